//! Ship-to addresses of a customer, reached only through that customer:
//! `/api/v1/customers/{customer_id}/ship_tos[/{ship_to_id}]`.

pub mod model;
pub mod store;

use axum::{
    extract::{Path, State},
    response::Response,
};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{
    auth::{Caller, Writer},
    body::{In, Reader},
    customers::visible_customer,
    change::Change,
    conditional::One,
    db::{ShopFilter, now_micros},
    error::{ApiError, Problem},
    extract::{JsonBody, Replace, path_id},
    listing::{ListQuery, ListSpec, Page, RequestUrl},
    respond::unique_as_invalid,
    scope,
    state::AppState,
    validate,
};
use model::{ShipTo, ShipToInput, ShipToListParams};
use store::ShipToFields;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_ship_tos, create_ship_to))
        .routes(routes!(get_ship_to, update_ship_to))
}

const LIST: ListSpec = ListSpec { sorts: store::SORTS, filters: &["shop_id"] };

/// List a customer's ship-to addresses.
#[utoipa::path(get, path = "/api/v1/customers/{customer_id}/ship_tos", tag = "customers",
    params(("customer_id" = i64, Path), ShipToListParams),
    responses((status = 200, body = Page<ShipTo>, description = "A page of the customer's ship-tos"), (status = 400, body = Problem), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn list_ship_tos(
    State(state): State<AppState>,
    caller: Caller,
    Path(customer_id): Path<String>,
    url: RequestUrl,
) -> Result<Page<ShipTo>, ApiError> {
    let list = ListQuery::parse(&url.params, &LIST)?;
    let customer = visible_customer(&state, &caller, &customer_id).await?;
    let shops = scope::shop_filter(&state.db, &caller, list.filter("shop_id")).await?;
    if let ShopFilter::Only(ids) = &shops {
        if !ids.contains(&customer.fields.shop_id) {
            return Ok(list.into_page(&url, Vec::new(), 0));
        }
    }
    let (rows, total) = store::list(&state.db, caller.company_id, customer.id, &list.request).await?;
    Ok(list.into_page(&url, rows.into_iter().map(ShipTo::from).collect(), total))
}

/// Get one ship-to of the customer.
#[utoipa::path(get, path = "/api/v1/customers/{customer_id}/ship_tos/{ship_to_id}", tag = "customers",
    params(("customer_id" = i64, Path), ("ship_to_id" = i64, Path)),
    responses((status = 200, body = ShipTo, description = "The ship-to"), (status = 404, body = Problem)))]
async fn get_ship_to(State(state): State<AppState>, caller: Caller, Path((customer_id, id)): Path<(String, String)>) -> Result<One<ShipTo>, ApiError> {
    let customer = visible_customer(&state, &caller, &customer_id).await?;
    let id = path_id(&id, "Ship-to")?;
    let row = store::find(&state.db, caller.company_id, customer.id, id).await?.ok_or_else(|| ApiError::not_found("Ship-to"))?;
    Ok(One(row.into()))
}

/// Create a ship-to for the customer (`write` or `admin` key).
#[utoipa::path(post, path = "/api/v1/customers/{customer_id}/ship_tos", tag = "customers",
    params(("customer_id" = i64, Path)), request_body = ShipToInput,
    responses((status = 201, body = ShipTo, description = "Created; `Location` names the new ship-to"), (status = 400, body = Problem), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn create_ship_to(
    State(state): State<AppState>,
    Writer(caller): Writer,
    Path(customer_id): Path<String>,
    JsonBody(input): JsonBody<ShipToInput>,
) -> Result<Response, ApiError> {
    let customer = visible_customer(&state, &caller, &customer_id).await?;
    let fields = read(input)?;
    let mut change = Change::begin(&state.db, caller.company_id).await?;
    let row = store::insert(change.tx(), caller.company_id, customer.id, &fields, now_micros()).await.map_err(unique_as_invalid("number"))?;
    let location = format!("/api/v1/customers/{}/ship_tos/{}", customer.id, row.id);
    let ship_to = ShipTo::from(row);
    change.record("ship_to.created", Some(customer.fields.shop_id), &ship_to)?;
    change.commit_created(location, ship_to).await
}

/// Replace a ship-to of the customer (`write` or `admin` key); the body is the create body.
#[utoipa::path(put, path = "/api/v1/customers/{customer_id}/ship_tos/{ship_to_id}", tag = "customers",
    params(("customer_id" = i64, Path), ("ship_to_id" = i64, Path)), request_body = ShipToInput,
    responses((status = 200, body = ShipTo, description = "The updated ship-to"), (status = 400, body = Problem), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn update_ship_to(State(state): State<AppState>, Writer(caller): Writer, put: Replace<ShipToInput, (String, String)>) -> Result<One<ShipTo>, ApiError> {
    let Replace { id: (customer_id, id), if_match, input } = put;
    let customer = visible_customer(&state, &caller, &customer_id).await?;
    let id = path_id(&id, "Ship-to")?;
    let current = store::find(&state.db, caller.company_id, customer.id, id).await?.ok_or_else(|| ApiError::not_found("Ship-to"))?;
    let fields = read(input?)?;
    let mut change = Change::begin(&state.db, caller.company_id).await?;
    if_match.verify::<ShipTo, _>(&current, store::find(change.tx(), caller.company_id, customer.id, id)).await?;
    let ship_to = ShipTo::from(
        store::update(change.tx(), caller.company_id, customer.id, id, &fields)
            .await
            .map_err(unique_as_invalid("number"))?
            .ok_or_else(|| ApiError::not_found("Ship-to"))?,
    );
    change.record("ship_to.updated", Some(customer.fields.shop_id), &ship_to)?;
    change.commit().await?;
    Ok(One(ship_to))
}

/// Every field present; `number`, `name`, `address`, `city`, `state`, `zip` not blank; `email`
/// null, empty or an address; phones and fax may be empty.
fn read(input: ShipToInput) -> Result<ShipToFields, ApiError> {
    let mut r = Reader::default();
    let field = |r: &mut Reader, name: &str, v, blank_ok: bool| {
        let value = r.text(name, v, 255);
        let value = if blank_ok { value } else { r.not_blank(name, value) };
        r.required(name, value).unwrap_or_default()
    };
    let number = field(&mut r, "number", input.number, false);
    let name = field(&mut r, "name", input.name, false);
    let address = field(&mut r, "address", input.address, false);
    let city = field(&mut r, "city", input.city, false);
    let state = field(&mut r, "state", input.state, false);
    let zip = field(&mut r, "zip", input.zip, false);
    let work_phone = field(&mut r, "work_phone", input.work_phone, true);
    let fax = field(&mut r, "fax", input.fax, true);
    let home_phone = field(&mut r, "home_phone", input.home_phone, true);
    let cell_phone = field(&mut r, "cell_phone", input.cell_phone, true);
    let email = match r.text("email", input.email, 255) {
        In::Set(v) if v.is_empty() => None,
        In::Set(v) => {
            validate::email(&mut r.errors, "email", &v);
            Some(v)
        }
        In::Null => None,
        In::Absent => {
            if !r.errors.has("email") {
                r.errors.add("email", "The email field must be present (it may be null).");
            }
            None
        }
    };
    r.errors.into_result()?;
    Ok(ShipToFields { number, name, address, city, state, zip, email, work_phone, fax, home_phone, cell_phone })
}
