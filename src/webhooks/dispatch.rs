//! The delivery loop each process runs: claim due deliveries (one replica per attempt), send
//! them signed with bounded concurrency and a 10 s limit, record the outcome and schedule
//! retries. Deliveries live in the database from the commit of their change on, so a killed
//! process loses nothing: what it had claimed is due again when its lease ends.

use std::{
    net::SocketAddr,
    sync::Arc,
    time::{Duration, Instant},
};

use reqwest::{
    Client,
    dns::{Addrs, Name, Resolve, Resolving},
};
use tokio::sync::{Notify, Semaphore};

use super::{
    model::check_url,
    signing::sign,
    ssrf,
    store::{self, Claimed, Outcome},
};
use crate::db::{Db, now_micros};

/// How long a receiver gets to answer.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a claimed attempt keeps other replicas away: past it, the attempt counts as lost
/// (the 10 s attempt limit plus time to record the outcome).
const LEASE: Duration = Duration::from_secs(15);
/// A webhook whose deliveries have all failed this long is disabled.
const DISABLE_AFTER: Duration = Duration::from_secs(3 * 24 * 3600);
/// Idle: look for due deliveries this often (new ones also wake the loop at once).
const IDLE_POLL: Duration = Duration::from_millis(500);

#[derive(Debug, Clone)]
pub struct DeliverySettings {
    pub allow_private: bool,
    /// Attempts in flight per process.
    pub concurrency: usize,
    /// Waits before the 2nd, 3rd, ... attempt; after the last one the delivery has failed.
    pub retry_schedule: Vec<Duration>,
}

/// The decisions §11 schedule: about 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h.
pub fn default_retry_schedule() -> Vec<Duration> {
    [5, 300, 1_800, 7_200, 18_000, 36_000, 36_000].into_iter().map(Duration::from_secs).collect()
}

/// Runs deliveries until the process ends. `wake` is notified when this process queued some.
pub fn start(db: Db, settings: DeliverySettings, wake: Arc<Notify>) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = match client(settings.allow_private) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "webhook deliveries are off: the HTTP client could not start");
            return;
        }
    };
    let settings = Arc::new(settings);
    tokio::spawn(async move {
        let slots = Arc::new(Semaphore::new(settings.concurrency.max(1)));
        loop {
            let free = slots.available_permits();
            let claimed = if free == 0 {
                Vec::new()
            } else {
                let now = now_micros();
                match store::claim_due(&db, now, now + LEASE.as_micros() as i64, free as i64).await {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!(error = %e, "claiming webhook deliveries failed");
                        Vec::new()
                    }
                }
            };
            let full = !claimed.is_empty() && claimed.len() == free;
            for delivery in claimed {
                let Ok(slot) = slots.clone().acquire_owned().await else { return };
                let (db, client, settings) = (db.clone(), client.clone(), settings.clone());
                tokio::spawn(async move {
                    attempt(&db, &client, &settings, delivery).await;
                    drop(slot);
                });
            }
            if !full {
                tokio::select! {
                    _ = wake.notified() => {}
                    _ = tokio::time::sleep(IDLE_POLL) => {}
                }
            } else if slots.available_permits() == 0 {
                // Every slot busy: wait for one to free up before claiming more.
                if let Ok(slot) = slots.clone().acquire_owned().await {
                    drop(slot);
                }
            }
        }
    });
}

