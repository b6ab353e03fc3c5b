//! A webhook receiver for the tests: a real HTTP server on 127.0.0.1 that checks every
//! delivery's Standard Webhooks signature (with its own HMAC code, not the server's), records
//! it, and answers with the statuses the test scripted.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{Router, body::Bytes, extract::State, http::HeaderMap, http::StatusCode, routing::post};
use base64::{Engine, engine::general_purpose::STANDARD};
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

#[derive(Debug, Clone)]
pub struct Received {
    pub webhook_id: String,
    pub timestamp: i64,
    pub signature_ok: bool,
    pub body: Value,
    /// The status the receiver answered.
    pub status: u16,
}

#[derive(Default)]
struct Shared {
    secret: Option<String>,
    /// Statuses to answer with, in order; then `then`.
    script: VecDeque<u16>,
    /// Statuses to answer each delivery's first attempts with (by `webhook-id`), before `script`.
    per_delivery: Vec<u16>,
    then: u16,
    /// How long to wait before answering.
    delay: Duration,
    received: Vec<Received>,
    /// Deliveries answered (a slow receiver answers after it received).
    answered: usize,
    /// Attempts received and not yet answered, by `webhook-id`, and the most seen at once for
    /// one id.
    in_flight: std::collections::HashMap<String, usize>,
    most_in_flight: usize,
}

#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    shared: Arc<Mutex<Shared>>,
}

impl Receiver {
    /// A receiver answering `then` to every delivery (after `script`, if set later).
    pub async fn start(then: u16) -> Receiver {
        let shared = Arc::new(Mutex::new(Shared { then, ..Default::default() }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let app = Router::new().route("/hook", post(receive)).with_state(shared.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Receiver { url, shared }
    }

    pub fn set_secret(&self, secret: &str) {
        self.shared.lock().unwrap().secret = Some(secret.to_owned());
    }

    /// Answers every later delivery only after `delay` (a slow receiver; the delivery counts as
    /// received when it arrives).
    pub fn delay(&self, delay: Duration) {
        self.shared.lock().unwrap().delay = delay;
    }

    pub fn script(&self, statuses: &[u16]) {
        self.shared.lock().unwrap().script = statuses.iter().copied().collect();
    }

    /// Answers the first attempts of every delivery (told apart by `webhook-id`) with
    /// `statuses`, in order; later attempts as without it.
    pub fn script_per_delivery(&self, statuses: &[u16]) {
        self.shared.lock().unwrap().per_delivery = statuses.to_vec();
    }

    /// The most attempts of one delivery the receiver held unanswered at once.
    pub fn most_in_flight(&self) -> usize {
        self.shared.lock().unwrap().most_in_flight
    }

    pub fn received(&self) -> Vec<Received> {
        self.shared.lock().unwrap().received.clone()
    }

    /// Waits until `n` deliveries have been answered (or panics after `secs`).
    pub async fn wait_answered(&self, n: usize, secs: u64) {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while self.shared.lock().unwrap().answered < n {
            assert!(Instant::now() < deadline, "expected {n} answered deliveries within {secs} s");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until `n` deliveries came (or panics after `secs`).
    pub async fn wait_for(&self, n: usize, secs: u64) -> Vec<Received> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let got = self.received();
            if got.len() >= n {
                return got;
            }
            assert!(Instant::now() < deadline, "expected {n} deliveries within {secs} s, got {}: {got:?}", got.len());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Verifies `v1,<base64 HMAC-SHA256>` over `{id}.{timestamp}.{body}` with the secret's bytes.
pub fn verify(secret: &str, id: &str, timestamp: &str, body: &[u8], header: &str) -> bool {
    let Ok(key) = STANDARD.decode(secret.trim_start_matches("whsec_")) else { return false };
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    let expected = STANDARD.encode(mac.finalize().into_bytes());
    header.split(' ').any(|sig| sig.strip_prefix("v1,") == Some(expected.as_str()))
}

async fn receive(State(shared): State<Arc<Mutex<Shared>>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let (id, timestamp, signature) = (header("webhook-id"), header("webhook-timestamp"), header("webhook-signature"));
    let (status, delay) = {
        let mut shared = shared.lock().unwrap();
        let signature_ok = shared.secret.as_deref().is_some_and(|s| verify(s, &id, &timestamp, &body, &signature))
            && header("content-type") == "application/json";
        let attempt = shared.received.iter().filter(|r| r.webhook_id == id).count();
        let status = match shared.per_delivery.get(attempt) {
            Some(status) => *status,
            None => shared.script.pop_front().unwrap_or(shared.then),
        };
        let in_flight = shared.in_flight.entry(id.clone()).or_default();
        *in_flight += 1;
        let now = *in_flight;
        shared.most_in_flight = shared.most_in_flight.max(now);
        shared.received.push(Received {
            webhook_id: id.clone(),
            timestamp: timestamp.parse().unwrap_or(0),
            signature_ok,
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
            status,
        });
        (status, shared.delay)
    };
    tokio::time::sleep(delay).await;
    let mut shared = shared.lock().unwrap();
    shared.answered += 1;
    *shared.in_flight.entry(id).or_default() -= 1;
    drop(shared);
    StatusCode::from_u16(status).unwrap()
}
