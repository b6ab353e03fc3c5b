//! Customers: `GET/POST /api/v1/customers`, `GET/PUT /api/v1/customers/{CustomerID}`.

pub mod demo;
mod details;
pub mod import;
mod input;
pub mod model;
pub mod store;

use axum::{
    Json,
    extract::{Path, State},
    response::{IntoResponse, Response},
};
use chrono::NaiveDate;
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{
    state::AppState,
    auth::{Caller, Writer},
    change::Change,
    conditional::One,
    db::{DbError, now_micros},
    error::{ApiError, FieldErrors, Problem},
    extract::{JsonBody, Replace, parse_integer, path_id},
    listing::{ListQuery, ListSpec, Page, RequestUrl},
    respond::unique_as_invalid,
    scope,
};
use model::{Customer, CustomerInput, CustomerListParams, NewCustomer};
use store::{CustomerFilter, CustomerRow};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_customers, create_customer))
        .routes(routes!(export_customers))
        .routes(routes!(import_customers))
        .routes(routes!(get_customer, update_customer))
}

const LIST: ListSpec = ListSpec {
    sorts: store::SORTS,
    filters: &["first_name", "last_name", "address", "phone", "customer_number", "updated_date", "shop_id"],
};

/// List customers.
#[utoipa::path(get, path = "/api/v1/customers", tag = "customers", params(CustomerListParams),
    responses((status = 200, body = Page<Customer>, description = "A page of customers"), (status = 400, body = Problem), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn list_customers(State(state): State<AppState>, caller: Caller, url: RequestUrl) -> Result<Page<Customer>, ApiError> {
    let list = ListQuery::parse(&url.params, &LIST)?;
    let filter = parse_filter(&url, &list)?;
    let with_details = url.params.bool("with_details")?.unwrap_or(false);
    let shops = scope::shop_filter(&state.db, &caller, list.filter("shop_id")).await?;
    let (rows, total) = store::list(&state.db, caller.company_id, &shops, &filter, &list.request).await?;
    let mut data: Vec<Customer> = rows.into_iter().map(Customer::from).collect();
    if with_details {
        details::attach(&state.db, &caller, &mut data).await?;
    }
    Ok(list.into_page(&url, data, total))
}

/// Export customers as CSV: the list's filters and sort, every matching customer, streamed.
#[utoipa::path(get, path = "/api/v1/customers/export", tag = "customers", params(model::CustomerExportParams),
    responses((status = 200, content_type = "text/csv", body = String,
        description = "RFC 4180 CSV: a header row of the customer's field names (nested ones with dots: `phone.home`), then one \
            row per customer in the list's order. `null` is an empty cell."),
        (status = 400, body = Problem), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn export_customers(State(state): State<AppState>, caller: Caller, url: RequestUrl) -> Result<Response, ApiError> {
    let list = ListQuery::parse(&url.params, &LIST)?;
    crate::export::refuse_list_only_parameters(&url.params)?;
    let filter = parse_filter(&url, &list)?;
    let shops = scope::shop_filter(&state.db, &caller, list.filter("shop_id")).await?;
    let q = store::export_query(&state.db, caller.company_id, &shops, &filter, &list.request);
    crate::export::csv_response::<CustomerRow, Customer>(&state, q, Customer::from(CustomerRow::default()), "customers").await
}

pub const IMPORT_PATH: &str = "/api/v1/customers/import";

/// Import customers from a CSV file (`write` or `admin` key): all rows or none.
///
/// The columns are the export's (`phone.home` for the home phone); `customer_id`, `timestamp`
/// and `updated_at` are ignored. Every row is validated like `POST /api/v1/customers`; one bad
/// row makes the answer a 422 with `errors` keyed `row N.field` (N counts data rows from 1),
/// and nothing is written. At most 100,000 rows.
#[utoipa::path(post, path = "/api/v1/customers/import", tag = "customers", params(model::ImportParams),
    request_body(content = Vec<u8>, content_type = "application/octet-stream",
        description = "A CSV file: RFC 4180, UTF-8, a header row of column names. Send it as `text/csv` (preferred) or \
            `application/octet-stream` (the type documented here, because generated clients cannot send `text/csv`)."),
    responses((status = 201, body = import::ImportSummary, description = "Every row was written: how many customers were created and updated"),
        (status = 400, body = Problem), (status = 413, body = Problem, description = "The file is larger than the limit or has more than 100,000 rows"),
        (status = 415, body = Problem, description = "The body is not `text/csv`"), (status = 422, body = Problem)))]
