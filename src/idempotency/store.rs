//! Idempotency-key SQL: reserve a key, complete it inside the write's transaction, release it
//! after a failure, purge expired ones.

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
    state: String,
    fingerprint: String,
    locked_until: i64,
    status: Option<i64>,
    location: Option<String>,
    body: Option<String>,
    expires_at: i64,
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
    /// This request runs; `token` identifies its reservation.
    Reserved { token: String },
    /// The key's first request succeeded: answer with its response.
    Replay(StoredResponse),
    /// The key was used with another method, path or body.
    Mismatch,
    /// The key's first request is still running.
    Running,
}

/// Reserves `scope` for a request with `fingerprint`, or says why not. A reservation older
/// than its lease (its request's process died) is taken over; an expired key starts afresh.
pub async fn reserve(db: &Db, scope: &KeyScope, fingerprint: &str, now: i64, lease_until: i64, expires_at: i64) -> Result<Reservation, DbError> {
    let token = random_token();
    let lock = if db.is_sqlite() { "" } else { " FOR UPDATE" };
    // Two first requests can both find no row: the one whose insert loses looks again.
    for _ in 0..3 {
        let mut tx = db.begin().await?;
        let select = Query::new(format!(
            "SELECT state, fingerprint, locked_until, status, location, body, expires_at FROM idempotency_keys WHERE {WHERE_KEY}{lock}"
        ));
        let found: Option<StoredRow> = tx.fetch_optional(&scope.bind(select)).await?;
        let take = match found {
            None => {
                let insert = scope
                    .bind(Query::new(
                        "INSERT INTO idempotency_keys (company_id, api_key_id, idem_key, fingerprint, state, token, locked_until, expires_at) \
                         VALUES ($1, $2, $3, $4, 'running', $5, $6, $7)",
                    ))
                    .bind(fingerprint)
                    .bind(token.as_str())
                    .bind(lease_until)
                    .bind(expires_at);
                match tx.execute(&insert).await {
                    Ok(_) => {
                        tx.commit().await?;
                        return Ok(Reservation::Reserved { token });
                    }
                    Err(DbError::Unique) => continue,
                    Err(e) => return Err(e),
                }
            }
            Some(row) if row.expires_at <= now => true,
            Some(row) if row.fingerprint != fingerprint => return Ok(Reservation::Mismatch),
            Some(row) if row.state == "done" => return Ok(Reservation::Replay(row.into_response())),
            Some(row) if row.locked_until > now => return Ok(Reservation::Running),
            Some(_) => true,
        };
        if take {
            let update = scope
                .bind(Query::new(format!(
                    "UPDATE idempotency_keys SET fingerprint = $4, state = 'running', token = $5, locked_until = $6, expires_at = $7, \
                     status = NULL, location = NULL, body = NULL WHERE {WHERE_KEY}"
                )))
                .bind(fingerprint)
                .bind(token.as_str())
                .bind(lease_until)
                .bind(expires_at);
            tx.execute(&update).await?;
            tx.commit().await?;
            return Ok(Reservation::Reserved { token });
        }
    }
    Ok(Reservation::Running)
}

/// Stores the response inside the write's transaction: it changes one row when the reservation
/// is still this request's. Otherwise (its lease ran out and a retry took it over) the write
/// must not commit.
pub fn complete_query(scope: &KeyScope, token: &str, response: &StoredResponse) -> Query {
    scope
        .bind(Query::new(format!(
            "UPDATE idempotency_keys SET state = 'done', locked_until = 0, status = $5, location = $6, body = $7 \
             WHERE {WHERE_KEY} AND token = $4 AND state = 'running'"
        )))
        .bind(token)
        .bind(i64::from(response.status))
        .bind(response.location.clone())
        .bind(response.body.as_str())
}

/// [`complete_query`] for a key claimed in memory ([`super::claims`]): inserts the 'done' row, or
/// turns an expired one into it. It changes no row when another request stored an answer for
/// the key first: the write must not commit.
pub fn record_query(scope: &KeyScope, fingerprint: &str, token: &str, response: &StoredResponse, expires_at: i64, now: i64) -> Query {
    scope
        .bind(Query::new(
            "INSERT INTO idempotency_keys (company_id, api_key_id, idem_key, fingerprint, state, token, locked_until, expires_at, status, location, body) \
             VALUES ($1, $2, $3, $4, 'done', $5, 0, $6, $7, $8, $9) \
             ON CONFLICT (company_id, api_key_id, idem_key) DO UPDATE SET fingerprint = excluded.fingerprint, state = 'done', \
             token = excluded.token, locked_until = 0, expires_at = excluded.expires_at, status = excluded.status, \
             location = excluded.location, body = excluded.body \
             WHERE idempotency_keys.state <> 'done' OR idempotency_keys.expires_at <= $10",
        ))
        .bind(fingerprint)
        .bind(token)
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
            "SELECT state, fingerprint, locked_until, status, location, body, expires_at FROM idempotency_keys \
             WHERE {WHERE_KEY} AND state = 'done' AND expires_at > $4"
        )))
        .bind(now);
    let row: Option<StoredRow> = db.fetch_optional(&q).await?;
    Ok(row.map(|row| if row.fingerprint != fingerprint { Reservation::Mismatch } else { Reservation::Replay(row.into_response()) }))
}

/// Frees a reservation whose request wrote nothing, so a corrected retry can use the key.
pub async fn release(db: &Db, scope: &KeyScope, token: &str) -> Result<(), DbError> {
    let q = scope.bind(Query::new(format!("DELETE FROM idempotency_keys WHERE {WHERE_KEY} AND token = $4 AND state = 'running'"))).bind(token);
    db.execute(&q).await.map(drop)
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

pub fn random_token() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
