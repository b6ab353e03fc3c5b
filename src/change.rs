//! Every change goes through a [`Change`]: one transaction holding the writes and the events
//! they record (a transactional outbox). They commit together or not at all: no change without
//! its event, no event without its change.

use serde::Serialize;

use crate::{
    db::{Db, DbError, Tx, now_micros},
    error::ApiError,
    events::{self, store::NewEvent},
    webhooks,
};

pub struct Change {
    tx: Tx,
    company_id: i64,
    events: Vec<NewEvent>,
}

impl Change {
    pub async fn begin(db: &Db, company_id: i64) -> Result<Change, DbError> {
        Ok(Change { tx: db.begin().await?, company_id, events: Vec::new() })
    }

    /// A change that creates its company: call [`Change::assign_company`] once the company row
    /// exists, before recording anything.
    pub async fn begin_new_company(db: &Db) -> Result<Change, DbError> {
        Ok(Change { tx: db.begin().await?, company_id: 0, events: Vec::new() })
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

    /// Writes the recorded events and the webhook deliveries they call for, and commits;
    /// answered once the change is durable.
    pub async fn commit(mut self) -> Result<(), DbError> {
        let mut queued = 0;
        if !self.events.is_empty() {
            let rows = events::store::insert(&mut self.tx, self.company_id, &self.events, now_micros()).await?;
            queued = webhooks::queue_deliveries(&mut self.tx, self.company_id, rows).await?;
            self.tx.notify(events::CHANNEL, self.company_id.to_string()).await?;
        }
        self.tx.commit().await?;
        if queued > 0 {
            webhooks::wake_dispatcher();
        }
        Ok(())
    }
}
