//! Time handling for appointments: parsing the `date` of a body in the shop's zone, the
//! shop-local date and time stored beside each start, and the bounds of list ranges.

use chrono::{DateTime, Days, NaiveDate, NaiveDateTime, NaiveTime, Timelike, Utc};
use chrono_tz::Tz;

use crate::time::{has_shape, local_day_start, local_to_utc};

pub const MICROS_PER_HOUR: f64 = 3_600_000_000.0;

/// A duration of `hours` (validated > 0) in microseconds, rounded but never to zero: `hours` as
/// small as `5e-324` passes the rule the document states (more than 0), and a hold or a slot
/// of no length would be no time at all.
pub fn duration_micros(hours: f64) -> i64 {
    ((hours * MICROS_PER_HOUR).round() as i64).max(1)
}
/// The longest appointment (`hours` <= 24): an end bound limits the start to one day earlier.
pub const MAX_DURATION_MICROS: i64 = 24 * 3_600_000_000;

/// Appointments are scheduled within these years (UTC), so every instant, start and end, prints
/// as a four-digit RFC 3339 year.
pub const YEARS: std::ops::RangeInclusive<i32> = 1900..=2200;

/// An appointment `date`: RFC 3339 with an offset or `Z`, or a local date-time without offset
/// read in `tz` (seconds and fractions optional, `T` or a space between date and time), whose
/// year as written is within [`YEARS`] (so the document's pattern can state the rule exactly).
pub fn parse_schedule(raw: &str, tz: Tz) -> Option<DateTime<Utc>> {
    use chrono::Datelike;
    let raw = raw.trim();
    const LOCAL: [&str; 4] = ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"];
    let (written_year, at) = match DateTime::parse_from_rfc3339(raw) {
        Ok(t) => (t.year(), t.with_timezone(&Utc)),
        Err(_) => {
            if !is_local_date_time(raw) {
                return None;
            }
            let local = LOCAL.iter().find_map(|f| NaiveDateTime::parse_from_str(raw, f).ok())?;
            (local.year(), local_to_utc(tz, local))
        }
    };
    YEARS.contains(&written_year).then_some(at)
}

/// `YYYY-MM-DD[T| ]HH:MM[:SS[.f]]` with two digits in every field and one to nine in the
/// fraction, as the document's pattern says (chrono's formats take one digit, or a sign).
fn is_local_date_time(raw: &str) -> bool {
    let (Some(minutes), Some(seconds)) = (raw.get(..16), raw.get(16..)) else { return false };
    let minutes_ok = has_shape(minutes, "9999-99-99T99:99") || has_shape(minutes, "9999-99-99 99:99");
    let seconds_ok = match seconds.split_once('.') {
        None => seconds.is_empty() || has_shape(seconds, ":99"),
        Some((whole, fraction)) => {
            has_shape(whole, ":99") && (1..=9).contains(&fraction.len()) && fraction.bytes().all(|b| b.is_ascii_digit())
        }
    };
    minutes_ok && seconds_ok
}

/// `(YYYY-MM-DD, HH:MM:SS)` of an instant in `tz`.
pub fn local_parts(tz: Tz, micros: i64) -> (String, String) {
    let local = DateTime::from_timestamp_micros(micros).unwrap_or_default().with_timezone(&tz);
    (local.format("%Y-%m-%d").to_string(), local.format("%H:%M:%S").to_string())
}

pub use crate::time::parse_ymd as parse_date;

/// `filter[time]`: `HH:MM` matches every second of that minute, `HH:MM:SS` one second. Returns
/// the inclusive `(from, to)` range of stored `HH:MM:SS` values.
pub fn parse_time_filter(raw: &str) -> Option<(String, String)> {
    let raw = raw.trim();
    match raw.len() {
        5 => NaiveTime::parse_from_str(raw, "%H:%M").ok().map(|t| {
            let minute = t.format("%H:%M").to_string();
            (format!("{minute}:00"), format!("{minute}:59"))
        }),
        8 => NaiveTime::parse_from_str(raw, "%H:%M:%S").ok().map(|t| {
            let exact = t.format("%H:%M:%S").to_string();
            (exact.clone(), exact)
        }),
        _ => None,
    }
}

/// A `start_date` / `end_date` value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    /// An instant, to the microsecond below it (instants are stored in microseconds), and
    /// whether it lies past that microsecond (it had more than six fraction digits).
    Instant { micros: i64, past: bool },
    Day(NaiveDate),
}

impl Bound {
    pub fn parse(raw: &str) -> Option<Bound> {
        if let Some(day) = parse_date(raw) {
            return Some(Bound::Day(day));
        }
        // `timestamp_micros` rounds down, before 1970 too (the nanoseconds count up from the second).
        DateTime::parse_from_rfc3339(raw.trim()).ok().map(|t| Bound::Instant { micros: t.timestamp_micros(), past: t.nanosecond() % 1_000 != 0 })
    }

    pub fn is_day(&self) -> bool {
        matches!(self, Bound::Day(_))
    }

