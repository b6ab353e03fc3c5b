//! The transport's timeouts and its connection cap, each set short by the test: slow or silent
//! clients lose their connection, everyone else keeps being served.

use std::time::{Duration, Instant};

use autoshop::config::{AppConfig, Transport};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{
    raw::{Answer, Conn, head},
    support::{Backend, TestApp, test_config},
};

crate::backend_tests!(
    partial_heads_are_closed_at_the_header_timeout_while_others_are_served,
    idle_keep_alive_outlasts_the_header_timeout,
    a_paused_body_is_a_408_and_closes,
    a_request_past_its_deadline_is_a_503_with_retry_after,
    the_connection_cap_holds_and_refuses_quickly,
    a_client_that_does_not_read_is_dropped_after_the_write_timeout,
);

fn with_transport(transport: Transport) -> AppConfig {
    AppConfig { transport, rate_limit: 0.0, ..test_config() }
}

/// Durations of `n` sequential authenticated reads, sorted.
async fn timed_reads(app: &TestApp, n: usize) -> Vec<Duration> {
    let mut took = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        assert_eq!(app.get(&app.admin_key, "/api/v1/bays").await.status, 200);
        took.push(started.elapsed());
    }
    took.sort();
    took
}

async fn partial_heads_are_closed_at_the_header_timeout_while_others_are_served(backend: Backend) {
    let header_timeout = Duration::from_secs(2);
    let app = TestApp::spawn_with(backend, with_transport(Transport { header_timeout, ..Transport::default() })).await;
    let before = timed_reads(&app, 20).await;

    // 100 slow clients: half send part of a head and stop, half send nothing at all.
    let opened = Instant::now();
    let mut slow = Vec::new();
    for i in 0..100 {
        let mut conn = Conn::open(&app.base).await;
        if i % 2 == 0 {
            conn.send(b"POST /api/v1/customers HTTP/1.1\r\nhost: test\r\n").await.unwrap();
        }
        slow.push(conn);
    }
    // One more trickles its head a byte every 100 ms: progress does not extend its deadline.
    let stream = tokio::net::TcpStream::connect(app.base.trim_start_matches("http://")).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let trickle = tokio::spawn(async move {
        for byte in format!("GET /healthz HTTP/1.1\r\nx-pad: {}", "a".repeat(100)).bytes() {
            if writer.write_all(&[byte]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });

    let during = timed_reads(&app, 20).await;
    assert!(opened.elapsed() < header_timeout, "the reads ran while the slow clients were connected");
    let (median_before, median_during, max_during) = (before[10], during[10], during[19]);
    assert!(
        max_during < Duration::from_millis(500) && median_during < median_before * 5 + Duration::from_millis(20),
        "reads during the slow clients: median {median_during:?} (before: {median_before:?}), max {max_during:?}"
    );

    let trickled_until = tokio::time::timeout(Duration::from_secs(8), async {
        let mut sink = [0u8; 1024];
        while matches!(reader.read(&mut sink).await, Ok(n) if n > 0) {}
        opened.elapsed()
    })
    .await
    .expect("the trickling client is closed");
    trickle.abort();
    for conn in &mut slow {
        assert!(conn.closed_within(Duration::from_secs(6)).await, "a partial head is still open");
    }
    let all_closed = opened.elapsed();
    assert!(trickled_until >= header_timeout - Duration::from_millis(100), "closed early: {trickled_until:?}");
    assert!(all_closed < header_timeout + Duration::from_secs(3), "closed late: {all_closed:?}");
    assert_eq!(app.get(&app.admin_key, "/api/v1/bays").await.status, 200);
}

async fn idle_keep_alive_outlasts_the_header_timeout(backend: Backend) {
    let (header_timeout, idle_timeout) = (Duration::from_millis(500), Duration::from_millis(1500));
    let app = TestApp::spawn_with(backend, with_transport(Transport { header_timeout, idle_timeout, ..Transport::default() })).await;
    let mut conn = Conn::open(&app.base).await;
    assert_eq!(conn.exchange(&head("GET", "/healthz", &[])).await.unwrap().status, 200);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(conn.exchange(&head("GET", "/healthz", &[])).await.expect("still open past the header timeout").status, 200);
    let idle_since = Instant::now();
    assert!(conn.closed_within(Duration::from_secs(5)).await, "an idle connection is closed");
    assert!(idle_since.elapsed() >= idle_timeout - Duration::from_millis(100), "closed after {:?}", idle_since.elapsed());
}

/// Sends a POST whose head promises 100 bytes of JSON, then only 10 of them, and returns the
/// answer (which must come: a stalled client gets an answer, not a dropped connection) and how
/// long it took.
async fn stalled_post(app: &TestApp) -> (Answer, Duration) {
    let auth = format!("Bearer {}", app.admin_key);
    let request_head = head("POST", "/api/v1/bays", &[("authorization", &auth), ("content-type", "application/json"), ("content-length", "100")]);
    let mut conn = Conn::open(&app.base).await;
    let started = Instant::now();
    conn.send(&request_head).await.unwrap();
    conn.send(b"{\"title\": ").await.unwrap();
    let answer = conn.answer().await.expect("an answer");
    (answer, started.elapsed())
}

async fn a_paused_body_is_a_408_and_closes(backend: Backend) {
    let body_timeout = Duration::from_millis(500);
    let app = TestApp::spawn_with(backend, with_transport(Transport { body_timeout, ..Transport::default() })).await;
    let (answer, took) = stalled_post(&app).await;
    answer.problem(408);
    assert!(answer.closes());
    assert!(took >= body_timeout);
}

async fn a_request_past_its_deadline_is_a_503_with_retry_after(backend: Backend) {
    let transport = Transport { discard_timeout: Duration::from_millis(200), ..Transport::default() };
    let config = AppConfig { request_timeout: Duration::from_millis(500), ..with_transport(transport) };
    let app = TestApp::spawn_with(backend, config).await;
    let (answer, took) = stalled_post(&app).await;
    answer.problem(503);
    assert_eq!(answer.header("retry-after"), Some("1"));
    assert!(answer.closes(), "the rest of the body never came: the connection cannot be reused");
    assert!(took < Duration::from_secs(3));
}

async fn the_connection_cap_holds_and_refuses_quickly(backend: Backend) {
    let app = TestApp::spawn_with(backend, with_transport(Transport { max_connections: 8, ..Transport::default() })).await;
    let healthz = head("GET", "/healthz", &[]);
    let mut held = Vec::new();
    for _ in 0..8 {
        let mut conn = Conn::open(&app.base).await;
        assert_eq!(conn.exchange(&healthz).await.unwrap().status, 200);
        held.push(conn);
    }
    for _ in 0..3 {
        let started = Instant::now();
        let mut extra = Conn::open(&app.base).await;
        let answer = extra.exchange(&healthz).await.expect("refused with an answer");
        answer.problem(503);
        assert_eq!(answer.header("retry-after"), Some("1"));
        assert!(answer.closes());
        assert!(started.elapsed() < Duration::from_secs(1), "refused slowly: {:?}", started.elapsed());
    }
    for conn in &mut held {
        assert_eq!(conn.exchange(&healthz).await.unwrap().status, 200, "connections within the cap are served");
    }
    drop(held.pop());
    let freed = Instant::now();
    loop {
        let mut conn = Conn::open(&app.base).await;
        if conn.exchange(&healthz).await.is_ok_and(|a| a.status == 200) {
            break;
        }
        assert!(freed.elapsed() < Duration::from_secs(3), "a closed connection frees its place");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn a_client_that_does_not_read_is_dropped_after_the_write_timeout(backend: Backend) {
    let write_timeout = Duration::from_millis(500);
    let app = TestApp::spawn_with(backend, with_transport(Transport { write_timeout, ..Transport::default() })).await;
    let doc_len = app.client.get(format!("{}/api/v1/openapi.json", app.base)).send().await.unwrap().bytes().await.unwrap().len();
    // 200 documents requested at once (far more than socket buffers hold), none read for a while.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(app.base.trim_start_matches("http://").parse().unwrap()).await.unwrap();
    let requests = head("GET", "/api/v1/openapi.json", &[]).repeat(200);
    stream.write_all(&requests).await.unwrap();
    tokio::time::sleep(write_timeout * 4).await;
    let received = tokio::time::timeout(Duration::from_secs(20), async {
        let (mut total, mut chunk) = (0usize, vec![0u8; 65536]);
        while let Ok(n @ 1..) = stream.read(&mut chunk).await {
            total += n;
        }
        total
    })
    .await
    .expect("the server ended the connection");
    assert!(received < 200 * doc_len, "received {received} bytes: the whole answer, nothing was cut");
    assert_eq!(app.get(&app.admin_key, "/api/v1/bays").await.status, 200);
}
