//! Webhooks (decisions §11): `GET/POST /api/v1/webhooks`, `GET/PUT/DELETE /api/v1/webhooks/{id}`,
//! `GET /api/v1/webhooks/{id}/deliveries`, `POST /api/v1/webhooks/{id}/test`, and the queueing
//! of deliveries in every change's transaction. Sending is [`dispatch`]'s job.

pub mod dispatch;
pub mod model;
pub mod signing;
pub mod ssrf;
pub mod store;

use std::sync::LazyLock;

use axum::{
    Json,
    extract::{Path, State},
    http::StatusCode,
    response::{IntoResponse, Response},
};
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{
    auth::{Admin, Caller, parse_shop_list},
    change::Change,
    conditional::One,
    db::{DbError, Query, ShopFilter},
    error::{ApiError, Problem},
    events::{Event, store::EventRow},
    extract::{JsonBody, Replace, Target, path_id},
    listing::{ListQuery, ListSpec, Page, RequestUrl},
    state::AppState,
};
use model::{Delivery, Webhook, WebhookInput, pattern_matches, visible_to};
use store::{NewDelivery, WebhookRow};

/// Webhooks per company (Stripe allows 16 endpoints; a few dozen is plenty).
pub const MAX_PER_COMPANY: usize = 50;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_webhooks, create_webhook))
        .routes(routes!(get_webhook, update_webhook, delete_webhook))
        .routes(routes!(list_deliveries))
        .routes(routes!(test_webhook))
}

const LIST: ListSpec = ListSpec { sorts: &[], filters: &[] };

#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
struct PageParams {
    #[param(minimum = 1)]
    page: Option<i64>,
    #[param(rename = "pageSize", minimum = 1, maximum = 100)]
    page_size: Option<i64>,
}

/// List webhooks (admin; a key limited to shops sees the webhooks limited to its shops).
#[utoipa::path(get, path = "/api/v1/webhooks", tag = "webhooks", params(PageParams),
    responses((status = 200, body = Page<Webhook>, description = "A page of webhooks, oldest first"),
        (status = 400, body = Problem, description = "Unknown parameter"), (status = 422, body = Problem, description = "Invalid parameter")))]
async fn list_webhooks(State(state): State<AppState>, Admin(caller): Admin, url: RequestUrl) -> Result<Page<Webhook>, ApiError> {
    let list = ListQuery::parse(&url.params, &LIST)?;
    let visible: Vec<WebhookRow> = store::all(&state.db, caller.company_id).await?.into_iter().filter(|w| visible_to(&caller, w)).collect();
    let total = visible.len() as i64;
    let data = visible.into_iter().skip(list.offset() as usize).take(list.per_page as usize).map(Webhook::from).collect();
    Ok(list.into_page(&url, data, total))
}

/// Create a webhook (admin). The response carries the signing `secret`, this once.
#[utoipa::path(post, path = "/api/v1/webhooks", tag = "webhooks", request_body = WebhookInput,
    responses((status = 201, body = Webhook, description = "Created, with its secret"),
        (status = 400, body = Problem, description = "Malformed JSON"), (status = 422, body = Problem, description = "Invalid settings")))]
async fn create_webhook(State(state): State<AppState>, Admin(caller): Admin, JsonBody(input): JsonBody<WebhookInput>) -> Result<Response, ApiError> {
    let existing = store::all(&state.db, caller.company_id).await?;
    if existing.len() >= MAX_PER_COMPANY {
        return Err(ApiError::invalid("url", format!("A company may have at most {MAX_PER_COMPANY} webhooks.")));
    }
    let shops = known_shops(&state, &caller, input.shop_ids.as_deref()).await?;
    let fields = model::read(input, &caller, &shops, state.config.webhook_allow_private)?;
    let secret = signing::new_secret();
    let mut change = Change::begin(&state.db, caller.company_id).await?;
    let row = store::insert(change.tx(), caller.company_id, &fields, &secret).await?;
    let mut webhook = Webhook::from(row);
    let location = format!("/api/v1/webhooks/{}", webhook.id);
    // A repeat never gets the secret again: its answer has `secret: null`.
    change.replay_as(StatusCode::CREATED, Some(&location), &crate::api_keys::with_null(&webhook, "secret"))?;
    let tag = crate::conditional::etag_of(&webhook)?;
    webhook.secret = Some(secret);
    Ok(crate::conditional::with_etag(change.commit_created(location, webhook).await?, &tag))
}