async fn import_customers(
    State(state): State<AppState>,
    Writer(caller): Writer,
    url: RequestUrl,
    headers: axum::http::HeaderMap,
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    let is_csv = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|t| ["text/csv", "application/octet-stream"].iter().any(|csv| t.trim().eq_ignore_ascii_case(csv)));
    if !is_csv {
        return Err(ApiError::UnsupportedMediaType(
            "An import takes a CSV file: send it with `Content-Type: text/csv` (or `application/octet-stream`).".into(),
        ));
    }
    let options = import_options(&state, &caller, &url).await?;
    let limit = state.config.body_limit_for(IMPORT_PATH);
    let file = axum::body::to_bytes(body, limit).await.map_err(|e| {
        if crate::server::is_body_timeout(&e) {
            ApiError::BodyTimedOut
        } else {
            ApiError::PayloadTooLarge(format!("The file is larger than {limit} bytes."))
        }
    })?;
    let summary = import::run(&state.db, &caller, &file, options).await?;
    Ok((axum::http::StatusCode::CREATED, Json(summary)).into_response())
}

async fn import_options(state: &AppState, caller: &Caller, url: &RequestUrl) -> Result<import::ImportOptions, ApiError> {
    let mut errors = FieldErrors::default();
    let shop_id = match url.params.get("shop_id") {
        None => None,
        Some(raw) => match parse_integer(raw) {
            Some(id) => {
                scope::body_shop(&state.db, caller, Some(id), &mut errors).await?;
                Some(id)
            }
            None => {
                errors.add("shop_id", "The shop_id parameter must be an integer.");
                None
            }
        },
    };
    let match_number = match url.params.get("match") {
        None => false,
        Some("customer_number") => true,
        Some(_) => {
            errors.add("match", "The match parameter must be customer_number.");
            false
        }
    };
    errors.into_result()?;
    Ok(import::ImportOptions { shop_id, match_number })
}

/// `customer_id` and the `filter[...]` values; an empty value means no filter.
fn parse_filter(url: &RequestUrl, list: &ListQuery) -> Result<CustomerFilter, ApiError> {
    let mut errors = FieldErrors::default();
    let id = match url.params.get("customer_id").map(str::trim).filter(|v| !v.is_empty()) {
        None => None,
        Some(raw) => parse_integer(raw).or_else(|| {
            errors.add("customer_id", "The customer_id parameter must be an integer.");
            None
        }),
    };
    let phone_digits = list.given("phone").and_then(|raw| {
        let digits = store::digits(raw);
        if digits.is_empty() {
            errors.add("filter[phone]", "The filter[phone] parameter must contain digits.");
        }
        Some(crate::db::capped_term(digits)).filter(|d| !d.is_empty())
    });
    let updated = list.given("updated_date").and_then(|raw| match crate::body::parse_date(raw) {
        Some(day) => {
            let start = NaiveDate::parse_from_str(&day, "%Y-%m-%d").ok()?.and_time(chrono::NaiveTime::MIN).and_utc();
            let start = start.timestamp_micros();
            Some((start, start + 86_400_000_000))
        }
        None => {
            errors.add("filter[updated_date]", "The filter[updated_date] parameter must be a date (YYYY-MM-DD).");
            None
        }
    });
    errors.into_result()?;
    Ok(CustomerFilter {
        id,
        first_name: list.given("first_name").map(crate::db::search_term),
        last_name: list.given("last_name").map(crate::db::search_term),
        address: list.given("address").map(crate::db::search_term),
        phone_digits,
        customer_number: list.given("customer_number").map(str::to_owned),
        updated,
    })
}

/// Get one customer.
#[utoipa::path(get, path = "/api/v1/customers/{CustomerID}", tag = "customers", params(("CustomerID" = i64, Path)),
    responses((status = 200, body = Customer, description = "The customer"), (status = 404, body = Problem)))]
async fn get_customer(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<One<Customer>, ApiError> {
    Ok(One(visible_customer(&state, &caller, &id).await?.into()))
}

/// Create a customer (`write` or `admin` key).
#[utoipa::path(post, path = "/api/v1/customers", tag = "customers", request_body = NewCustomer,
    responses((status = 201, body = Customer, description = "Created; `Location` names the new customer"), (status = 400, body = Problem), (status = 422, body = Problem)))]
async fn create_customer(
    State(state): State<AppState>,
    Writer(caller): Writer,
    JsonBody(body): JsonBody<CustomerInput>,
) -> Result<Response, ApiError> {
    let (fields, mut reader) = input::read(body, None);
    if !reader.errors.has("shop_id") {
        scope::body_shop(&state.db, &caller, Some(fields.shop_id), &mut reader.errors).await?;
    }
    reader.errors.into_result()?;
    let change = Change::begin(&state.db, caller.company_id).await?;
    change
        .finish_with(store::insert_query(caller.company_id, &fields, now_micros()), |row: Result<Option<CustomerRow>, DbError>, outbox| {
            let customer = Customer::from(row.map_err(unique_as_invalid("customer_number"))?.ok_or(DbError::NoRow)?);
            outbox.record("customer.created", Some(customer.shop_id), &customer)?;
            outbox.created(format!("/api/v1/customers/{}", customer.customer_id), customer)
        })
        .await
}

