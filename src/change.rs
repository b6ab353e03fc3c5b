//! Every change goes through a [`Change`]: one transaction holding the writes and the events
//! they record (a transactional outbox). They commit together or not at all: no change without
//! its event, no event without its change.

use axum::{http::StatusCode, response::Response};
use serde::Serialize;

use crate::{
    db::{Db, DbError, Finish, FromRow, Query, Tx, now_micros, sqlite},
    error::ApiError,
    events::{
        self,
        store::{EventRow, NewEvent},
    },
    idempotency::{self, store::StoredResponse},
    respond::created,
    webhooks,
};

pub struct Change {
    tx: Tx,
    outbox: Outbox,
    /// What the change must still find when it writes (see [`Change::require`]).
    guard: Option<Query>,
}

/// What a change records besides its writes: its events, and the answer a repeat of a keyed
/// request gets.
pub struct Outbox {
    company_id: i64,
    events: Vec<NewEvent>,
    /// What a repeat of this request with its `Idempotency-Key` answers.
    replay: Option<StoredResponse>,
    /// Whether the request sent an `Idempotency-Key`: only then is `replay` kept. Read when the
    /// change begins, on the request's task (`respond` may run on SQLite's writer thread).
    keyed: bool,
}

impl Outbox {
    /// Records that `data` (the resource exactly as its GET shows it) changed.
    pub fn record<T: Serialize>(&mut self, kind: &'static str, shop_id: Option<i64>, data: &T) -> Result<(), ApiError> {
        debug_assert!(events::TYPES.contains(&kind), "unknown event type {kind}");
        if cfg!(feature = "bench-outbox-off") {
            return Ok(());
        }
        // No foreign key catches an event without its company on PostgreSQL (migration 0017).
        if self.company_id == 0 {
            return Err(ApiError::Internal(format!("a {kind} event recorded before its company")));
        }
        let data = serde_json::to_string(data).map_err(|e| ApiError::Internal(format!("serializing a {kind} event: {e}")))?;
        self.events.push(NewEvent { kind, shop_id, data });
        Ok(())
    }

    /// Sets the response a repeat of this request with its `Idempotency-Key` gets (a `POST`
    /// sets it before committing; secrets are left out of it). Without a key, nothing to keep.
    pub fn replay_as<T: Serialize>(&mut self, status: StatusCode, location: Option<&str>, body: &T) -> Result<(), ApiError> {
        if !self.keyed {
            return Ok(());
        }
        let body = serde_json::to_string(body).map_err(|e| ApiError::Internal(format!("serializing a response: {e}")))?;
        self.replay = Some(StoredResponse { status: status.as_u16(), location: location.map(str::to_owned), body });
        Ok(())
    }

    /// `201 Created` with `Location` and `body`, which a keyed repeat replays (unless
    /// [`Outbox::replay_as`] set another body).
    pub fn created<T: Serialize>(&mut self, location: String, body: T) -> Result<Response, ApiError> {
        if self.replay.is_none() {
            self.replay_as(StatusCode::CREATED, Some(&location), &body)?;
        }
        Ok(created(location, body))
    }

    /// The statements that write the events, the webhook deliveries and a keyed request's
    /// answer, for a request holding `slot`.
    fn last_statements(&mut self, slot: Option<idempotency::Slot>) -> LastStatements {
        let stored_answer = match (slot, &self.replay) {
            (Some(slot), Some(replay)) => Some((slot.store_query(replay, now_micros()), slot)),
            _ => None,
        };
        LastStatements {
            company_id: self.company_id,
            lock_order: self.events.first().and_then(|e| e.shop_id).unwrap_or(0),
            stored_answer,
            guard: None,
            lead: None,
            events: events::store::value_lists(self.company_id, std::mem::take(&mut self.events), EVENTS_CHUNK, now_micros()),
        }
    }
}

impl Change {
    pub async fn begin(db: &Db, company_id: i64) -> Result<Change, DbError> {
        let outbox = Outbox { company_id, events: Vec::new(), replay: None, keyed: idempotency::current().is_some() };
        Ok(Change { tx: db.begin().await?, outbox, guard: None })
    }

    /// A change that creates its company: call [`Change::assign_company`] once the company row
    /// exists, before recording anything.
    pub async fn begin_new_company(db: &Db) -> Result<Change, DbError> {
        Change::begin(db, 0).await
    }

    pub fn assign_company(&mut self, company_id: i64) {
        debug_assert!(self.outbox.company_id == 0 && self.outbox.events.is_empty());
        self.outbox.company_id = company_id;
    }

    pub fn company_id(&self) -> i64 {
        self.outbox.company_id
    }

