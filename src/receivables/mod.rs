//! Accounts receivable of a customer: the list (`GET`, any key), and admin writes for entries
//! and payments.

pub mod model;
pub mod store;

use axum::{
    extract::{Path, State},
    response::Response,
};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{
    state::AppState,
    change::Change,
    conditional::One,
    db::now_micros,
    auth::{Admin, Caller},
    body::{In, Reader, parse_date},
    customers::visible_customer,
    error::{ApiError, FieldErrors, Problem},
    extract::{JsonBody, parse_bool, path_id},
    listing::{ListQuery, ListSpec, Page, RequestUrl},
    scope,
};
use model::{PaymentInput, Receivable, ReceivableInput, ReceivableListParams};
use store::{Payment, ReceivableFields, ReceivableFilter};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_receivables, create_receivable))
        .routes(routes!(get_receivable))
        .routes(routes!(create_payment))
}

/// `(filter name, column, operator)` of the inclusive date ranges.
const RANGES: [(&str, &str, &str); 8] = [
    ("ar_date_start", "date", ">="),
    ("ar_date_end", "date", "<="),
    ("ar_due_date_start", "due_date", ">="),
    ("ar_due_date_end", "due_date", "<="),
    ("payment_date_start", "payment_date", ">="),
    ("payment_date_end", "payment_date", "<="),
    ("ar_actual_date_start", "actual_date", ">="),
    ("ar_actual_date_end", "actual_date", "<="),
];

const LIST: ListSpec = ListSpec {
    sorts: store::SORTS,
    filters: &[
        "paid",
        "ar_date_start",
        "ar_date_end",
        "ar_due_date_start",
        "ar_due_date_end",
        "payment_date_start",
        "payment_date_end",
        "ar_actual_date_start",
        "ar_actual_date_end",
        "reference",
        "repair_order_id",
        "shop_id",
    ],
};

/// List a customer's accounts receivable.
#[utoipa::path(get, path = "/api/v1/customers/{customer_id}/accounts_receivable", tag = "customers",
    params(("customer_id" = i64, Path), ReceivableListParams),
    responses((status = 200, body = Page<Receivable>, description = "A page of the customer's entries"), (status = 400, body = Problem), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn list_receivables(
    State(state): State<AppState>,
    caller: Caller,
    Path(customer_id): Path<String>,
    url: RequestUrl,
) -> Result<Page<Receivable>, ApiError> {
    let list = ListQuery::parse(&url.params, &LIST)?;
    let filter = parse_filter(&list)?;
    let customer = visible_customer(&state, &caller, &customer_id).await?;
    let shops = scope::shop_filter(&state.db, &caller, list.filter("shop_id")).await?;
    let (rows, total) = store::list(&state.db, caller.company_id, customer.id, &shops, &filter, &list.request).await?;
    Ok(list.into_page(&url, rows.into_iter().map(Receivable::from).collect(), total))
}

/// The `filter[...]` values; an empty value means no filter.
fn parse_filter(list: &ListQuery) -> Result<ReceivableFilter, ApiError> {
    let mut errors = FieldErrors::default();
    let mut filter = ReceivableFilter::default();
    if let Some(raw) = list.given("paid") {
        filter.paid = parse_bool(raw);
        if filter.paid.is_none() {
            errors.add("filter[paid]", "The filter[paid] parameter must be true, false, 1 or 0.");
        }
    }
    for (name, column, op) in RANGES {
        if let Some(raw) = list.given(name) {
            match parse_date(raw) {
                Some(day) => filter.ranges.push((column, op, day)),
                None => errors.add(format!("filter[{name}]"), format!("The filter[{name}] parameter must be a date (YYYY-MM-DD).")),
            }
        }
    }
    filter.reference = list.given("reference").map(str::to_owned);
    if let Some(raw) = list.given("repair_order_id") {
        filter.repair_order_id = crate::extract::parse_integer(raw);
        if filter.repair_order_id.is_none() {
            errors.add("filter[repair_order_id]", "The filter[repair_order_id] parameter must be an integer.");
        }
    }
    errors.into_result()?;
    Ok(filter)
}

/// Get one accounts receivable entry of the customer.
#[utoipa::path(get, path = "/api/v1/customers/{customer_id}/accounts_receivable/{id}", tag = "customers",
    params(("customer_id" = i64, Path), ("id" = i64, Path)),
    responses((status = 200, body = Receivable, description = "The entry"), (status = 404, body = Problem)))]
async fn get_receivable(
    State(state): State<AppState>,
    caller: Caller,
    Path((customer_id, id)): Path<(String, String)>,
) -> Result<One<Receivable>, ApiError> {
    Ok(One(visible_receivable(&state, &caller, &customer_id, &id).await?.into()))
}