    /// The first instant of the bound as a lower limit (a day starts at its midnight in `tz`;
    /// an instant between two microseconds starts at the later one).
    pub fn lower(&self, tz: Tz) -> i64 {
        match *self {
            Bound::Instant { micros, past } => micros + i64::from(past),
            Bound::Day(d) => local_day_start(tz, d).timestamp_micros(),
        }
    }

    /// The last instant of the bound as an inclusive upper limit (a day ends just before the
    /// next midnight in `tz`).
    pub fn upper(&self, tz: Tz) -> i64 {
        match *self {
            Bound::Instant { micros, .. } => micros,
            Bound::Day(d) => match d.checked_add_days(Days::new(1)) {
                Some(next) => local_day_start(tz, next).timestamp_micros() - 1,
                None => i64::MAX,
            },
        }
    }
}

/// The UTC day `[start, end]` (inclusive micros) of `filter[updated_date]`.
pub fn utc_day(day: NaiveDate) -> (i64, i64) {
    let b = Bound::Day(day);
    (b.lower(chrono_tz::UTC), b.upper(chrono_tz::UTC))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::format_instant;

    fn chicago() -> Tz {
        "America/Chicago".parse().unwrap()
    }

    #[test]
    fn schedule_dates_with_offset_or_local() {
        let tz = chicago();
        let at = |s: &str| parse_schedule(s, tz).map(format_instant);
        assert_eq!(at("2026-07-09T08:30:00Z").as_deref(), Some("2026-07-09T08:30:00.000000Z"));
        assert_eq!(at("2026-07-09T08:30:00+02:00").as_deref(), Some("2026-07-09T06:30:00.000000Z"));
        assert_eq!(at("2026-07-09T08:30:00").as_deref(), Some("2026-07-09T13:30:00.000000Z"));
        assert_eq!(at("2026-07-09 08:30").as_deref(), Some("2026-07-09T13:30:00.000000Z"));
        assert_eq!(at("2026-01-09T08:30:00.5").as_deref(), Some("2026-01-09T14:30:00.500000Z"));
        assert_eq!(at(" 2026-07-09T08:30:00.123456789 ").as_deref(), Some("2026-07-09T13:30:00.123456Z"));
        // Only the documented shapes: two digits in every field, a fraction of 1 to 9 digits.
        for bad in ["", "2026-07-09", "09/07/2026 08:30", "2026-13-01T08:00:00", "soon", "2026-7-9T8:30", "2026-07-09T8:30",
            "+2026-07-09T08:30", "2026- 7-09 08:30", "2026-07-09T08:30:5", "2026-07-09T08:30:00.", "2026-07-09T08:30:00.1234567890",
            "2026-07-09t08:30", "2026-07-09T08:30é"] {
            assert_eq!(at(bad), None, "{bad}");
        }
    }

    #[test]
    fn day_bounds_follow_the_zone_across_dst() {
        let tz = chicago();
        let spring = Bound::Day(NaiveDate::from_ymd_opt(2026, 3, 8).unwrap());
        // 23-hour day: CST midnight to CDT midnight.
        assert_eq!(spring.upper(tz) + 1 - spring.lower(tz), 23 * 3_600_000_000);
        let fall = Bound::Day(NaiveDate::from_ymd_opt(2026, 11, 1).unwrap());
        assert_eq!(fall.upper(tz) + 1 - fall.lower(tz), 25 * 3_600_000_000);
        assert_eq!(Bound::parse("2026-03-08T10:00:00Z"), Some(Bound::Instant { micros: 1_772_964_000_000_000, past: false }));
        assert_eq!(Bound::parse("2026-3-8"), None);
    }

    #[test]
    fn instants_between_microseconds_bound_only_what_lies_inside() {
        let utc = chrono_tz::UTC;
        // The `(lower, upper)` limits of one bound.
        let limits = |raw: &str| Bound::parse(raw).map(|b| (b.lower(utc), b.upper(utc)));
        let at = 1_772_964_000_000_000;
        // 100 ns past a microsecond: a lower limit starts at the next one, an upper one ends at it.
        assert_eq!(limits("2026-03-08T10:00:00.0000001Z"), Some((at + 1, at)));
        assert_eq!(limits("2026-03-08T10:00:00.000001Z"), Some((at + 1, at + 1)));
        assert_eq!(limits("2026-03-08T10:00:00.000001000Z"), Some((at + 1, at + 1)));
        // Before 1970 the microsecond below is the earlier one as well.
        assert_eq!(limits("1969-12-31T23:59:59.9999995Z"), Some((0, -1)));
    }

    #[test]
    fn time_filters() {
        assert_eq!(parse_time_filter("09:05"), Some(("09:05:00".into(), "09:05:59".into())));
        assert_eq!(parse_time_filter("09:05:30"), Some(("09:05:30".into(), "09:05:30".into())));
        for bad in ["9:05", "24:00", "09:60", "0905", "09:05:3"] {
            assert_eq!(parse_time_filter(bad), None, "{bad}");
        }
        assert_eq!(local_parts(chicago(), 1_772_964_000_000_000), ("2026-03-08".into(), "05:00:00".into()));
    }
}
