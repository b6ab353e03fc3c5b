//! Appointment sources: `GET /api/v1/settings/sources` and the admin writes.

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
    error::{ApiError, FieldErrors, Problem},
    extract::{JsonBody, Replace, parse_bool, path_id},
    listing::{ListQuery, ListSpec, Page, RequestUrl},
    respond::unique_as_invalid,
    scope, validate,
};
use model::{Source, SourceInput, SourceListParams};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_sources, create_source)).routes(routes!(get_source, update_source))
}

const LIST: ListSpec = ListSpec { sorts: store::SORTS, filters: &["shop_id", "active"] };

/// List a shop's appointment sources.
#[utoipa::path(get, path = "/api/v1/settings/sources", tag = "settings", params(SourceListParams),
    responses((status = 200, body = Page<Source>, description = "A page of the shop's sources"), (status = 400, body = Problem), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn list_sources(State(state): State<AppState>, caller: Caller, url: RequestUrl) -> Result<Page<Source>, ApiError> {
    let list = ListQuery::parse(&url.params, &LIST)?;
    let Some(raw_shop) = list.given("shop_id") else {
        return Err(ApiError::invalid("filter[shop_id]", "The filter[shop_id] parameter is required."));
    };
    let shop_id = crate::extract::parse_integer(raw_shop)
        .ok_or_else(|| ApiError::invalid("filter[shop_id]", "The filter[shop_id] parameter must be an integer."))?;
    scope::visible_shop(&state.db, &caller, shop_id).await?;
    let active = match list.given("active") {
        None => true,
        Some(v) => parse_bool(v)
            .ok_or_else(|| ApiError::invalid("filter[active]", "The filter[active] parameter must be true, false, 1 or 0."))?,
    };
    let (rows, total) = store::list(&state.db, caller.company_id, shop_id, active, &list.request).await?;
    Ok(list.into_page(&url, rows.into_iter().map(Source::from).collect(), total))
}

/// Get one source.
#[utoipa::path(get, path = "/api/v1/settings/sources/{id}", tag = "settings", params(("id" = i64, Path)),
    responses((status = 200, body = Source, description = "The source"), (status = 404, body = Problem)))]
async fn get_source(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<One<Source>, ApiError> {
    Ok(One(visible_source(&state, &caller, &id).await?.into()))
}

/// Create a source (admin).
#[utoipa::path(post, path = "/api/v1/settings/sources", tag = "settings", request_body = SourceInput,
    responses((status = 201, body = Source, description = "Created; `Location` names the new source"), (status = 422, body = Problem)))]
async fn create_source(State(state): State<AppState>, Admin(caller): Admin, JsonBody(input): JsonBody<SourceInput>) -> Result<Response, ApiError> {
    let (shop_id, name) = validate_source(&state, &caller, &input).await?;
    let mut change = Change::begin(&state.db, caller.company_id).await?;
    let source = Source::from(
        store::insert(change.tx(), caller.company_id, shop_id, &name, input.active.unwrap_or(true)).await.map_err(unique_as_invalid("name"))?,
    );
    change.record("source.created", Some(source.shop_id), &source)?;
    change.commit_created(format!("/api/v1/settings/sources/{}", source.id), source).await
}

/// Update a source (admin). The body is the create body; an omitted `active` keeps its value.
#[utoipa::path(put, path = "/api/v1/settings/sources/{id}", tag = "settings", params(("id" = i64, Path)), request_body = SourceInput,
    responses((status = 200, body = Source, description = "The updated source"), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn update_source(State(state): State<AppState>, Admin(caller): Admin, put: Replace<SourceInput>) -> Result<One<Source>, ApiError> {
    let Replace { id, if_match, input } = put;
    let current = visible_source(&state, &caller, &id).await?;
    let input = input?;
    let (shop_id, name) = validate_source(&state, &caller, &input).await?;
    let mut change = Change::begin(&state.db, caller.company_id).await?;
    // The source as it is now, locked: moved meanwhile to a shop this key may not see, it is not
    // this key's to change; an omitted `active` keeps the value it holds now.
    let stored = store::find(change.tx(), caller.company_id, current.id)
        .await?
        .filter(|s| caller.can_see_shop(s.shop_id))
        .ok_or_else(|| ApiError::not_found("Source"))?;
    if_match.check_row::<Source, _>(&current, &stored)?;
    let source = Source::from(
        store::update(change.tx(), caller.company_id, current.id, shop_id, &name, input.active.unwrap_or(stored.active))
            .await
            .map_err(unique_as_invalid("name"))?
            .ok_or_else(|| ApiError::not_found("Source"))?,
    );
    change.record("source.updated", Some(source.shop_id), &source)?;
    change.commit().await?;
    Ok(One(source))
}

/// The shop and the trimmed name of a create or update body (PUT validates like create).
async fn validate_source(state: &AppState, caller: &Caller, input: &SourceInput) -> Result<(i64, String), ApiError> {
    let mut errors = FieldErrors::default();
    let shop_id = validate::required(&mut errors, "shop_id", input.shop_id);
    scope::body_shop(&state.db, caller, shop_id, &mut errors).await?;
    let name = validate::required_text(&mut errors, "name", input.name.clone()).unwrap_or_default();
    validate::max_len(&mut errors, "name", &name, 100);
    errors.into_result()?;
    Ok((shop_id.unwrap_or_default(), name.trim().to_owned()))
}

async fn visible_source(state: &AppState, caller: &Caller, raw_id: &str) -> Result<store::SourceRow, ApiError> {
    let id = path_id(raw_id, "Source")?;
    store::find(&state.db, caller.company_id, id)
        .await?
        .filter(|s| caller.can_see_shop(s.shop_id))
        .ok_or_else(|| ApiError::not_found("Source"))
}
