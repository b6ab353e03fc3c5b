use crate::{
    auth::{REVOCATION_CHANNEL, Role, generate_key},
    db::{Db, DbError, Query, Tx, now_micros, page::{PageRequest, Sort, fetch_page}},
};

/// Sortable fields and their columns.
pub const SORTS: &[Sort] = &[("created_at", "created_at")];

#[derive(Debug, crate::db::FromRow)]
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

pub async fn find(db: &Db, company_id: i64, id: i64) -> Result<Option<KeyRecordRow>, DbError> {
    let q = Query::new(format!("SELECT {COLUMNS} FROM api_keys WHERE company_id = $1 AND id = $2")).bind(company_id).bind(id);
    db.fetch_optional(&q).await
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
pub async fn insert(db: &Db, company_id: i64, name: &str, role: Role, shops: Option<&[i64]>) -> Result<(KeyRecordRow, String), DbError> {
    let (q, key) = insert_query(company_id, name, role, shops);
    let row = db.write_fetch_optional(&q).await?.ok_or(DbError::NoRow)?;
    Ok((row, key))
}

pub async fn insert_in(tx: &mut Tx, company_id: i64, name: &str, role: Role) -> Result<String, DbError> {
    let (q, key) = insert_query(company_id, name, role, None);
    tx.execute(&q).await?;
    Ok(key)
}

/// Revokes a key of the company. `false` when no such key exists. The revocation and its notice
/// to every replica's key cache commit together.
pub async fn revoke(db: &Db, company_id: i64, id: i64) -> Result<bool, DbError> {
    let mut tx = db.begin().await?;
    let q = Query::new("UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $3) WHERE company_id = $1 AND id = $2")
        .bind(company_id)
        .bind(id)
        .bind(now_micros());
    let found = tx.execute(&q).await? > 0;
    if found {
        tx.notify(REVOCATION_CHANNEL, id.to_string()).await?;
    }
    tx.commit().await?;
    Ok(found)
}

/// Creates a company and its first admin key, atomically.
pub async fn create_company(db: &Db, name: &str) -> Result<(i64, String), DbError> {
    let mut tx = db.begin().await?;
    let (id,): (i64,) = tx
        .fetch_optional(&Query::new("INSERT INTO companies (name, created_at) VALUES ($1, $2) RETURNING id").bind(name).bind(now_micros()))
        .await?
        .ok_or(DbError::NoRow)?;
    let key = insert_in(&mut tx, id, "bootstrap admin", Role::Admin).await?;
    tx.commit().await?;
    Ok((id, key))
}

pub async fn company_count(db: &Db) -> Result<i64, DbError> {
    let (n,): (i64,) = db.fetch_optional(&Query::new("SELECT COUNT(*) FROM companies")).await?.unwrap_or((0,));
    Ok(n)
}
