//! API keys of the caller's company: list, create (the key is shown once), revoke.

pub mod store;

use axum::{
    extract::{Path, State},
    http::StatusCode,
    response::Response,
};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{
    auth::{CompanyAdmin, Role, parse_shop_list},
    change::Change,
    db::{Db, ShopFilter},
    error::{ApiError, FieldErrors, Problem},
    extract::{JsonBody, Target, path_id},
    listing::{ListQuery, ListSpec, Page, RequestUrl},
    state::AppState,
    time,
    validate,
};
use store::{KeyRecordRow, Revocation};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_keys, create_key)).routes(routes!(get_key, revoke_key))
}

const LIST: ListSpec = ListSpec { sorts: store::SORTS, filters: &[] };

/// An API key's record. The key itself is only ever returned by the create call.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApiKeyRecord {
    pub id: i64,
    pub name: String,
    pub role: Role,
    /// The shops the key is limited to; null for every shop of the company.
    pub shop_ids: Option<Vec<i64>>,
    /// The first characters of the key, to recognise it.
    pub prefix: String,
    pub created_at: String,
    /// Refreshed at most once a minute.
    pub last_used_at: Option<String>,
    pub revoked_at: Option<String>,
    /// Only in the response to the create call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
}

impl From<KeyRecordRow> for ApiKeyRecord {
    fn from(r: KeyRecordRow) -> Self {
        ApiKeyRecord {
            id: r.id,
            name: r.name,
            role: Role::parse(&r.role).unwrap_or(Role::Read),
            shop_ids: parse_shop_list(r.shop_ids.as_deref()),
            prefix: r.key_prefix,
            created_at: time::format_micros(r.created_at),
            last_used_at: r.last_used_at.map(time::format_micros),
            revoked_at: r.revoked_at.map(time::format_micros),
            api_key: None,
        }
    }
}

/// Most shops one key can be limited to.
const MAX_KEY_SHOPS: usize = 100;

/// Body of `POST /api/v1/api_keys`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ApiKeyInput {
    #[schema(required, nullable = false, max_length = 100, pattern = r"\S")]
    pub name: Option<String>,
    #[schema(required, nullable = false, value_type = Option<Role>)]
    pub role: Option<String>,
    /// Limit the key to these shops (1 to 100 of them); omitted or null for every shop.
    #[schema(min_items = 1, max_items = 100)]
    pub shop_ids: Option<Vec<i64>>,
}

#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
struct KeyListParams {
    #[param(minimum = 1)]
    page: Option<i64>,
    #[param(rename = "pageSize", minimum = 1, maximum = 100)]
    page_size: Option<i64>,
    /// `created_at` or `-created_at`.
    #[param(pattern = r"^([-+]?(created_at)(,[-+]?(created_at))*)?$")]
    sort: Option<String>,
}

/// List the company's API keys, revoked ones included (admin key without a shop list).
#[utoipa::path(get, path = "/api/v1/api_keys", tag = "api_keys", params(KeyListParams),
    responses((status = 200, body = Page<ApiKeyRecord>, description = "A page of key records"), (status = 400, body = Problem), (status = 422, body = Problem)))]
async fn list_keys(State(state): State<AppState>, CompanyAdmin(caller): CompanyAdmin, url: RequestUrl) -> Result<Page<ApiKeyRecord>, ApiError> {
    let list = ListQuery::parse(&url.params, &LIST)?;
    let (rows, total) = store::list(&state.db, caller.company_id, &list.request).await?;
    Ok(list.into_page(&url, rows.into_iter().map(ApiKeyRecord::from).collect(), total))
}

/// Create an API key. The response carries the key in `api_key`, once.
#[utoipa::path(post, path = "/api/v1/api_keys", tag = "api_keys", request_body = ApiKeyInput,
    responses((status = 201, body = ApiKeyRecord, description = "Created; the record carries the key in `api_key`, this once, and `Location` names it"), (status = 422, body = Problem)))]