fn client(allow_private: bool) -> reqwest::Result<Client> {
    Client::builder()
        .timeout(ATTEMPT_TIMEOUT)
        .connect_timeout(Duration::from_secs(5))
        .redirect(reqwest::redirect::Policy::none())
        .dns_resolver(GuardedResolver { allow_private })
        .user_agent(concat!("autoshop-webhooks/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// Resolves names and refuses the whole name when any address is internal (unless allowed):
/// the address checked is the address connected to.
struct GuardedResolver {
    allow_private: bool,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if !allow_private && addrs.iter().any(|a| !ssrf::is_public(a.ip())) {
                return Err(format!("{host} resolves to a private or internal address").into());
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

async fn attempt(db: &Db, client: &Client, settings: &DeliverySettings, delivery: Claimed) {
    let started = Instant::now();
    let target = match store::target(db, &delivery).await {
        Ok(t) => t,
        Err(e) => {
            // The lease runs out and the delivery is tried again.
            tracing::warn!(error = %e, "reading a webhook failed");
            return;
        }
    };
    let outcome = match target {
        None => return, // deleted with its deliveries, or claimed again since
        Some(t) if !t.enabled => final_failure(None, "the webhook is disabled", started),
        Some(t) => send(client, settings, &delivery, &t.url, &t.secret, started).await,
    };
    if let Err(e) = store::record_attempt(db, &delivery, &outcome, DISABLE_AFTER.as_micros() as i64).await {
        tracing::warn!(error = %e, "recording a webhook attempt failed; it will be retried when its lease ends");
    }
}

async fn send(client: &Client, settings: &DeliverySettings, delivery: &Claimed, url: &str, secret: &str, started: Instant) -> Outcome {
    if let Err(reason) = check_url(url, settings.allow_private) {
        return final_failure(None, &reason, started);
    }
    let timestamp = now_micros() / 1_000_000;
    let request = client
        .post(url)
        .header("content-type", "application/json")
        .header("webhook-id", &delivery.event_id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", sign(secret, &delivery.event_id, timestamp, &delivery.payload))
        .body(delivery.payload.clone());
    let (status, error) = match request.send().await {
        Ok(response) => (Some(response.status().as_u16()), None),
        Err(e) => (None, Some(describe(&e))),
    };
    let duration_ms = started.elapsed().as_millis() as i64;
    match status {
        Some(s) if (200..300).contains(&s) => {
            Outcome { status_code: Some(s.into()), error: None, duration_ms, retry_at: None, succeeded: true, disable: false }
        }
        Some(410) => Outcome { status_code: Some(410), error: None, duration_ms, retry_at: None, succeeded: false, disable: true },
        _ => Outcome {
            status_code: status.map(i64::from),
            error,
            duration_ms,
            retry_at: retry_at(&settings.retry_schedule, delivery.attempt),
            succeeded: false,
            disable: false,
        },
    }
}

fn final_failure(status: Option<i64>, reason: &str, started: Instant) -> Outcome {
    let duration_ms = started.elapsed().as_millis() as i64;
    Outcome { status_code: status, error: Some(reason.to_owned()), duration_ms, retry_at: None, succeeded: false, disable: false }
}

/// When attempt `attempt + 1` is due (±10% jitter), or `None` when `attempt` was the last.
fn retry_at(schedule: &[Duration], attempt: i64) -> Option<i64> {
    let wait = schedule.get(usize::try_from(attempt).ok()?.checked_sub(1)?)?;
    let mut byte = [0u8; 1];
    let _ = getrandom::fill(&mut byte);
    let jitter = 0.9 + 0.2 * f64::from(byte[0]) / 255.0;
    Some(now_micros() + (wait.as_micros() as f64 * jitter) as i64)
}

fn describe(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "request failed"
    };
    let mut detail = String::new();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        detail = s.to_string();
        source = s.source();
    }
    if detail.is_empty() { kind.to_owned() } else { format!("{kind}: {detail}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_follow_the_schedule_then_stop() {
        let schedule = default_retry_schedule();
        let now = now_micros();
        let first = retry_at(&schedule, 1).unwrap() - now;
        assert!((4_400_000..=5_600_000).contains(&first), "{first}");
        let last = retry_at(&schedule, 7).unwrap() - now;
        assert!(last >= 32_000_000_000, "{last}");
        assert_eq!(retry_at(&schedule, 8), None, "eight attempts in all");
        assert_eq!(retry_at(&schedule, 0), None);
    }
}
