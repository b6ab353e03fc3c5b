//! `GET /api/v1/events/stream`: the feed as Server-Sent Events.
//!
//! A stream reads the same feed as `GET /api/v1/events` (so it inherits its ordering guarantee)
//! from its cursor on, and sleeps until a committed change of its company wakes it. On
//! PostgreSQL a change can stay invisible for a moment after its notice (an older transaction
//! still runs), so a wake that finds nothing is retried a few times at short intervals.

use std::{collections::VecDeque, convert::Infallible, time::Duration};

use axum::{
    extract::State,
    http::HeaderMap,
    response::sse::{Event as SseEvent, KeepAlive, Sse},
};
use futures_util::Stream;
use tokio::sync::broadcast::{Receiver, error::RecvError};

use super::{Event, FeedRequest, cursor::Position, hub::EVERYONE, store};
use crate::{
    auth::{self, Caller},
    db::{Db, DbError},
    error::{ApiError, Problem},
    extract::QueryParams,
    state::AppState,
};

/// Comment lines keep idle connections (and proxies) open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// A safety net when no notice arrives (notices are not persisted).
const IDLE_POLL: Duration = Duration::from_secs(5);
/// Retries after a wake that found nothing yet (PostgreSQL's visibility horizon).
const CATCH_UP: [u64; 5] = [20, 50, 100, 250, 500];
/// How often a long-lived stream checks that its key is still valid: an idle stream looks only
/// every [`IDLE_POLL`], so a revoked key's stream ends within this plus that (30 s, as
/// docs/api.md says).
const RECHECK_KEY: Duration = Duration::from_secs(25);
const _: () = assert!(RECHECK_KEY.as_secs() + IDLE_POLL.as_secs() <= 30);
const BATCH: i64 = 100;

/// One message of the stream, as a Server-Sent Events parser reads it (the schema describes
/// each message, as OpenAPI 3.2's `itemSchema` does).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub struct StreamMessage {
    /// The event id (`evt_...`): send it back as `Last-Event-ID` to resume.
    id: String,
    /// The event type, e.g. `appointment.updated`.
    event: String,
    /// The event as JSON text (the `Event` schema).
    data: String,
}

/// Query parameters of `GET /api/v1/events/stream`.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
struct StreamParams {
    /// An event id to continue after.
    #[param(pattern = r"^evt_[0-7][0-9a-f]{15}[0-7][0-9a-f]{15}$")]
    after: Option<String>,
    #[param(rename = "filter[type]", schema_with = super::type_filter_schema)]
    filter_type: Option<String>,
    /// One shop's events.
    #[param(rename = "filter[shop_id]")]
    filter_shop_id: Option<i64>,
}

/// The live event stream.
///
/// The feed of `GET /api/v1/events` as `text/event-stream`: each event is sent with `id:` (the
/// event id), `event:` (its type) and `data:` (the event JSON). Resume with the `Last-Event-ID`
/// header (browsers send it when they reconnect) or `?after=`; without either the stream starts
/// with the changes committed after it connected. A comment line is sent at least every 15 s.
#[utoipa::path(get, path = "/api/v1/events/stream", tag = "events",
    params(
        StreamParams,
        ("Last-Event-ID" = Option<String>, Header, nullable = false, pattern = r"^(evt_[0-7][0-9a-f]{15}[0-7][0-9a-f]{15})?$",
            description = "The last event id received; overrides `after`. An empty value counts as absent."),
    ),
    responses((status = 200, content_type = "text/event-stream", body = StreamMessage, description = "A stream of events, one message each"),
        (status = 400, body = Problem, description = "Unknown filter"),
        (status = 404, body = Problem, description = "Unknown or out-of-scope shop"),
        (status = 410, body = Problem, description = "The cursor is older than the retention window"),
        (status = 422, body = Problem, description = "Invalid parameter")))]
