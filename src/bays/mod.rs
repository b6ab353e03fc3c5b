//! Bays (the interface's "columns"): `GET /api/v1/bays` and the admin writes.

pub mod model;
pub mod store;

use axum::{
    extract::{Path, State},
    response::Response,
};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{
    state::AppState,
    auth::{Admin, Caller},
    change::Change,
    conditional::One,
    db::{DbError, now_micros},
    error::{ApiError, FieldErrors, Problem},
    extract::{JsonBody, Replace, parse_bool, path_id},
    listing::{ListQuery, ListSpec, Page, RequestUrl},
    respond::unique_as_invalid,
    scope, validate,
};
use model::{Bay, BayInput, BayListParams};
use store::BayFields;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_bays, create_bay)).routes(routes!(get_bay, update_bay))
}

const LIST: ListSpec = ListSpec { sorts: store::SORTS, filters: &["shop_id", "active"] };

/// List bays.
#[utoipa::path(get, path = "/api/v1/bays", tag = "bays", params(BayListParams),
    responses((status = 200, body = Page<Bay>, description = "A page of bays"), (status = 400, body = Problem), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn list_bays(State(state): State<AppState>, caller: Caller, url: RequestUrl) -> Result<Page<Bay>, ApiError> {
    let list = ListQuery::parse(&url.params, &LIST)?;
    let shops = scope::shop_filter(&state.db, &caller, list.filter("shop_id")).await?;
    let active = match list.filter("active").map(|v| v.trim().to_ascii_lowercase()) {
        None => Some(true),
        Some(v) if matches!(v.as_str(), "" | "null" | "all") => None,
        Some(v) => Some(parse_bool(&v).ok_or_else(|| {
            ApiError::invalid("filter[active]", "The filter[active] parameter must be true, false, 1, 0, null or all.")
        })?),
    };
    let (rows, total) = store::list(&state.db, caller.company_id, &shops, active, &list.request).await?;
    Ok(list.into_page(&url, rows.into_iter().map(Bay::from).collect(), total))
}

/// Get one bay.
#[utoipa::path(get, path = "/api/v1/bays/{id}", tag = "bays", params(("id" = i64, Path)),
    responses((status = 200, body = Bay, description = "The bay"), (status = 404, body = Problem)))]
async fn get_bay(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<One<Bay>, ApiError> {
    Ok(One(visible_bay(&state, &caller, &id).await?.into()))
}

/// Create a bay (admin).
#[utoipa::path(post, path = "/api/v1/bays", tag = "bays", request_body = BayInput,
    responses((status = 201, body = Bay, description = "Created; `Location` names the new bay"), (status = 422, body = Problem)))]
async fn create_bay(State(state): State<AppState>, Admin(caller): Admin, JsonBody(input): JsonBody<BayInput>) -> Result<Response, ApiError> {
    let fields = bay_fields(&input, validate_bay(&state, &caller, &input).await?, None);
    let mut change = Change::begin(&state.db, caller.company_id).await?;
    let row = store::insert(change.tx(), caller.company_id, &fields).await.map_err(unique_as_invalid("title"))?;
    let location = format!("/api/v1/bays/{}", row.id);
    let bay = Bay::from(row);
    change.record("bay.created", Some(fields.shop_id), &bay)?;
    let created = change.commit_created(location, bay).await?;
    crate::shops::cache::forget_company(&state.shops, caller.company_id);
    Ok(created)
}

/// Update a bay (admin). The body is the create body; an omitted `order` or `active` keeps its
/// value.
#[utoipa::path(put, path = "/api/v1/bays/{id}", tag = "bays", params(("id" = i64, Path)), request_body = BayInput,
    responses((status = 200, body = Bay, description = "The updated bay"), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn update_bay(State(state): State<AppState>, Admin(caller): Admin, put: Replace<BayInput>) -> Result<One<Bay>, ApiError> {
    let Replace { id, if_match, input } = put;
    let current = visible_bay(&state, &caller, &id).await?;
    let input = input?;
    let (shop_id, title) = validate_bay(&state, &caller, &input).await?;
    let mut change = Change::begin(&state.db, caller.company_id).await?;
    // An appointment's bay belongs to the appointment's shop, a hold's to the hold's: checked in
    // the write's transaction, on the bay's shop as it is then, so neither a hold made meanwhile
    // nor a move committed meanwhile strands anything. Before If-Match, which locks the bay:
    // `move_blocked` locks the bay's expired holds before the bay, as a hold's writer does (and
    // a 422 comes before a 412).
    let blocked = || ApiError::invalid("shop_id", "This bay has appointments or holds; it cannot move to another shop.");
    match store::move_blocked(change.tx(), caller.company_id, current.id, shop_id, now_micros()).await? {
        store::Move::Blocked => return Err(blocked()),
        // Moved meanwhile to a shop this key may not see: it may not take the bay from there.
        store::Move::From(shop) if !caller.can_see_shop(shop) => return Err(ApiError::not_found("Bay")),
        store::Move::Gone => return Err(ApiError::not_found("Bay")),
        store::Move::Stays | store::Move::From(_) => {}
    }
    // The bay as it is now (`move_blocked` locked it), which If-Match checks and an omitted
    // `order` or `active` keeps.
    let stored = store::find_locked_already(change.tx(), caller.company_id, current.id).await?.ok_or_else(|| ApiError::not_found("Bay"))?;
    if_match.check_row::<Bay, _>(&current, &stored)?;
    let fields = bay_fields(&input, (shop_id, title), Some(&stored));
    let bay = Bay::from(
        store::update(change.tx(), caller.company_id, current.id, &fields)
            .await
            // The database's own rule (migration 0021), should an appointment slip past the check.
            .map_err(|e| if matches!(e, DbError::BayNotInShop) { blocked() } else { unique_as_invalid("title")(e) })?
            .ok_or_else(|| ApiError::not_found("Bay"))?,
    );
    change.record("bay.updated", Some(fields.shop_id), &bay)?;
    change.commit().await?;
    crate::shops::cache::forget_company(&state.shops, caller.company_id);
    Ok(One(bay))
}

/// The shop and the trimmed title of a create or update body (PUT validates like create).
async fn validate_bay(state: &AppState, caller: &Caller, input: &BayInput) -> Result<(i64, String), ApiError> {
    let mut errors = FieldErrors::default();
    let shop_id = validate::required(&mut errors, "shop_id", input.shop_id);
    scope::body_shop(&state.db, caller, shop_id, &mut errors).await?;
    let title = validate::required_text(&mut errors, "title", input.title.clone()).unwrap_or_default();
    validate::max_len(&mut errors, "title", &title, 100);
    errors.into_result()?;
    Ok((shop_id.unwrap_or_default(), title.trim().to_owned()))
}

/// The fields a body asks for, validated: an omitted `order` or `active` keeps `stored`'s (a
/// create's: 0 and active).
fn bay_fields(input: &BayInput, (shop_id, title): (i64, String), stored: Option<&store::BayRow>) -> BayFields {
    BayFields {
        shop_id,
        title,
        order: input.order.or(stored.map(|b| b.sort_order)).unwrap_or(0),
        active: input.active.or(stored.map(|b| b.active)).unwrap_or(true),
    }
}

async fn visible_bay(state: &AppState, caller: &Caller, raw_id: &str) -> Result<store::BayRow, ApiError> {
    let id = path_id(raw_id, "Bay")?;
    store::find(&state.db, caller.company_id, id)
        .await?
        .filter(|bay| caller.can_see_shop(bay.shop_id))
        .ok_or_else(|| ApiError::not_found("Bay"))
}
