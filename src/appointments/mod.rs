//! Appointments: `GET/POST /api/v1/appointments`, `GET/PUT /api/v1/appointments/{id}`.

pub mod demo;
pub mod filters;
pub mod model;
pub mod patch;
pub mod store;
pub mod timing;
mod validation;

use std::collections::HashMap;

use axum::{
    extract::{Path, State},
    http::StatusCode,
    response::Response,
};
use utoipa_axum::{router::OpenApiRouter, routes};

pub use demo::load_demo;
pub use validation::Validated;

use crate::{
    auth::{Caller, Writer},
    change::Change,
    conditional::{IfMatch, One},
    customers::{model::Customer, store as customers},
    db::{DbError, ShopFilter, now_micros},
    error::{ApiError, Problem},
    extract::{JsonBody, Replace, Target, path_id},
    listing::{ListQuery, ListSpec, Page, RequestUrl},
    scope,
    state::AppState,
};
use filters::{FILTERS, ListFilters};
use model::{Appointment, AppointmentInput, AppointmentListParams, AppointmentUpdate};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_appointments, create_appointment))
        .routes(routes!(export_appointments))
        .routes(routes!(get_appointment, update_appointment, delete_appointment))
}

const LIST: ListSpec = ListSpec {
    sorts: store::SORTS,
    filters: &FILTERS,
};

/// List appointments.
///
/// Shop-local filters (`filter[date]`, `filter[time]`, date-only `start_date`/`end_date` with
/// `filter_by`) use each shop's own time zone.
#[utoipa::path(get, path = "/api/v1/appointments", tag = "appointments", params(AppointmentListParams),
    responses((status = 200, body = Page<Appointment>, description = "A page of appointments"), (status = 400, body = Problem), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn list_appointments(State(state): State<AppState>, caller: Caller, url: RequestUrl) -> Result<Page<Appointment>, ApiError> {
    let list = ListQuery::parse(&url.params, &LIST)?;
    let with_details = url.params.bool("with_details")?.unwrap_or(false);
    let (mut filters, range) = ListFilters::parse(&url.params, &list)?;
    let (shops, shop) = scope::shop_filter_and_row(&state.db, &caller, list.filter("shop_id")).await?;
    if let Some(range) = range {
        filters.resolve_range(&state.db, caller.company_id, &shops, shop, range).await?;
    }
    let (rows, total) = store::list(&state.db, caller.company_id, &shops, &filters, &list.request).await?;
    let mut data: Vec<Appointment> = rows.into_iter().map(Appointment::from).collect();
    if with_details {
        attach_customers(&state, &caller, &mut data).await?;
    }
    Ok(list.into_page(&url, data, total))
}

/// Export appointments as CSV: the list's filters and sort, every matching appointment, streamed.
#[utoipa::path(get, path = "/api/v1/appointments/export", tag = "appointments", params(model::AppointmentExportParams),
    responses((status = 200, content_type = "text/csv", body = String,
        description = "RFC 4180 CSV: a header row of the appointment's field names (nested ones with dots: `vehicle.make`, \
            `schedule.start`), then one row per appointment in the list's order. `null` is an empty cell."),
        (status = 400, body = Problem), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn export_appointments(State(state): State<AppState>, caller: Caller, url: RequestUrl) -> Result<Response, ApiError> {
    let list = ListQuery::parse(&url.params, &LIST)?;
    crate::export::refuse_list_only_parameters(&url.params)?;
    let (mut filters, range) = ListFilters::parse(&url.params, &list)?;
    let (shops, shop) = scope::shop_filter_and_row(&state.db, &caller, list.filter("shop_id")).await?;
    if let Some(range) = range {
        filters.resolve_range(&state.db, caller.company_id, &shops, shop, range).await?;
    }
    let q = store::export_query(caller.company_id, &shops, &filters, &list.request);
    let sample = Appointment::from(store::AppointmentRow::default());
    crate::export::csv_response::<store::AppointmentRow, Appointment>(&state, q, sample, "appointments").await
}

/// Adds `customer` to every appointment: the page's customers in one query; a customer outside
/// the key's shops shows as null.
async fn attach_customers(state: &AppState, caller: &Caller, data: &mut [Appointment]) -> Result<(), ApiError> {
    let mut ids: Vec<i64> = data.iter().filter_map(|a| a.customer_id).collect();
    ids.sort_unstable();
    ids.dedup();
    let found: HashMap<i64, Customer> = customers::by_ids(&state.db, caller.company_id, &ids)
        .await?
        .into_iter()
        .filter(|c| caller.can_see_shop(c.fields.shop_id))
        .map(|c| (c.id, Customer::from(c)))
        .collect();
    for a in data {
        a.customer = Some(a.customer_id.and_then(|id| found.get(&id).cloned()));
    }
    Ok(())
}

/// Get one appointment.
#[utoipa::path(get, path = "/api/v1/appointments/{id}", tag = "appointments", params(("id" = i64, Path)),
    responses((status = 200, body = Appointment, description = "The appointment (also when cancelled: see `deleted`)"), (status = 404, body = Problem)))]