    /// Writes the change only while `guard` (a `SELECT id ...` of one row) still finds its
    /// row, checked as the first statement of the change's last hand-off (on PostgreSQL, in the
    /// statement of a change sent alone): it fails with [`DbError::Outdated`] otherwise. On
    /// PostgreSQL the row is locked as it is checked ([`Tx::still_holds`]), so the guard must
    /// come before any row lock the change takes: a change that locks rows first checks with
    /// [`Change::require_now`].
    pub fn require(&mut self, guard: Query) {
        debug_assert!(self.guard.is_none(), "a change has one guard");
        self.guard = Some(guard);
    }

    /// [`Change::require`], checked (and on PostgreSQL locked) now: before the change's first
    /// row lock, in the order a shop's PUT takes them (its shop, then its appointments).
    pub async fn require_now(&mut self, guard: &Query) -> Result<(), DbError> {
        check(&mut self.tx, Some(guard)).await
    }

    /// `guard` ([`Change::require`]) as a condition of the change's last write, to append to its
    /// `WHERE`: ` AND EXISTS (guard)`, locked as [`Tx::still_holds`] locks it, which costs no
    /// statement of its own. A write that then changes no row does not say why: a caller that
    /// needs to know checks with [`Change::require_now`] (in a transaction of its own, before it
    /// locks rows).
    pub fn guard_condition(&self, guard: &Query) -> Query {
        let mut q = Query::new(" AND EXISTS (");
        q.push_query(&self.tx.locking_guard(guard)).push(")");
        q
    }

    /// The transaction, for the stores' statements.
    pub fn tx(&mut self) -> &mut Tx {
        &mut self.tx
    }

    /// Records that `data` (the resource exactly as its GET shows it) changed.
    pub fn record<T: Serialize>(&mut self, kind: &'static str, shop_id: Option<i64>, data: &T) -> Result<(), ApiError> {
        self.outbox.record(kind, shop_id, data)
    }

    /// See [`Outbox::replay_as`].
    pub fn replay_as<T: Serialize>(&mut self, status: StatusCode, location: Option<&str>, body: &T) -> Result<(), ApiError> {
        self.outbox.replay_as(status, location, body)
    }

    /// Commits a create and answers `201 Created` with `Location` and `body` (which a keyed
    /// repeat replays, unless [`Change::replay_as`] set another body).
    pub async fn commit_created<T: Serialize>(mut self, location: String, body: T) -> Result<Response, ApiError> {
        if self.outbox.replay.is_none() {
            self.replay_as(StatusCode::CREATED, Some(&location), &body)?;
        }
        self.commit().await?;
        Ok(created(location, body))
    }

    /// Writes the recorded events and the webhook deliveries they call for, and the response
    /// of a keyed request, and commits; answered once the change is durable.
    pub async fn commit(self) -> Result<(), DbError> {
        self.commit_led_by(None).await
    }

    /// [`Change::commit`], with `lead` (a last write) sent in one statement with the first
    /// events' insert on PostgreSQL.
    async fn commit_led_by(mut self, lead: Option<Query>) -> Result<(), DbError> {
        let slot = idempotency::current();
        if !self.outbox.events.is_empty() {
            self.tx.notify(events::CHANNEL, self.outbox.company_id.to_string()).await?;
        }
        let stores_answer = slot.is_some() && self.outbox.replay.is_some();
        let mut last = self.outbox.last_statements(slot.clone());
        last.lead = lead;
        last.guard = self.guard.take();
        let queued = if self.tx.can_commit_alone() && last.commit_alone(&mut self.tx).await? {
            0
        } else {
            self.tx.commit_with(last).await?
        };
        finished(slot.filter(|_| stores_answer), queued);
        Ok(())
    }

    /// Runs the change's last write `q` (a statement returning at most one row), hands its
    /// outcome to `respond` (which shapes the answer and records the events), and commits: on
    /// SQLite all of it in one hand-off to the writer, so the writer never waits for this
    /// request between its last statement and its commit (it waited one round trip through a
    /// busy runtime before). `respond` runs on the writer's thread there: plain Rust, no I/O.
    /// An error from `respond` rolls the whole change back. Every change that finishes this
    /// way records an event (the feed's streams are told of one).
    pub async fn finish_with<R, T, F>(self, q: Query, respond: F) -> Result<T, ApiError>
    where
        R: FromRow + Send + 'static,
        T: Send + 'static,
        F: FnOnce(Result<Option<R>, DbError>, &mut Outbox) -> Result<T, ApiError> + Send + 'static,
    {
        self.finish(q, respond).await
    }

