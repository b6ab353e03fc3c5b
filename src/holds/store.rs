//! Hold SQL. Every statement takes the caller's company.
//!
//! The rule "no two live holds on one bay overlap" is the database's: an exclusion constraint
//! on PostgreSQL, a trigger on SQLite; a violation comes back as [`DbError::Overlap`].

use crate::appointments::timing::MAX_DURATION_MICROS;
use crate::db::{Db, DbError, Query, Tx, company_row};

#[derive(Debug, Clone, crate::db::FromRow)]
pub struct HoldRow {
    /// 0 in a hold about to be inserted.
    pub id: i64,
    pub shop_id: i64,
    pub bay_id: i64,
    pub start_at: i64,
    pub end_at: i64,
    pub hours: f64,
    pub expires_at: i64,
    pub state: String,
}

const COLUMNS: &str = "id, shop_id, bay_id, start_at, end_at, hours, expires_at, state";

pub async fn find(db: &Db, company_id: i64, id: i64) -> Result<Option<HoldRow>, DbError> {
    db.fetch_optional(&company_row(COLUMNS, "holds", company_id, id)).await
}

/// Retires the expired holds of a shop that overlap `[start, end)`, so they no longer count for
/// the overlap rule. On PostgreSQL the rows are locked in id order, so two writers retiring the
/// same holds queue instead of deadlocking.
pub async fn retire_expired(tx: &mut Tx, company_id: i64, shop_id: i64, start: i64, end: i64, now: i64) -> Result<u64, DbError> {
    let mut pick = Query::new(
        "SELECT id FROM holds WHERE company_id = $1 AND shop_id = $2 AND state = 'held' AND expires_at <= $3 \
         AND start_at < $4 AND end_at > $5 AND start_at > $6 ORDER BY id",
    );
    if matches!(tx, Tx::Postgres(_)) {
        pick.push(" FOR UPDATE");
    }
    let q = pick
        .wrapped("UPDATE holds SET state = 'expired' WHERE company_id = $1 AND id IN (", ")")
        .bind(company_id)
        .bind(shop_id)
        .bind(now)
        .bind(end)
        .bind(start)
        .bind(start - MAX_DURATION_MICROS);
    tx.execute(&q).await
}

/// The bays of a shop busy at some time of `[start, end)`: a live appointment or an unexpired
/// hold on them.
pub async fn busy_bays(tx: &mut Tx, company_id: i64, shop_id: i64, start: i64, end: i64, now: i64) -> Result<Vec<i64>, DbError> {
    let q = Query::new(
        "SELECT bay_id FROM appointments WHERE company_id = $1 AND shop_id = $2 AND bay_id IS NOT NULL AND deleted_at IS NULL \
           AND start_at < $3 AND end_at > $4 AND start_at > $5 \
         UNION SELECT bay_id FROM holds WHERE company_id = $1 AND shop_id = $2 AND state = 'held' AND expires_at > $6 \
           AND start_at < $3 AND end_at > $4 AND start_at > $5",
    )
    .bind(company_id)
    .bind(shop_id)
    .bind(end)
    .bind(start)
    .bind(start - MAX_DURATION_MICROS)
    .bind(now);
    Ok(tx.fetch_all::<(i64,)>(&q).await?.into_iter().map(|(id,)| id).collect())
}

/// Whether a live appointment occupies the bay at some time of `[start, end)`. Run after the
/// hold's insert: on PostgreSQL that statement waited for any transaction whose hold it
/// overlapped (a booking consuming one), so this read sees that booking's appointment.
pub async fn appointment_overlaps(tx: &mut Tx, company_id: i64, shop_id: i64, bay_id: i64, start: i64, end: i64) -> Result<bool, DbError> {
    let q = Query::new(
        "SELECT id FROM appointments WHERE company_id = $1 AND shop_id = $2 AND bay_id = $3 AND deleted_at IS NULL \
         AND start_at < $4 AND end_at > $5 AND start_at > $6 LIMIT 1",
    )
    .bind(company_id)
    .bind(shop_id)
    .bind(bay_id)
    .bind(end)
    .bind(start)
    .bind(start - MAX_DURATION_MICROS);
    Ok(tx.fetch_optional::<(i64,)>(&q).await?.is_some())
}

/// Queues the writers of holds on one bay (PostgreSQL; SQLite's single writer queues them
/// already). The exclusion constraint alone is the guarantee, but two transactions inserting
/// overlapping holds at once each wait in the constraint's check for the other's tuple: a
/// deadlock, which PostgreSQL breaks after a second by failing one of them. With the bay's row
/// locked first (`FOR NO KEY UPDATE`), the second writer waits here and then meets the committed
/// hold.
///
/// Returns whether the bay is still an active bay of `shop_id`: a bay moved to another shop, or
/// set inactive, since the request read its shop's bays takes no hold for this one (a bay's
/// update locks the row too, and a move refuses a bay with holds: see `bays::store::move_blocked`).
pub async fn lock_bay(tx: &mut Tx, company_id: i64, shop_id: i64, bay_id: i64) -> Result<bool, DbError> {
    let lock = if tx.is_sqlite() { "" } else { " FOR NO KEY UPDATE" };
    let q = Query::new(format!("SELECT shop_id, active FROM bays WHERE company_id = $1 AND id = $2{lock}")).bind(company_id).bind(bay_id);
    Ok(tx.fetch_optional::<(i64, bool)>(&q).await? == Some((shop_id, true)))
}

/// Inserts `h` as a live hold (its `id` and `state` are the database's) and returns the stored
/// row. `Err(DbError::Overlap)` when a live hold on the bay overlaps it.
pub async fn insert(tx: &mut Tx, company_id: i64, h: &HoldRow, now: i64) -> Result<HoldRow, DbError> {
    let q = Query::new(format!(
        "INSERT INTO holds (company_id, shop_id, bay_id, start_at, end_at, hours, expires_at, state, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, 'held', $8) RETURNING {COLUMNS}"
    ))
    .bind(company_id)
    .bind(h.shop_id)
    .bind(h.bay_id)
    .bind(h.start_at)
    .bind(h.end_at)
    .bind(h.hours)
    .bind(h.expires_at)
    .bind(now);
    tx.fetch_optional(&q).await?.ok_or(DbError::NoRow)
}

/// Ends a live, unexpired hold (`booked` or `released`); `false` when it is not live any more.
/// On PostgreSQL the row lock makes a second consumer wait and then find it gone.
pub async fn end(tx: &mut Tx, company_id: i64, id: i64, state: &'static str, now: i64) -> Result<bool, DbError> {
    let q = Query::new("UPDATE holds SET state = $3 WHERE company_id = $1 AND id = $2 AND state = 'held' AND expires_at > $4")
        .bind(company_id)
        .bind(id)
        .bind(state)
        .bind(now);
    Ok(tx.execute(&q).await? == 1)
}

/// Deletes up to `batch` holds that expired before `before` (kept until then so a late booking
/// learns its hold expired); returns how many.
pub async fn purge(db: &Db, before: i64, batch: i64) -> Result<u64, DbError> {
    let q = Query::new("DELETE FROM holds WHERE id IN (SELECT id FROM holds WHERE expires_at < $1 LIMIT $2)").bind(before).bind(batch);
    db.execute(&q).await
}
