//! A running request holds its key in memory, in the server that runs it, instead of in a
//! committed row: claiming a key costs no write (and on SQLite no fsync) of its own. The answer
//! is stored by the request's own transaction, as a row that only ever exists 'done'; a crash
//! forgets the claims together with the requests that held them, so a retry runs at once.
//!
//! Two servers (PostgreSQL replicas) do not see each other's claims: both may run the write, and
//! the one whose transaction stores its answer second changes no row and does not commit
//! ([`super::store::record_query`]); its caller gets the first one's answer instead.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use super::store::{self, KeyScope, Reservation};
use crate::db::{Db, DbError};

/// (company, API key, Idempotency-Key) → fingerprint of the running request.
type ClaimKey = (i64, i64, String);

/// The keys this server's running requests hold.
#[derive(Debug, Default)]
pub struct Claims {
    running: Mutex<HashMap<ClaimKey, String>>,
}

/// A running request's hold on its key, let go when dropped: after the request's commit, or
/// when the request is abandoned (timed out, failed).
#[derive(Debug)]
pub struct Claim {
    claims: Arc<Claims>,
    key: ClaimKey,
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.claims.running.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.key);
    }
}

/// Claims `scope` for a request with `fingerprint`, or says why not.
pub async fn reserve(claims: &Arc<Claims>, db: &Db, scope: &KeyScope, fingerprint: &str, now: i64) -> Result<Reservation, DbError> {
    let key = (scope.company_id, scope.api_key_id, scope.key.clone());
    {
        let mut running = claims.running.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(held) = running.get(&key) {
            return Ok(if held == fingerprint { Reservation::Running } else { Reservation::Mismatch });
        }
        running.insert(key.clone(), fingerprint.to_owned());
    }
    let claim = Claim { claims: claims.clone(), key };
    if !db.is_sqlite() {
        // No look before the write on PostgreSQL (a round trip on every keyed request): a repeat
        // of a finished request runs, finds the stored answer when its write tries to store its
        // own, rolls back, and answers the stored one ([`super::settle`]).
        return Ok(Reservation::Reserved(claim));
    }
    // A request that completed this key committed before it let go of its claim, so reading
    // after claiming sees its answer.
    match store::stored_answer(db, scope, fingerprint, now).await? {
        Some(answer) => Ok(answer),
        None => Ok(Reservation::Reserved(claim)),
    }
}
