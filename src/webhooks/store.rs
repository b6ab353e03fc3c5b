//! Webhook SQL: the records, the deliveries queued with each change, and the dispatcher's claims.
//!
//! Claiming due deliveries is the one statement that differs by backend: PostgreSQL replicas
//! skip rows another replica has locked (`FOR UPDATE SKIP LOCKED`), so each attempt is made by
//! one replica; SQLite has one writer in one process and needs no lock clause.

use crate::{
    db::{Db, DbError, FromRow, OneStatement, Query, Reader, Tx, company_row, now_micros, page::{PageRequest, fetch_page}},
    events::{self, store::EventRow},
};

#[derive(Debug, Clone, FromRow)]
pub struct WebhookRow {
    pub id: i64,
    pub url: String,
    pub events: String,
    pub description: String,
    pub shop_ids: Option<String>,
    pub enabled: bool,
    pub created_at: i64,
    pub updated_at: i64,
}

const COLUMNS: &str = "id, url, events, description, shop_ids, enabled, created_at, updated_at";

/// A webhook's stored settings.
#[derive(Debug, Clone)]
pub struct WebhookFields {
    pub url: String,
    /// JSON array text of the event patterns.
    pub events: String,
    pub description: String,
    /// Comma-separated shop ids; `None` for every shop.
    pub shop_ids: Option<String>,
    /// `None`: as stored when the write runs (a new webhook: enabled). Never the value read
    /// before: a PUT without `enabled` must not undo the dispatcher disabling it meanwhile.
    pub enabled: Option<bool>,
}

/// Every webhook of the company, oldest first (a company has at most a few dozen).
pub async fn all(db: &Db, company_id: i64) -> Result<Vec<WebhookRow>, DbError> {
    db.fetch_all(&Query::new(format!("SELECT {COLUMNS} FROM webhooks WHERE company_id = $1 ORDER BY id")).bind(company_id)).await
}

pub async fn find(from: impl Into<Reader<'_>>, company_id: i64, id: i64) -> Result<Option<WebhookRow>, DbError> {
    from.into().fetch_optional(company_row(COLUMNS, "webhooks", company_id, id)).await
}

pub async fn insert(tx: &mut Tx, company_id: i64, f: &WebhookFields, secret: &str) -> Result<WebhookRow, DbError> {
    let q = Query::new(format!(
        "INSERT INTO webhooks (company_id, url, events, description, shop_ids, secret, enabled, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) RETURNING {COLUMNS}"
    ))
    .bind(company_id)
    .bind(&f.url)
    .bind(&f.events)
    .bind(&f.description)
    .bind(f.shop_ids.clone())
    .bind(secret)
    .bind(f.enabled.unwrap_or(true))
    .bind(now_micros());
    tx.fetch_optional(&q).await?.ok_or(DbError::NoRow)
}

/// Replaces the settings (`enabled` only when given). Enabling a disabled webhook restarts its
/// failure clock.
pub async fn update(tx: &mut Tx, company_id: i64, id: i64, f: &WebhookFields) -> Result<Option<WebhookRow>, DbError> {
    let q = Query::new(format!(
        "UPDATE webhooks SET url = $3, events = $4, description = $5, shop_ids = $6, \
         failing_since = CASE WHEN COALESCE($7, enabled) AND NOT enabled THEN NULL ELSE failing_since END, \
         enabled = COALESCE($7, enabled), updated_at = $8 \
         WHERE company_id = $1 AND id = $2 RETURNING {COLUMNS}"
    ))
    .bind(company_id)
    .bind(id)
    .bind(&f.url)
    .bind(&f.events)
    .bind(&f.description)
    .bind(f.shop_ids.clone())
    .bind(f.enabled)
    .bind(now_micros());
    tx.fetch_optional(&q).await
}

/// Deletes a webhook and its delivery log. `false` when there was none.
pub async fn delete(tx: &mut Tx, company_id: i64, id: i64) -> Result<bool, DbError> {
    tx.execute(&Query::new("DELETE FROM webhook_deliveries WHERE company_id = $1 AND webhook_id = $2").bind(company_id).bind(id)).await?;
    Ok(tx.execute(&Query::new("DELETE FROM webhooks WHERE company_id = $1 AND id = $2").bind(company_id).bind(id)).await? > 0)
}

/// The enabled webhooks of a company, for fanning out its new events.
#[derive(Debug, FromRow)]
pub struct Subscription {
    pub id: i64,
    pub events: String,
    pub shop_ids: Option<String>,
}

