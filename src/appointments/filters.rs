//! `GET /api/v1/appointments` parameters beyond paging and sorting, parsed into the conditions
//! the store renders.

use std::collections::BTreeMap;

use chrono_tz::Tz;

use super::timing::{Bound, MAX_DURATION_MICROS, parse_date, parse_time_filter, utc_day};
use crate::{
    db::{Db, DbError, ShopFilter},
    error::{ApiError, FieldErrors},
    extract::QueryParams,
    listing::ListQuery,
    shops::store as shops,
};

pub const FILTERS: [&str; 12] =
    ["first_name", "last_name", "reason", "year", "make", "model", "date", "time", "status", "updated_date", "shop_id", "trashed"];

/// Which appointments a list holds, by their soft delete (`filter[trashed]`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum Trashed {
    /// Live ones only (no filter given).
    #[default]
    Without,
    With,
    Only,
}

/// Everything that narrows the list, besides the shops.
#[derive(Debug, Default)]
pub struct ListFilters {
    pub appointment_id: Option<i64>,
    /// `(key column, LIKE pattern)`: lower-cased, escaped, wrapped in `%`.
    pub text: Vec<(&'static str, String)>,
    pub year: Option<String>,
    pub local_date: Option<String>,
    /// Inclusive `HH:MM:SS` range.
    pub local_time: Option<(String, String)>,
    pub done: Option<bool>,
    /// Inclusive micros.
    pub updated: Option<(i64, i64)>,
    pub range: Option<Range>,
    pub trashed: Trashed,
}

/// A `start_date` / `end_date` range resolved to UTC bounds.
#[derive(Debug)]
pub struct Range {
    /// Column the bounds apply to: `created_at`, `start_at` or `end_at`.
    pub column: &'static str,
    /// Inclusive bounds on `start_at` covering every shop's bounds, so an index on `start_at`
    /// serves the query (see [`start_envelope`]).
    pub start_envelope: Option<(Option<i64>, Option<i64>)>,
    /// Per time zone: the shops in that zone and their inclusive bounds on `column`. One entry
    /// with no shops when the bounds are the same for every shop.
    pub zones: Vec<(Vec<i64>, Option<i64>, Option<i64>)>,
}

/// Laravel treats an empty query value like an absent one.
fn filled(v: Option<&str>) -> Option<&str> {
    v.map(str::trim).filter(|v| !v.is_empty())
}

impl ListFilters {
    /// True when no filter narrows the list beyond its shops.
    pub fn is_unfiltered(&self) -> bool {
        let ListFilters { appointment_id, text, year, local_date, local_time, done, updated, range, trashed } = self;
        appointment_id.is_none()
            && text.is_empty()
            && year.is_none()
            && local_date.is_none()
            && local_time.is_none()
            && done.is_none()
            && updated.is_none()
            && range.is_none()
            && *trashed == Trashed::Without
    }

    /// Parses the filters; the date range still needs [`ListFilters::resolve_range`].
    pub fn parse(params: &QueryParams, list: &ListQuery) -> Result<(ListFilters, Option<RawRange>), ApiError> {
        let mut errors = FieldErrors::default();
        let mut f = ListFilters { appointment_id: params.i64("appointment_id")?, ..Default::default() };
        for (name, column) in [("first_name", "first_name_key"), ("last_name", "last_name_key"), ("reason", "reason_key"), ("make", "make_key"), ("model", "model_key")] {
            if let Some(v) = filled(list.filter(name)) {
                f.text.push((column, crate::db::like_contains(&crate::db::search_term(v))));
            }
        }
        f.year = filled(list.filter("year")).map(str::to_owned);
        if let Some(v) = filled(list.filter("date")) {
            match parse_date(v) {
                Some(d) => f.local_date = Some(d.format("%Y-%m-%d").to_string()),
                None => errors.add("filter[date]", "The filter[date] parameter must be a date in the format YYYY-MM-DD."),
            }
        }
        if let Some(v) = filled(list.filter("time")) {
            match parse_time_filter(v) {
                Some(range) => f.local_time = Some(range),
                None => errors.add("filter[time]", "The filter[time] parameter must be a time in the format HH:MM or HH:MM:SS."),
            }
        }
        match filled(list.filter("status")) {
            None | Some("both") => {}
            Some("complete") => f.done = Some(true),
            Some("incomplete") => f.done = Some(false),
            Some(_) => errors.add("filter[status]", "The filter[status] parameter must be complete, incomplete or both."),
        }
        // Unlike the other filters an empty value is refused: spatie/laravel-query-builder's
        // convention, which decisions §10 follows.
        match list.filter("trashed").map(str::trim) {
            None => {}
            Some("with") => f.trashed = Trashed::With,
            Some("only") => f.trashed = Trashed::Only,
            Some(_) => errors.add("filter[trashed]", "The filter[trashed] parameter must be with or only."),
        }
        if let Some(v) = filled(list.filter("updated_date")) {
            match parse_date(v) {
                Some(d) => f.updated = Some(utc_day(d)),
                None => errors.add("filter[updated_date]", "The filter[updated_date] parameter must be a date in the format YYYY-MM-DD."),
            }
        }
        let mut bound = |name: &str| {
            let v = filled(params.get(name))?;
            let b = Bound::parse(v);
            if b.is_none() {
                errors.add(name, format!("The {name} parameter must be a date (YYYY-MM-DD) or an RFC 3339 date-time."));
            }
            b
        };
        let (start, end) = (bound("start_date"), bound("end_date"));
        let column = match filled(params.get("filter_by")) {
            None => "created_at",
            Some("appointment_start") => "start_at",
            Some("appointment_end") => "end_at",
            Some(_) => {
                errors.add("filter_by", "The filter_by parameter must be appointment_start or appointment_end.");
                "created_at"
            }
        };
        errors.into_result()?;
        let raw = (start.is_some() || end.is_some()).then_some(RawRange { column, start, end });
        Ok((f, raw))
    }

