//! On SQLite every writer is in this process, so a running request holds its key in memory
//! instead of in a committed row: claiming a key costs no write (and no fsync) of its own. The
//! answer is still stored by the request's own transaction, as a row that only ever exists
//! 'done'; a crash forgets the claims together with the requests that held them.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{LazyLock, Mutex},
};

use super::store::{self, KeyScope, Reservation};
use crate::db::{Db, DbError};

/// (database file, company, API key, Idempotency-Key) → fingerprint of the running request.
type ClaimKey = (PathBuf, i64, i64, String);

static RUNNING: LazyLock<Mutex<HashMap<ClaimKey, String>>> = LazyLock::new(Default::default);

/// A running request's hold on its key, let go when dropped: after the request's commit, or
/// when the request is abandoned (timed out, failed).
pub struct Claim {
    key: ClaimKey,
}

impl Drop for Claim {
    fn drop(&mut self) {
        RUNNING.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.key);
    }
}

/// Claims `scope` for a request with `fingerprint`, or says why not.
pub async fn reserve(db: &Db, file: &Path, scope: &KeyScope, fingerprint: &str, now: i64) -> Result<(Reservation, Option<Claim>), DbError> {
    let key = (file.to_owned(), scope.company_id, scope.api_key_id, scope.key.clone());
    {
        let mut running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(held) = running.get(&key) {
            return Ok((if held == fingerprint { Reservation::Running } else { Reservation::Mismatch }, None));
        }
        running.insert(key.clone(), fingerprint.to_owned());
    }
    let claim = Claim { key };
    // A request that completed this key committed before it let go of its claim, so reading
    // after claiming sees its answer.
    match store::stored_answer(db, scope, fingerprint, now).await? {
        Some(answer) => Ok((answer, None)),
        None => Ok((Reservation::Reserved { token: store::random_token() }, Some(claim))),
    }
}
