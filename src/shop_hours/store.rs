use crate::{
    db::{Db, DbError, Query, ShopFilter, Tx},
};

use super::model::Interval;

#[derive(Debug, crate::db::FromRow)]
pub struct HoursRow {
    pub shop_id: i64,
    pub day: i64,
    pub open_minute: i64,
    pub close_minute: i64,
}

pub async fn for_shops(db: &Db, company_id: i64, shops: &ShopFilter) -> Result<Vec<HoursRow>, DbError> {
    db.fetch_all(&shops.rows("shop_id, day, open_minute, close_minute", "shop_hours", company_id, "shop_id, day, open_minute")).await
}

/// Replaces a shop's week inside the caller's transaction: either the whole new week is stored
/// or nothing changes.
///
/// The shop's row is locked first ([`Tx::lock_row`]), so weeks written at once replace each
/// other in turn: without it, on PostgreSQL a second write's `DELETE`, waiting on the first's
/// deleted rows, ran on a snapshot that missed the first's inserted ones, and the shop kept
/// both weeks.
pub async fn replace_week(tx: &mut Tx, company_id: i64, shop_id: i64, week: &[Interval]) -> Result<(), DbError> {
    tx.lock_row("shops", company_id, shop_id).await?;
    tx.execute(&Query::new("DELETE FROM shop_hours WHERE company_id = $1 AND shop_id = $2").bind(company_id).bind(shop_id))
        .await?;
    for (day, open, close) in week {
        let q = Query::new(
            "INSERT INTO shop_hours (company_id, shop_id, day, open_minute, close_minute) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(company_id)
        .bind(shop_id)
        .bind(*day)
        .bind(*open)
        .bind(*close);
        tx.execute(&q).await?;
    }
    Ok(())
}
