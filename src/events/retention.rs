//! Deleting events older than the retention window, in small batches so writers never wait on
//! a long delete. Every server runs it; on PostgreSQL replicas may overlap, which is harmless.

use std::time::Duration;

use crate::db::{Db, now_micros};

/// Events deleted per statement.
const BATCH: i64 = 1000;
/// Pause between sweeps when nothing is left to delete.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// Runs for as long as the runtime does.
pub fn spawn(db: Db, retention_days: u32) {
    tokio::spawn(async move {
        // Not at start: a restarting fleet should not sweep all at once.
        tokio::time::sleep(SWEEP_EVERY).await;
        loop {
            let before = now_micros() - i64::from(retention_days) * 86_400_000_000;
            match super::store::purge(&db, before, BATCH).await {
                // A full batch: more may wait; give writers a moment, then go on.
                Ok(n) if n as i64 >= BATCH => tokio::time::sleep(Duration::from_millis(50)).await,
                Ok(_) => tokio::time::sleep(SWEEP_EVERY).await,
                Err(e) => {
                    tracing::warn!(error = %e, "event retention sweep failed");
                    tokio::time::sleep(SWEEP_EVERY).await;
                }
            }
        }
    });
}