/// Get a webhook (admin). The secret is never shown again.
#[utoipa::path(get, path = "/api/v1/webhooks/{id}", tag = "webhooks", params(("id" = i64, Path)),
    responses((status = 200, body = Webhook, description = "The webhook"), (status = 404, body = Problem, description = "No such webhook")))]
async fn get_webhook(State(state): State<AppState>, Admin(caller): Admin, Path(id): Path<String>) -> Result<One<Webhook>, ApiError> {
    Ok(One(visible(&state, &caller, &id).await?.into()))
}

/// Replace a webhook's settings (admin): the create body, plus `enabled`. Enabling a disabled
/// webhook restarts its failure clock; deliveries that failed while it was off are not resent.
#[utoipa::path(put, path = "/api/v1/webhooks/{id}", tag = "webhooks", params(("id" = i64, Path)), request_body = WebhookInput,
    responses((status = 200, body = Webhook, description = "The updated webhook"), (status = 400, body = Problem, description = "Malformed JSON"),
        (status = 404, body = Problem, description = "No such webhook"), (status = 422, body = Problem, description = "Invalid settings")))]
async fn update_webhook(State(state): State<AppState>, Admin(caller): Admin, put: Replace<WebhookInput>) -> Result<One<Webhook>, ApiError> {
    let Replace { id, if_match, input } = put;
    let current = visible(&state, &caller, &id).await?;
    let input = input?;
    let shops = known_shops(&state, &caller, input.shop_ids.as_deref()).await?;
    let fields = model::read(input, &caller, &shops, state.config.webhook_allow_private)?;
    let mut change = Change::begin(&state.db, caller.company_id).await?;
    if_match.verify::<Webhook, _>(&current, store::find(change.tx(), caller.company_id, current.id)).await?;
    let row = store::update(change.tx(), caller.company_id, current.id, &fields).await?.ok_or_else(|| ApiError::not_found("Webhook"))?;
    change.commit().await?;
    Ok(One(row.into()))
}

/// Delete a webhook and its delivery log (admin). Nothing more is sent to it.
#[utoipa::path(delete, path = "/api/v1/webhooks/{id}", tag = "webhooks", params(("id" = i64, Path)),
    responses((status = 204, description = "Deleted"), (status = 404, body = Problem, description = "No such webhook")))]
async fn delete_webhook(State(state): State<AppState>, Admin(caller): Admin, Target { id, if_match }: Target) -> Result<StatusCode, ApiError> {
    let current = visible(&state, &caller, &id).await?;
    let mut change = Change::begin(&state.db, caller.company_id).await?;
    if_match.verify::<Webhook, _>(&current, store::find(change.tx(), caller.company_id, current.id)).await?;
    if !store::delete(change.tx(), caller.company_id, current.id).await? {
        return Err(ApiError::not_found("Webhook"));
    }
    change.commit().await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A webhook's deliveries, newest first (admin): one item per event, with its latest attempt.
#[utoipa::path(get, path = "/api/v1/webhooks/{id}/deliveries", tag = "webhooks", params(("id" = i64, Path), PageParams),
    responses((status = 200, body = Page<Delivery>, description = "A page of deliveries"), (status = 404, body = Problem, description = "No such webhook"),
        (status = 422, body = Problem, description = "Invalid parameter")))]
async fn list_deliveries(State(state): State<AppState>, Admin(caller): Admin, Path(id): Path<String>, url: RequestUrl) -> Result<Page<Delivery>, ApiError> {
    let webhook = visible(&state, &caller, &id).await?;
    let list = ListQuery::parse(&url.params, &LIST)?;
    let (rows, total) = store::deliveries(&state.db, caller.company_id, webhook.id, &list.request).await?;
    Ok(list.into_page(&url, rows.into_iter().map(Delivery::from).collect(), total))
}

/// Send a `webhook.test` event to the webhook now (admin). Answers 202 with the queued
/// delivery; its outcome shows in the deliveries list. Test events are not in the feed.
#[utoipa::path(post, path = "/api/v1/webhooks/{id}/test", tag = "webhooks", params(("id" = i64, Path)),
    responses((status = 202, body = Delivery, description = "Queued"), (status = 404, body = Problem, description = "No such webhook")))]