async fn get_appointment(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<One<Appointment>, ApiError> {
    Ok(One(visible(&state, &caller, &id).await?.into()))
}

/// Create an appointment (`write` or `admin` key). With `hold_id`, book exactly the held shop,
/// bay and time and consume the hold (409 when it expired or was used).
#[utoipa::path(post, path = "/api/v1/appointments", tag = "appointments", request_body = AppointmentInput,
    responses((status = 201, body = Appointment, description = "Created; `Location` names the new appointment"),
        (status = 400, body = Problem), (status = 409, body = Problem, description = "The `hold_id` names a hold that expired or was used or released; or the shop's time zone changed \
            while the appointment was written, three times running (send it again)"),
        (status = 422, body = Problem)))]
async fn create_appointment(State(state): State<AppState>, Writer(caller): Writer, JsonBody(input): JsonBody<AppointmentInput>) -> Result<Response, ApiError> {
    with_fresh_zone(&state, caller.company_id, || create(&state, &caller, input.clone())).await
}

async fn create(state: &AppState, caller: &Caller, mut input: AppointmentInput) -> Result<Response, ApiError> {
    let (hold, mut errors) = match input.hold_id {
        Some(id) => {
            let (held, errors) = crate::holds::fill_from_hold(&state.db, caller, &mut input, id).await?;
            (Some(held), errors)
        }
        None => (None, crate::error::FieldErrors::default()),
    };
    // Every field error of the body at once: the hold's beside the others.
    let mut valid = match validation::validate(&state.db, &state.shops, caller, input, None).await {
        Ok(valid) if errors.is_empty() => valid,
        Ok(_) => return Err(ApiError::Validation(errors)),
        Err(ApiError::Validation(others)) => {
            errors.absorb("", others);
            return Err(ApiError::Validation(errors));
        }
        Err(e) => return Err(e),
    };
    let mut change = Change::begin(&state.db, caller.company_id).await?;
    match &hold {
        // The shop before the hold's row (the transaction has begun already: no round trip of
        // its own on PostgreSQL).
        Some(held) => {
            held.pin(&mut valid);
            change.require_now(&valid.zone_guard(caller.company_id)).await?;
            crate::holds::consume(&mut change, &held.hold).await?;
        }
        None => change.require(valid.zone_guard(caller.company_id)),
    }
    let (column_title, company_id, now) = (valid.column_title, caller.company_id, now_micros());
    change
        .finish_insert("appointments", |id| store::insert_new(company_id, id, &valid.fields, now), move |row, outbox| {
            let mut row: store::AppointmentRow = row?.ok_or(DbError::NoRow)?;
            row.column_title = column_title;
            let appointment = Appointment::from(row);
            outbox.record("appointment.created", Some(appointment.shop_id), &appointment)?;
            outbox.created(format!("/api/v1/appointments/{}", appointment.appointment_id), appointment)
        })
        .await
}

/// Runs `write` again, at most twice, when it failed because its shop's time zone changed after
/// it was validated ([`ApiError::Outdated`]: its local date and time were derived in the old
/// zone). Each try validates afresh, with the company's shops read from the database rather than
/// from this replica's cache, which may not have heard of the change yet, and (on SQLite) once
/// the change is committed, not only run by the writer.
async fn with_fresh_zone<T, W: Future<Output = Result<T, ApiError>>>(state: &AppState, company_id: i64, mut write: impl FnMut() -> W) -> Result<T, ApiError> {
    let mut tries = 1;
    loop {
        match write().await {
            Err(ApiError::Outdated) if tries < 3 => {
                state.db.settle_writes().await?;
                crate::shops::cache::forget_company(&state.shops, company_id);
                tries += 1;
            }
            done => return done,
        }
    }
}