pub async fn stream_events(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    params: QueryParams,
    stopping: Option<axum::Extension<crate::server::Stopping>>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let mut params = params;
    // An empty header is what a client that has seen no event yet sends: it counts as absent,
    // like an empty query value.
    let last_event_id = headers.get("last-event-id").filter(|v| !v.is_empty());
    if let Some(last) = last_event_id {
        let last = last.to_str().map_err(|_| ApiError::invalid("Last-Event-ID", "The Last-Event-ID header must be an event id."))?;
        params.0.retain(|(k, _)| k != "after");
        params.0.push(("after".into(), last.to_owned()));
    }
    let request = FeedRequest::parse(&state, &caller, &params).await.map_err(|e| rename_after(e, last_event_id.is_some()))?;
    let (cursor, committed_before) = match request.after {
        Some(after) => (after, None),
        None => store::tail(&state.db, caller.company_id).await?,
    };
    let key_hash = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| auth::bearer_key(Some(h)).ok())
        .map(auth::hash_key)
        .unwrap_or_default();
    let mut reader = Reader {
        db: state.db.clone(),
        company_id: caller.company_id,
        filter: request.filter,
        cursor,
        committed_before,
        buffer: VecDeque::new(),
        wake: state.events.subscribe(),
        key_hash,
        key_checked: tokio::time::Instant::now(),
    };
    if request.after.is_some() {
        // The first page is read before the cursor's purge check, as the feed does: a purge that
        // committed between a check and the read would delete events the stream then skipped.
        reader.fill().await?;
        super::refuse_purged(&state, &caller, request.after).await?;
    }
    let events = futures_util::stream::unfold((reader, stopping.map(|s| s.0)), |(mut reader, mut stopping)| async move {
        let event = match &mut stopping {
            Some(stopping) => tokio::select! {
                event = reader.next() => event?,
                () = stopping.wait() => return None,
            },
            None => reader.next().await?,
        };
        Some((Ok(event), (reader, stopping)))
    });
    // A stream that ended (shutdown, a revoked key) may be polled again by outer layers.
    let events = futures_util::StreamExt::fuse(events);
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive")))
}

/// A cursor given in `Last-Event-ID` is reported under that name.
fn rename_after(e: ApiError, from_header: bool) -> ApiError {
    match e {
        ApiError::Validation(errors) if from_header && errors.has("after") => {
            ApiError::invalid("Last-Event-ID", "The Last-Event-ID header must be an event id (evt_ followed by 32 hexadecimal digits).")
        }
        other => other,
    }
}

struct Reader {
    db: Db,
    company_id: i64,
    filter: store::FeedFilter,
    cursor: Position,
    /// Without a cursor, on PostgreSQL: the transactions whose events came before the stream.
    committed_before: Option<store::CommittedBefore>,
    buffer: VecDeque<SseEvent>,
    wake: Receiver<i64>,
    key_hash: String,
    key_checked: tokio::time::Instant,
}

impl Reader {
    /// The next event to send; `None` ends the stream (the key was revoked).
    async fn next(&mut self) -> Option<SseEvent> {
        let mut catch_up = 0;
        loop {
            if let Some(event) = self.buffer.pop_front() {
                return Some(event);
            }
            if self.key_checked.elapsed() >= RECHECK_KEY {
                if let Err(ApiError::Unauthorized(_)) = auth::authenticate(&self.db, &self.key_hash).await {
                    return None;
                }
                self.key_checked = tokio::time::Instant::now();
            }
            match self.fill().await {
                Ok(true) => continue,
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "event stream read failed; retrying"),
            }
            // Nothing new: after a wake, look again shortly; otherwise wait for the next one.
            let wait = match CATCH_UP.get(catch_up) {
                Some(ms) => Duration::from_millis(*ms),
                None => IDLE_POLL,
            };
            let woken = tokio::time::timeout(wait, self.wait_for_company()).await;
            catch_up = if woken.is_ok() { 0 } else { catch_up + 1 };
        }
    }

    /// Reads the next page of events after the cursor into the buffer; whether there was one.
    async fn fill(&mut self) -> Result<bool, DbError> {
        let rows = store::page(&self.db, self.company_id, self.cursor, &self.filter, BATCH).await?;
        let found = !rows.is_empty();
        for row in rows {
            self.cursor = row.position();
            if let Some(before) = &self.committed_before {
                if before.contains(row.xid) {
                    continue;
                }
                if row.xid >= before.xmax {
                    self.committed_before = None;
                }
            }
            let event = Event::from_row(self.company_id, row);
            let sse = SseEvent::default().id(event.id.clone()).event(event.kind.clone());
            match sse.json_data(&event) {
                Ok(sse) => self.buffer.push_back(sse),
                Err(e) => tracing::error!(error = %e, "could not encode an event for a stream"),
            }
        }
        Ok(found)
    }

    /// Returns when a change of this company (or possibly any) has committed.
    async fn wait_for_company(&mut self) {
        loop {
            match self.wake.recv().await {
                Ok(id) if id == self.company_id || id == EVERYONE => return,
                Ok(_) => continue,
                Err(RecvError::Lagged(_)) => return,
                Err(RecvError::Closed) => return std::future::pending().await,
            }
        }
    }
}