async fn test_webhook(State(state): State<AppState>, Admin(caller): Admin, Path(id): Path<String>) -> Result<Response, ApiError> {
    let webhook = visible(&state, &caller, &id).await?;
    let mut random = [0u8; 12];
    getrandom::fill(&mut random).map_err(|e| ApiError::Internal(format!("random source: {e}")))?;
    let event_id = format!("evt_test_{}", crate::hex::encode(&random));
    let payload = serde_json::json!({
        "id": event_id, "type": "webhook.test", "created_at": crate::time::format_micros(crate::db::now_micros()),
        "company_id": caller.company_id, "shop_id": null, "data": {"webhook_id": webhook.id},
    });
    let mut change = Change::begin(&state.db, caller.company_id).await?;
    let delivery = NewDelivery { webhook_id: webhook.id, event_id, event_type: "webhook.test".into(), payload: payload.to_string() };
    let row = store::enqueue(change.tx(), caller.company_id, &[delivery]).await?.pop();
    // No row: the webhook was deleted since it was read.
    let delivery = Delivery::from(row.ok_or_else(|| ApiError::not_found("Webhook"))?);
    change.replay_as(StatusCode::ACCEPTED, None, &delivery)?;
    change.commit().await?;
    wake_dispatcher();
    Ok((StatusCode::ACCEPTED, Json(delivery)).into_response())
}

async fn visible(state: &AppState, caller: &Caller, raw_id: &str) -> Result<WebhookRow, ApiError> {
    let id = path_id(raw_id, "Webhook")?;
    store::find(&state.db, caller.company_id, id)
        .await?
        .filter(|w| visible_to(caller, w))
        .ok_or_else(|| ApiError::not_found("Webhook"))
}

/// The ids among `requested` that are shops of the caller's company.
async fn known_shops(state: &AppState, caller: &Caller, requested: Option<&[i64]>) -> Result<Vec<i64>, ApiError> {
    let Some(ids) = requested.filter(|ids| !ids.is_empty() && ids.len() <= model::MAX_SHOPS) else {
        return Ok(Vec::new());
    };
    let rows = crate::shops::store::list(&state.db, caller.company_id, &ShopFilter::Only(ids.to_vec())).await?;
    Ok(rows.into_iter().map(|s| s.id).collect())
}

/// The insert queueing a delivery of each new event to each enabled webhook that takes it (its
/// patterns and shops), for the change's transaction; `None` when no webhook takes any.
pub fn enqueue_queries(
    company_id: i64,
    subscriptions: &[store::Subscription],
    events: Vec<EventRow>,
    locks: store::WebhookLocks,
) -> Result<Vec<Query>, DbError> {
    let mut deliveries = Vec::new();
    if subscriptions.is_empty() {
        return Ok(Vec::new());
    }
    let events: Vec<Event> = events.into_iter().map(|row| Event::from_row(company_id, row)).collect();
    for s in subscriptions {
        let patterns: Vec<String> = serde_json::from_str(&s.events).unwrap_or_default();
        let shops = parse_shop_list(s.shop_ids.as_deref());
        for event in &events {
            let in_scope = match (&shops, event.shop_id) {
                (None, _) => true,
                (Some(ids), Some(shop)) => ids.contains(&shop),
                (Some(_), None) => false,
            };
            if in_scope && pattern_matches(&patterns, &event.kind) {
                let payload = serde_json::to_string(event).map_err(|e| DbError::Other(format!("serializing an event: {e}")))?;
                deliveries.push(NewDelivery { webhook_id: s.id, event_id: event.id.clone(), event_type: event.kind.clone(), payload });
            }
        }
    }
    Ok(store::enqueue_queries(company_id, &deliveries, locks))
}

static WAKE: LazyLock<std::sync::Arc<tokio::sync::Notify>> = LazyLock::new(Default::default);

/// The signal this process's dispatcher waits on between polls.
pub fn dispatcher_wake() -> std::sync::Arc<tokio::sync::Notify> {
    WAKE.clone()
}

/// Tells this process's dispatcher that deliveries were just queued.
pub fn wake_dispatcher() {
    WAKE.notify_one();
}