/// Update an appointment (`write` or `admin` key). The body is the create body, required fields
/// included; omitted optional fields keep their value and `null` clears a nullable one.
#[utoipa::path(put, path = "/api/v1/appointments/{id}", tag = "appointments", params(("id" = i64, Path)),
    request_body = AppointmentUpdate,
    responses((status = 200, body = Appointment, description = "The updated appointment"), (status = 400, body = Problem), (status = 404, body = Problem),
        (status = 409, body = Problem, description = "The appointment is cancelled: cancelled appointments are read-only; or the shop's time zone \
            changed while it was written, three times running (send it again)"), (status = 422, body = Problem)))]
async fn update_appointment(State(state): State<AppState>, Writer(caller): Writer, put: Replace<AppointmentInput>) -> Result<One<Appointment>, ApiError> {
    let Replace { id, if_match, input } = put;
    let current = visible(&state, &caller, &id).await?;
    if current.deleted_at.is_some() {
        return Err(deleted_is_read_only());
    }
    let input = input?;
    if input.hold_id.is_some() {
        return Err(ApiError::invalid("hold_id", "The hold_id field is accepted only when creating an appointment."));
    }
    // Each try starts from the row read here: after a zone change re-localised it, the guarded
    // write misses it and the locked pass reads it afresh.
    with_fresh_zone(&state, caller.company_id, || update(&state, &caller, &current, &if_match, &input)).await
}

/// Writes `input` over `current`, as read outside the transaction.
async fn update(state: &AppState, caller: &Caller, current: &store::AppointmentRow, if_match: &IfMatch, input: &AppointmentInput) -> Result<One<Appointment>, ApiError> {
    let company = caller.company_id;
    // Over the row as read outside the transaction, written only while it still holds that: an
    // omitted optional field keeps the value it has when the update is written.
    let valid = validation::validate(&state.db, &state.shops, caller, input.clone(), Some(current)).await?;
    let mut change = Change::begin(&state.db, company).await?;
    if if_match.is_present() {
        // The shop before the appointment: the order in which a zone change locks them.
        change.require_now(&valid.zone_guard(company)).await?;
        let locked = store::find(change.tx(), company, current.id).await?;
        // Deleted meanwhile: read-only whatever If-Match says (409, not 412).
        if locked.as_ref().is_some_and(|a| a.deleted_at.is_some()) {
            return Err(deleted_is_read_only());
        }
        if_match.check::<Appointment>(&current.clone().into(), locked.map(Appointment::from).as_ref())?;
    }
    let column_title = valid.column_title.clone();
    // Guarded in its own `WHERE` (no statement of its own): a zone change makes it miss, like a
    // change of the row; the locked pass below checks the zone it reads then, alone, first.
    let zone_unchanged = change.guard_condition(&valid.zone_guard(company));
    let update = store::update_unless_changed(company, current.id, &current.fields, &valid.fields, &zone_unchanged);
    if let Some(updated) = change.finish_with(update, move |row, outbox| row?.map(|row| recorded(row, column_title, outbox)).transpose()).await? {
        return Ok(updated);
    }
    // Changed since: validated again over the row read locked (it stays so until this write
    // commits), with what the body names read before the lock. Nothing is read from the pool
    // while the lock is held: the request waiting for a connection must not hold what the
    // requests holding every connection wait for.
    let named = validation::References::read(&state.db, &state.shops, caller, input, None).await?;
    let mut change = Change::begin(&state.db, company).await?;
    if let Some(guard) = named.zone_guard(company) {
        change.require_now(&guard).await?;
    }
    let current = store::find(change.tx(), company, current.id)
        .await?
        .filter(|a| caller.can_see_shop(a.fields.shop_id))
        .ok_or_else(|| ApiError::not_found("Appointment"))?;
    if current.deleted_at.is_some() {
        return Err(deleted_is_read_only());
    }
    let valid = validation::check(named, input.clone(), Some(&current))?;
    if_match.check_current::<Appointment>(&current.clone().into())?;
    let column_title = valid.column_title;
    change
        .finish_with(store::update_query(company, current.id, &valid.fields), move |row, outbox| {
            recorded(row?.ok_or_else(deleted_is_read_only)?, column_title, outbox)
        })
        .await
}

