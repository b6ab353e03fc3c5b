//! A replica's cache of rows that any replica may change, kept in step by the notices that the
//! changing transactions send as they commit (`NOTIFY` on PostgreSQL, an in-process broadcast on
//! SQLite, whose writers all live in this process).
//!
//! The cache is only consulted while this replica is sure to hear of changes: while its listener
//! is up. If the listener drops or falls behind, the cache empties and stays off until it is
//! back. A lookup that raced a change is not kept (the generation moved), and even while notices
//! flow an entry is read again after [`TTL`].

use std::{
    collections::HashMap,
    hash::Hash,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use super::{Db, notify::Listener};

/// A safety net: even while notices flow, an entry is read again after this long.
pub const TTL: Duration = Duration::from_secs(1);
const MAX_ENTRIES: usize = 10_000;

pub struct NoticedCache<K, V> {
    /// True while change notices are guaranteed to reach this replica.
    live: AtomicBool,
    /// Bumped on every change heard, so a lookup that raced a change is not cached.
    generation: AtomicU64,
    entries: Mutex<HashMap<K, (V, Instant)>>,
}

impl<K, V> Default for NoticedCache<K, V> {
    fn default() -> Self {
        NoticedCache { live: AtomicBool::new(false), generation: AtomicU64::new(0), entries: Mutex::new(HashMap::new()) }
    }
}

impl<K: Eq + Hash, V: Clone> NoticedCache<K, V> {
    /// The current generation, to pass to [`NoticedCache::put`] after a lookup.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    pub fn get(&self, key: &K) -> Option<V> {
        if !self.live.load(Ordering::SeqCst) {
            return None;
        }
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.get(key).filter(|(_, at)| at.elapsed() < TTL).map(|(value, _)| value.clone())
    }

    /// Caches a lookup made at `generation`, unless a change was heard since.
    pub fn put(&self, key: K, value: V, generation: u64) {
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
        entries.insert(key, (value, Instant::now()));
    }

    /// Drops the entries a change made stale, so this replica reads them again from the next
    /// request on.
    pub fn forget_where(&self, stale: impl Fn(&K, &V) -> bool) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        self.generation.fetch_add(1, Ordering::SeqCst);
        entries.retain(|k, (v, _)| !stale(k, v));
    }

    pub(crate) fn set_live(&self, live: bool) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        self.generation.fetch_add(1, Ordering::SeqCst);
        entries.clear();
        self.live.store(live, Ordering::SeqCst);
    }
}

/// One cache's part of [`listen`]: its channel, and what a notice on it does to the cache.
pub struct Subscription {
    channel: &'static str,
    /// Drops what a notice's payload made stale; false when the payload could not be read.
    heard: Box<dyn Fn(&str) -> bool + Send + Sync>,
    set_live: Box<dyn Fn(bool) + Send + Sync>,
}

/// Keeps `cache` in step with the changes any replica announces on `channel`: `heard` drops
/// what a notice's payload made stale and says whether it could read the payload (if not, the
/// whole cache is dropped).
pub fn subscription<K, V>(channel: &'static str, cache: Arc<NoticedCache<K, V>>, heard: fn(&NoticedCache<K, V>, &str) -> bool) -> Subscription
where
    K: Eq + Hash + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    let live = cache.clone();
    Subscription { channel, heard: Box::new(move |payload| heard(&cache, payload)), set_live: Box::new(move |on| live.set_live(on)) }
}

/// Runs `subscriptions` for as long as the runtime runs, on one listening connection (on
/// PostgreSQL each listener holds a connection of the pool for good).
pub fn listen(db: &Db, subscriptions: Vec<Subscription>) {
    let db = db.clone();
    let channels: Vec<&'static str> = subscriptions.iter().map(|s| s.channel).collect();
    tokio::spawn(async move {
        let set_live = |on: bool| subscriptions.iter().for_each(|s| (s.set_live)(on));
        loop {
            if let Ok(mut listener) = Listener::connect(&db, &channels).await {
                set_live(true);
                // An error: the connection was lost or fell behind, and notices with it.
                while let Ok(notice) = listener.recv().await {
                    for s in subscriptions.iter().filter(|s| s.channel == notice.channel) {
                        if !(s.heard)(&notice.payload) {
                            (s.set_live)(true);
                        }
                    }
                }
            }
            set_live(false);
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

    #[test]
    fn nothing_is_cached_unless_changes_are_heard() {
        let cache = NoticedCache::<&str, i64>::default();
        cache.put("h", 1, cache.generation());
        assert!(cache.get(&"h").is_none());
        cache.set_live(true);
        cache.put("h", 1, cache.generation());
        assert_eq!(cache.get(&"h"), Some(1));
        cache.set_live(false);
        assert!(cache.get(&"h").is_none(), "losing the notice connection empties the cache");
    }

    #[test]
    fn a_lookup_that_raced_a_change_is_not_cached() {
        let cache = NoticedCache::<&str, i64>::default();
        cache.set_live(true);
        let before = cache.generation();
        cache.forget_where(|_, v| *v == 7);
        cache.put("h", 7, before);
        assert!(cache.get(&"h").is_none());
        cache.put("h", 7, cache.generation());
        cache.put("k", 8, cache.generation());
        cache.forget_where(|_, v| *v == 7);
        assert!(cache.get(&"h").is_none());
        assert_eq!(cache.get(&"k"), Some(8), "only the stale entries are dropped");
    }
}
