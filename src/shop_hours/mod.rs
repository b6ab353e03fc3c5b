//! Shop hours: `GET /api/v1/settings/shop_hours` and the admin `PUT` that replaces a week.

pub mod model;
pub mod store;

use std::collections::HashMap;

use axum::{Json, extract::State};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{
    auth::{Admin, Caller},
    change::Change,
    db::{Db, ShopFilter},
    error::{ApiError, FieldErrors, Problem},
    extract::{JsonBody, QueryParams},
    listing::DataList,
    scope,
    shops::store::ShopRow,
    state::AppState,
    validate,
};
use model::{HoursParams, HoursRecord, WeekInput};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_hours, put_hours))
}

/// Shop hours: one record per open interval; closed days have none.
#[utoipa::path(get, path = "/api/v1/settings/shop_hours", tag = "settings", params(HoursParams),
    responses((status = 200, body = DataList<HoursRecord>, description = "The opening intervals of the shops the key may see"), (status = 400, body = Problem), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn get_hours(State(state): State<AppState>, caller: Caller, params: QueryParams) -> Result<Json<DataList<HoursRecord>>, ApiError> {
    crate::listing::parse_filters(&params, &["shop_id"])?;
    let shops = scope::shop_filter(&state.db, &caller, params.get("filter[shop_id]")).await?;
    let shop_rows = crate::shops::store::list(&state.db, caller.company_id, &shops).await?;
    let mut by_shop = records_by_shop(&state.db, caller.company_id, &shops, &shop_rows).await?;
    let data = shop_rows.iter().flat_map(|s| by_shop.remove(&s.id).unwrap_or_default()).collect();
    Ok(Json(DataList { data }))
}

/// Replace a shop's week (admin). A rejected request leaves the old week in place.
#[utoipa::path(put, path = "/api/v1/settings/shop_hours", tag = "settings", request_body = WeekInput,
    responses((status = 200, body = DataList<HoursRecord>, description = "The shop's new week"), (status = 422, body = Problem)))]
async fn put_hours(State(state): State<AppState>, Admin(caller): Admin, JsonBody(input): JsonBody<WeekInput>) -> Result<Json<DataList<HoursRecord>>, ApiError> {
    let mut errors = FieldErrors::default();
    let shop_id = validate::required(&mut errors, "shop_id", input.shop_id);
    let shop = scope::body_shop(&state.db, &caller, shop_id, &mut errors).await?;
    let hours = validate::required(&mut errors, "hours", input.hours).unwrap_or_default();
    let week = model::validate_week(hours, &mut errors);
    errors.into_result()?;
    let shop = shop.ok_or_else(|| ApiError::Internal("validated shop missing".into()))?;
    let mut change = Change::begin(&state.db, caller.company_id).await?;
    let data = replace_week(&mut change, &shop, &week).await?;
    change.commit().await?;
    Ok(Json(DataList { data }))
}

/// Stores a shop's new week and records its `shop_hours.updated` event; returns the records.
/// Their instants are worked out in the shop's zone as read locked here: a zone change committed
/// since `shop` was read would otherwise leave the answer and the event in the old zone.
pub async fn replace_week(change: &mut Change, shop: &ShopRow, week: &[model::Interval]) -> Result<Vec<HoursRecord>, ApiError> {
    let company_id = change.company_id();
    // The week first: its lock on the shop's row (`FOR NO KEY UPDATE`, which a zone change's
    // update waits for, and which leaves inserts that point at the shop alone), then the shop
    // read by a statement of its own, which sees a zone committed before the lock was granted.
    store::replace_week(change.tx(), company_id, shop.id, week).await?;
    let shop = crate::shops::store::find(change.tx(), company_id, shop.id).await?.ok_or_else(|| ApiError::not_found("Shop"))?;
    let now = chrono::Utc::now();
    let data: Vec<HoursRecord> = week.iter().map(|(day, open, close)| HoursRecord::new(shop.id, shop.tz(), *day, *open, *close, now)).collect();
    change.record("shop_hours.updated", Some(shop.id), &data)?;
    Ok(data)
}

/// Hours records of the given shops, grouped by shop (one query for all of them).
pub async fn records_by_shop(
    db: &Db,
    company_id: i64,
    shops: &ShopFilter,
    shop_rows: &[ShopRow],
) -> Result<HashMap<i64, Vec<HoursRecord>>, ApiError> {
    let zones: HashMap<i64, chrono_tz::Tz> = shop_rows.iter().map(|s| (s.id, s.tz())).collect();
    let now = chrono::Utc::now();
    let mut grouped: HashMap<i64, Vec<HoursRecord>> = HashMap::new();
    for row in store::for_shops(db, company_id, shops).await? {
        let tz = zones.get(&row.shop_id).copied().unwrap_or(chrono_tz::UTC);
        grouped
            .entry(row.shop_id)
            .or_default()
            .push(HoursRecord::new(row.shop_id, tz, row.day, row.open_minute, row.close_minute, now));
    }
    Ok(grouped)
}
