//! Event SQL: the outbox insert made in every writing transaction, the feed, and retention.
//!
//! The one place where the two backends need different text: on PostgreSQL the feed stops at
//! the oldest transaction still running (see migration 0008); SQLite's single writer hands out
//! ids in commit order and needs no horizon.

use super::cursor::Position;
use crate::db::{Db, DbError, FromRow, Query, ShopFilter, Tx};

/// An event recorded by a change, not yet written.
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub kind: &'static str,
    pub shop_id: Option<i64>,
    /// The resource as JSON text.
    pub data: String,
}

#[derive(Debug, FromRow)]
pub struct EventRow {
    pub xid: i64,
    pub id: i64,
    pub kind: String,
    pub shop_id: Option<i64>,
    pub data: String,
    pub created_at: i64,
}

impl EventRow {
    pub fn position(&self) -> Position {
        Position { xid: self.xid, id: self.id }
    }
}

/// On PostgreSQL, only events of transactions older than every running one are visible.
fn horizon(db_is_sqlite: bool) -> &'static str {
    if db_is_sqlite { "" } else { " AND xid < CAST(CAST(pg_snapshot_xmin(pg_current_snapshot()) AS TEXT) AS BIGINT)" }
}

/// Writes `events` of `company_id` in one statement, inside the change's transaction; returns
/// their rows (ids included).
pub async fn insert(tx: &mut Tx, company_id: i64, events: &[NewEvent], at: i64) -> Result<Vec<EventRow>, DbError> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    let mut rows = Vec::new();
    for q in insert_queries(company_id, events.to_vec(), events.len(), at) {
        rows.extend(tx.fetch_all::<EventRow>(&q).await?);
    }
    Ok(rows)
}

/// The start of every events insert, before its `VALUES` lists.
pub const INSERT_EVENTS: &str = "INSERT INTO events (company_id, type, shop_id, data, created_at) VALUES ";

/// The `VALUES` lists of `events`, `chunk` rows each (`(...), (...)`), their data moved into
/// the lists (an import records 100,000 events: one copy of their text is enough). A list
/// follows [`INSERT_EVENTS`]: in [`insert_returning`], or with other changes' lists in the one
/// insert of a shared statement.
pub fn value_lists(company_id: i64, events: Vec<NewEvent>, chunk: usize, at: i64) -> Vec<Query> {
    let mut lists = Vec::new();
    let mut events = events.into_iter().peekable();
    while events.peek().is_some() {
        let mut q = Query::new("");
        for (i, e) in events.by_ref().take(chunk.max(1)).enumerate() {
            q.push(if i == 0 { "(" } else { ", (" });
            q.push_bind(company_id).push(", ").push_bind(e.kind).push(", ").push_bind(e.shop_id).push(", ");
            q.push_bind(e.data).push(", ").push_bind(at).push(")");
        }
        lists.push(q);
    }
    lists
}

/// The insert of a [`value_lists`] list, returning its rows.
pub fn insert_returning(values: Query) -> Query {
    values.wrapped(INSERT_EVENTS, &format!(" RETURNING {COLUMNS}"))
}

/// The inserts of `events`, `chunk` rows each, returning their rows.
pub fn insert_queries(company_id: i64, events: Vec<NewEvent>, chunk: usize, at: i64) -> Vec<Query> {
    value_lists(company_id, events, chunk, at).into_iter().map(insert_returning).collect()
}

