//! The key lookup behind every authenticated request.

use crate::db::{Db, DbError, Query};

#[derive(crate::db::FromRow)]
pub struct KeyRow {
    pub id: i64,
    pub company_id: i64,
    pub role: String,
    pub shop_ids: Option<String>,
    pub key_hash: String,
    pub last_used_at: Option<i64>,
}

/// The unrevoked key whose SHA-256 is `hash` (hex).
pub async fn find_unrevoked(db: &Db, hash: &str) -> Result<Option<KeyRow>, DbError> {
    let q = Query::new(
        "SELECT id, company_id, role, shop_ids, key_hash, last_used_at FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL",
    )
    .bind(hash);
    db.fetch_optional(&q).await
}

pub async fn record_use(db: &Db, company_id: i64, id: i64, at: i64) -> Result<u64, DbError> {
    let q = Query::new("UPDATE api_keys SET last_used_at = $1 WHERE company_id = $2 AND id = $3").bind(at).bind(company_id).bind(id);
    db.execute(&q).await
}
