use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveTime, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::{
    error::FieldErrors,
    time::{format_hh_mm, format_instant, local_to_utc, parse_hh_mm},
};

/// One open interval of a shop's week.
#[derive(Debug, Serialize, ToSchema)]
pub struct HoursRecord {
    /// Always null: a week is replaced as a whole, so its intervals have no lasting identity.
    #[schema(value_type = Option<i64>)]
    pub id: Option<i64>,
    /// The shop's id, as a string (kept from the original interface).
    pub shop_id: String,
    /// 0 = Sunday .. 6 = Saturday.
    pub day: i64,
    /// UTC start of this interval's next occurrence that has not yet ended.
    pub start_time: String,
    /// UTC end of that occurrence.
    pub end_time: String,
    /// Shop-local opening time, `HH:MM`.
    pub open: String,
    /// Shop-local closing time, `HH:MM` (`24:00` for midnight).
    pub close: String,
    pub timezone: String,
}

impl HoursRecord {
    pub fn new(shop_id: i64, tz: Tz, day: i64, open: i64, close: i64, now: DateTime<Utc>) -> Self {
        let (start, end) = next_occurrence(tz, day, open, close, now);
        HoursRecord {
            id: None,
            shop_id: shop_id.to_string(),
            day,
            start_time: format_instant(start),
            end_time: format_instant(end),
            open: format_hh_mm(open),
            close: format_hh_mm(close),
            timezone: tz.name().to_owned(),
        }
    }
}

pub fn at_minutes(tz: Tz, date: NaiveDate, minutes: i64) -> DateTime<Utc> {
    let date = date + Duration::days(minutes / 1440);
    let time = NaiveTime::from_num_seconds_from_midnight_opt(((minutes % 1440) * 60) as u32, 0).unwrap_or(NaiveTime::MIN);
    local_to_utc(tz, date.and_time(time))
}

/// The next occurrence of `day` `open`..`close` (shop-local) that has not ended at `now`. A day
/// whose daylight-saving jump swallows the interval (02:30-03:15 on a spring-forward night:
/// the opening moves forward past the close) has none, as availability sees it.
pub fn next_occurrence(tz: Tz, day: i64, open: i64, close: i64, now: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
    let today = now.with_timezone(&tz).date_naive();
    let ahead = (day - today.weekday().num_days_from_sunday() as i64).rem_euclid(7);
    let mut date = today + Duration::days(ahead);
    loop {
        let (start, end) = (at_minutes(tz, date, open), at_minutes(tz, date, close));
        if end > now && end > start {
            return (start, end);
        }
        date += Duration::days(7);
    }
}

