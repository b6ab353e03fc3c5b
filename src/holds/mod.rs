//! Slot holds (decisions §14): `POST /api/v1/holds`, `DELETE /api/v1/holds/{id}`, and the
//! consumption of a hold by `POST /api/v1/appointments` with `hold_id`.
//!
//! Among concurrent holds for overlapping time on one bay at most one succeeds: the database
//! refuses the second live hold (an exclusion constraint on PostgreSQL, a trigger on SQLite's
//! single writer), whichever replica writes it. Holds record no events: they are short-lived
//! and private to the booking client; the appointment that consumes one records
//! `appointment.created`.

pub mod model;
pub mod store;

use std::time::Duration;

use axum::{
    extract::{Path, State},
    http::StatusCode,
    response::Response,
};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{
    appointments::{
        Validated,
        model::AppointmentInput,
        patch::Patch,
        timing::{duration_micros, local_parts, parse_date, parse_schedule},
    },
    auth::{Caller, Writer},
    availability::slots::{inside_one, opening_intervals},
    bays::store::{self as bays, BayRow},
    change::Change,
    conditional::One,
    db::{Db, DbError, ShopFilter, now_micros},
    error::{ApiError, FieldErrors, Problem},
    extract::{JsonBody, Target, path_id},
    scope,
    shop_hours::{model::Interval, store as shop_hours},
    shops::store::ShopRow,
    state::AppState,
};
use model::{Hold, HoldInput};
use store::HoldRow;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create_hold)).routes(routes!(get_hold, release_hold))
}

/// Hold a bay (`write` or `admin` key): reserves it for `[date, date + hours)` until
/// `expires_at` (`--hold-ttl-secs` after now). Without `column`, the first active bay by
/// `order` that is free for the whole time. 409 when that time is outside one opening interval
/// of the shop's hours, or no bay (or not the named one) is free: a bay is busy during a live
/// appointment on it and during another unexpired hold. Concurrent holds never overlap on a bay.
#[utoipa::path(post, path = "/api/v1/holds", tag = "booking", request_body = HoldInput,
    responses((status = 201, body = Hold, description = "Held; `Location` names the hold"), (status = 400, body = Problem),
        (status = 409, body = Problem, description = "No bay (or not the one named) is free for the whole time, or the time is outside opening hours"),
        (status = 422, body = Problem)))]
async fn create_hold(State(state): State<AppState>, Writer(caller): Writer, JsonBody(input): JsonBody<HoldInput>) -> Result<Response, ApiError> {
    let now = now_micros();
    let wanted = validate(&state.db, &caller, input, now).await?;
    let week = shop_week(&state.db, caller.company_id, wanted.shop.id).await?;
    let tz = wanted.shop.tz();
    let (local_date, _) = local_parts(tz, wanted.start);
    let date = parse_date(&local_date).ok_or_else(|| ApiError::Internal("unreadable local date".into()))?;
    if !inside_one(&opening_intervals(tz, date, &week), wanted.start, wanted.end) {
        return Err(ApiError::Conflict("The time is outside the shop's opening hours.".into()));
    }
    let expires_at = now + i64::from(state.config.hold_ttl_secs) * 1_000_000;
    // A bay chosen for the caller can be taken by a concurrent hold between the read and the
    // insert, or moved to another shop or set inactive (`gone`); then the next free one is tried.
    let mut gone = Vec::new();
    for _ in 0..=wanted.bays.len() {
        let mut change = Change::begin(&state.db, caller.company_id).await?;
        let (company, shop) = (caller.company_id, wanted.shop.id);
        store::retire_expired(change.tx(), company, shop, wanted.start, wanted.end, now).await?;
        let busy = store::busy_bays(change.tx(), company, shop, wanted.start, wanted.end, now).await?;
        let Some(bay) = wanted.bays.iter().find(|b| !busy.contains(&b.id) && !gone.contains(&b.id)) else { break };
        if !store::lock_bay(change.tx(), company, shop, bay.id).await? {
            gone.push(bay.id);
            continue;
        }
        let new = HoldRow {
            id: 0,
            shop_id: shop,
            bay_id: bay.id,
            start_at: wanted.start,
            end_at: wanted.end,
            hours: wanted.hours,
            expires_at,
            state: "held".into(),
        };
        let row = match store::insert(change.tx(), company, &new, now).await {
            Err(DbError::Overlap) => continue,
            other => other?,
        };
        if store::appointment_overlaps(change.tx(), company, shop, bay.id, wanted.start, wanted.end).await? {
            continue;
        }
        let hold = Hold::new(&row, bay.title.clone());
        return change.commit_created(format!("/api/v1/holds/{}", row.id), hold).await;
    }
    Err(ApiError::Conflict(match wanted.named {
        true => "The bay is not free for the whole time.".into(),
        false => "No bay is free for the whole time.".into(),
    }))
}

