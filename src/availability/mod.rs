//! `GET /api/v1/availability` (decisions §14): the free start times of a shop for a job of a
//! given length, per shop-local date, with the bays free for each.

pub mod slots;
mod store;

use axum::{Json, extract::State};
use chrono::{Datelike, Days, NaiveDate};
use serde::Serialize;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{
    appointments::timing::duration_micros,
    auth::Caller,
    db::now_micros,
    error::{ApiError, FieldErrors, Problem},
    extract::QueryParams,
    holds::{active_bays, shop_week},
    scope,
    state::AppState,
    time::{format_micros, local_day_start, parse_ymd},
};
use slots::{BayRef, Busy, day_slots};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(availability))
}

/// The most dates one search covers.
const MAX_DATES: u64 = 31;

#[derive(Debug, Serialize, ToSchema)]
pub struct Availability {
    /// Every shop-local date of the range, in order; a closed or full day has no slots.
    pub data: Vec<DaySlots>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DaySlots {
    /// Shop-local `YYYY-MM-DD`.
    pub date: String,
    pub slots: Vec<FreeSlot>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FreeSlot {
    /// Start (UTC).
    pub start: String,
    /// End (UTC): start plus `hours`.
    pub end: String,
    /// Shop-local start time, `HH:MM` (twice in a repeated daylight-saving hour, with different
    /// `start`s).
    pub time: String,
    /// Titles of the bays free for the whole slot, in bay `order`.
    pub columns: Vec<String>,
}

/// Query parameters of `GET /api/v1/availability`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct AvailabilityParams {
    /// The shop (required).
    #[param(rename = "filter[shop_id]", required = true)]
    filter_shop_id: i64,
    /// First shop-local date, `YYYY-MM-DD`, in the years 1900 to 2200 (required).
    #[param(required = true, value_type = chrono::NaiveDate)]
    start_date: String,
    /// Last shop-local date, `YYYY-MM-DD`, in the years 1900 to 2200: not before `start_date`, at
    /// most 31 dates in all. Default `start_date`.
    #[param(value_type = Option<chrono::NaiveDate>)]
    end_date: Option<String>,
    /// The job's length in hours: more than 0, at most 24 (required).
    #[param(required = true, exclusive_minimum = 0, maximum = 24)]
    hours: f64,
    /// Only this bay: the title of an active bay of the shop (case-insensitive).
    column: Option<String>,
    /// Minutes between start times, counted from each opening interval's start: 5 to 240,
    /// default 30.
    #[param(minimum = 5, maximum = 240)]
    step: Option<i64>,
}

/// Free slots (any role). Start times lie on the `step` grid of each opening interval of the
/// shop's hours (in its time zone; a skipped daylight-saving hour has none, a repeated one
/// goes on in elapsed time), such that `[start, start + hours)` fits in that interval and at
/// least one active bay (or the `column` asked for) is free for all of it. A bay is busy during
/// a live appointment on it and during an unexpired hold; appointments without a bay block
/// nothing. Starts before now are left out.
#[utoipa::path(get, path = "/api/v1/availability", tag = "booking", params(AvailabilityParams),
    responses((status = 200, body = Availability, description = "The free slots of every date of the range"), (status = 400, body = Problem), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn availability(State(state): State<AppState>, caller: Caller, params: QueryParams) -> Result<Json<Availability>, ApiError> {
    crate::listing::parse_filters(&params, &["shop_id"])?;
    let Some(raw_shop) = params.get("filter[shop_id]") else {
        return Err(ApiError::invalid("filter[shop_id]", "The filter[shop_id] parameter is required."));
    };
    let (_, shop) = scope::shop_filter_and_row(&state.db, &caller, Some(raw_shop)).await?;
    let shop = shop.ok_or_else(|| ApiError::not_found("Shop"))?;
    let mut errors = FieldErrors::default();
    let (first, last) = dates(&params, &mut errors);
    let hours = match params.get("hours").map(|h| h.trim().parse::<f64>()) {
        None => {
            errors.add("hours", "The hours parameter is required.");
            None
        }
        Some(Ok(h)) if h > 0.0 && h <= 24.0 => Some(h),
        Some(_) => {
            errors.add("hours", "The hours parameter must be a number greater than 0 and at most 24.");
            None
        }
    };
    let step = match params.get("step").map(crate::extract::parse_integer) {
        None => 30,
        Some(Some(s)) if (5..=240).contains(&s) => s,
        Some(_) => {
            errors.add("step", "The step parameter must be an integer from 5 to 240 (minutes).");
            30
        }
    };
    let (bays, _) = active_bays(&state.db, caller.company_id, shop.id, params.get("column"), "column", &mut errors).await?;
    errors.into_result()?;
    let (Some(first), Some(last), Some(hours)) = (first, last, hours) else {
        return Err(ApiError::Internal("validated availability without dates or hours".into()));
    };

    let tz = shop.tz();
    let week = shop_week(&state.db, caller.company_id, shop.id).await?;
    let now = now_micros();
    let after_last = last.checked_add_days(Days::new(1)).unwrap_or(last);
    let (from, to) = (local_day_start(tz, first).timestamp_micros().max(now), local_day_start(tz, after_last).timestamp_micros());
    let mut busy = Busy::new();
    if from < to && !bays.is_empty() && !week.is_empty() {
        for (bay, start, end) in store::busy_times(&state.db, caller.company_id, shop.id, from, to, now).await? {
            busy.entry(bay).or_default().push((start, end));
        }
    }
    let refs: Vec<BayRef> = bays.into_iter().map(|b| BayRef { id: b.id, title: b.title }).collect();
    let duration = duration_micros(hours);
    let mut data = Vec::new();
    let mut date = first;
    loop {
        let slots = day_slots(tz, date, &week, &refs, &busy, duration, step * 60_000_000, now)
            .into_iter()
            .map(|s| FreeSlot {
                start: format_micros(s.start),
                end: format_micros(s.end),
                time: local_hh_mm(tz, s.start),
                columns: s.bays.iter().map(|&i| refs[i].title.clone()).collect(),
            })
            .collect();
        data.push(DaySlots { date: date.format("%Y-%m-%d").to_string(), slots });
        match date.checked_add_days(Days::new(1)) {
            Some(next) if next <= last => date = next,
            _ => break,
        }
    }
    Ok(Json(Availability { data }))
}

fn local_hh_mm(tz: chrono_tz::Tz, micros: i64) -> String {
    chrono::DateTime::from_timestamp_micros(micros).unwrap_or_default().with_timezone(&tz).format("%H:%M").to_string()
}

/// A shop-local date in the years an appointment takes: a later one offers slots nothing can
/// book, and past 9999 prints no RFC 3339 time.
pub(crate) fn booking_date(raw: &str) -> Option<NaiveDate> {
    parse_ymd(raw).filter(|date| crate::appointments::timing::YEARS.contains(&date.year()))
}

/// `start_date` (required) and `end_date` (default `start_date`, not before it, at most
/// [`MAX_DATES`] dates in all).
fn dates(params: &QueryParams, errors: &mut FieldErrors) -> (Option<NaiveDate>, Option<NaiveDate>) {
    let first = match params.get("start_date") {
        None => {
            errors.add("start_date", "The start_date parameter is required.");
            None
        }
        Some(raw) => booking_date(raw).or_else(|| {
            errors.add("start_date", "The start_date parameter must be a date as YYYY-MM-DD in the years 1900 to 2200.");
            None
        }),
    };
    let last = match params.get("end_date") {
        None => first,
        Some(raw) => booking_date(raw).or_else(|| {
            errors.add("end_date", "The end_date parameter must be a date as YYYY-MM-DD in the years 1900 to 2200.");
            None
        }),
    };
    if let (Some(f), Some(l)) = (first, last) {
        if l < f {
            errors.add("end_date", "The end_date must not be before the start_date.");
        } else if (l - f).num_days() as u64 >= MAX_DATES {
            errors.add("end_date", format!("The range may span at most {MAX_DATES} dates."));
        }
    }
    (first, last)
}