/// Update a customer (`write` or `admin` key). Omitted fields keep their value.
///
/// The value they have when the update is written, even when another update lands meanwhile.
#[utoipa::path(put, path = "/api/v1/customers/{CustomerID}", tag = "customers", params(("CustomerID" = i64, Path)),
    request_body = CustomerInput,
    responses((status = 200, body = Customer, description = "The updated customer"), (status = 400, body = Problem), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn update_customer(State(state): State<AppState>, Writer(caller): Writer, put: Replace<CustomerInput>) -> Result<One<Customer>, ApiError> {
    let Replace { id, if_match, input: body } = put;
    let current = visible_customer(&state, &caller, &id).await?;
    let (company, id) = (caller.company_id, current.id);
    let body = body?;
    // First without a lock: the body over the row as read, written only where the row still
    // holds what was read (on the columns the body leaves alone).
    let fields = merged(&state, &caller, body.clone(), &current, &[]).await?;
    // Shops known good from here on: the one the customer was in, the one the body asked for.
    let good_shops = [current.fields.shop_id, fields.shop_id];
    let mut change = Change::begin(&state.db, company).await?;
    if_match.verify::<Customer, _>(&current, store::find(change.tx(), company, id)).await?;
    let updated = change
        .finish_with(store::update_unless_changed(company, id, &current.fields, &fields), |row: Result<Option<CustomerRow>, DbError>, outbox| {
            row.map_err(unique_as_invalid("customer_number"))?.map(|row| recorded(row, outbox)).transpose()
        })
        .await?;
    if let Some(updated) = updated {
        return Ok(updated);
    }
    // Another write changed the customer since the read: the body again, over the row as it is
    // now, read locked (it stays so until this write commits). Nothing is read from the pool
    // while the lock is held: the request that waits for a connection must not hold what the
    // requests holding every connection wait for.
    let mut change = Change::begin(&state.db, company).await?;
    let current = store::find(change.tx(), company, id)
        .await?
        .filter(|c| caller.can_see_shop(c.fields.shop_id))
        .ok_or_else(|| ApiError::not_found("Customer"))?;
    let fields = merged(&state, &caller, body, &current, &good_shops).await?;
    if_match.check_current::<Customer>(&current.clone().into())?;
    change
        .finish_with(store::update_query(company, id, &fields), |row: Result<Option<CustomerRow>, DbError>, outbox| {
            let row = row.map_err(unique_as_invalid("customer_number"))?.ok_or_else(|| ApiError::not_found("Customer"))?;
            recorded(row, outbox)
        })
        .await
}

/// The fields a PUT's `body` asks for over `current`, validated. A new shop is read unless it
/// is one of `good_shops`, checked already. (The body's shop, when it names one, is checked
/// the first time: the second, locked, pass reads nothing.)
async fn merged(
    state: &AppState,
    caller: &Caller,
    body: CustomerInput,
    current: &CustomerRow,
    good_shops: &[i64],
) -> Result<store::CustomerFields, ApiError> {
    let (fields, mut reader) = input::read(body, Some(current.fields.clone()));
    if !reader.errors.has("shop_id") && fields.shop_id != current.fields.shop_id && !good_shops.contains(&fields.shop_id) {
        scope::body_shop(&state.db, caller, Some(fields.shop_id), &mut reader.errors).await?;
    }
    reader.errors.into_result()?;
    Ok(fields)
}

/// The answer to an update that wrote `row`, with its event.
fn recorded(row: CustomerRow, outbox: &mut crate::change::Outbox) -> Result<One<Customer>, ApiError> {
    let customer = Customer::from(row);
    outbox.record("customer.updated", Some(customer.shop_id), &customer)?;
    Ok(One(customer))
}

/// A customer of the caller's company in a shop the key may see, from a path id; else 404.
pub async fn visible_customer(state: &AppState, caller: &Caller, raw_id: &str) -> Result<CustomerRow, ApiError> {
    let id = path_id(raw_id, "Customer")?;
    store::find(&state.db, caller.company_id, id)
        .await?
        .filter(|c| caller.can_see_shop(c.fields.shop_id))
        .ok_or_else(|| ApiError::not_found("Customer"))
}