/// An event just inserted, with the company's enabled webhooks (`[[id, events, shop_ids], ...]`
/// as JSON text): what [`inserted_with_subscriptions`] returns on PostgreSQL.
#[derive(Debug, FromRow)]
pub struct InsertedEvent {
    #[row(flatten)]
    pub event: EventRow,
    pub webhooks: String,
}

/// PostgreSQL only: `insert` (the events insert of a change) and the company's enabled
/// webhooks, in one statement, so the outbox costs one round trip; with `lead`, the change's
/// last write too, so it costs none of its own.
pub fn inserted_with_subscriptions(lead: Option<Query>, insert: Query, company_id: i64) -> Query {
    let mut q = with_inserted(lead, insert);
    q.push(" SELECT ev.xid, ev.id, ev.kind, ev.shop_id, ev.data, ev.created_at, (SELECT COALESCE(json_agg(json_build_array(w.id, w.events, w.shop_ids)), '[]')::text FROM webhooks w WHERE w.company_id = ");
    q.push_bind(company_id).push(" AND w.enabled) AS webhooks FROM ev");
    q
}

/// Why [`one_statement`] refuses when the company has webhooks.
pub const HAS_WEBHOOKS: &str = "the company has webhooks";

/// A change sent as one statement outside any transaction ([`Tx::commit_alone`]): its last
/// write `lead`, its events (a `VALUES` list of [`events::store::value_lists`]), and
/// `exactly_one` (another write, which must change exactly one row: a keyed request's stored
/// answer), and `guard` (a `SELECT id ...` that must find its row, locked `FOR KEY SHARE`:
/// [`crate::change::Change::require`]). The statement raises (`refuse_outside_transaction`),
/// and so undoes all of itself, when the company has an enabled webhook and the change has
/// events (their deliveries must be written in the same transaction), when `exactly_one`
/// changed no row, or when `guard` found none (the change then fails with
/// [`crate::db::DbError::Outdated`]). At least `lead` or `events` is needed.
pub fn one_statement(lead: Option<Query>, events: Option<Query>, exactly_one: Option<Query>, guard: Option<Query>, company_id: i64) -> OneStatement {
    debug_assert!(lead.is_some() || events.is_some(), "a change with no write");
    // The company whose webhooks the statement looks up, as a bound value (`$n`).
    let subscriber = events.as_ref().map(|_| {
        let mut q = Query::new("");
        q.push_bind(company_id);
        q
    });
    OneStatement { parts: vec![lead, events, exactly_one, subscriber, guard], merge: one_statement_of, lock_order: 0 }
}

/// The statement of one or more changes of [`one_statement`]: each change's writes are parts
/// of one data-modifying `WITH` (PostgreSQL runs every such part, read or not), and the
/// `SELECT` holds the checks, so one change's refusal undoes them all. The events of all the
/// changes go in one insert: an insert of its own per change cost the statement an executor
/// node, an index and trigger set-up each (the outbox is a cost on every create: issue #12).
/// The webhooks of every company with events in the statement are looked up once, in one
/// `EXISTS` (a look-up per change cost a statement of one create about 6% of its throughput in
/// pgbench; shared statements mostly hold one company's creates).
fn one_statement_of(changes: &[Vec<Option<Query>>]) -> Query {
    let mut q = Query::new("WITH ");
    let mut subscribers = Vec::with_capacity(changes.len());
    let mut exactly_ones = Vec::new();
    let mut guards = Vec::new();
    let mut value_lists = Vec::with_capacity(changes.len());
    let mut first = true;
    let mut next_part = |q: &mut Query| {
        if !std::mem::take(&mut first) {
            q.push(", ");
        }
    };
    for (i, parts) in changes.iter().enumerate() {
        let [lead, values, exactly_one, subscriber, guard] = parts.as_slice() else { panic!("a change of one_statement has five parts") };
        for (name, part, suffix) in [("must", guard, crate::db::KEY_SHARE), ("lead", lead, ""), ("one", exactly_one, " RETURNING 1")] {
            if let Some(part) = part {
                next_part(&mut q);
                q.push(&format!("{name}{i} AS (")).push_query(part).push(suffix).push(")");
            }
        }
        value_lists.extend(values.as_ref());
        subscribers.extend(subscriber.as_ref());
        if exactly_one.is_some() {
            exactly_ones.push(i);
        }
        if guard.is_some() {
            guards.push(i);
        }
    }
    if !value_lists.is_empty() {
        next_part(&mut q);
        q.push("ev AS (").push(events::store::INSERT_EVENTS);
        push_listed(&mut q, value_lists);
        q.push(")");
    }
    if subscribers.is_empty() && exactly_ones.is_empty() && guards.is_empty() {
        q.push(" SELECT ''");
        return q;
    }
    q.push(" SELECT CASE");
    if !subscribers.is_empty() {
        q.push(" WHEN EXISTS (SELECT 1 FROM webhooks w WHERE w.company_id IN (");
        push_listed(&mut q, subscribers);
        q.push(") AND w.enabled) THEN refuse_outside_transaction('").push(HAS_WEBHOOKS).push("')");
    }
    for i in exactly_ones {
        q.push(&format!(" WHEN NOT EXISTS (SELECT 1 FROM one{i}) THEN refuse_outside_transaction('{CHANGED_NO_ROW}')"));
    }
    for i in guards {
        q.push(&format!(" WHEN NOT EXISTS (SELECT 1 FROM must{i}) THEN refuse_outside_transaction('{OUTDATED}')"));
    }
    q.push(" ELSE '' END");
    q
}

