//! Shops: `GET /api/v1/settings/shop_info` and the admin routes under `/api/v1/shops`.

pub mod cache;
pub mod model;
pub mod store;
pub mod timezones;

use crate::respond::group_by;

use axum::{
    Json,
    extract::{Path, State},
    response::Response,
};
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{
    state::AppState,
    auth::{Admin, Caller, CompanyAdmin},
    change::Change,
    conditional::One,
    bays::{model::Bay, store as bays},
    error::{ApiError, Problem},
    extract::{JsonBody, Replace, QueryParams, path_id},
    listing::{DataList, parse_filters},
    scope,
    shop_hours,
    sources::{model::Source, store as sources},
};
use model::{ShopFields, ShopInfo, ShopInput};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(shop_info))
        .routes(routes!(create_shop))
        .routes(routes!(get_shop, update_shop))
        .routes(routes!(timezones::list_timezones))
}

const EMBEDS: [&str; 3] = ["hours", "bays", "sources"];

/// `with[]` on shop info: the lists to embed, each at most once.
fn with_schema() -> utoipa::openapi::schema::Array {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
    ArrayBuilder::new().items(ObjectBuilder::new().schema_type(Type::String).enum_values(Some(EMBEDS))).unique_items(true).build()
}

/// Query parameters of `GET /api/v1/settings/shop_info`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
struct ShopInfoParams {
    /// One shop; omitted means every shop of the company the key may see.
    #[param(rename = "filter[shop_id]")]
    filter_shop_id: Option<i64>,
    /// Lists to embed in each shop (each at most once).
    #[param(rename = "with[]", explode = true, schema_with = with_schema)]
    with: Option<Vec<String>>,
}

/// Shop information, optionally with its hours, bays and sources.
#[utoipa::path(get, path = "/api/v1/settings/shop_info", tag = "settings", params(ShopInfoParams),
    responses((status = 200, body = DataList<ShopInfo>, description = "The shops the key may see"), (status = 400, body = Problem), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn shop_info(State(state): State<AppState>, caller: Caller, params: QueryParams) -> Result<Json<DataList<ShopInfo>>, ApiError> {
    parse_filters(&params, &["shop_id"])?;
    let embeds = parse_with(&params)?;
    let shops = scope::shop_filter(&state.db, &caller, params.get("filter[shop_id]")).await?;
    let rows = store::list(&state.db, caller.company_id, &shops).await?;
    let mut data: Vec<ShopInfo> = Vec::with_capacity(rows.len());
    let mut hours = if embeds.contains(&"hours") {
        Some(shop_hours::records_by_shop(&state.db, caller.company_id, &shops, &rows).await?)
    } else {
        None
    };
    let mut bays = if embeds.contains(&"bays") { Some(group_by(bays::for_shops(&state.db, caller.company_id, &shops).await?, |b| b.shop_id, Bay::from)) } else { None };
    let mut sources = if embeds.contains(&"sources") {
        Some(group_by(sources::for_shops(&state.db, caller.company_id, &shops).await?, |s| s.shop_id, Source::from))
    } else {
        None
    };
    for row in rows {
        let id = row.id;
        let mut info = ShopInfo::from(row);
        info.hours = hours.as_mut().map(|h| h.remove(&id).unwrap_or_default());
        info.bays = bays.as_mut().map(|b| b.remove(&id).unwrap_or_default());
        info.sources = sources.as_mut().map(|s| s.remove(&id).unwrap_or_default());
        data.push(info);
    }
    Ok(Json(DataList { data }))
}

/// `with[]` values (also accepted as `with[0]`, `with[1]`, ...): unknown is 400, repeated 422.
fn parse_with(params: &QueryParams) -> Result<Vec<&'static str>, ApiError> {
    let mut embeds = Vec::new();
    for (key, value) in &params.0 {
        let is_with = key == "with" || key.strip_prefix("with[").and_then(|k| k.strip_suffix(']')).is_some_and(|i| i.is_empty() || i.parse::<u32>().is_ok());
        if !is_with {
            continue;
        }
        // Each item must name a list: an empty one is refused like an unknown one (the
        // document's enum has no empty value).
        for item in value.split(',').map(str::trim) {
            let Some(known) = EMBEDS.iter().find(|e| **e == item) else {
                return Err(ApiError::BadRequest(format!("Unknown with[] value `{item}`. Allowed values: hours, bays, sources.")));
            };
            if embeds.contains(known) {
                return Err(ApiError::invalid("with[]", format!("The with[] value `{item}` is given more than once.")));
            }
            embeds.push(*known);
        }
    }
    Ok(embeds)
}

