//! Answers given before the request body was read (refusals) leave the connection usable: the
//! server reads and discards the rest of the body, or says `Connection: close`. A client never
//! sees a connection closed without an answer. Raw sockets, so the body can arrive late.

use std::time::Duration;

use autoshop::config::AppConfig;
use serde_json::json;

use crate::{
    raw::{Conn, head},
    support::{Backend, TestApp, test_config},
};

crate::backend_tests!(
    early_answers_keep_the_connection_usable,
    a_thousand_refusals_on_one_keep_alive_connection,
    a_refused_expect_continue_is_answered_at_once_and_closed,
);

/// What the tests send as a body: a plausible customer, a few hundred bytes.
fn customer_body() -> Vec<u8> {
    serde_json::to_vec(&json!({"shop_id": 1, "business_name": "", "first_name": "Ada", "last_name": "Lovelace",
        "address": "1 Main St", "city": "Springfield", "state": "IL", "zip": "62701", "notes": "x".repeat(200)}))
    .unwrap()
}

fn chunked(body: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", body.len()).into_bytes();
    out.extend_from_slice(body);
    out.extend_from_slice(b"\r\n0\r\n\r\n");
    out
}

struct Case {
    what: &'static str,
    status: u16,
    head: Vec<u8>,
    body: Vec<u8>,
}

/// Sends the head, waits 50 ms (a body crossing a real network arrives after its headers), sends
/// the body, and checks the answer; then the same connection must answer a second request, unless
/// the first answer said `Connection: close` (and then the server must indeed close it).
async fn check(app: &TestApp, case: Case) {
    let Case { what, status, head: request_head, body } = case;
    let mut conn = Conn::open(&app.base).await;
    conn.send(&request_head).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let sent = conn.send(&body).await;
    let first = conn.answer().await.unwrap_or_else(|e| panic!("{what}: no answer: {e}"));
    assert_eq!(first.status, status, "{what}: {}", String::from_utf8_lossy(&first.body));
    first.problem(status);
    if status == 413 {
        assert!(first.closes(), "{what}: a 413 says Connection: close");
    }
    if first.closes() {
        assert!(conn.closed_within(Duration::from_secs(5)).await, "{what}: said close, kept the connection open");
        return;
    }
    assert!(sent.is_ok(), "{what}: the body could not be sent on a connection kept open: {sent:?}");
    let second = conn.exchange(&head("GET", "/healthz", &[])).await.unwrap_or_else(|e| panic!("{what}: second request: {e}"));
    assert_eq!(second.status, 200, "{what}");
}

