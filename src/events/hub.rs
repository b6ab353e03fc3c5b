//! Wakes the open event streams of this process when a change commits, on any server: one
//! listener per process (not one database connection per stream) fans the notices out.

use std::{sync::Arc, time::Duration};

use tokio::sync::broadcast;

use crate::db::{Db, notify::Listener};

/// Sent instead of a company id when notices may have been missed: every stream re-reads.
pub const EVERYONE: i64 = -1;

pub struct EventHub {
    wake: broadcast::Sender<i64>,
}

impl EventHub {
    /// Starts listening for committed changes; runs for as long as the runtime does.
    pub fn start(db: &Db) -> Arc<EventHub> {
        let hub = Arc::new(EventHub { wake: broadcast::channel(1024).0 });
        let (db, wake) = (db.clone(), hub.wake.clone());
        tokio::spawn(async move {
            loop {
                if let Ok(mut listener) = Listener::connect(&db, &[super::CHANNEL]).await {
                    // Changes may have committed while nobody listened.
                    let _ = wake.send(EVERYONE);
                    while let Ok(notice) = listener.recv().await {
                        if let Ok(company_id) = notice.payload.parse::<i64>() {
                            let _ = wake.send(company_id);
                        }
                    }
                }
                let _ = wake.send(EVERYONE);
                if matches!(&db, Db::Postgres(pool) if pool.is_closed()) {
                    return;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        hub
    }

    pub fn subscribe(&self) -> broadcast::Receiver<i64> {
        self.wake.subscribe()
    }
}
