//! `Idempotency-Key` on every `POST` under `/api/v1` (decisions §12): the first request with a
//! key runs and its response is stored by the transaction of its write ([`crate::change`]); a
//! repeat replays it; the key with another request is a 422; a repeat while the first runs is a
//! 409. Keys are scoped to the API key and kept 24 hours.

pub mod claims;
pub mod store;

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use axum::{
    body::{Body, to_bytes},
    extract::Request,
    http::{HeaderValue, Method, StatusCode, header},
    response::{IntoResponse, Response},
};
use sha2::{Digest, Sha256};

use crate::{
    auth::{Caller, Role},
    db::{Db, now_micros},
    error::ApiError,
    state::AppState,
};
use store::{KeyScope, Reservation, StoredResponse};

pub const HEADER: &str = "idempotency-key";
/// How long a key is kept.
pub const RETENTION: Duration = Duration::from_secs(24 * 3600);

/// What the transaction of a keyed request's write needs to store its answer, and what it tells
/// the middleware afterwards.
#[derive(Clone)]
pub struct Slot {
    scope: KeyScope,
    fingerprint: String,
    expires_at: i64,
    completed: Arc<AtomicBool>,
    /// Another request with the key (on another server) stored its answer before this one's
    /// write could: the write rolled back, and the caller gets that answer once it is committed.
    answered_elsewhere: Arc<AtomicBool>,
}

impl Slot {
    /// The statement that stores `response` in the transaction of the request's write; it
    /// changes exactly one row unless another request stored an answer for the key first.
    pub fn store_query(&self, response: &StoredResponse, now: i64) -> crate::db::Query {
        store::record_query(&self.scope, &self.fingerprint, response, self.expires_at, now)
    }

    pub fn mark_completed(&self) {
        self.completed.store(true, Ordering::Release);
    }

    pub fn mark_answered_elsewhere(&self) {
        self.answered_elsewhere.store(true, Ordering::Release);
    }
}

tokio::task_local! {
    static SLOT: Slot;
}

/// The reservation of the request this task is serving, if it sent an `Idempotency-Key`.
pub fn current() -> Option<Slot> {
    SLOT.try_with(Slot::clone).ok()
}

/// Whether a header value is a valid key: 1 to 255 characters from `!` to `~`.
pub fn valid_key(raw: &[u8]) -> bool {
    (1..=255).contains(&raw.len()) && raw.iter().all(|b| (b'!'..=b'~').contains(b))
}

/// Runs a request through its `Idempotency-Key`: a `POST` with a key runs `next` once and stores
/// its answer, or gets the stored answer (or a 409 or 422) without running it; any other request
/// runs `next` as it is.
pub async fn replay_or_run<F: Future<Output = Response>>(state: &AppState, request: Request, next: impl FnOnce(Request) -> F) -> Response {
    if request.method() != Method::POST {
        return next(request).await;
    }
    let Some(raw) = request.headers().get(HEADER).cloned() else {
        return next(request).await;
    };
    let Some(caller) = request.extensions().get::<Caller>().cloned() else {
        return next(request).await;
    };
    // Every POST needs a `write` key at least: a `read` key's goes straight to its handler,
    // which refuses it (403) before its body or its Idempotency-Key, as without a key.
    if caller.require(Role::Write).is_err() {
        return next(request).await;
    }
    if !valid_key(raw.as_bytes()) {
        return ApiError::BadRequest("The Idempotency-Key header must be 1 to 255 characters from ! to ~ (no spaces).".into()).into_response();
    }
    let limit = state.config.body_limit_for(request.uri().path());
    let (parts, body) = request.into_parts();
    let bytes = match to_bytes(body, limit).await {
        Ok(bytes) => bytes,
        Err(e) if crate::server::is_body_timeout(&e) => return ApiError::BodyTimedOut.into_response(),
        Err(_) => {
            return ApiError::PayloadTooLarge(format!("The request body is larger than {limit} bytes.")).into_response();
        }
    };
    let target = parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let mut hash = Sha256::new();
    hash.update(parts.method.as_str().as_bytes());
    hash.update(b"\n");
    hash.update(target.as_bytes());
    hash.update(b"\n");
    hash.update(&bytes);
    let fingerprint: String = crate::hex::encode(&hash.finalize());

    let scope = KeyScope {
        company_id: caller.company_id,
        api_key_id: caller.key_id,
        key: String::from_utf8_lossy(raw.as_bytes()).into_owned(),
    };
    let now = now_micros();
    let expires_at = now + RETENTION.as_micros() as i64;
    match claims::reserve(&state.claims, &state.db, &scope, &fingerprint, now).await {
        Err(e) => ApiError::from(e).into_response(),
        Ok(Reservation::Replay(stored)) => replay(stored),
        Ok(Reservation::Mismatch) => mismatch(),
        Ok(Reservation::Running) => still_running(),
        Ok(Reservation::Reserved(claim)) => {
            let slot = Slot { scope, fingerprint, expires_at, completed: Arc::default(), answered_elsewhere: Arc::default() };
            let request = Request::from_parts(parts, Body::from(bytes));
            let response = SLOT.scope(slot.clone(), next(request)).await;
            // A claim is let go only now, after the request's commit.
            let response = settle(&state.db, &slot, response).await;
            drop(claim);
            response
        }
    }
}