/// What a page of the feed may contain.
#[derive(Debug, Clone, Default)]
pub struct FeedFilter {
    /// The shops the caller may see: company-wide events (no shop) only for every shop.
    pub shops: ShopFilter,
    /// Exact types, or prefixes (`appointment.` for `appointment.*`); empty: every type.
    pub types: Vec<TypeMatch>,
    /// Whether `api_key.*` events are shown: only to keys that may read API keys (an admin key
    /// without a shop list), as `GET /api/v1/api_keys`.
    pub key_events: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TypeMatch {
    Exact(String),
    Prefix(String),
}

const COLUMNS: &str = "xid, id, type AS kind, shop_id, data, created_at";

/// Up to `limit` visible events of the company after `after`, in feed order.
pub async fn page(db: &Db, company_id: i64, after: Position, filter: &FeedFilter, limit: i64) -> Result<Vec<EventRow>, DbError> {
    let mut q = Query::new(format!("SELECT {COLUMNS} FROM events WHERE company_id = $1 AND (xid, id) > ($2, $3)"))
        .bind(company_id)
        .bind(after.xid)
        .bind(after.id);
    if let ShopFilter::Only(_) = filter.shops {
        // `shop_id IN (...)` is never true for a company-wide event (no shop).
        filter.shops.push_sql(&mut q, "shop_id");
    }
    if !filter.key_events {
        let key_types: Vec<&str> = super::TYPES.iter().copied().filter(|t| t.starts_with("api_key.")).collect();
        q.push(" AND type NOT IN ").push_in_list(&key_types);
    }
    if !filter.types.is_empty() {
        q.push(" AND (");
        for (i, t) in filter.types.iter().enumerate() {
            q.push(if i == 0 { "" } else { " OR " });
            match t {
                TypeMatch::Exact(name) => q.push("type = ").push_bind(name.as_str()),
                TypeMatch::Prefix(prefix) => q.push("type LIKE ").push_bind(crate::db::like_prefix(prefix)).push(" ESCAPE '\\'"),
            };
        }
        q.push(")");
    }
    q.push(horizon(db.is_sqlite())).push(" ORDER BY xid, id LIMIT ").push_bind(limit);
    db.fetch_all(&q).await
}

/// Where a stream without a cursor starts: the position just before the first event that is
/// not visible yet, and (PostgreSQL) the transactions above it that had committed already. A
/// stream that starts there and skips those sees exactly the events committed after it connected.
pub async fn tail(db: &Db, company_id: i64) -> Result<(Position, Option<CommittedBefore>), DbError> {
    if db.is_sqlite() {
        // The one writer numbers events in commit order: the last one is the start.
        let q = Query::new("SELECT CAST(COALESCE(MAX(id), 0) AS BIGINT) FROM events WHERE company_id = $1").bind(company_id);
        let (id,): (i64,) = db.fetch_optional(&q).await?.ok_or(DbError::NoRow)?;
        return Ok((Position { xid: 0, id }, None));
    }
    // Everything below the horizon (xmin) is already visible. At or above it, the transactions
    // of the snapshot's in-progress list, and those from xmax on, had not committed.
    let q = Query::new(
        "SELECT CAST(CAST(pg_snapshot_xmin(s) AS TEXT) AS BIGINT), CAST(CAST(pg_snapshot_xmax(s) AS TEXT) AS BIGINT), \
         COALESCE((SELECT string_agg(CAST(x AS TEXT), ',') FROM pg_snapshot_xip(s) AS x), '') FROM (SELECT pg_current_snapshot() AS s) AS now",
    );
    let (xmin, xmax, running): (i64, i64, String) = db.fetch_optional(&q).await?.ok_or(DbError::NoRow)?;
    let running = running.split(',').filter_map(|x| x.parse().ok()).collect();
    Ok((Position { xid: xmin - 1, id: i64::MAX }, Some(CommittedBefore { xmax, running })))
}

/// The transactions at or above a stream's starting horizon that had committed when it connected
/// (PostgreSQL): their events are older than the stream, and it skips them. Once a stream is past
/// `xmax`, nothing more is skipped.
#[derive(Debug, Clone)]
pub struct CommittedBefore {
    /// The first transaction that had not started.
    pub xmax: i64,
    /// The transactions below `xmax` that were still running.
    pub running: Vec<i64>,
}

impl CommittedBefore {
    /// Whether transaction `xid` (at or above the horizon) had committed when the stream began.
    pub fn contains(&self, xid: i64) -> bool {
        xid < self.xmax && !self.running.contains(&xid)
    }
}

/// Whether `after` lies in the part of the company's feed that retention has deleted.
pub async fn is_purged(db: &Db, company_id: i64, after: Position) -> Result<bool, DbError> {
    let q = Query::new("SELECT xid, id FROM event_purges WHERE company_id = $1").bind(company_id);
    let purged: Option<(i64, i64)> = db.fetch_optional(&q).await?;
    Ok(purged.is_some_and(|(xid, id)| after <= Position { xid, id }))
}

/// Deletes up to `batch` events created before `before` (oldest first), recording for each
/// company how far its feed is now deleted. Returns how many were deleted.
pub async fn purge(db: &Db, before: i64, batch: i64) -> Result<u64, DbError> {
    let doomed = if db.is_sqlite() {
        // The single writer hands ids out in commit order: the oldest events are the first ids
        // (an event a little younger among them waits for the next run).
        "SELECT company_id, xid, id FROM (SELECT company_id, xid, id, created_at FROM events ORDER BY id LIMIT $2) AS first \
         WHERE created_at < $1"
    } else {
        // Through the BRIN index on created_at: only the block ranges of old events are read.
        "SELECT company_id, xid, id FROM events WHERE created_at < $1 ORDER BY created_at LIMIT $2"
    };
    let q = Query::new(format!(
        "SELECT company_id, CAST(MAX(xid) AS BIGINT), CAST(MAX(id) AS BIGINT) FROM ({doomed}) AS doomed GROUP BY company_id"
    ))
    .bind(before)
    .bind(batch);
    let companies: Vec<(i64, i64, i64)> = db.fetch_all(&q).await?;
    if companies.is_empty() {
        return Ok(0);
    }
    let mut tx = db.begin().await?;
    let mut deleted = 0;
    for (company_id, xid, id) in companies {
        // Everything of the company up to that position goes, and the mark records it.
        let q = Query::new("DELETE FROM events WHERE company_id = $1 AND (xid, id) <= ($2, $3) AND created_at < $4")
            .bind(company_id)
            .bind(xid)
            .bind(id)
            .bind(before);
        deleted += tx.execute(&q).await?;
        let mark = Query::new(
            "INSERT INTO event_purges (company_id, xid, id) VALUES ($1, $2, $3) ON CONFLICT (company_id) DO UPDATE \
             SET xid = excluded.xid, id = excluded.id WHERE (event_purges.xid, event_purges.id) < (excluded.xid, excluded.id)",
        )
        .bind(company_id)
        .bind(xid)
        .bind(id);
        tx.execute(&mark).await?;
    }
    tx.commit().await?;
    Ok(deleted)
}