/// Get one hold (any role), as its create answered it; `expires_at` says whether it is still
/// live (a booked or released hold answers too, until it is purged a day after expiring).
#[utoipa::path(get, path = "/api/v1/holds/{id}", tag = "booking", params(("id" = i64, Path)),
    responses((status = 200, body = Hold, description = "The hold"), (status = 404, body = Problem)))]
async fn get_hold(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<One<Hold>, ApiError> {
    let hold = visible(&state.db, &caller, &id).await?;
    let bay = bays::find(&state.db, caller.company_id, hold.bay_id).await?.ok_or_else(|| ApiError::not_found("Hold"))?;
    Ok(One(Hold::new(&hold, bay.title)))
}

/// Release a hold (`write` or `admin` key): its bay is free again at once. A hold already
/// booked, released or expired answers 204 too and stays as it is. `If-Match` is checked
/// against the hold as `GET` shows it.
#[utoipa::path(delete, path = "/api/v1/holds/{id}", tag = "booking", params(("id" = i64, Path)),
    responses((status = 204, description = "Released (or not live any more)"), (status = 404, body = Problem),
        (status = 412, body = Problem, description = "`If-Match` names another representation")))]
async fn release_hold(State(state): State<AppState>, Writer(caller): Writer, target: Target) -> Result<StatusCode, ApiError> {
    let Target { id, if_match } = target;
    let hold = visible(&state.db, &caller, &id).await?;
    if if_match.is_present() {
        // What a hold shows never changes but its bay's title, so the row needs no lock here.
        let bay = bays::find(&state.db, caller.company_id, hold.bay_id).await?.ok_or_else(|| ApiError::not_found("Hold"))?;
        if_match.check_current(&Hold::new(&hold, bay.title))?;
    }
    if hold.state == "held" {
        let mut change = Change::begin(&state.db, caller.company_id).await?;
        if store::end(change.tx(), caller.company_id, hold.id, "released", now_micros()).await? {
            change.commit().await?;
        }
    }
    Ok(StatusCode::NO_CONTENT)
}

/// A hold of the caller's company in a shop the key may see, or 404.
async fn visible(db: &Db, caller: &Caller, raw_id: &str) -> Result<HoldRow, ApiError> {
    let id = path_id(raw_id, "Hold")?;
    store::find(db, caller.company_id, id).await?.filter(|h| caller.can_see_shop(h.shop_id)).ok_or_else(|| ApiError::not_found("Hold"))
}

/// A validated hold request.
struct Wanted {
    shop: ShopRow,
    start: i64,
    end: i64,
    hours: f64,
    /// The candidate bays in `order`: the named one, or every active bay of the shop.
    bays: Vec<BayRow>,
    named: bool,
}

