//! A replica's cache of recently checked keys, so most requests skip the key lookup.
//!
//! A revoked key must be refused at once on every replica, so the cache is only consulted while
//! this replica is sure to hear of revocations: while its listener for revocation notices is up
//! (the revoking transaction sends the notice as it commits: `NOTIFY` on PostgreSQL, an
//! in-process broadcast on SQLite, whose writers all live in this process). If the listener
//! drops or falls behind, the cache empties and stays off until it is back.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};


use super::Caller;
use crate::db::{Db, notify::Listener};

/// The PostgreSQL channel on which revocations are announced (payload: the key id).
pub const REVOCATION_CHANNEL: &str = "autoshop_key_revoked";

/// A safety net: even while notices flow, an entry is re-checked after this long.
const TTL: Duration = Duration::from_secs(1);
const MAX_ENTRIES: usize = 10_000;

#[derive(Default)]
pub struct KeyCache {
    /// True while revocation notices are guaranteed to reach this replica.
    live: AtomicBool,
    /// Bumped on every revocation, so a lookup that raced a revocation is not cached.
    generation: AtomicU64,
    entries: Mutex<HashMap<String, (Caller, Instant)>>,
}

impl KeyCache {
    /// The current generation, to pass to [`KeyCache::put`] after a lookup.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    pub fn get(&self, hash: &str) -> Option<Caller> {
        if !self.live.load(Ordering::SeqCst) {
            return None;
        }
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.get(hash).filter(|(_, at)| at.elapsed() < TTL).map(|(caller, _)| caller.clone())
    }

    /// Caches a lookup made at `generation`, unless a revocation happened since.
    pub fn put(&self, hash: String, caller: Caller, generation: u64) {
        if !self.live.load(Ordering::SeqCst) {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if self.generation() != generation {
            return;
        }
        if entries.len() >= MAX_ENTRIES {
            entries.retain(|_, (_, at)| at.elapsed() < TTL);
        }
        entries.insert(hash, (caller, Instant::now()));
    }

    /// Drops a revoked key so this replica refuses it from the next request on.
    pub fn forget(&self, key_id: i64) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        self.generation.fetch_add(1, Ordering::SeqCst);
        entries.retain(|_, (c, _)| c.key_id != key_id);
    }

    fn set_live(&self, live: bool) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        self.generation.fetch_add(1, Ordering::SeqCst);
        entries.clear();
        self.live.store(live, Ordering::SeqCst);
    }
}

/// Keeps `cache` in step with revocations made by any replica, for as long as the runtime runs.
pub fn listen_for_revocations(db: &Db, cache: Arc<KeyCache>) {
    let db = db.clone();
    tokio::spawn(async move {
        loop {
            if let Ok(mut listener) = Listener::connect(&db, &[REVOCATION_CHANNEL]).await {
                cache.set_live(true);
                // An error: the connection was lost or fell behind, and notices with it.
                while let Ok(notice) = listener.recv().await {
                    match notice.payload.parse() {
                        Ok(key_id) => cache.forget(key_id),
                        Err(_) => cache.set_live(true),
                    }
                }
            }
            cache.set_live(false);
            if matches!(&db, Db::Postgres(pool) if pool.is_closed()) {
                return;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Role;

    fn caller(key_id: i64) -> Caller {
        Caller { key_id, company_id: 1, role: Role::Read, shops: None }
    }

    #[test]
    fn nothing_is_cached_unless_revocations_are_heard() {
        let cache = KeyCache::default();
        cache.put("h".into(), caller(1), cache.generation());
        assert!(cache.get("h").is_none());
        cache.set_live(true);
        cache.put("h".into(), caller(1), cache.generation());
        assert_eq!(cache.get("h").map(|c| c.key_id), Some(1));
        cache.set_live(false);
        assert!(cache.get("h").is_none(), "losing the notice connection empties the cache");
    }

    #[test]
    fn a_lookup_that_raced_a_revocation_is_not_cached() {
        let cache = KeyCache::default();
        cache.set_live(true);
        let before = cache.generation();
        cache.forget(7);
        cache.put("h".into(), caller(7), before);
        assert!(cache.get("h").is_none());
        cache.put("h".into(), caller(7), cache.generation());
        cache.forget(7);
        assert!(cache.get("h").is_none());
    }
}