/// The answer to an update that wrote `row`, with its event.
fn recorded(mut row: store::AppointmentRow, column_title: Option<String>, outbox: &mut crate::change::Outbox) -> Result<One<Appointment>, ApiError> {
    row.column_title = column_title;
    let appointment = Appointment::from(row);
    outbox.record("appointment.updated", Some(appointment.shop_id), &appointment)?;
    Ok(One(appointment))
}

fn deleted_is_read_only() -> ApiError {
    ApiError::Conflict("The appointment is deleted: deleted appointments are read-only.".into())
}

/// Cancel an appointment (`write` or `admin` key): a soft delete. It stays readable with
/// `deleted` set, leaves the lists (see `filter[trashed]`) and can no longer be changed.
/// Deleting it again answers 204 and keeps the first `deleted` time.
#[utoipa::path(delete, path = "/api/v1/appointments/{id}", tag = "appointments", params(("id" = i64, Path)),
    responses((status = 204, description = "Deleted (or deleted already)"), (status = 404, body = Problem)))]
async fn delete_appointment(State(state): State<AppState>, Writer(caller): Writer, Target { id, if_match }: Target) -> Result<StatusCode, ApiError> {
    let current = visible(&state, &caller, &id).await?;
    if current.deleted_at.is_some() {
        if_match.check_current::<Appointment>(&current.into())?;
        return Ok(StatusCode::NO_CONTENT);
    }
    let mut change = Change::begin(&state.db, caller.company_id).await?;
    if_match.verify::<Appointment, _>(&current, store::find(change.tx(), caller.company_id, current.id)).await?;
    // A key with a shop list deletes only in its shops as they are when it writes: the
    // appointment may have moved to another shop since `visible` read it.
    match store::soft_delete(change.tx(), caller.company_id, current.id, caller.shops.as_deref(), now_micros()).await? {
        Some(row) => {
            let appointment = Appointment::from(row);
            change.record("appointment.deleted", Some(appointment.shop_id), &appointment)?;
            change.commit().await?;
        }
        None => {
            let stored = store::find(change.tx(), caller.company_id, current.id).await?;
            if stored.is_some_and(|row| row.deleted_at.is_none() && !caller.can_see_shop(row.fields.shop_id)) {
                return Err(ApiError::not_found("Appointment"));
            }
        }
    }
    Ok(StatusCode::NO_CONTENT)
}

/// For customers' `with_details`: the statement that reads the appointments of a page of (at
/// least one) customers, to run with the page's other details ([`crate::db::Db::read_together`]);
/// [`schedules_of_customers`] turns its rows into each customer's schedule.
pub fn customers_appointments(company_id: i64, customer_ids: &[i64]) -> crate::db::Rows<store::AppointmentRow> {
    store::for_customers(company_id, customer_ids)
}

/// Each customer's appointments in the given shops (as this API returns them, by scheduled
/// start), from the rows of [`customers_appointments`]. Derive their `vehicles` with
/// [`model::distinct_vehicles`].
pub fn schedules_of_customers(rows: Vec<store::AppointmentRow>, shops: &ShopFilter) -> HashMap<i64, Vec<Appointment>> {
    let mut out: HashMap<i64, Vec<Appointment>> = HashMap::new();
    for row in rows {
        let in_scope = match shops {
            ShopFilter::All => true,
            ShopFilter::Only(ids) => ids.contains(&row.fields.shop_id),
        };
        if let (true, Some(customer_id)) = (in_scope, row.fields.customer_id) {
            out.entry(customer_id).or_default().push(row.into());
        }
    }
    out
}

async fn visible(state: &AppState, caller: &Caller, raw_id: &str) -> Result<store::AppointmentRow, ApiError> {
    let id = path_id(raw_id, "Appointment")?;
    store::find(&state.db, caller.company_id, id)
        .await?
        .filter(|a| caller.can_see_shop(a.fields.shop_id))
        .ok_or_else(|| ApiError::not_found("Appointment"))
}
