use crate::{
    auth::{REVOCATION_CHANNEL, Role, generate_key},
    db::{Db, DbError, Query, Reader, Tx, company_row, now_micros, page::{PageRequest, Sort, fetch_page}},
};

/// Sortable fields and their columns.
pub const SORTS: &[Sort] = &[("created_at", "created_at")];

#[derive(Debug, Clone, crate::db::FromRow)]
pub struct KeyRecordRow {
    pub id: i64,
    pub name: String,
    pub role: String,
    pub shop_ids: Option<String>,
    pub key_prefix: String,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

const COLUMNS: &str = "id, name, role, shop_ids, key_prefix, created_at, last_used_at, revoked_at";

pub async fn list(db: &Db, company_id: i64, page: &PageRequest) -> Result<(Vec<KeyRecordRow>, i64), DbError> {
    let q = Query::new("FROM api_keys WHERE company_id = $1").bind(company_id);
    fetch_page(db, COLUMNS, &q, page, "id").await
}

pub async fn find(from: impl Into<Reader<'_>>, company_id: i64, id: i64) -> Result<Option<KeyRecordRow>, DbError> {
    from.into().fetch_optional(company_row(COLUMNS, "api_keys", company_id, id)).await
}

fn insert_query(company_id: i64, name: &str, role: Role, shops: Option<&[i64]>) -> (Query, String) {
    let (key, hash) = generate_key();
    let shop_ids = shops.map(|ids| ids.iter().map(i64::to_string).collect::<Vec<_>>().join(","));
    let q = Query::new(format!(
        "INSERT INTO api_keys (company_id, name, role, shop_ids, key_hash, key_prefix, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING {COLUMNS}"
    ))
    .bind(company_id)
    .bind(name)
    .bind(role.as_str())
    .bind(shop_ids)
    .bind(hash)
    .bind(key[..12].to_owned())
    .bind(now_micros());
    (q, key)
}

/// Creates a key; returns its record and the key itself (the only time it exists in clear).
pub async fn insert(tx: &mut Tx, company_id: i64, name: &str, role: Role, shops: Option<&[i64]>) -> Result<(KeyRecordRow, String), DbError> {
    let (q, key) = insert_query(company_id, name, role, shops);
    let row = tx.fetch_optional(&q).await?.ok_or(DbError::NoRow)?;
    Ok((row, key))
}

/// Outcome of [`revoke`].
pub enum Revocation {
    /// Revoked by this call: the record afterwards.
    Revoked(KeyRecordRow),
    /// Revoked before; nothing changed.
    Already,
    NotFound,
}

/// Locks the revoking key `by` and the key `id` to revoke, in id order, and answers whether `by`
/// is still unrevoked. Of two admin keys revoking each other at once, the second to lock finds
/// itself revoked (and must stop), so the company keeps an admin key. With `id == by`, what a
/// key creating another checks: that it is not revoked meanwhile.
pub async fn lock_revoker(tx: &mut Tx, company_id: i64, id: i64, by: i64) -> Result<bool, DbError> {
    let both = Query::new("SELECT id, revoked_at FROM api_keys WHERE company_id = $1 AND id IN ($2, $3) ORDER BY id")
        .bind(company_id)
        .bind(id)
        .bind(by);
    let keys: Vec<(i64, Option<i64>)> = Reader::Locked(tx).fetch_all(both).await?;
    Ok(keys.iter().any(|(key, revoked)| *key == by && revoked.is_none()))
}

/// Revokes a key of the company. The revocation and its notice to every replica's key cache
/// commit together.
pub async fn revoke(tx: &mut Tx, company_id: i64, id: i64) -> Result<Revocation, DbError> {
    let q = Query::new(format!(
        "UPDATE api_keys SET revoked_at = $3 WHERE company_id = $1 AND id = $2 AND revoked_at IS NULL RETURNING {COLUMNS}"
    ))
    .bind(company_id)
    .bind(id)
    .bind(now_micros());
    if let Some(row) = tx.fetch_optional::<KeyRecordRow>(&q).await? {
        tx.notify_with_commit(REVOCATION_CHANNEL, id.to_string()).await?;
        return Ok(Revocation::Revoked(row));
    }
    let q = Query::new("SELECT id FROM api_keys WHERE company_id = $1 AND id = $2").bind(company_id).bind(id);
    Ok(if tx.fetch_optional::<(i64,)>(&q).await?.is_some() { Revocation::Already } else { Revocation::NotFound })
}

/// Inserts a company; returns its id.
pub async fn insert_company(tx: &mut Tx, name: &str) -> Result<i64, DbError> {
    let q = Query::new("INSERT INTO companies (name, created_at) VALUES ($1, $2) RETURNING id").bind(name).bind(now_micros());
    let (id,): (i64,) = tx.fetch_optional(&q).await?.ok_or(DbError::NoRow)?;
    Ok(id)
}

pub async fn company_count(db: &Db) -> Result<i64, DbError> {
    let (n,): (i64,) = db.fetch_optional(&Query::new("SELECT COUNT(*) FROM companies")).await?.unwrap_or((0,));
    Ok(n)
}