/// Create an accounts receivable entry for the customer (admin).
#[utoipa::path(post, path = "/api/v1/customers/{customer_id}/accounts_receivable", tag = "customers",
    params(("customer_id" = i64, Path)), request_body = ReceivableInput,
    responses((status = 201, body = Receivable, description = "Created; `Location` names the new entry"), (status = 400, body = Problem), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn create_receivable(
    State(state): State<AppState>,
    Admin(caller): Admin,
    Path(customer_id): Path<String>,
    JsonBody(input): JsonBody<ReceivableInput>,
) -> Result<Response, ApiError> {
    let customer = visible_customer(&state, &caller, &customer_id).await?;
    let mut r = Reader::default();
    let shop_id = r.int("shop_id", input.shop_id);
    let shop_id = r.required("shop_id", shop_id);
    let reference = r.text("reference", input.reference, 255);
    let reference = r.not_blank("reference", reference);
    let reference = r.required("reference", reference).unwrap_or_default();
    let repair_order_id = r.int("repair_order_id", input.repair_order_id).set();
    let date = r.date("date", input.date);
    let date = r.required("date", date).unwrap_or_default();
    let due_date = r.date("due_date", input.due_date);
    let due_date = r.required("due_date", due_date).unwrap_or_default();
    if !date.is_empty() && !due_date.is_empty() && due_date < date {
        r.errors.add("due_date", "The due_date field must be a date after or equal to date.");
    }
    let actual_date = match r.date("actual_date", input.actual_date) {
        In::Set(d) => d,
        _ => date.clone(),
    };
    let amount = r.money("amount", input.amount);
    let amount = r.required("amount", amount).unwrap_or_default();
    if amount <= 0 && !r.errors.has("amount") {
        r.errors.add("amount", "The amount field must be greater than 0.");
    }
    scope::body_shop(&state.db, &caller, shop_id, &mut r.errors).await?;
    r.errors.into_result()?;
    let fields = ReceivableFields {
        shop_id: shop_id.unwrap_or_default(),
        reference,
        repair_order_id,
        date,
        due_date,
        actual_date,
        amount,
    };
    let mut change = Change::begin(&state.db, caller.company_id).await?;
    let row = store::insert(change.tx(), caller.company_id, customer.id, &fields, now_micros()).await?;
    let location = format!("/api/v1/customers/{}/accounts_receivable/{}", customer.id, row.id);
    let entry = Receivable::from(row);
    change.record("receivable.created", Some(fields.shop_id), &entry)?;
    change.commit_created(location, entry).await
}

/// Record a payment on an entry (admin): lowers its balance and sets `payment_date`; answers
/// with the updated entry.
#[utoipa::path(post, path = "/api/v1/customers/{customer_id}/accounts_receivable/{id}/payments", tag = "customers",
    params(("customer_id" = i64, Path), ("id" = i64, Path)), request_body = PaymentInput,
    responses((status = 201, body = Receivable, description = "Recorded; the body is the updated entry, which `Location` names"), (status = 400, body = Problem), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn create_payment(
    State(state): State<AppState>,
    Admin(caller): Admin,
    Path((customer_id, id)): Path<(String, String)>,
    JsonBody(input): JsonBody<PaymentInput>,
) -> Result<Response, ApiError> {
    let entry = visible_receivable(&state, &caller, &customer_id, &id).await?;
    let mut r = Reader::default();
    let amount = r.money("amount", input.amount);
    let amount = r.required("amount", amount).unwrap_or_default();
    if amount <= 0 && !r.errors.has("amount") {
        r.errors.add("amount", "The amount field must be greater than 0.");
    }
    let date = r.date("date", input.date);
    let date = r.required("date", date).unwrap_or_default();
    r.errors.into_result()?;
    let location = format!("/api/v1/customers/{}/accounts_receivable/{}", entry.customer_id, entry.id);
    let mut change = Change::begin(&state.db, caller.company_id).await?;
    match store::pay(change.tx(), caller.company_id, entry.customer_id, entry.id, amount, &date, now_micros()).await? {
        Payment::Applied(row) => {
            let entry = Receivable::from(row);
            change.record("payment.created", Some(entry.shop_id), &entry)?;
            change.commit_created(location, entry).await
        }
        Payment::ExceedsBalance(balance) => Err(ApiError::invalid(
            "amount",
            format!("The amount field must not be greater than the balance ({:.2}).", balance as f64 / 100.0),
        )),
        Payment::NotFound => Err(ApiError::not_found("Accounts receivable entry")),
    }
}

/// An entry of a visible customer, in a shop the key may see; else 404.
async fn visible_receivable(state: &AppState, caller: &Caller, customer_id: &str, id: &str) -> Result<store::ReceivableRow, ApiError> {
    let customer = visible_customer(state, caller, customer_id).await?;
    let id = path_id(id, "Accounts receivable entry")?;
    store::find(&state.db, caller.company_id, customer.id, id)
        .await?
        .filter(|entry| caller.can_see_shop(entry.fields.shop_id))
        .ok_or_else(|| ApiError::not_found("Accounts receivable entry"))
}