    /// [`Change::finish_with`] for an insert into `table` (its `id` an identity column) whose
    /// row the code knows but for its id. `insert` gets an id reserved beforehand and returns
    /// the statement and the row it stores; or, given `None`, returns a statement that returns
    /// the row. On PostgreSQL the id is reserved, `respond` answers from the known row, and the
    /// insert travels in one statement with the events it recorded: the outbox costs no round
    /// trip of its own. On SQLite, whose writer runs the whole finish in one hand-off already,
    /// it is `finish_with(insert(None))`.
    pub async fn finish_insert<R, T, I, F>(mut self, table: &'static str, insert: I, respond: F) -> Result<T, ApiError>
    where
        R: FromRow + Send + 'static,
        T: Send + 'static,
        I: FnOnce(Option<i64>) -> (Query, Option<R>),
        F: FnOnce(Result<Option<R>, DbError>, &mut Outbox) -> Result<T, ApiError> + Send + 'static,
    {
        let id = self.tx.reserve_id(table).await?;
        let (q, known) = insert(id);
        let Some(row) = known else { return self.finish(q, respond).await };
        let value = respond(Ok(Some(row)), &mut self.outbox)?;
        self.commit_led_by(Some(q)).await?;
        Ok(value)
    }

    async fn finish<R, T, F>(mut self, q: Query, respond: F) -> Result<T, ApiError>
    where
        R: FromRow + Send + 'static,
        T: Send + 'static,
        F: FnOnce(Result<Option<R>, DbError>, &mut Outbox) -> Result<T, ApiError> + Send + 'static,
    {
        let slot = idempotency::current();
        self.tx.notify(events::CHANNEL, self.outbox.company_id.to_string()).await?;
        let last = LastWrite { guard: self.guard.take(), q, respond, outbox: self.outbox, slot: slot.clone(), row: std::marker::PhantomData };
        let (value, queued, stored_answer) = self.tx.commit_with(last).await?;
        finished(slot.filter(|_| stored_answer), queued);
        Ok(value)
    }
}

/// After a commit: a keyed request's answer is stored, deliveries wait for the dispatcher.
fn finished(stored_answer: Option<idempotency::Slot>, queued: usize) {
    if let Some(slot) = stored_answer {
        slot.mark_completed();
    }
    if queued > 0 {
        webhooks::wake_dispatcher();
    }
}

/// [`Change::finish_with`]'s work: the last write, the answer built from its row, then the
/// outbox's statements.
struct LastWrite<R, F> {
    /// Checked before `q` ([`Change::require`]).
    guard: Option<Query>,
    q: Query,
    respond: F,
    outbox: Outbox,
    slot: Option<idempotency::Slot>,
    row: std::marker::PhantomData<fn() -> R>,
}

impl<R, T, F> Finish for LastWrite<R, F>
where
    R: FromRow + Send + 'static,
    T: Send + 'static,
    F: FnOnce(Result<Option<R>, DbError>, &mut Outbox) -> Result<T, ApiError> + Send + 'static,
{
    /// The answer, the deliveries queued, and whether a keyed request's answer was stored.
    type Output = (T, usize, bool);
    type Error = ApiError;

    fn run_blocking(mut self, conn: &rusqlite::Connection) -> Result<Self::Output, ApiError> {
        check_blocking(conn, self.guard.as_ref())?;
        let row = sqlite::fetch_optional(conn, &self.q);
        let value = (self.respond)(row, &mut self.outbox)?;
        let stores_answer = self.slot.is_some() && self.outbox.replay.is_some();
        let queued = self.outbox.last_statements(self.slot).run_blocking(conn)?;
        Ok((value, queued, stores_answer))
    }

    async fn run(mut self, tx: &mut Tx) -> Result<Self::Output, ApiError> {
        check(tx, self.guard.as_ref()).await?;
        let row = tx.fetch_optional(&self.q).await;
        let value = (self.respond)(row, &mut self.outbox)?;
        let stores_answer = self.slot.is_some() && self.outbox.replay.is_some();
        let queued = self.outbox.last_statements(self.slot).run(tx).await?;
        Ok((value, queued, stores_answer))
    }
}

/// What every change writes last: a keyed request's stored answer, its events, and the webhook
/// deliveries they call for. On SQLite they run in the commit's own hand-off to the writer, so
/// the outbox adds no round trip there.
struct LastStatements {
    company_id: i64,
    /// The shop of the first event: the change's place in a statement it shares (see
    /// [`crate::db::OneStatement::lock_order`]).
    lock_order: i64,
    /// The statement that stores a keyed request's answer, and the request's claim (told when
    /// another request stored an answer for the key first).
    stored_answer: Option<(Query, idempotency::Slot)>,
    /// Checked before anything is written ([`Change::require`]).
    guard: Option<Query>,
    /// A write to send in one statement with the first events' insert (see
    /// [`Change::finish_insert`]).
    lead: Option<Query>,
    /// The events' `VALUES` lists ([`events::store::value_lists`]), one per [`EVENTS_CHUNK`]
    /// (one for every change but an import).
    events: Vec<Query>,
}

/// Events per `INSERT` (5 values each: under both databases' limits on placeholders).
const EVENTS_CHUNK: usize = 1000;

impl LastStatements {
    /// On PostgreSQL, before any statement began the transaction: when these statements are
    /// one (a last write, at most one events insert, a keyed request's answer), sends it
    /// without `BEGIN` and `COMMIT`. A company with webhooks needs their deliveries written in
    /// the same transaction, and an answer that another request stored first must fail the
    /// change: the statement then undoes itself and `false` says to run these in a transaction
    /// (which tells the answer apart). Companies seen with webhooks go there directly for a
    /// while.
    async fn commit_alone(&self, tx: &mut Tx) -> Result<bool, DbError> {
        let answer = self.stored_answer.as_ref().map(|(q, _)| q.clone());
        if self.events.len() > 1 || (self.lead.is_none() && self.events.is_empty()) {
            return Ok(false);
        }
        if !self.events.is_empty() && tx.skips_alone(self.company_id) {
            return Ok(false);
        }
        let change = webhooks::store::one_statement(self.lead.clone(), self.events.first().cloned(), answer, self.guard.clone(), self.company_id)
            .with_lock_order(self.lock_order);
        match tx.commit_alone(change).await? {
            Ok(()) => Ok(true),
            // Its guard found no row: the transaction would find none either.
            Err(reason) if reason == webhooks::store::OUTDATED => Err(DbError::Outdated),
            Err(reason) => {
                if reason == webhooks::store::HAS_WEBHOOKS {
                    tx.skip_alone(self.company_id);
                }
                Ok(false)
            }
        }
    }
}

impl Finish for LastStatements {
    /// How many webhook deliveries were queued.
    type Output = usize;
    type Error = DbError;