/// Body of `PUT /api/v1/settings/shop_hours`: the shop's whole week, replacing the old one.
#[derive(Debug, Deserialize, ToSchema)]
pub struct WeekInput {
    #[schema(required, nullable = false)]
    pub shop_id: Option<i64>,
    /// Open intervals; a day without any is closed. An empty list closes the shop all week.
    #[schema(required, nullable = false, max_items = 100)]
    pub hours: Option<Vec<IntervalInput>>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct IntervalInput {
    /// 0 = Sunday .. 6 = Saturday.
    #[schema(required, nullable = false, minimum = 0, maximum = 6)]
    pub day: Option<i64>,
    /// Shop-local `HH:MM`.
    #[schema(required, nullable = false, pattern = r"^([01][0-9]|2[0-3]):[0-5][0-9]$")]
    pub open: Option<String>,
    /// Shop-local `HH:MM`, after `open`; `24:00` for midnight.
    #[schema(required, nullable = false, pattern = r"^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$")]
    pub close: Option<String>,
}

/// A validated interval: `(day, open minute, close minute)`.
pub type Interval = (i64, i64, i64);

/// The most intervals a week holds: far more than any shop opens, few enough that the week's
/// checks and inserts stay cheap.
pub const MAX_INTERVALS: usize = 100;

/// Validates a week: each interval well-formed, none overlapping another on the same day.
pub fn validate_week(hours: Vec<IntervalInput>, errors: &mut FieldErrors) -> Vec<Interval> {
    if hours.len() > MAX_INTERVALS {
        errors.add("hours", format!("The hours field may list at most {MAX_INTERVALS} intervals."));
        return Vec::new();
    }
    let mut week = Vec::new();
    for (i, interval) in hours.into_iter().enumerate() {
        let day = match interval.day {
            Some(d) if (0..=6).contains(&d) => Some(d),
            Some(_) => {
                errors.add(format!("hours.{i}.day"), "The day must be from 0 (Sunday) to 6 (Saturday).");
                None
            }
            None => {
                errors.add(format!("hours.{i}.day"), format!("The hours.{i}.day field is required."));
                None
            }
        };
        // `24:00` is midnight at the end of the day: a closing time, never an opening one.
        let mut time = |name: &str, value: Option<String>| match value.as_deref().map(parse_hh_mm) {
            Some(Some(m)) if !(name == "open" && m == 24 * 60) => Some(m),
            Some(_) => {
                errors.add(format!("hours.{i}.{name}"), format!("The hours.{i}.{name} field must be a time as HH:MM."));
                None
            }
            None => {
                errors.add(format!("hours.{i}.{name}"), format!("The hours.{i}.{name} field is required."));
                None
            }
        };
        let (open, close) = (time("open", interval.open), time("close", interval.close));
        if let (Some(day), Some(open), Some(close)) = (day, open, close) {
            if close <= open {
                errors.add(format!("hours.{i}.close"), "The closing time must be after the opening time.");
            } else if week.iter().any(|(d, o, c)| *d == day && open < *c && *o < close) {
                errors.add(format!("hours.{i}"), "This interval overlaps another interval of the same day.");
            } else {
                week.push((day, open, close));
            }
        }
    }
    week.sort();
    week
}

/// Query parameters of `GET /api/v1/settings/shop_hours`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct HoursParams {
    /// One shop; omitted means every shop of the company the key may see.
    #[param(rename = "filter[shop_id]")]
    filter_shop_id: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
    }

    #[test]
    fn an_interval_a_spring_forward_jump_swallows_occurs_the_week_after() {
        let tz: Tz = "America/Chicago".parse().unwrap();
        // Monday 2026-03-02; Sunday 2026-03-08 skips 02:00-03:00 CDT.
        let (s, e) = next_occurrence(tz, 0, 2 * 60 + 30, 3 * 60 + 15, utc(2026, 3, 2, 12, 0));
        assert_eq!((s, e), (utc(2026, 3, 15, 7, 30), utc(2026, 3, 15, 8, 15)));
        // An interval the jump only shortens still occurs that night.
        let (s, e) = next_occurrence(tz, 0, 2 * 60 + 30, 4 * 60, utc(2026, 3, 2, 12, 0));
        assert_eq!((s, e), (utc(2026, 3, 8, 8, 30), utc(2026, 3, 8, 9, 0)));
    }

    #[test]
    fn next_occurrence_is_this_week_until_it_ends() {
        let tz: Tz = "America/Chicago".parse().unwrap();
        // Wednesday 2026-07-08 10:00 CDT = 15:00 UTC. Wednesday is day 3.
        let now = utc(2026, 7, 8, 15, 0);
        let (s, e) = next_occurrence(tz, 3, 8 * 60, 12 * 60, now);
        assert_eq!((s, e), (utc(2026, 7, 8, 13, 0), utc(2026, 7, 8, 17, 0)));
        // After it closed, the next one is a week later.
        let (s, _) = next_occurrence(tz, 3, 8 * 60, 12 * 60, utc(2026, 7, 8, 18, 0));
        assert_eq!(s, utc(2026, 7, 15, 13, 0));
    }

    #[test]
    fn next_occurrence_crosses_daylight_saving() {
        let tz: Tz = "America/Chicago".parse().unwrap();
        // Saturday 2026-03-07 before the spring change; Monday 8:00 is already CDT (UTC-5).
        let (s, _) = next_occurrence(tz, 1, 8 * 60, 17 * 60, utc(2026, 3, 7, 12, 0));
        assert_eq!(s, utc(2026, 3, 9, 13, 0));
        // Friday 2026-10-30 (CDT); the next Monday 8:00 is CST (UTC-6).
        let (s, _) = next_occurrence(tz, 1, 8 * 60, 17 * 60, utc(2026, 10, 30, 12, 0));
        assert_eq!(s, utc(2026, 11, 2, 14, 0));
    }

    #[test]
    fn shop_east_of_utc_opens_the_previous_utc_day() {
        let tz: Tz = "Asia/Tokyo".parse().unwrap();
        // Monday 08:00 JST is Sunday 23:00 UTC.
        let (s, e) = next_occurrence(tz, 1, 8 * 60, 24 * 60, utc(2026, 7, 1, 0, 0));
        assert_eq!((s, e), (utc(2026, 7, 5, 23, 0), utc(2026, 7, 6, 15, 0)));
    }

    #[test]
    fn week_validation_reports_each_bad_interval() {
        let iv = |day, open: &str, close: &str| IntervalInput { day: Some(day), open: Some(open.into()), close: Some(close.into()) };
        let mut errors = FieldErrors::default();
        let week = validate_week(
            vec![iv(1, "13:00", "17:00"), iv(1, "08:00", "12:00"), iv(1, "11:00", "14:00"), iv(7, "08:00", "09:00"), iv(2, "10:00", "09:00")],
            &mut errors,
        );
        assert_eq!(week, vec![(1, 480, 720), (1, 780, 1020)]);
        assert!(errors.has("hours.2") && errors.has("hours.3.day") && errors.has("hours.4.close"));
        let mut errors = FieldErrors::default();
        validate_week(vec![iv(1, "24:00", "24:00")], &mut errors);
        assert!(errors.has("hours.0.open") && !errors.has("hours.0.close"), "{errors:?}");
    }
}
