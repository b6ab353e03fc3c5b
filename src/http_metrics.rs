//! Request metrics: `http_requests_total{method,route,status}` and
//! `http_request_duration_seconds{method,route}`, recorded by a middleware on every request.
//!
//! Looking a metric up by its labels allocates and hashes a key each time; the handles of each
//! `(route, method, status)` seen are kept instead (a bounded set: the router's routes), so a
//! request records with two atomic updates.

use std::{
    collections::HashMap,
    sync::{OnceLock, RwLock},
    time::Instant,
};

use axum::{
    extract::{MatchedPath, Request},
    http::Method,
    response::Response,
};
use metrics::{Counter, Histogram};

type Key<'a> = (&'a str, &'static str, u16);

/// Past this many label sets (a router has far fewer), handles are looked up every time.
const MAX_CACHED: usize = 4096;

fn cache() -> &'static RwLock<HashMap<Key<'static>, (Counter, Histogram)>> {
    static CACHE: OnceLock<RwLock<HashMap<Key<'static>, (Counter, Histogram)>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

fn method_name(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::PATCH => "PATCH",
        _ => "OTHER",
    }
}

fn record(route: &str, method: &'static str, status: u16, seconds: f64) {
    {
        let cached = cache().read().unwrap_or_else(|e| e.into_inner());
        // The map's keys outlive any `route`: a shorter-lived key is fine for a lookup.
        let lookup: &HashMap<Key<'_>, (Counter, Histogram)> = &cached;
        if let Some((counter, histogram)) = lookup.get(&(route, method, status)) {
            counter.increment(1);
            histogram.record(seconds);
            return;
        }
    }
    let labels = [("method", method.to_owned()), ("route", route.to_owned()), ("status", status.to_string())];
    let counter = metrics::counter!("http_requests_total", &labels);
    let histogram = metrics::histogram!("http_request_duration_seconds", &labels[..2]);
    counter.increment(1);
    histogram.record(seconds);
    let mut cached = cache().write().unwrap_or_else(|e| e.into_inner());
    if cached.len() < MAX_CACHED {
        // Routes are a fixed set: each is leaked once, to key the cache for good.
        let route: &'static str = Box::leak(route.to_owned().into_boxed_str());
        cached.entry((route, method, status)).or_insert((counter, histogram));
    }
}

/// Runs `next` and records its response's status and how long it took.
pub async fn measured<F: Future<Output = Response>>(request: Request, next: impl FnOnce(Request) -> F) -> Response {
    let started = Instant::now();
    let route = request.extensions().get::<MatchedPath>().cloned();
    let method = method_name(request.method());
    let response = next(request).await;
    let route = route.as_ref().map_or("unmatched", MatchedPath::as_str);
    record(route, method, response.status().as_u16(), started.elapsed().as_secs_f64());
    response
}