async fn validate(db: &Db, caller: &Caller, input: HoldInput, now: i64) -> Result<Wanted, ApiError> {
    let mut errors = FieldErrors::default();
    if input.shop_id.is_none() {
        errors.add("shop_id", "The shop_id field is required.");
    }
    let shop = scope::body_shop(db, caller, input.shop_id, &mut errors).await?;
    let tz = shop.as_ref().map(ShopRow::tz).unwrap_or(chrono_tz::UTC);
    let start = match input.date.as_deref().map(|raw| parse_schedule(raw, tz)) {
        None => {
            errors.add("date", "The date field is required.");
            None
        }
        Some(None) => {
            errors.add("date", "The date field must be an RFC 3339 date-time or a local date-time (YYYY-MM-DDTHH:MM[:SS]).");
            None
        }
        Some(Some(t)) if t.timestamp_micros() < now => {
            errors.add("date", "The date field must not be in the past.");
            None
        }
        Some(Some(t)) => Some(t.timestamp_micros()),
    };
    let hours = input.hours.unwrap_or(f64::NAN);
    if !(hours > 0.0 && hours <= 24.0) {
        errors.add("hours", "The hours field is required, greater than 0 and at most 24.");
    }
    let (bays, named) = match &shop {
        Some(shop) => active_bays(db, caller.company_id, shop.id, input.column.as_deref(), "column", &mut errors).await?,
        None => (Vec::new(), false),
    };
    errors.into_result()?;
    let (Some(shop), Some(start)) = (shop, start) else {
        return Err(ApiError::Internal("validated hold without shop or date".into()));
    };
    Ok(Wanted { shop, start, end: start + duration_micros(hours), hours, bays, named })
}

/// The active bays of a shop by `order`, or only the one `column` names (case-insensitive; a
/// title that names no active bay of the shop is a 422 on `field`). Returns whether one was
/// named.
pub async fn active_bays(
    db: &Db,
    company_id: i64,
    shop_id: i64,
    column: Option<&str>,
    field: &str,
    errors: &mut FieldErrors,
) -> Result<(Vec<BayRow>, bool), ApiError> {
    let mut all: Vec<BayRow> = bays::for_shops(db, company_id, &ShopFilter::Only(vec![shop_id])).await?;
    all.retain(|b| b.active);
    let Some(title) = column.map(str::trim).filter(|t| !t.is_empty()) else { return Ok((all, false)) };
    let wanted = crate::db::fold_case(title);
    all.retain(|b| crate::db::fold_case(&b.title) == wanted);
    if all.is_empty() {
        errors.add(field, format!("The {field} must be the title of an active bay of the shop."));
    }
    Ok((all, true))
}

/// A shop's week of opening intervals.
pub async fn shop_week(db: &Db, company_id: i64, shop_id: i64) -> Result<Vec<Interval>, ApiError> {
    let rows = shop_hours::for_shops(db, company_id, &ShopFilter::Only(vec![shop_id])).await?;
    Ok(rows.into_iter().map(|r| (r.day, r.open_minute, r.close_minute)).collect())
}

/// Deletes holds a day after they expired, in small batches so writers never wait on a long
/// delete (until then a late booking with one learns it expired).
pub fn spawn_purge(db: Db) {
    const BATCH: i64 = 500;
    const SWEEP_EVERY: Duration = Duration::from_secs(60);
    tokio::spawn(async move {
        tokio::time::sleep(SWEEP_EVERY).await;
        loop {
            match store::purge(&db, now_micros() - 86_400_000_000, BATCH).await {
                Ok(n) if n as i64 >= BATCH => tokio::time::sleep(Duration::from_millis(50)).await,
                Ok(_) => tokio::time::sleep(SWEEP_EVERY).await,
                Err(e) => {
                    tracing::warn!(error = %e, "hold purge failed");
                    tokio::time::sleep(SWEEP_EVERY).await;
                }
            }
        }
    });
}

/// A live hold a booking names, with what it reserved as read from the database.
pub struct HeldSlot {
    pub hold: HoldRow,
    tz: chrono_tz::Tz,
    /// The shop's time zone as stored, which the booking is written under (`tz` parsed).
    zone: String,
    title: String,
}

