//! What every request handler shares: the database, the settings, and the process-wide caches.

use std::sync::{Arc, OnceLock};

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::{
    auth::{KeyCache, revocations},
    config::AppConfig,
    db::Db,
    events::hub::EventHub,
    idempotency::claims::Claims,
    rate_limit::{Limits, RateLimiter},
    shops::cache::{self as shop_cache, ShopCache},
    webhooks::dispatch::DeliverySettings,
};

/// Cloned for every request by the router: one shared pointer, so a clone is one atomic
/// increment (cloning each field's own `Arc` was 3% of the CPU on a list page).
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

pub struct Shared {
    pub db: Db,
    pub config: Arc<AppConfig>,
    pub metrics: PrometheusHandle,
    pub keys: Arc<KeyCache>,
    /// Shops with their bays, as appointment writes read them.
    pub shops: Arc<ShopCache>,
    pub limiter: Arc<RateLimiter>,
    /// Wakes this process's event streams when a change commits.
    pub events: Arc<EventHub>,
    /// The `Idempotency-Key`s this server's running requests hold.
    pub claims: Arc<Claims>,
    /// A permit per export allowed to run at once (`--max-exports`).
    pub exports: Arc<tokio::sync::Semaphore>,
}

impl AppState {
    /// The state of one server (one replica): starts its listener for key revocations.
    pub fn new(db: Db, config: AppConfig) -> AppState {
        let limiter = RateLimiter::new(Limits { per_second: config.rate_limit, burst: config.rate_limit_burst });
        let keys = Arc::new(KeyCache::default());
        let shops = Arc::new(ShopCache::default());
        crate::db::noticed::listen(&db, vec![revocations(keys.clone()), shop_cache::changes(shops.clone())]);
        crate::events::retention::spawn(db.clone(), config.event_retention_days);
        let events = EventHub::start(&db);
        let deliveries = DeliverySettings {
            allow_private: config.webhook_allow_private,
            concurrency: config.webhook_concurrency as usize,
            retry_schedule: config.webhook_retry_schedule.0.clone(),
        };
        crate::idempotency::spawn_purge(db.clone());
        crate::holds::spawn_purge(db.clone());
        crate::webhooks::dispatch::start(db.clone(), deliveries, crate::webhooks::dispatcher_wake());
        let exports = Arc::new(tokio::sync::Semaphore::new(config.max_exports.max(1) as usize));
        AppState(Arc::new(Shared {
            db,
            exports,
            config: Arc::new(config),
            metrics: metrics_handle(),
            keys,
            shops,
            limiter: Arc::new(limiter),
            events,
            claims: Arc::default(),
        }))
    }
}

/// The process-wide Prometheus recorder (metrics macros write to one global recorder).
fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let handle = PrometheusBuilder::new()
                .set_buckets(&[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0])
                .expect("static buckets are valid")
                .install_recorder()
                .expect("the metrics recorder is installed once");
            // The recorder keeps every histogram sample until upkeep folds it into the
            // buckets, which only a scrape of /metrics did: unscraped, the server grew by
            // about a megabyte a second at 45,000 requests/s (bench/RESULTS.md).
            let upkeep = handle.clone();
            std::thread::Builder::new()
                .name("metrics-upkeep".into())
                .spawn(move || {
                    loop {
                        std::thread::sleep(METRICS_UPKEEP);
                        upkeep.run_upkeep();
                    }
                })
                .expect("starting the metrics upkeep thread");
            handle
        })
        .clone()
}

const METRICS_UPKEEP: std::time::Duration = std::time::Duration::from_secs(2);
