//! PostgreSQL: changes that are one statement each ([`super::Tx::commit_alone`]), sent several
//! to a statement when they arrive together.
//!
//! A create costs PostgreSQL a round trip, an executor start and a commit (its WAL flush)
//! whatever it writes; eight creates in one statement cost one of each. pgbench with the app's
//! own statement, 16 clients: 2,850 creates/s one per statement, 8,960/s eight per statement.
//! So a change waits here only while up to [`MAX_IN_FLIGHT`] statements of its shape are on their
//! way; it then goes with the others that waited meanwhile (a lone request goes at once). A
//! merged statement commits all of its changes or none. When the database refuses it or
//! rejects it (an `ERROR`, which undoes the statement), each of its changes is sent again on
//! its own, so one change's refusal or error is never another's; when its outcome is unknown
//! (the connection failed, a `FATAL`), each change is told so and none is sent again.

use std::{
    collections::HashMap,
    hash::{Hash, Hasher},
    sync::Mutex,
};

use tokio::sync::oneshot;

use super::{DbError, OneStatement, Query, postgres::{self, Pg}};

/// Statements of one shape on their way at once (each shape counts apart: keyed and plain
/// creates are two). A waiting change holds no connection, so senders cannot starve it.
/// (pgbench, eight creates per statement: 2 clients 7,200/s, 4 clients 8,450/s, 8 clients
/// 7,350/s.)
const MAX_IN_FLIGHT: usize = 4;

/// Changes per statement at most. Batches are powers of two, so a shape has at most five
/// statement texts for each connection to prepare.
const MAX_BATCH: usize = 16;

/// The changes waiting, by shape.
#[derive(Debug, Default)]
pub(super) struct Merger {
    queues: Mutex<HashMap<u64, Queue>>,
}

#[derive(Debug)]
struct Queue {
    merge: fn(&[Vec<Option<Query>>]) -> Query,
    waiting: Vec<Waiting>,
    in_flight: usize,
}

#[derive(Debug)]
struct Waiting {
    parts: Vec<Option<Query>>,
    lock_order: i64,
    reply: oneshot::Sender<Reply>,
}

#[derive(Debug)]
enum Reply {
    /// The change's own outcome.
    Done(Result<Result<(), String>, DbError>),
    /// The statement holding it failed: nothing of it was written. Send it on its own.
    Again(Vec<Option<Query>>),
}

/// Commits `change` in a statement of its own or with others of its shape. `Ok(Err(reason))`
/// when it refused to run outside a transaction (nothing of it was written).
pub(super) async fn commit(pg: &Pg, change: OneStatement) -> Result<Result<(), String>, DbError> {
    let shape = shape(&change);
    let merge = change.merge;
    let (reply, answer) = oneshot::channel();
    let starts = {
        let mut queues = pg.merger().queues.lock().unwrap_or_else(|e| e.into_inner());
        let queue = queues.entry(shape).or_insert_with(|| Queue { merge, waiting: Vec::new(), in_flight: 0 });
        queue.waiting.push(Waiting { parts: change.parts, lock_order: change.lock_order, reply });
        queue.in_flight < MAX_IN_FLIGHT && {
            queue.in_flight += 1;
            true
        }
    };
    if starts {
        tokio::spawn(send_waiting(pg.clone(), shape));
    }
    match answer.await {
        Ok(Reply::Done(outcome)) => outcome,
        Ok(Reply::Again(parts)) => postgres::commit_statement(pg, &**pg, &merge(&[parts]), 1).await,
        Err(_) => Err(DbError::Unavailable("the statement carrying this change was abandoned".into())),
    }
}

/// Sends the changes of `shape` that wait, a batch per statement, until none is left. A batch
/// is taken once a connection is at hand, so the changes that queued meanwhile go with it.
async fn send_waiting(pg: Pg, shape: u64) {
    let mut slot = InFlight { pg: &pg, shape, held: true };
    loop {
        let conn = pg.acquire().await;
        let Some((merge, batch)) = slot.next_batch() else { return };
        let (parts, replies): (Vec<_>, Vec<_>) = batch.into_iter().map(|w| (w.parts, w.reply)).unzip();
        let outcome = match conn {
            Ok(mut conn) => postgres::commit_statement(&pg, &mut *conn, &merge(&parts), parts.len()).await,
            Err(e) => Err(DbError::from(e)),
        };
        // Refused or rejected by the database, the statement was undone: each change goes again
        // alone. Otherwise (committed, or the connection failed, when no one knows whether it
        // committed) each is told the statement's outcome.
        if parts.len() == 1 || !matches!(outcome, Ok(Err(_))) {
            replies.into_iter().for_each(|r| drop(r.send(Reply::Done(outcome.clone()))));
        } else {
            parts.into_iter().zip(replies).for_each(|(p, r)| drop(r.send(Reply::Again(p))));
        }
    }
}

/// A sender's place among the [`MAX_IN_FLIGHT`] of its shape, given back when it finds nothing
/// waiting, or when its task ends early (a panic), so the shape never stalls.
struct InFlight<'a> {
    pg: &'a Pg,
    shape: u64,
    held: bool,
}

impl InFlight<'_> {
    /// The next batch (the longest-waiting changes, a power of two of them, in their lock
    /// order), or `None` after giving the place back, under the same lock that a change joining
    /// the queue takes.
    fn next_batch(&mut self) -> Option<(fn(&[Vec<Option<Query>>]) -> Query, Vec<Waiting>)> {
        let mut queues = self.pg.merger().queues.lock().unwrap_or_else(|e| e.into_inner());
        let queue = queues.get_mut(&self.shape)?;
        // A request that is gone (its client left, or its deadline answered 503) takes its
        // change with it, as it did before the change was sent.
        queue.waiting.retain(|w| !w.reply.is_closed());
        if queue.waiting.is_empty() {
            queue.in_flight -= 1;
            self.held = false;
            if queue.in_flight == 0 {
                queues.remove(&self.shape);
            }
            return None;
        }
        let n = queue.waiting.len().min(MAX_BATCH);
        let n = 1 << n.ilog2();
        Some((queue.merge, in_lock_order(queue.waiting.drain(..n).collect())))
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if self.held {
            let mut queues = self.pg.merger().queues.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(queue) = queues.get_mut(&self.shape) {
                queue.in_flight -= 1;
                if queue.in_flight == 0 && queue.waiting.is_empty() {
                    queues.remove(&self.shape);
                } else if !queue.waiting.is_empty() {
                    queue.in_flight += 1;
                    tokio::spawn(send_waiting(self.pg.clone(), self.shape));
                }
            }
        }
    }
}

/// A statement's changes sorted by [`OneStatement::lock_order`]. PostgreSQL runs the parts of a
/// `WITH` in an order fixed by their places, so statements whose changes are sorted alike take
/// the row locks they share (a shop's counter row, sharded by connection: migration 0007) in
/// one order: before this, two statements holding the same two shops in opposite orders
/// deadlocked now and then (14 times in 160 s of `POST` load at 64 connections), and each
/// waited a second for PostgreSQL to break it.
fn in_lock_order(mut batch: Vec<Waiting>) -> Vec<Waiting> {
    batch.sort_by_key(|w| w.lock_order);
    batch
}

/// Changes merge when they have the same `merge` and their parts are the same statements but
/// for the values. (Two such shapes that hashed alike would still merge correctly, into a
/// statement text of their own: `merge` accepts any parts of its own layout.)
fn shape(change: &OneStatement) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (change.merge as usize).hash(&mut h);
    for part in &change.parts {
        part.as_ref().map(Query::sql).hash(&mut h);
    }
    h.finish()
}