/// Appends `parts`, separated by commas.
fn push_listed(q: &mut Query, parts: Vec<&Query>) {
    for (n, part) in parts.into_iter().enumerate() {
        if n > 0 {
            q.push(", ");
        }
        q.push_query(part);
    }
}

/// Why [`one_statement`] refuses when its `guard` found no row.
pub const OUTDATED: &str = "its guard found no row";

/// Why [`one_statement`] refuses when its `exactly_one` write changed no row.
pub const CHANGED_NO_ROW: &str = "its other write changed no row";

/// `WITH [lead AS (lead),] ev AS (insert)`: one statement, as PostgreSQL runs every
/// data-modifying part of a `WITH`, read or not.
fn with_inserted(lead: Option<Query>, insert: Query) -> Query {
    let mut q = Query::new("WITH ");
    if let Some(lead) = lead {
        q.push("lead AS (").push_query(&lead).push("), ");
    }
    q.push("ev AS (").push_query(&insert).push(")");
    q
}

impl InsertedEvent {
    /// The event row, and the webhooks (the same on every row of one insert).
    pub fn split(rows: Vec<InsertedEvent>) -> (Vec<EventRow>, Vec<Subscription>) {
        let subscriptions = rows
            .first()
            .and_then(|r| serde_json::from_str::<Vec<(i64, String, Option<String>)>>(&r.webhooks).ok())
            .unwrap_or_default()
            .into_iter()
            .map(|(id, events, shop_ids)| Subscription { id, events, shop_ids })
            .collect();
        let events = rows.into_iter().map(|r| r.event).collect();
        (events, subscriptions)
    }
}

/// The company's enabled webhooks, as the fan-out of a change reads them.
pub fn subscriptions_query(company_id: i64) -> Query {
    Query::new("SELECT id, events, shop_ids FROM webhooks WHERE company_id = $1 AND enabled").bind(company_id)
}

/// A delivery to queue: which webhook, which event, the body to send.
pub struct NewDelivery {
    pub webhook_id: i64,
    pub event_id: String,
    pub event_type: String,
    pub payload: String,
}

/// Queues deliveries due now, in the caller's transaction. Returns their rows: none for a
/// webhook deleted meanwhile.
pub async fn enqueue(tx: &mut Tx, company_id: i64, deliveries: &[NewDelivery]) -> Result<Vec<DeliveryRow>, DbError> {
    let mut rows = Vec::new();
    for q in enqueue_queries(company_id, deliveries, WebhookLocks::for_tx(tx)) {
        rows.extend(tx.fetch_all::<DeliveryRow>(&q).await?);
    }
    Ok(rows)
}

/// How the insert of deliveries keeps a webhook deleted beside it from failing the change.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum WebhookLocks {
    /// PostgreSQL: another transaction may delete a webhook between the read that found it and
    /// the insert, whose foreign key would then fail the whole change (a 500 for a write that
    /// had nothing wrong with it). The insert takes a key-share lock on each webhook first
    /// (the lock the foreign key's check takes anyway): one deleted meanwhile is skipped, and a
    /// delete that comes later waits for this commit and then removes the new deliveries too.
    KeyShare,
    /// SQLite: its one writer runs the change alone; nothing can delete the webhook meanwhile.
    None,
}

