//! The slot grid of decisions §14, as a pure function of a shop's week, its bays and when they
//! are busy: no I/O, so the property test can drive it with random inputs.

use std::collections::HashMap;

use chrono::{Datelike, NaiveDate};
use chrono_tz::Tz;

use crate::shop_hours::model::{Interval, at_minutes};

/// An active bay, in bay order.
#[derive(Debug, Clone)]
pub struct BayRef {
    pub id: i64,
    pub title: String,
}

/// Half-open busy times `[start, end)` in UTC microseconds, by bay id.
pub type Busy = HashMap<i64, Vec<(i64, i64)>>;

/// One bookable start: `[start, end)` and the bays free for all of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Slot {
    pub start: i64,
    pub end: i64,
    pub bays: Vec<usize>,
}

/// The opening intervals of a shop-local date as UTC `[start, end)`, in order. Local times are
/// read as §2 says (a time skipped by a daylight-saving jump moves forward by the jump, a repeated
/// one takes its first occurrence), so a 23- or 25-hour day is 23 or 25 hours long. Intervals
/// apart on the clock can overlap once read so (a close at 02:45 and an open at 03:00 on the
/// day 02:00-03:00 is skipped); they stay separate intervals.
pub fn opening_intervals(tz: Tz, date: NaiveDate, week: &[Interval]) -> Vec<(i64, i64)> {
    let weekday = i64::from(date.weekday().num_days_from_sunday());
    let mut out: Vec<(i64, i64)> = week
        .iter()
        .filter(|(day, _, _)| *day == weekday)
        .map(|&(_, open, close)| (at_minutes(tz, date, open).timestamp_micros(), at_minutes(tz, date, close).timestamp_micros()))
        .filter(|(start, end)| end > start)
        .collect();
    out.sort_unstable();
    out
}

/// Whether `[start, end)` meets none of `busy`.
pub fn is_free(busy: &[(i64, i64)], start: i64, end: i64) -> bool {
    !busy.iter().any(|&(s, e)| s < end && e > start)
}

/// Whether `[start, end)` lies inside one of `intervals`.
pub fn inside_one(intervals: &[(i64, i64)], start: i64, end: i64) -> bool {
    intervals.iter().any(|&(s, e)| s <= start && end <= e)
}

