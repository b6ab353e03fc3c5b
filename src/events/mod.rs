//! The change feed: `GET /api/v1/events` (decisions §11).
//!
//! Every change records its events in its own transaction ([`crate::change::Change`]); the feed
//! returns them in commit order, each exactly once to a client that pages with `after`.

pub mod cursor;
pub mod hub;
pub mod retention;
pub mod store;
mod stream;

use axum::{extract::State, response::Response};
use serde::{Serialize, Serializer, ser::SerializeStruct};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{
    auth::Caller,
    db::ShopFilter,
    error::{ApiError, Problem},
    extract::QueryParams,
    listing::parse_filters,
    scope,
    state::AppState,
    time::format_micros,
};
use cursor::Position;
use store::{EventRow, FeedFilter, TypeMatch};

/// The notice a committed change sends (payload: its company id), so open streams wake up.
pub const CHANNEL: &str = "autoshop_events";

/// Every event type, by resource.
pub const TYPES: [&str; 18] = [
    "appointment.created",
    "appointment.updated",
    "appointment.deleted",
    "customer.created",
    "customer.updated",
    "ship_to.created",
    "ship_to.updated",
    "receivable.created",
    "payment.created",
    "shop.created",
    "shop.updated",
    "shop_hours.updated",
    "bay.created",
    "bay.updated",
    "source.created",
    "source.updated",
    "api_key.created",
    "api_key.revoked",
];

/// Every value an event type selector takes: an exact type, or a resource's wildcard
/// (`appointment.*`).
pub fn type_selectors() -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in TYPES {
        let wildcard = format!("{}.*", t.split('.').next().unwrap_or(t));
        if !out.contains(&wildcard) {
            out.push(wildcard);
        }
        out.push(t.to_owned());
    }
    out
}

/// `filter[type]`: comma-separated selectors, as a pattern built from the known types.
pub fn type_filter_schema() -> utoipa::openapi::schema::Object {
    let one = type_selectors().iter().map(|s| s.replace('.', r"\.").replace('*', r"\*")).collect::<Vec<_>>().join("|");
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .pattern(Some(format!("^({one})(,({one}))*$")))
        .description(Some("Comma-separated event types; `appointment.*` selects every type of a resource."))
        .build()
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_events)).routes(routes!(stream::stream_events))
}

/// One change, as the feed, the stream and webhooks deliver it.
#[derive(Debug, Serialize, ToSchema)]
pub struct Event {
    /// `evt_` and 32 hexadecimal digits; ids sort in feed order. Pass the last one seen as
    /// `after` to continue.
    pub id: String,
    /// What happened, e.g. `appointment.created`.
    #[serde(rename = "type")]
    pub kind: String,
    /// When the change was made (UTC).
    pub created_at: String,
    pub company_id: i64,
    /// The shop the change belongs to; null for company-wide changes (API keys).
    pub shop_id: Option<i64>,
    /// The resource after the change, exactly as its own GET shows it (for `payment.created`
    /// the updated receivable entry; for `shop_hours.updated` the shop's hours).
    /// (An object for every type but `shop_hours.updated`, whose data is the hours list.)
    #[schema(value_type = Value)]
    pub data: StoredJson,
}

/// JSON text this server wrote itself (an event's `data`), sent as it is. `RawValue` would parse
/// it again only to prove it is JSON: 7% of the server's CPU on a feed page of 100 events.
#[derive(Debug, Clone)]
pub struct StoredJson(String);

impl Serialize for StoredJson {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // The struct name serde_json's own `RawValue` serializes under: serde_json writes the
        // field verbatim (`tests/api/events_recorded.rs` compares each `data` with the GET).
        const RAW_VALUE: &str = "$serde_json::private::RawValue";
        let mut raw = serializer.serialize_struct(RAW_VALUE, 1)?;
        raw.serialize_field(RAW_VALUE, &self.0)?;
        raw.end()
    }
}

impl Event {
    pub fn from_row(company_id: i64, row: EventRow) -> Event {
        let id = row.position().to_event_id();
        let data = StoredJson(row.data);
        Event { id, kind: row.kind, created_at: format_micros(row.created_at), company_id, shop_id: row.shop_id, data }
    }
}

/// A page of the feed.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventPage {
    pub data: Vec<Event>,
    /// The id of the last event of `data`, or the `after` given when `data` is empty: pass it
    /// as the next `after`.
    pub next_after: Option<String>,
}

/// Query parameters of `GET /api/v1/events`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
struct EventParams {
    /// An event id: the feed continues after it. Omitted: from the oldest event kept.
    #[param(pattern = r"^evt_[0-7][0-9a-f]{15}[0-7][0-9a-f]{15}$")]
    after: Option<String>,
    /// Events per page, 1 to 1000.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<i64>,
    /// Comma-separated event types; `appointment.*` selects every type of a resource.
    #[param(rename = "filter[type]", schema_with = type_filter_schema)]
    filter_type: Option<String>,
    /// One shop's events.
    #[param(rename = "filter[shop_id]")]
    filter_shop_id: Option<i64>,
}

pub const DEFAULT_LIMIT: i64 = 100;
pub const MAX_LIMIT: i64 = 1000;