impl WebhookLocks {
    pub fn for_tx(tx: &Tx) -> WebhookLocks {
        if tx.is_sqlite() { WebhookLocks::None } else { WebhookLocks::KeyShare }
    }
}

/// Deliveries per `INSERT` (6 values each: under both databases' limits on placeholders).
const ENQUEUE_CHUNK: usize = 1000;

/// The inserts of `deliveries` (one per [`ENQUEUE_CHUNK`]), returning their rows.
pub fn enqueue_queries(company_id: i64, deliveries: &[NewDelivery], locks: WebhookLocks) -> Vec<Query> {
    deliveries.chunks(ENQUEUE_CHUNK).filter_map(|chunk| enqueue_query(company_id, chunk, locks)).collect()
}

/// The insert of `deliveries` whose webhook still exists, returning their rows; `None` when
/// there are none. (Both databases name a `VALUES` list's columns `column1`, `column2`...)
fn enqueue_query(company_id: i64, deliveries: &[NewDelivery], locks: WebhookLocks) -> Option<Query> {
    if deliveries.is_empty() {
        return None;
    }
    let now = now_micros();
    let mut q = Query::new(
        "INSERT INTO webhook_deliveries (company_id, webhook_id, event_id, event_type, payload, state, attempt, next_attempt_at, created_at, updated_at) \
         SELECT column1, column2, column3, column4, column5, 'pending', 0, column6, column6, column6 FROM (VALUES ",
    );
    for (i, d) in deliveries.iter().enumerate() {
        q.push(if i == 0 { "(" } else { ", (" });
        q.push_bind(company_id).push(", ").push_bind(d.webhook_id).push(", ").push_bind(d.event_id.as_str()).push(", ");
        q.push_bind(d.event_type.as_str()).push(", ").push_bind(d.payload.as_str()).push(", ").push_bind(now).push(")");
    }
    q.push(") AS d WHERE EXISTS (SELECT 1 FROM webhooks w WHERE w.company_id = d.column1 AND w.id = d.column2");
    if locks == WebhookLocks::KeyShare {
        q.push(" FOR KEY SHARE");
    }
    q.push(&format!(") RETURNING {DELIVERY_COLUMNS}"));
    Some(q)
}

#[derive(Debug, Clone, FromRow)]
pub struct DeliveryRow {
    pub id: i64,
    pub event_id: String,
    pub event_type: String,
    pub state: String,
    pub attempt: i64,
    pub next_attempt_at: Option<i64>,
    pub status_code: Option<i64>,
    pub error: Option<String>,
    pub duration_ms: Option<i64>,
    pub created_at: i64,
}

const DELIVERY_COLUMNS: &str = "id, event_id, event_type, state, attempt, next_attempt_at, status_code, error, duration_ms, created_at";

/// A webhook's deliveries, newest first.
pub async fn deliveries(db: &Db, company_id: i64, webhook_id: i64, page: &PageRequest) -> Result<(Vec<DeliveryRow>, i64), DbError> {
    let q = Query::new("FROM webhook_deliveries WHERE company_id = $1 AND webhook_id = $2").bind(company_id).bind(webhook_id);
    let newest_first = PageRequest { order: vec![("id", true)], ..page.clone() };
    fetch_page(db, DELIVERY_COLUMNS, &q, &newest_first, "id").await
}

/// A delivery claimed for one attempt, with what the attempt needs.
#[derive(Debug, FromRow)]
pub struct Claimed {
    pub company_id: i64,
    pub id: i64,
    pub webhook_id: i64,
    pub event_id: String,
    pub payload: String,
    pub attempt: i64,
}

/// Claims up to `limit` due deliveries for one attempt each: their attempt number goes up and
/// they stay out of other claims until `lease_until` (past it, a delivery whose attempt never
/// finished, say because the process was killed, is due again).
pub async fn claim_due(db: &Db, now: i64, lease_until: i64, limit: i64) -> Result<Vec<Claimed>, DbError> {
    let lock = if db.is_sqlite() { "" } else { " FOR UPDATE SKIP LOCKED" };
    let q = Query::new(format!(
        "UPDATE webhook_deliveries SET attempt = attempt + 1, next_attempt_at = $2, updated_at = $1 \
         WHERE (company_id, id) IN (SELECT company_id, id FROM webhook_deliveries WHERE state = 'pending' AND next_attempt_at <= $1 \
         ORDER BY next_attempt_at LIMIT $3{lock}) \
         RETURNING company_id, id, webhook_id, event_id, payload, attempt"
    ))
    .bind(now)
    .bind(lease_until)
    .bind(limit);
    let mut tx = db.begin().await?;
    let claimed = tx.fetch_all(&q).await?;
    tx.commit().await?;
    Ok(claimed)
}