/// The slots of one shop-local date: starts every `step` of elapsed time from each opening
/// interval's start, such that `[start, start + duration)` fits in that interval, does not start
/// before `now`, and finds at least one of `bays` free (listed by index into `bays`).
pub fn day_slots(tz: Tz, date: NaiveDate, week: &[Interval], bays: &[BayRef], busy: &Busy, duration: i64, step: i64, now: i64) -> Vec<Slot> {
    let none = Vec::new();
    let mut out = Vec::new();
    for (open, close) in opening_intervals(tz, date, week) {
        // The first grid point at or after `now`.
        let mut start = if now > open { open + (now - open + step - 1) / step * step } else { open };
        while start + duration <= close {
            let end = start + duration;
            let free: Vec<usize> =
                bays.iter().enumerate().filter(|(_, b)| is_free(busy.get(&b.id).unwrap_or(&none), start, end)).map(|(i, _)| i).collect();
            if !free.is_empty() {
                out.push(Slot { start, end, bays: free });
            }
            start += step;
        }
    }
    out.sort_by_key(|s| s.start);
    // Two intervals that overlap once read in UTC (see `opening_intervals`) can both offer a
    // start: it is one slot, its free bays the same either way.
    out.dedup_by_key(|s| s.start);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::local_to_utc;
    use chrono::{Days, NaiveTime, TimeZone, Utc};
    use proptest::prelude::*;

    const MIN: i64 = 60_000_000;

    fn chicago() -> Tz {
        "America/Chicago".parse().unwrap()
    }

    #[test]
    fn intervals_that_meet_across_a_skipped_hour_offer_each_start_once() {
        // 2027-03-14, Chicago: 02:00-03:00 does not exist; 02:45 reads as 03:45 (08:45Z).
        let date = NaiveDate::from_ymd_opt(2027, 3, 14).unwrap();
        let week = [(0, 60, 165), (0, 180, 240)];
        let intervals = opening_intervals(chicago(), date, &week);
        assert_eq!(intervals.len(), 2, "{intervals:?}");
        assert!(intervals[0].1 > intervals[1].0, "they overlap in UTC: {intervals:?}");
        let slots = day_slots(chicago(), date, &week, &bays(1), &Busy::new(), 30 * MIN, 30 * MIN, 0);
        let starts: Vec<String> = slots.iter().map(|s| local(chicago(), s.start)).collect();
        assert_eq!(starts, ["01:00", "01:30", "03:00", "03:30"]);
        // Each interval keeps its own grid, and a stay must fit in one of them.
        let offset = [(0, 70, 165), (0, 180, 240)];
        let slots = day_slots(chicago(), date, &offset, &bays(1), &Busy::new(), 30 * MIN, 30 * MIN, 0);
        let starts: Vec<String> = slots.iter().map(|s| local(chicago(), s.start)).collect();
        assert_eq!(starts, ["01:10", "01:40", "03:00", "03:10", "03:30"]);
        let long = day_slots(chicago(), date, &week, &bays(1), &Busy::new(), 90 * MIN, 30 * MIN, 0);
        assert!(long.iter().all(|s| inside_one(&intervals, s.start, s.end)));
    }

    fn bays(n: usize) -> Vec<BayRef> {
        (0..n).map(|i| BayRef { id: i as i64 + 1, title: format!("B{i}") }).collect()
    }

    fn local(tz: Tz, micros: i64) -> String {
        Utc.timestamp_micros(micros).unwrap().with_timezone(&tz).format("%H:%M").to_string()
    }

    #[test]
    fn spring_forward_has_no_slots_in_the_skipped_hour() {
        let tz = chicago();
        let day = NaiveDate::from_ymd_opt(2026, 3, 8).unwrap(); // Sunday
        let slots = day_slots(tz, day, &[(0, 0, 1440)], &bays(1), &Busy::new(), 60 * MIN, 60 * MIN, 0);
        let times: Vec<String> = slots.iter().map(|s| local(tz, s.start)).collect();
        assert_eq!(slots.len(), 23);
        assert!(!times.iter().any(|t| t.starts_with("02:")), "{times:?}");
    }

    #[test]
    fn fall_back_repeats_a_wall_clock_time_with_different_starts() {
        let tz = chicago();
        let day = NaiveDate::from_ymd_opt(2026, 11, 1).unwrap(); // Sunday
        let slots = day_slots(tz, day, &[(0, 0, 1440)], &bays(1), &Busy::new(), 60 * MIN, 60 * MIN, 0);
        assert_eq!(slots.len(), 25);
        let ones: Vec<&Slot> = slots.iter().filter(|s| local(tz, s.start) == "01:00").collect();
        assert_eq!(ones.len(), 2);
        assert_eq!(ones[1].start - ones[0].start, 60 * MIN);
    }

    #[test]
    fn busy_bays_past_starts_and_interval_edges() {
        let tz = chrono_tz::UTC;
        let day = NaiveDate::from_ymd_opt(2026, 7, 6).unwrap(); // Monday
        let open = local_to_utc(tz, day.and_time(NaiveTime::from_hms_opt(8, 0, 0).unwrap())).timestamp_micros();
        let mut busy = Busy::new();
        busy.insert(1, vec![(open, open + 60 * MIN)]);
        busy.insert(2, vec![(open, open + 120 * MIN)]);
        // 08:00-12:00, one-hour jobs every 30 minutes, now = 08:10.
        let slots = day_slots(tz, day, &[(1, 480, 720)], &bays(2), &busy, 60 * MIN, 30 * MIN, open + 10 * MIN);
        let got: Vec<(String, Vec<usize>)> = slots.iter().map(|s| (local(tz, s.start), s.bays.clone())).collect();
        let want = [("09:00", vec![0]), ("09:30", vec![0]), ("10:00", vec![0, 1]), ("10:30", vec![0, 1]), ("11:00", vec![0, 1])];
        assert_eq!(got, want.iter().map(|(t, b)| (t.to_string(), b.clone())).collect::<Vec<_>>());
    }

    /// Minute-by-minute: no busy time of the bay covers any minute of `[start, end)`.
    fn free_by_minutes(busy: &[(i64, i64)], start: i64, end: i64) -> bool {
        let mut m = start;
        while m < end {
            if busy.iter().any(|&(s, e)| s <= m && m < e) {
                return false;
            }
            m += MIN;
        }
        true
    }

    fn zone() -> impl Strategy<Value = Tz> {
        prop::sample::select(vec!["UTC", "America/Chicago", "Europe/London", "Asia/Tokyo", "Australia/Lord_Howe"])
            .prop_map(|z| z.parse::<Tz>().unwrap())
    }

    /// A day's intervals: sorted, non-overlapping, on the 5-minute grid.
    fn week() -> impl Strategy<Value = Vec<Interval>> {
        prop::collection::vec((0i64..7, prop::collection::btree_set(0i64..=288, 0..6)), 0..7).prop_map(|days| {
            let mut week = Vec::new();
            for (day, cuts) in days {
                if week.iter().any(|(d, _, _)| *d == day) {
                    continue;
                }
                let cuts: Vec<i64> = cuts.into_iter().map(|c| c * 5).collect();
                for pair in cuts.chunks(2) {
                    if let [open, close] = pair {
                        week.push((day, *open, *close));
                    }
                }
            }
            week.sort();
            week
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn every_slot_is_free_and_open_and_every_free_start_is_a_slot(
            tz in zone(),
            // Around both 2026 daylight-saving changes of each zone above.
            first in prop::sample::select(vec![(2026, 3, 7), (2026, 3, 27), (2026, 4, 4), (2026, 9, 26), (2026, 10, 24), (2026, 10, 31), (2026, 7, 1)]),
            days in 1u64..4,
            week in week(),
            n_bays in 1usize..4,
            raw_busy in prop::collection::vec((0usize..4, 0i64..(4 * 288), 1i64..60), 0..25),
            duration_steps in 1i64..60,
            step_minutes in 5i64..=240,
            now_offset in prop::option::of(0i64..(4 * 288)),
        ) {
            let first = NaiveDate::from_ymd_opt(first.0, first.1, first.2).unwrap();
            let base = local_to_utc(tz, first.and_time(NaiveTime::MIN)).timestamp_micros();
            let bays = bays(n_bays);
            let mut busy = Busy::new();
            for (bay, at, len) in raw_busy {
                let start = base + at * 5 * MIN;
                busy.entry(bay as i64 + 1).or_default().push((start, start + len * 5 * MIN));
            }
            let duration = duration_steps * 5 * MIN;
            let step = step_minutes * MIN;
            let now = now_offset.map_or(0, |o| base + o * 5 * MIN);
            let none = Vec::new();
            for d in 0..days {
                let date = first.checked_add_days(Days::new(d)).unwrap();
                let slots = day_slots(tz, date, &week, &bays, &busy, duration, step, now);
                // Every slot: on the grid of one interval, inside it, not past, its bays free,
                // the others busy.
                let weekday = i64::from(date.weekday().num_days_from_sunday());
                let intervals: Vec<(i64, i64)> = week.iter().filter(|(day, _, _)| *day == weekday)
                    .map(|&(_, o, c)| {
                        let at = |m: i64| local_to_utc(tz, date.and_time(NaiveTime::MIN) + chrono::Duration::minutes(m)).timestamp_micros();
                        (at(o), at(c))
                    })
                    .filter(|(s, e)| e > s)
                    .collect();
                for s in &slots {
                    prop_assert!(s.start >= now);
                    prop_assert_eq!(s.end - s.start, duration);
                    prop_assert!(intervals.iter().any(|&(o, c)| o <= s.start && s.end <= c && (s.start - o) % step == 0));
                    for (i, b) in bays.iter().enumerate() {
                        let free = free_by_minutes(busy.get(&b.id).unwrap_or(&none), s.start, s.end);
                        prop_assert_eq!(free, s.bays.contains(&i), "bay {} at {}", i, s.start);
                    }
                }
                // Every free start on the grid is there.
                for &(o, c) in &intervals {
                    let mut t = o;
                    while t + duration <= c {
                        let any_free = bays.iter().any(|b| free_by_minutes(busy.get(&b.id).unwrap_or(&none), t, t + duration));
                        if t >= now && any_free {
                            prop_assert!(slots.iter().any(|s| s.start == t), "missing start {}", t);
                        }
                        t += step;
                    }
                }
                prop_assert!(slots.windows(2).all(|w| w[0].start < w[1].start));
            }
        }
    }
}