async fn early_answers_keep_the_connection_usable(backend: Backend) {
    let app = TestApp::spawn_with(backend, AppConfig { max_body_bytes: 4096, import_max_bytes: 16384, rate_limit: 0.0, ..test_config() }).await;
    let admin = app.admin_key.clone();
    let read = app.create_key(&admin, "read", None).await;
    let body = customer_body();
    let length = body.len().to_string();
    let json_post = |path: &str, key: &str| {
        let auth = format!("Bearer {key}");
        head("POST", path, &[("authorization", &auth), ("content-type", "application/json"), ("content-length", &length)])
    };
    let too_big = vec![b' '; 8192];
    let auth = format!("Bearer {admin}");
    let mut cases = vec![
        Case { what: "401 unknown key", status: 401, head: json_post("/api/v1/customers", "ask_unknown"), body: body.clone() },
        Case { what: "403 read key", status: 403, head: json_post("/api/v1/customers", &read), body: body.clone() },
        Case { what: "403 read key, PUT", status: 403, head: head("PUT", "/api/v1/customers/1", &[("authorization", &format!("Bearer {read}")), ("content-type", "application/json"), ("content-length", &length)]), body: body.clone() },
        Case { what: "403 read key, appointment", status: 403, head: json_post("/api/v1/appointments", &read), body: body.clone() },
        Case { what: "404 unknown path", status: 404, head: json_post("/api/v1/nothing-here", &admin), body: body.clone() },
        Case {
            what: "405 wrong method",
            status: 405,
            head: head("PATCH", "/api/v1/bays", &[("authorization", &auth), ("content-type", "application/json"), ("content-length", &length)]),
            body: body.clone(),
        },
        Case {
            what: "415 not JSON",
            status: 415,
            head: head("POST", "/api/v1/bays", &[("authorization", &auth), ("content-type", "text/plain"), ("content-length", &length)]),
            body: body.clone(),
        },
        Case {
            what: "400 bad Idempotency-Key",
            status: 400,
            head: head("POST", "/api/v1/bays", &[("authorization", &auth), ("content-type", "application/json"), ("idempotency-key", "a b"), ("content-length", &length)]),
            body: body.clone(),
        },
        Case {
            what: "403 read key, chunked body",
            status: 403,
            head: head("POST", "/api/v1/customers", &[("authorization", &format!("Bearer {read}")), ("content-type", "application/json"), ("transfer-encoding", "chunked")]),
            body: chunked(&body),
        },
        Case {
            what: "413 body over the limit",
            status: 413,
            head: head("POST", "/api/v1/bays", &[("authorization", &auth), ("content-type", "application/json"), ("content-length", &too_big.len().to_string())]),
            body: too_big.clone(),
        },
        Case {
            what: "413 chunked body over the limit",
            status: 413,
            head: head("POST", "/api/v1/bays", &[("authorization", &auth), ("content-type", "application/json"), ("transfer-encoding", "chunked")]),
            body: chunked(&too_big),
        },
    ];
    for case in cases.drain(..) {
        check(&app, case).await;
    }
    // The import route takes larger bodies: refused under its own limit (though over the JSON
    // routes'), the connection stays usable.
    let csv = vec![b'x'; 6000];
    let csv_length = csv.len().to_string();
    let read_auth = format!("Bearer {read}");
    for (what, status, auth, content_type) in [("403 read key, import", 403, &read_auth, "text/csv"), ("415 import not CSV", 415, &auth, "text/plain")] {
        let mut conn = Conn::open(&app.base).await;
        let request = [head("POST", "/api/v1/customers/import", &[("authorization", auth), ("content-type", content_type), ("content-length", &csv_length)]), csv.clone()].concat();
        let first = conn.exchange(&request).await.unwrap();
        assert_eq!(first.status, status, "{what}");
        assert!(!first.closes(), "{what}: a body under the route's limit is read past, not a reason to close");
        assert_eq!(conn.exchange(&head("GET", "/healthz", &[])).await.unwrap().status, 200, "{what}");
    }

    // 429: a key whose burst is spent.
    let limited = TestApp::spawn_with(backend, AppConfig { rate_limit: 0.001, rate_limit_burst: 1.0, ..test_config() }).await;
    assert_eq!(limited.get(&limited.admin_key, "/api/v1/bays").await.status, 200);
    let auth = format!("Bearer {}", limited.admin_key);
    let case = Case {
        what: "429 rate limited",
        status: 429,
        head: head("POST", "/api/v1/bays", &[("authorization", &auth), ("content-type", "application/json"), ("content-length", &length)]),
        body,
    };
    check(&limited, case).await;
}

/// What httpx did to the old server: many refused POSTs on one keep-alive connection, the body
/// written right after the head (so it races the refusal). Every one must be answered.
async fn a_thousand_refusals_on_one_keep_alive_connection(backend: Backend) {
    let app = TestApp::spawn_with(backend, AppConfig { rate_limit: 0.0, ..test_config() }).await;
    let read = app.create_key(&app.admin_key, "read", None).await;
    let body = customer_body();
    let request_head = head(
        "POST",
        "/api/v1/customers",
        &[("authorization", &format!("Bearer {read}")), ("content-type", "application/json"), ("content-length", &body.len().to_string())],
    );
    let mut conn = Conn::open(&app.base).await;
    for i in 0..1000 {
        conn.send(&request_head).await.unwrap_or_else(|e| panic!("request {i}: {e}"));
        if i % 2 == 0 {
            tokio::task::yield_now().await;
        }
        conn.send(&body).await.unwrap_or_else(|e| panic!("request {i}: {e}"));
        let answer = conn.answer().await.unwrap_or_else(|e| panic!("request {i}: network error: {e}"));
        assert_eq!(answer.status, 403, "request {i}");
        assert!(!answer.closes(), "request {i}: the connection stays usable");
    }
}

/// A client that sends `Expect: 100-continue` waits for the server before sending its body; a
/// refusal answers at once (no body is asked for) and closes, since whether the client will send
/// the body anyway is not known.
async fn a_refused_expect_continue_is_answered_at_once_and_closed(backend: Backend) {
    let app = TestApp::spawn_with(backend, AppConfig { rate_limit: 0.0, ..test_config() }).await;
    let read = app.create_key(&app.admin_key, "read", None).await;
    let mut conn = Conn::open(&app.base).await;
    let request_head = head(
        "POST",
        "/api/v1/customers",
        &[("authorization", &format!("Bearer {read}")), ("content-type", "application/json"), ("content-length", "300"), ("expect", "100-continue")],
    );
    conn.send(&request_head).await.unwrap();
    let answer = conn.answer().await.expect("answered without the body");
    answer.problem(403);
    assert!(answer.closes());
    assert!(conn.closed_within(Duration::from_secs(5)).await);
}