/// What an attempt needs to know about its webhook.
#[derive(Debug, FromRow)]
pub struct Target {
    pub url: String,
    pub secret: String,
    pub enabled: bool,
}

/// The webhook of a claimed attempt, read through the delivery: `None` when the delivery is gone
/// (its webhook was deleted) or no longer this attempt's (another claim took it after the lease
/// ran out). On SQLite a deleted webhook's id, and its deliveries' ids, can be given to the next
/// rows created: the event id and the attempt number tell this delivery from a newer one.
pub async fn target(db: &Db, claimed: &Claimed) -> Result<Option<Target>, DbError> {
    let q = Query::new(
        "SELECT w.url, w.secret, w.enabled FROM webhook_deliveries d JOIN webhooks w ON w.company_id = d.company_id AND w.id = d.webhook_id \
         WHERE d.company_id = $1 AND d.id = $2 AND d.webhook_id = $3 AND d.event_id = $4 AND d.attempt = $5 AND d.state = 'pending'",
    );
    db.fetch_optional(&of_attempt(q, claimed)).await
}

/// Binds `$1`-`$5` of a statement that names one claimed attempt (see [`target`]).
fn of_attempt(q: Query, claimed: &Claimed) -> Query {
    q.bind(claimed.company_id).bind(claimed.id).bind(claimed.webhook_id).bind(claimed.event_id.clone()).bind(claimed.attempt)
}

/// How an attempt ended.
pub struct Outcome {
    pub status_code: Option<i64>,
    pub error: Option<String>,
    pub duration_ms: i64,
    /// `Some(at)`: retry at that time; `None`: the delivery is over (see `succeeded`).
    pub retry_at: Option<i64>,
    pub succeeded: bool,
    /// Disable the webhook now (410 Gone).
    pub disable: bool,
}

/// Records an attempt's outcome and keeps the webhook's failure clock: a success stops it, a
/// failure starts it if needed, and a webhook failing for `disable_after` is disabled.
pub async fn record_attempt(db: &Db, claimed: &Claimed, outcome: &Outcome, disable_after: i64) -> Result<(), DbError> {
    let now = now_micros();
    let state = match (outcome.succeeded, outcome.retry_at) {
        (true, _) => "succeeded",
        (false, Some(_)) => "pending",
        (false, None) => "failed",
    };
    let mut tx = db.begin().await?;
    // Only onto the attempt claimed: an attempt that outlived its lease, or whose delivery was
    // deleted and its id given to another, leaves the newer delivery's state alone.
    let q = Query::new(
        "UPDATE webhook_deliveries SET state = $6, next_attempt_at = $7, status_code = $8, error = $9, duration_ms = $10, updated_at = $11 \
         WHERE company_id = $1 AND id = $2 AND webhook_id = $3 AND event_id = $4 AND attempt = $5 AND state = 'pending'",
    );
    let q = of_attempt(q, claimed)
        .bind(state)
        .bind(outcome.retry_at)
        .bind(outcome.status_code)
        .bind(outcome.error.clone())
        .bind(outcome.duration_ms)
        .bind(now);
    if tx.execute(&q).await? == 0 {
        return tx.commit().await;
    }
    let webhook = if outcome.succeeded {
        Query::new("UPDATE webhooks SET failing_since = NULL WHERE company_id = $1 AND id = $2 AND failing_since IS NOT NULL")
            .bind(claimed.company_id)
            .bind(claimed.webhook_id)
    } else {
        Query::new(
            "UPDATE webhooks SET failing_since = COALESCE(failing_since, $3), \
             enabled = CASE WHEN $4 OR COALESCE(failing_since, $3) <= $3 - $5 THEN FALSE ELSE enabled END \
             WHERE company_id = $1 AND id = $2",
        )
        .bind(claimed.company_id)
        .bind(claimed.webhook_id)
        .bind(now)
        .bind(outcome.disable)
        .bind(disable_after)
    };
    tx.execute(&webhook).await?;
    tx.commit().await
}