/// The change feed.
///
/// Events of the caller's company (and, with a shop list, of its shops: company-wide events
/// need a key without one; `api_key.*` events an admin key without one, the keys that may read
/// API keys) in commit order. Polling with `after` set to the previous page's
/// `next_after` returns every event exactly once, even while several servers commit changes
/// at the same time. Events are kept 30 days; an `after` older than that answers 410 (read the
/// lists again, then follow the feed from its newest event).
#[utoipa::path(get, path = "/api/v1/events", tag = "events", params(EventParams),
    responses((status = 200, body = EventPage, description = "A page of events"),
        (status = 400, body = Problem, description = "Unknown filter"),
        (status = 404, body = Problem, description = "Unknown or out-of-scope shop"),
        (status = 410, body = Problem, description = "`after` is older than the retention window"),
        (status = 422, body = Problem, description = "Invalid parameter")))]
async fn list_events(State(state): State<AppState>, caller: Caller, params: QueryParams) -> Result<Response, ApiError> {
    let request = FeedRequest::parse(&state, &caller, &params).await?;
    let after = match request.after {
        Some(after) => after,
        None => Position::default(),
    };
    let rows = store::page(&state.db, caller.company_id, after, &request.filter, request.limit).await?;
    // Checked after the page: a purge that commits between a check and the page would delete
    // events the page then silently skips. Purge marks only grow, so a cursor found unpurged
    // after the read was unpurged during it.
    refuse_purged(&state, &caller, request.after).await?;
    let next_after = rows.last().map(EventRow::position).or(request.after).map(Position::to_event_id);
    // The events' data as stored, plus their envelopes: the page's size, to fill one buffer.
    let size = 64 + rows.iter().map(|r| r.data.len() + 160).sum::<usize>();
    let data = rows.into_iter().map(|r| Event::from_row(caller.company_id, r)).collect();
    Ok(crate::respond::json_ok(&EventPage { data, next_after }, size))
}

/// A validated feed request (shared by the feed and the stream).
pub struct FeedRequest {
    pub after: Option<Position>,
    pub limit: i64,
    pub filter: FeedFilter,
}

impl FeedRequest {
    pub async fn parse(state: &AppState, caller: &Caller, params: &QueryParams) -> Result<FeedRequest, ApiError> {
        let filters = parse_filters(params, &["type", "shop_id"])?;
        let get = |name: &str| filters.iter().find(|(f, _)| *f == name).map(|(_, v)| v.trim()).filter(|v| !v.is_empty());
        let mut errors = crate::error::FieldErrors::default();
        let after = match params.get("after") {
            None => None,
            Some(raw) => {
                let p = Position::parse(raw.trim());
                if p.is_none() {
                    errors.add("after", "The after parameter must be an event id (evt_ followed by 32 hexadecimal digits).");
                }
                p
            }
        };
        let limit = match params.get("limit") {
            None => DEFAULT_LIMIT,
            Some(raw) => match crate::extract::parse_integer(raw) {
                Some(n) if (1..=MAX_LIMIT).contains(&n) => n,
                _ => {
                    errors.add("limit", format!("The limit parameter must be an integer from 1 to {MAX_LIMIT}."));
                    DEFAULT_LIMIT
                }
            },
        };
        let types = match get("type") {
            None => Vec::new(),
            Some(raw) => parse_types(raw).unwrap_or_else(|bad| {
                errors.add("filter[type]", format!("Unknown event type `{bad}`. Use a type such as appointment.created, or appointment.* for every type of a resource."));
                Vec::new()
            }),
        };
        errors.into_result()?;
        let shops = match get("shop_id") {
            Some(raw) => scope::shop_filter(&state.db, caller, Some(raw)).await?,
            None => caller.shops.clone().map_or(ShopFilter::All, ShopFilter::Only),
        };
        let key_events = caller.require_company_admin().is_ok();
        Ok(FeedRequest { after, limit, filter: FeedFilter { shops, types, key_events } })
    }
}

/// 410 when the events after `after` have been purged (the caller must start over).
pub async fn refuse_purged(state: &AppState, caller: &Caller, after: Option<Position>) -> Result<(), ApiError> {
    match after {
        Some(after) if store::is_purged(&state.db, caller.company_id, after).await? => Err(ApiError::Gone(
            "This cursor is older than the events kept (30 days by default): read the lists again, then follow the feed from its newest event.".into(),
        )),
        _ => Ok(()),
    }
}

/// `appointment.*,customer.created` → a prefix and an exact type; an unknown one is returned.
fn parse_types(raw: &str) -> Result<Vec<TypeMatch>, String> {
    raw.split(',')
        .map(str::trim)
        .map(|t| match t.strip_suffix(".*") {
            Some(resource) if TYPES.iter().any(|k| k.split('.').next() == Some(resource)) => Ok(TypeMatch::Prefix(format!("{resource}."))),
            None if TYPES.contains(&t) => Ok(TypeMatch::Exact(t.to_owned())),
            _ => Err(t.to_owned()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_filters_take_exact_types_and_resource_wildcards() {
        assert_eq!(
            parse_types("appointment.*, customer.created").unwrap(),
            vec![TypeMatch::Prefix("appointment.".into()), TypeMatch::Exact("customer.created".into())]
        );
        assert_eq!(parse_types("appointment.exploded").unwrap_err(), "appointment.exploded");
        assert_eq!(parse_types("nothing.*").unwrap_err(), "nothing.*");
        assert_eq!(parse_types("*").unwrap_err(), "*");
    }
}
