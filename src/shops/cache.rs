//! A replica's cache of shops with their bays. Every appointment write reads its shop (the time
//! zone localises its dates, the bays resolve its `column`): on PostgreSQL that read was a third
//! of the server's CPU per `POST /api/v1/appointments` (bench/RESULTS.md, eleventh session).
//!
//! A change to a shop or to one of its bays announces its company as it commits
//! ([`CHANNEL`]), and every replica drops that company's entries; the replica that made the
//! change drops them as soon as it committed. See [`crate::db::noticed`] for when the cache is
//! trusted at all.

use std::sync::Arc;

use super::store::{self, ShopRow};
use crate::db::{
    Db, DbError, Tx,
    noticed::{self, NoticedCache, Subscription},
};

/// The PostgreSQL channel on which shop and bay changes are announced (payload: the company id).
pub const CHANNEL: &str = "autoshop_shop_changed";

/// A shop of a company, `(company_id, shop_id)`, with the id and title of each of its bays.
pub type ShopCache = NoticedCache<(i64, i64), (ShopRow, Vec<(i64, String)>)>;

/// [`store::find_with_bays`], from the cache when it holds the shop.
pub async fn find_with_bays(db: &Db, cache: &ShopCache, company_id: i64, id: i64) -> Result<Option<(ShopRow, Vec<(i64, String)>)>, DbError> {
    if let Some(found) = cache.get(&(company_id, id)) {
        return Ok(Some(found));
    }
    let generation = cache.generation();
    let found = store::find_with_bays(db, company_id, id).await?;
    if let Some(found) = &found {
        cache.put((company_id, id), found.clone(), generation);
    }
    Ok(found)
}

/// Announces, when `tx` commits, that a shop or bay of `company_id` changed.
pub async fn announce_change(tx: &mut Tx, company_id: i64) -> Result<(), DbError> {
    tx.notify(CHANNEL, company_id.to_string()).await
}

/// Drops every shop of `company_id`: call it once a change to one of them committed.
pub fn forget_company(cache: &ShopCache, company_id: i64) {
    cache.forget_where(|(company, _), _| *company == company_id);
}

/// Keeps `cache` in step with the shop and bay changes of every replica (see
/// [`noticed::listen`]).
pub fn changes(cache: Arc<ShopCache>) -> Subscription {
    noticed::subscription(CHANNEL, cache, |cache, payload| payload.parse().map(|company| forget_company(cache, company)).is_ok())
}