/// Get one shop.
#[utoipa::path(get, path = "/api/v1/shops/{id}", tag = "shops", params(("id" = i64, Path)),
    responses((status = 200, body = ShopInfo, description = "The shop"), (status = 404, body = Problem)))]
async fn get_shop(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<One<ShopInfo>, ApiError> {
    let shop = scope::visible_shop(&state.db, &caller, path_id(&id, "Shop")?).await?;
    Ok(One(shop.into()))
}

/// Create a shop (admin key without a shop list). It starts with one source per appointment
/// source value, no bays and no hours.
#[utoipa::path(post, path = "/api/v1/shops", tag = "shops", request_body = ShopInput,
    responses((status = 201, body = ShopInfo, description = "Created; `Location` names the new shop"), (status = 422, body = Problem)))]
async fn create_shop(State(state): State<AppState>, CompanyAdmin(caller): CompanyAdmin, JsonBody(input): JsonBody<ShopInput>) -> Result<Response, ApiError> {
    let fields = input.into_fields(None).map_err(ApiError::Validation)?;
    let mut change = Change::begin(&state.db, caller.company_id).await?;
    let shop = create(&mut change, &fields).await?;
    change.commit_created(format!("/api/v1/shops/{}", shop.id), ShopInfo::from(shop)).await
}

/// Creates a shop with its default sources inside `change`, recording their events.
pub async fn create(change: &mut Change, fields: &ShopFields) -> Result<store::ShopRow, ApiError> {
    let company_id = change.company_id();
    let shop = store::insert(change.tx(), company_id, fields).await?;
    change.record("shop.created", Some(shop.id), &ShopInfo::from(shop.clone()))?;
    for source in sources::insert_defaults(change.tx(), company_id, shop.id).await? {
        change.record("source.created", Some(shop.id), &Source::from(source))?;
    }
    Ok(shop)
}

/// Update a shop (admin). The body is the create body (`name` required); omitted optional
/// fields keep their value. A new time zone re-computes the
/// shop-local date and time of the shop's appointments in the same transaction.
#[utoipa::path(put, path = "/api/v1/shops/{id}", tag = "shops", params(("id" = i64, Path)), request_body = ShopInput,
    responses((status = 200, body = ShopInfo, description = "The updated shop"), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn update_shop(State(state): State<AppState>, Admin(caller): Admin, put: Replace<ShopInput>) -> Result<One<ShopInfo>, ApiError> {
    let Replace { id, if_match, input } = put;
    let current = scope::visible_shop(&state.db, &caller, path_id(&id, "Shop")?).await?;
    let input = input?;
    input.clone().into_fields(Some(current.fields.clone())).map_err(ApiError::Validation)?;
    // A new time zone moves the shop-local date and time stored with each appointment; both
    // changes commit together.
    // One `shop.updated` event stands for the re-localised appointments too (docs/api.md).
    let mut change = Change::begin(&state.db, caller.company_id).await?;
    // Whether the zone changes is decided on the row as it is now, locked: against `current`, a
    // concurrent zone change would be undone without its appointments following.
    let stored = store::find(change.tx(), caller.company_id, current.id).await?.ok_or_else(|| ApiError::not_found("Shop"))?;
    if_match.check_row::<ShopInfo, _>(&current, &stored)?;
    // Omitted fields keep what they hold now, not what they held when `current` was read (valid
    // over that, the body is valid over this: every stored value passed the same checks).
    let fields = input.into_fields(Some(stored.fields.clone())).map_err(ApiError::Validation)?;
    let shop = store::update(change.tx(), caller.company_id, current.id, &fields).await?.ok_or_else(|| ApiError::not_found("Shop"))?;
    if shop.fields.timezone != stored.fields.timezone {
        crate::appointments::store::relocalize_shop(change.tx(), caller.company_id, shop.id, shop.tz()).await?;
    }
    let info = ShopInfo::from(shop);
    change.record("shop.updated", Some(info.shop_id), &info)?;
    change.commit().await?;
    cache::forget_company(&state.shops, caller.company_id);
    Ok(One(info))
}