/// After the request: a success stored its response with its write. A failure wrote nothing; if
/// meanwhile another request with the key (on another replica) stored an answer, which is why
/// this one may have failed, the caller gets that answer, as a repeat would.
async fn settle(db: &Db, slot: &Slot, response: Response) -> Response {
    if slot.completed.load(Ordering::Acquire) {
        return response;
    }
    if response.status().is_success() {
        // Every POST handler stores its response through its Change; one that did not is a bug.
        tracing::error!(status = %response.status(), "a successful keyed POST stored no response");
        return response;
    }
    // The other request's answer is stored by its own commit, which may still be under way (on
    // SQLite both writes can share one group commit): look for it a few times.
    let attempts = if slot.answered_elsewhere.load(Ordering::Acquire) { 20 } else { 1 };
    for attempt in 0..attempts {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(5 * attempt)).await;
        }
        match store::stored_answer(db, &slot.scope, &slot.fingerprint, now_micros()).await {
            Ok(Some(Reservation::Replay(stored))) => return replay(stored),
            Ok(Some(Reservation::Mismatch)) => return mismatch(),
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "looking up an idempotency key after a failure failed");
                break;
            }
        }
    }
    response
}

fn mismatch() -> Response {
    ApiError::invalid("Idempotency-Key", "This Idempotency-Key was already used with another request (method, path or body); use a new key.")
        .into_response()
}

fn still_running() -> Response {
    let mut response = ApiError::Conflict("A request with this Idempotency-Key is still running; retry in a moment.".into()).into_response();
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

fn replay(stored: StoredResponse) -> Response {
    let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK);
    let mut response = (status, stored.body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert("idempotent-replayed", HeaderValue::from_static("true"));
    if let Some(location) = stored.location.and_then(|l| HeaderValue::from_str(&l).ok()) {
        headers.insert(header::LOCATION, location);
    }
    response
}

/// Deletes expired keys every minute, a thousand at a time (short statements: writes never
/// wait long behind the sweep).
pub fn spawn_purge(db: Db) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(60)).await;
            loop {
                match store::purge(&db, now_micros(), 1000).await {
                    Ok(n) if n == 1000 => tokio::task::yield_now().await,
                    Ok(_) => break,
                    Err(e) => {
                        tracing::warn!(error = %e, "purging idempotency keys failed");
                        break;
                    }
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_1_to_255_visible_ascii_characters() {
        assert!(valid_key(b"a") && valid_key(b"order-42_retry~1!") && valid_key(&[b'x'; 255]));
        assert!(!valid_key(b"") && !valid_key(&[b'x'; 256]) && !valid_key(b"has space") && !valid_key("é".as_bytes()) && !valid_key(b"tab\t"));
    }
}