    fn run_blocking(self, conn: &rusqlite::Connection) -> Result<usize, DbError> {
        check_blocking(conn, self.guard.as_ref())?;
        if let Some((q, slot)) = &self.stored_answer {
            if sqlite::execute(conn, q)? != 1 {
                return Err(answered_first(slot));
            }
        }
        if let Some(q) = &self.lead {
            sqlite::execute(conn, q)?;
        }
        if self.events.is_empty() {
            return Ok(0);
        }
        let subscriptions = sqlite::fetch_all(conn, &webhooks::store::subscriptions_query(self.company_id))?;
        let mut queued = 0;
        for values in self.events {
            let rows: Vec<EventRow> = sqlite::fetch_all(conn, &events::store::insert_returning(values))?;
            for q in webhooks::enqueue_queries(self.company_id, &subscriptions, rows, webhooks::store::WebhookLocks::None)? {
                queued += sqlite::execute(conn, &q)? as usize;
            }
        }
        Ok(queued)
    }

    async fn run(self, tx: &mut Tx) -> Result<usize, DbError> {
        check(tx, self.guard.as_ref()).await?;
        if let Some((q, slot)) = &self.stored_answer {
            if tx.execute(q).await? != 1 {
                return Err(answered_first(slot));
            }
        }
        let (mut queued, mut lead) = (0, self.lead);
        for values in self.events {
            let insert = events::store::insert_returning(values);
            let inserted = tx.fetch_all(&webhooks::store::inserted_with_subscriptions(lead.take(), insert, self.company_id)).await?;
            let (rows, subscriptions) = webhooks::store::InsertedEvent::split(inserted);
            for q in webhooks::enqueue_queries(self.company_id, &subscriptions, rows, webhooks::store::WebhookLocks::for_tx(tx))? {
                queued += tx.execute(&q).await? as usize;
            }
        }
        if let Some(q) = lead {
            tx.execute(&q).await?;
        }
        Ok(queued)
    }
}

/// A change's guard ([`Change::require`]), on SQLite's writer thread.
fn check_blocking(conn: &rusqlite::Connection, guard: Option<&Query>) -> Result<(), DbError> {
    match guard {
        Some(q) if sqlite::fetch_optional::<(i64,)>(conn, q)?.is_none() => Err(DbError::Outdated),
        _ => Ok(()),
    }
}

/// A change's guard ([`Change::require`]), in its transaction.
async fn check(tx: &mut Tx, guard: Option<&Query>) -> Result<(), DbError> {
    match guard {
        Some(q) if !tx.still_holds(q).await? => Err(DbError::Outdated),
        _ => Ok(()),
    }
}

fn answered_first(slot: &idempotency::Slot) -> DbError {
    slot.mark_answered_elsewhere();
    DbError::Unavailable("another request with this Idempotency-Key stored its answer first; retry to get it".into())
}
