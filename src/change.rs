//! Every change goes through a [`Change`]: one transaction holding the writes and the events
//! they record (a transactional outbox). They commit together or not at all: no change without
//! its event, no event without its change.

use axum::{http::StatusCode, response::Response};
use serde::Serialize;

use crate::{
    db::{Db, DbError, Tx, now_micros},
    error::ApiError,
    events::{self, store::NewEvent},
    idempotency::{self, store::StoredResponse},
    respond::created,
    webhooks,
};

pub struct Change {
    tx: Tx,
    company_id: i64,
    events: Vec<NewEvent>,
    /// What a repeat of this request with its `Idempotency-Key` answers.
    replay: Option<StoredResponse>,
}

impl Change {
    pub async fn begin(db: &Db, company_id: i64) -> Result<Change, DbError> {
        Ok(Change { tx: db.begin().await?, company_id, events: Vec::new(), replay: None })
    }

    /// A change that creates its company: call [`Change::assign_company`] once the company row
    /// exists, before recording anything.
    pub async fn begin_new_company(db: &Db) -> Result<Change, DbError> {
        Ok(Change { tx: db.begin().await?, company_id: 0, events: Vec::new(), replay: None })
    }

    pub fn assign_company(&mut self, company_id: i64) {
        debug_assert!(self.company_id == 0 && self.events.is_empty());
        self.company_id = company_id;
    }

    pub fn company_id(&self) -> i64 {
        self.company_id
    }

    /// The transaction, for the stores' statements.
    pub fn tx(&mut self) -> &mut Tx {
        &mut self.tx
    }

    /// Records that `data` (the resource exactly as its GET shows it) changed.
    pub fn record<T: Serialize>(&mut self, kind: &'static str, shop_id: Option<i64>, data: &T) -> Result<(), ApiError> {
        debug_assert!(events::TYPES.contains(&kind), "unknown event type {kind}");
        debug_assert!(self.company_id != 0, "an event before its company");
        let data = serde_json::to_string(data).map_err(|e| ApiError::Internal(format!("serializing a {kind} event: {e}")))?;
        self.events.push(NewEvent { kind, shop_id, data });
        Ok(())
    }

    /// Sets the response a repeat of this request with its `Idempotency-Key` gets (a `POST`
    /// sets it before committing; secrets are left out of it).
    pub fn replay_as<T: Serialize>(&mut self, status: StatusCode, location: Option<&str>, body: &T) -> Result<(), ApiError> {
        let body = serde_json::to_string(body).map_err(|e| ApiError::Internal(format!("serializing a response: {e}")))?;
        self.replay = Some(StoredResponse { status: status.as_u16(), location: location.map(str::to_owned), body });
        Ok(())
    }

    /// Commits a create and answers `201 Created` with `Location` and `body` (which a keyed
    /// repeat replays, unless [`Change::replay_as`] set another body).
    pub async fn commit_created<T: Serialize>(mut self, location: String, body: T) -> Result<Response, ApiError> {
        if self.replay.is_none() {
            self.replay_as(StatusCode::CREATED, Some(&location), &body)?;
        }
        self.commit().await?;
        Ok(created(location, body))
    }

    /// Writes the recorded events and the webhook deliveries they call for, and the response
    /// of a keyed request, and commits; answered once the change is durable.
    pub async fn commit(mut self) -> Result<(), DbError> {
        let slot = idempotency::current();
        if let (Some(slot), Some(replay)) = (&slot, &self.replay) {
            if !idempotency::store::complete(&mut self.tx, &slot.scope, &slot.token, replay).await? {
                return Err(DbError::Unavailable("the request's Idempotency-Key reservation expired; retry".into()));
            }
        }
        let mut queued = 0;
        if !self.events.is_empty() {
            let rows = events::store::insert(&mut self.tx, self.company_id, &self.events, now_micros()).await?;
            queued = webhooks::queue_deliveries(&mut self.tx, self.company_id, rows).await?;
            self.tx.notify(events::CHANNEL, self.company_id.to_string()).await?;
        }
        self.tx.commit().await?;
        if let (Some(slot), Some(_)) = (&slot, &self.replay) {
            slot.mark_completed();
        }
        if queued > 0 {
            webhooks::wake_dispatcher();
        }
        Ok(())
    }
}