    /// Turns the range into UTC bounds: a date-only bound of a scheduled start or end is a day
    /// in each shop's own zone, so the shops in scope are grouped by zone.
    /// `known`: the one shop of `scope` when the caller already read it (saves a query).
    pub async fn resolve_range(
        &mut self,
        db: &Db,
        company_id: i64,
        scope: &ShopFilter,
        known: Option<shops::ShopRow>,
        raw: RawRange,
    ) -> Result<(), DbError> {
        let RawRange { column, start, end } = raw;
        let zoned = column != "created_at" && (start.is_some_and(|b| b.is_day()) || end.is_some_and(|b| b.is_day()));
        let mut groups: BTreeMap<String, (Tz, Vec<i64>)> = BTreeMap::new();
        if zoned {
            let rows = match known {
                Some(shop) => vec![shop],
                None => shops::list(db, company_id, scope).await?,
            };
            for shop in rows {
                groups.entry(shop.fields.timezone.clone()).or_insert_with(|| (shop.tz(), Vec::new())).1.push(shop.id);
            }
        }
        if groups.is_empty() {
            groups.insert("UTC".into(), (chrono_tz::UTC, Vec::new()));
        }
        let single = groups.len() == 1;
        let zones: Vec<(Vec<i64>, Option<i64>, Option<i64>)> = groups
            .into_values()
            .map(|(tz, ids)| (if single { Vec::new() } else { ids }, start.map(|b| b.lower(tz)), end.map(|b| b.upper(tz))))
            .collect();
        self.range = Some(Range { column, start_envelope: start_envelope(column, &zones), zones });
        Ok(())
    }
}

/// Bounds on `start_at` covering every zone's bounds on `column`, for an index on `start_at` to
/// serve (an end bound limits the start too: appointments last at most 24 h). None where the
/// zones' own bounds already are that, one zone bounding `start_at` (said twice, SQLite tested
/// the second pair on every index entry of the range: 44% of a shop's week's count), and for
/// `created_at`, which has its own index.
fn start_envelope(column: &'static str, zones: &[(Vec<i64>, Option<i64>, Option<i64>)]) -> Option<(Option<i64>, Option<i64>)> {
    let needed = column == "end_at" || (column == "start_at" && zones.len() > 1);
    needed.then(|| {
        let lo = zones.iter().filter_map(|z| z.1).min();
        let hi = zones.iter().filter_map(|z| z.2).max();
        let lo = if column == "end_at" { lo.map(|t| t.saturating_sub(MAX_DURATION_MICROS)) } else { lo };
        (lo, hi)
    })
}

/// A parsed but not yet resolved `start_date` / `end_date` range.
#[derive(Debug)]
pub struct RawRange {
    column: &'static str,
    start: Option<Bound>,
    end: Option<Bound>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_envelope_is_only_there_when_the_zones_bounds_are_not_it() {
        let one = vec![(vec![], Some(10), Some(20))];
        assert_eq!(start_envelope("start_at", &one), None, "one zone's start bounds are the envelope");
        assert_eq!(start_envelope("created_at", &one), None);
        assert_eq!(start_envelope("end_at", &one), Some((Some(10 - MAX_DURATION_MICROS), Some(20))));
        let two = vec![(vec![1], Some(10), Some(20)), (vec![2], Some(13), Some(23))];
        assert_eq!(start_envelope("start_at", &two), Some((Some(10), Some(23))));
        let open_ended = vec![(vec![1], None, Some(20)), (vec![2], None, Some(23))];
        assert_eq!(start_envelope("start_at", &open_ended), Some((None, Some(23))));
    }
}
