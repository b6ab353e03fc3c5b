//! A replica's cache of recently checked keys, so most requests skip the key lookup.
//!
//! A revoked key must be refused at once on every replica: the revoking transaction announces
//! it as it commits, and the cache is consulted only while this replica is sure to hear such
//! notices (see [`crate::db::noticed`]).

use std::sync::Arc;

use super::Caller;
use crate::db::noticed::{self, NoticedCache, Subscription};

/// The PostgreSQL channel on which revocations are announced (payload: the key id).
pub const REVOCATION_CHANNEL: &str = "autoshop_key_revoked";

/// Key hash to the caller it authenticates.
pub type KeyCache = NoticedCache<String, Caller>;

/// Drops a revoked key so this replica refuses it from the next request on.
pub fn forget_key(cache: &KeyCache, key_id: i64) {
    cache.forget_where(|_, caller| caller.key_id == key_id);
}

/// Keeps `cache` in step with revocations made by any replica (see [`noticed::listen`]).
pub fn revocations(cache: Arc<KeyCache>) -> Subscription {
    noticed::subscription(REVOCATION_CHANNEL, cache, |cache, payload| payload.parse().map(|key_id| forget_key(cache, key_id)).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Role;

    fn caller(key_id: i64) -> Caller {
        Caller { key_id, company_id: 1, role: Role::Read, shops: None }
    }

    #[test]
    fn a_revoked_key_is_dropped_and_a_lookup_that_raced_it_is_not_cached() {
        let cache = KeyCache::default();
        cache.set_live(true);
        cache.put("h".into(), caller(7), cache.generation());
        cache.put("k".into(), caller(8), cache.generation());
        let before = cache.generation();
        forget_key(&cache, 7);
        assert!(cache.get(&"h".to_string()).is_none());
        assert_eq!(cache.get(&"k".to_string()).map(|c| c.key_id), Some(8));
        cache.put("h".into(), caller(7), before);
        assert!(cache.get(&"h".to_string()).is_none());
    }
}
