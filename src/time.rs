//! Instants on the wire and shop-local time.

use chrono::{DateTime, Duration, LocalResult, NaiveDate, NaiveDateTime, NaiveTime, Offset, TimeZone, Utc};
use chrono_tz::Tz;

/// `2024-07-09T08:35:25.394000Z`: RFC 3339, UTC, six fractional digits (Laravel's format).
///
/// Written digit by digit: chrono's `format` parses its pattern on every call, and every
/// resource carries two instants (a feed page of 100 events spent 13% of the server's CPU
/// there).
pub fn format_instant(at: DateTime<Utc>) -> String {
    use chrono::{Datelike, Timelike};
    let year = at.year();
    if !(0..=9999).contains(&year) {
        return at.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
    }
    let micros = at.nanosecond() / 1_000;
    let mut out = [0u8; 27];
    let mut put = |at: usize, value: u32, digits: usize| {
        let mut v = value;
        for i in (0..digits).rev() {
            out[at + i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(0, year as u32, 4);
    put(5, at.month(), 2);
    put(8, at.day(), 2);
    put(11, at.hour(), 2);
    put(14, at.minute(), 2);
    // A leap second (nanosecond past 999,999,999) shows as :60, as chrono does.
    put(17, at.second() + micros / 1_000_000, 2);
    put(20, micros % 1_000_000, 6);
    for (i, c) in [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':'), (19, b'.'), (26, b'Z')] {
        out[i] = c;
    }
    String::from_utf8(out.to_vec()).expect("ASCII digits")
}

pub fn format_micros(micros: i64) -> String {
    format_instant(DateTime::from_timestamp_micros(micros).unwrap_or_default())
}

pub fn parse_timezone(name: &str) -> Option<Tz> {
    name.parse().ok()
}

/// The UTC instant of a shop-local wall-clock time. A time skipped by a daylight-saving jump is
/// read with the offset in force before the jump, so it moves forward by the jump's length
/// (02:30 on a one-hour spring-forward night is 03:30), as PHP, java.time and Python do; a
/// repeated time takes its first occurrence.
pub fn local_to_utc(tz: Tz, local: NaiveDateTime) -> DateTime<Utc> {
    match tz.from_local_datetime(&local) {
        LocalResult::Single(t) => t.with_timezone(&Utc),
        LocalResult::Ambiguous(first, _) => first.with_timezone(&Utc),
        LocalResult::None => {
            // Zones change offset at most a few times a year: a day earlier is before the jump.
            let before = tz.offset_from_utc_datetime(&(local - Duration::days(1))).fix();
            Utc.from_utc_datetime(&(local - Duration::seconds(before.local_minus_utc() as i64)))
        }
    }
}

/// The UTC start of a shop-local calendar day.
pub fn local_day_start(tz: Tz, day: NaiveDate) -> DateTime<Utc> {
    local_to_utc(tz, day.and_time(NaiveTime::MIN))
}

/// Whether `text` has `shape`'s form: a `9` in the shape is any ASCII digit, every other byte
/// itself. chrono's parser alone takes `2026-3-8`, `2026- 3- 8` and `+2026-03-08`, which the
/// documented forms (and the published patterns) do not.
pub fn has_shape(text: &str, shape: &str) -> bool {
    text.len() == shape.len() && text.bytes().zip(shape.bytes()).all(|(t, s)| if s == b'9' { t.is_ascii_digit() } else { t == s })
}

/// A calendar date written exactly `YYYY-MM-DD` (surrounding blanks ignored).
pub fn parse_ymd(raw: &str) -> Option<NaiveDate> {
    let raw = raw.trim();
    has_shape(raw, "9999-99-99").then(|| NaiveDate::parse_from_str(raw, "%Y-%m-%d").ok()).flatten()
}

/// `HH:MM` -> minutes after midnight (00:00 to 24:00).
pub fn parse_hh_mm(s: &str) -> Option<i64> {
    let (h, m) = s.split_once(':')?;
    if h.len() != 2 || m.len() != 2 || !h.bytes().chain(m.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (h, m): (i64, i64) = (h.parse().ok()?, m.parse().ok()?);
    let minutes = h * 60 + m;
    ((0..24).contains(&h) && (0..60).contains(&m) || minutes == 24 * 60).then_some(minutes)
}

pub fn format_hh_mm(minutes: i64) -> String {
    format!("{:02}:{:02}", minutes / 60, minutes % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_have_six_fraction_digits() {
        assert_eq!(format_micros(1_720_514_125_394_000), "2024-07-09T08:35:25.394000Z");
        assert_eq!(format_micros(0), "1970-01-01T00:00:00.000000Z");
    }

    proptest::proptest! {
        /// The digit-by-digit writer says what chrono's pattern says, years 0 to 9999 and past.
        #[test]
        fn instants_are_written_as_chrono_writes_them(micros in -62_167_219_200_000_000i64..300_000_000_000_000_000) {
            let at = DateTime::from_timestamp_micros(micros).unwrap();
            proptest::prop_assert_eq!(format_instant(at), at.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string());
        }
    }

    #[test]
    fn chicago_spring_gap_moves_forward_by_the_jump_and_fall_repeat_takes_the_first() {
        let tz: Tz = "America/Chicago".parse().unwrap();
        let day = NaiveDate::from_ymd_opt(2026, 3, 8).unwrap();
        // 02:00-03:00 does not exist: each skipped time is an hour later, in order.
        for ((h, m, s), want) in [
            ((2, 0, 0), "2026-03-08T08:00:00.000000Z"),
            ((2, 10, 0), "2026-03-08T08:10:00.000000Z"),
            ((2, 30, 0), "2026-03-08T08:30:00.000000Z"),
            ((2, 59, 30), "2026-03-08T08:59:30.000000Z"),
            ((3, 0, 0), "2026-03-08T08:00:00.000000Z"),
        ] {
            assert_eq!(format_instant(local_to_utc(tz, day.and_hms_opt(h, m, s).unwrap())), want, "{h}:{m}:{s}");
        }
        let repeat = NaiveDate::from_ymd_opt(2026, 11, 1).unwrap().and_hms_opt(1, 30, 0).unwrap();
        assert_eq!(format_instant(local_to_utc(tz, repeat)), "2026-11-01T06:30:00.000000Z");
    }

    #[test]
    fn hh_mm_parsing_is_strict() {
        assert_eq!(parse_hh_mm("08:30"), Some(510));
        assert_eq!(parse_hh_mm("24:00"), Some(1440));
        for bad in ["8:30", "24:01", "12:60", "ab:cd", "0830", "+8:00", "-0:30", "+08:00"] {
            assert_eq!(parse_hh_mm(bad), None, "{bad}");
        }
        assert_eq!(format_hh_mm(510), "08:30");
    }
}
