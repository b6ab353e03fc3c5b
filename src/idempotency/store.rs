//! Idempotency-key SQL: look up a stored answer, store one inside the write's transaction, purge
//! expired ones.

use crate::db::{Db, DbError, FromRow, Query};

/// Whose key it is: the company, the API key, and the client's `Idempotency-Key`.
#[derive(Debug, Clone)]
pub struct KeyScope {
    pub company_id: i64,
    pub api_key_id: i64,
    pub key: String,
}

impl KeyScope {
    fn bind(&self, q: Query) -> Query {
        q.bind(self.company_id).bind(self.api_key_id).bind(self.key.as_str())
    }
}

const WHERE_KEY: &str = "company_id = $1 AND api_key_id = $2 AND idem_key = $3";

#[derive(Debug, FromRow)]
struct StoredRow {
    fingerprint: String,
    status: Option<i64>,
    location: Option<String>,
    body: Option<String>,
}

impl StoredRow {
    fn into_response(self) -> StoredResponse {
        StoredResponse {
            status: self.status.and_then(|s| u16::try_from(s).ok()).unwrap_or(200),
            location: self.location,
            body: self.body.unwrap_or_default(),
        }
    }
}

/// A response kept for replay.
#[derive(Debug, Clone)]
pub struct StoredResponse {
    pub status: u16,
    pub location: Option<String>,
    pub body: String,
}

#[derive(Debug)]
pub enum Reservation {
    /// This request runs, holding its key until the claim is dropped.
    Reserved(super::claims::Claim),
    /// The key's first request succeeded: answer with its response.
    Replay(StoredResponse),
    /// The key was used with another method, path or body.
    Mismatch,
    /// The key's first request is still running.
    Running,
}

/// Stores the response inside the write's transaction, for a key claimed in memory
/// ([`super::claims`]): inserts the 'done' row, or turns an expired one into it (or a 'running'
/// row left by a release that reserved keys in rows, whose `token` and `locked_until` columns
/// are kept empty now). It changes no row when another request stored an answer for the key
/// first: the write must not commit.
pub fn record_query(scope: &KeyScope, fingerprint: &str, response: &StoredResponse, expires_at: i64, now: i64) -> Query {
    scope
        .bind(Query::new(
            "INSERT INTO idempotency_keys (company_id, api_key_id, idem_key, fingerprint, state, token, locked_until, expires_at, status, location, body) \
             VALUES ($1, $2, $3, $4, 'done', '', 0, $5, $6, $7, $8) \
             ON CONFLICT (company_id, api_key_id, idem_key) DO UPDATE SET fingerprint = excluded.fingerprint, state = 'done', \
             token = '', locked_until = 0, expires_at = excluded.expires_at, status = excluded.status, \
             location = excluded.location, body = excluded.body \
             WHERE idempotency_keys.state <> 'done' OR idempotency_keys.expires_at <= $9",
        ))
        .bind(fingerprint)
        .bind(expires_at)
        .bind(i64::from(response.status))
        .bind(response.location.clone())
        .bind(response.body.as_str())
        .bind(now)
}

/// The answer stored for `scope`, if any and still kept: a replay, or a mismatch when it was
/// for another request.
pub async fn stored_answer(db: &Db, scope: &KeyScope, fingerprint: &str, now: i64) -> Result<Option<Reservation>, DbError> {
    let q = scope
        .bind(Query::new(format!(
            "SELECT fingerprint, status, location, body FROM idempotency_keys \
             WHERE {WHERE_KEY} AND state = 'done' AND expires_at > $4"
        )))
        .bind(now);
    let row: Option<StoredRow> = db.fetch_optional(&q).await?;
    Ok(row.map(|row| if row.fingerprint != fingerprint { Reservation::Mismatch } else { Reservation::Replay(row.into_response()) }))
}

/// Deletes up to `batch` expired keys; returns how many.
pub async fn purge(db: &Db, now: i64, batch: i64) -> Result<u64, DbError> {
    let q = Query::new(
        "DELETE FROM idempotency_keys WHERE (company_id, api_key_id, idem_key) IN \
         (SELECT company_id, api_key_id, idem_key FROM idempotency_keys WHERE expires_at <= $1 LIMIT $2)",
    )
    .bind(now)
    .bind(batch);
    db.execute(&q).await
}
