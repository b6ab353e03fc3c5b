//! The reads of an availability search.

use crate::{
    appointments::timing::MAX_DURATION_MICROS,
    db::{Db, DbError, Query},
};

/// The busy times of a shop's bays overlapping `[from, to)`: live appointments and unexpired
/// holds, as `(bay_id, start, end)`. One statement, served by the `(company, shop, start)` indexes.
pub async fn busy_times(db: &Db, company_id: i64, shop_id: i64, from: i64, to: i64, now: i64) -> Result<Vec<(i64, i64, i64)>, DbError> {
    let q = Query::new(
        "SELECT bay_id, start_at, end_at FROM appointments WHERE company_id = $1 AND shop_id = $2 AND bay_id IS NOT NULL \
           AND deleted_at IS NULL AND start_at < $3 AND end_at > $4 AND start_at > $5 \
         UNION ALL SELECT bay_id, start_at, end_at FROM holds WHERE company_id = $1 AND shop_id = $2 AND state = 'held' \
           AND expires_at > $6 AND start_at < $3 AND end_at > $4 AND start_at > $5",
    )
    .bind(company_id)
    .bind(shop_id)
    .bind(to)
    .bind(from)
    .bind(from - MAX_DURATION_MICROS)
    .bind(now);
    db.fetch_all(&q).await
}