async fn create_key(State(state): State<AppState>, CompanyAdmin(caller): CompanyAdmin, JsonBody(input): JsonBody<ApiKeyInput>) -> Result<Response, ApiError> {
    let mut errors = FieldErrors::default();
    let name = validate::required_text(&mut errors, "name", input.name).unwrap_or_default();
    validate::max_len(&mut errors, "name", &name, 100);
    let role = match validate::required(&mut errors, "role", input.role) {
        Some(r) => Role::parse(&r).or_else(|| {
            errors.add("role", "The role must be one of read, write, admin.");
            None
        }),
        None => None,
    };
    let mut shops = input.shop_ids;
    if let Some(ids) = shops.as_mut() {
        if ids.is_empty() || ids.len() > MAX_KEY_SHOPS {
            errors.add("shop_ids", format!("The shop_ids field must list 1 to {MAX_KEY_SHOPS} shops, or be omitted for every shop."));
        } else {
            let found = crate::shops::store::list(&state.db, caller.company_id, &ShopFilter::Only(ids.clone())).await?;
            for (i, id) in ids.iter().enumerate() {
                if !found.iter().any(|s| s.id == *id) {
                    errors.add(format!("shop_ids.{i}"), "The selected shop is invalid.");
                }
            }
        }
        ids.sort_unstable();
        ids.dedup();
    }
    errors.into_result()?;
    let mut change = Change::begin(&state.db, caller.company_id).await?;
    // As for a revocation: a key revoked since it was authenticated must not make a key that
    // outlives it (its row, locked, holds off a revocation until this commits).
    if !store::lock_revoker(change.tx(), caller.company_id, caller.key_id, caller.key_id).await? {
        return Err(ApiError::Unauthorized("The API key is not valid or has been revoked.".into()));
    }
    let (row, key) = store::insert(change.tx(), caller.company_id, name.trim(), role.unwrap_or(Role::Read), shops.as_deref()).await?;
    let mut record = ApiKeyRecord::from(row);
    change.record("api_key.created", None, &record)?;
    let location = format!("/api/v1/api_keys/{}", record.id);
    // A repeat never gets the key again: its answer has `api_key: null`.
    change.replay_as(StatusCode::CREATED, Some(&location), &with_null(&record, "api_key"))?;
    let tag = crate::conditional::etag_of(&record)?;
    record.api_key = Some(key);
    Ok(crate::conditional::with_etag(change.commit_created(location, record).await?, &tag))
}

/// `value` as JSON with `field` present and null (secrets in stored responses).
pub fn with_null<T: Serialize>(value: &T, field: &str) -> serde_json::Value {
    let mut json = serde_json::to_value(value).unwrap_or_default();
    if let Some(object) = json.as_object_mut() {
        object.insert(field.to_owned(), serde_json::Value::Null);
    }
    json
}

/// Get one API key's record (never the key itself).
#[utoipa::path(get, path = "/api/v1/api_keys/{id}", tag = "api_keys", params(("id" = i64, Path)),
    responses((status = 200, body = ApiKeyRecord, description = "The key's record"), (status = 404, body = Problem)))]
async fn get_key(State(state): State<AppState>, CompanyAdmin(caller): CompanyAdmin, Path(id): Path<String>) -> Result<crate::conditional::One<ApiKeyRecord>, ApiError> {
    let id = path_id(&id, "API key")?;
    let row = store::find(&state.db, caller.company_id, id).await?.ok_or_else(|| ApiError::not_found("API key"))?;
    Ok(crate::conditional::One(row.into()))
}

/// Revoke an API key: refused from the next request on. Revoking twice is not an error; a key
/// cannot revoke itself (so the last admin key cannot be lost by mistake).
#[utoipa::path(delete, path = "/api/v1/api_keys/{id}", tag = "api_keys", params(("id" = i64, Path)),
    responses((status = 204, description = "Revoked"), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn revoke_key(State(state): State<AppState>, CompanyAdmin(caller): CompanyAdmin, Target { id, if_match }: Target) -> Result<StatusCode, ApiError> {
    let id = path_id(&id, "API key")?;
    if id == caller.key_id {
        return Err(ApiError::invalid("id", "A key cannot revoke itself; revoke it with another admin key."));
    }
    let mut change = Change::begin(&state.db, caller.company_id).await?;
    // The caller was authenticated before this transaction: a key revoked since must not revoke.
    if !store::lock_revoker(change.tx(), caller.company_id, id, caller.key_id).await? {
        return Err(ApiError::Unauthorized("The API key is not valid or has been revoked.".into()));
    }
    if if_match.is_present() {
        let current = store::find(change.tx(), caller.company_id, id).await?.ok_or_else(|| ApiError::not_found("API key"))?;
        if_match.check_current::<ApiKeyRecord>(&current.into())?;
    }
    match store::revoke(change.tx(), caller.company_id, id).await? {
        Revocation::Revoked(row) => {
            change.record("api_key.revoked", None, &ApiKeyRecord::from(row))?;
            change.commit().await?;
        }
        Revocation::Already => {}
        Revocation::NotFound => return Err(ApiError::not_found("API key")),
    }
    crate::auth::forget_key(&state.keys, id);
    Ok(StatusCode::NO_CONTENT)
}

/// Creates a company and its first admin key, atomically (the CLI and the demo). Returns the
/// company id and the key.
pub async fn create_company(db: &Db, name: &str) -> Result<(i64, String), ApiError> {
    let mut change = Change::begin_new_company(db).await?;
    let company_id = store::insert_company(change.tx(), name).await?;
    change.assign_company(company_id);
    let (row, key) = store::insert(change.tx(), company_id, "bootstrap admin", Role::Admin, None).await?;
    change.record("api_key.created", None, &ApiKeyRecord::from(row))?;
    change.commit().await?;
    Ok((company_id, key))
}