impl HeldSlot {
    /// Writes the hold's shop, bay and time into a validated booking. Validation read them back
    /// from the body through the replica's cache of shops (a bay's title, the shop's zone), which
    /// a rename or a zone change can have outdated for a moment; the booking takes exactly what
    /// the hold reserved.
    pub fn pin(&self, valid: &mut Validated) {
        let fields = &mut valid.fields;
        (fields.shop_id, fields.bay_id) = (self.hold.shop_id, Some(self.hold.bay_id));
        (fields.start_at, fields.end_at) = (self.hold.start_at, self.hold.end_at);
        fields.localize(self.tz);
        valid.zone = self.zone.clone();
        valid.column_title = Some(self.title.clone());
    }
}

/// For `POST /api/v1/appointments` with `hold_id`: fills the omitted `shop_id`, `date`,
/// `hours` and `column` from the hold, and returns the hold for [`HeldSlot::pin`] and
/// [`consume`] with an error for each given one that differs from the hold's (which it then
/// replaces, so the body's other checks run and report beside them). An unknown hold, or one
/// outside the key's shops, is a 422 on `hold_id`; one no longer live is a 409.
pub async fn fill_from_hold(db: &Db, caller: &Caller, input: &mut AppointmentInput, hold_id: i64) -> Result<(HeldSlot, FieldErrors), ApiError> {
    let invalid = || ApiError::invalid("hold_id", "The selected hold_id is invalid.");
    let hold = store::find(db, caller.company_id, hold_id).await?.filter(|h| caller.can_see_shop(h.shop_id)).ok_or_else(invalid)?;
    if hold.state != "held" || hold.expires_at <= now_micros() {
        return Err(hold_not_live());
    }
    let shop = crate::shops::store::find(db, caller.company_id, hold.shop_id).await?.ok_or_else(invalid)?;
    let bay = bays::find(db, caller.company_id, hold.bay_id).await?.ok_or_else(invalid)?;
    let mut errors = FieldErrors::default();
    let e = &mut errors;
    same(e, "shop_id", &mut input.shop_id, hold.shop_id, &|v: &i64| *v == hold.shop_id);
    same(e, "hours", &mut input.hours, hold.hours, &|v: &f64| duration_micros(*v) == hold.end_at - hold.start_at);
    let tz = shop.tz();
    let start = crate::time::format_micros(hold.start_at);
    same(e, "date", &mut input.date, start, &|v: &String| parse_schedule(v, tz).map(|t| t.timestamp_micros()) == Some(hold.start_at));
    let title = crate::db::fold_case(&bay.title);
    same(e, "column", &mut input.column, bay.title.clone(), &|v: &String| crate::db::fold_case(v.trim()) == title);
    Ok((HeldSlot { hold, tz, zone: shop.fields.timezone, title: bay.title }, errors))
}

/// An omitted field takes the hold's value; a given one must match it (else an error, and the
/// hold's value in its place).
fn same<T>(errors: &mut FieldErrors, field: &str, patch: &mut Patch<T>, held: T, equal: &dyn Fn(&T) -> bool) {
    match patch {
        Patch::Value(v) if equal(v) => {}
        Patch::Missing => *patch = Patch::Value(held),
        _ => {
            errors.add(field, format!("The {field} must equal the hold's (or be omitted)."));
            *patch = Patch::Value(held);
        }
    }
}

/// Consumes a hold inside the booking's transaction: 409 when it expired or was used,
/// released or consumed by a concurrent booking meanwhile.
pub async fn consume(change: &mut Change, hold: &HoldRow) -> Result<(), ApiError> {
    let company_id = change.company_id();
    match store::end(change.tx(), company_id, hold.id, "booked", now_micros()).await? {
        true => Ok(()),
        false => Err(hold_not_live()),
    }
}

fn hold_not_live() -> ApiError {
    ApiError::Conflict("The hold has expired or was already used or released.".into())
}
