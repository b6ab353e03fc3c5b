//! The live stream: changes reach an open stream within a second (on PostgreSQL, from another
//! replica), in feed order, resumable with Last-Event-ID.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use autoshop::change::Change;
use serde_json::{Value, json};

use crate::support::{Backend, HeldWrite, TestApp};

crate::backend_tests!(
    a_change_reaches_a_stream_on_another_replica_within_a_second,
    streams_resume_after_last_event_id,
    streams_on_two_replicas_carry_the_feed_exactly_while_three_servers_create,
    a_stream_without_a_cursor_starts_after_the_changes_committed_before_it,
);

/// An open SSE response, read event by event.
struct SseReader {
    response: reqwest::Response,
    buffer: String,
}

impl SseReader {
    async fn open(base: &str, key: &str, query: &str, last_event_id: Option<&str>) -> SseReader {
        let mut req = crate::support::client().get(format!("{base}/api/v1/events/stream{query}")).bearer_auth(key);
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        let response = req.send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        SseReader { response, buffer: String::new() }
    }

    /// The next event's `(id, type, data)`, skipping keep-alive comments; `None` on timeout.
    async fn next(&mut self, within: Duration) -> Option<(String, String, Value)> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let field = |name: &str| block.lines().find_map(|l| l.strip_prefix(&format!("{name}:")).map(|v| v.trim().to_owned()));
                if let (Some(id), Some(kind), Some(data)) = (field("id"), field("event"), field("data")) {
                    return Some((id, kind, serde_json::from_str(&data).unwrap()));
                }
                continue;
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            match tokio::time::timeout(left, self.response.chunk()).await {
                Ok(Ok(Some(bytes))) => self.buffer.push_str(&String::from_utf8_lossy(&bytes)),
                _ => return None,
            }
        }
    }
}

async fn commit_event(app: &TestApp, n: u64) {
    let mut change = Change::begin(&app.db, app.company_id).await.unwrap();
    change.record("customer.updated", None, &json!({"n": n})).unwrap();
    change.commit().await.unwrap();
}

async fn a_change_reaches_a_stream_on_another_replica_within_a_second(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let replica = app.spawn_replica().await;
    commit_event(&app, 0).await; // before the stream opens: not sent
    let mut stream = SseReader::open(&replica, &app.admin_key, "", None).await;
    for n in 1..=2 {
        // Let the stream go idle (its quick re-reads stop after about a second): from then on
        // only the commit's notice can wake it in time.
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let started = Instant::now();
        commit_event(&app, n).await;
        let (id, kind, data) = stream.next(Duration::from_secs(1)).await.unwrap_or_else(|| panic!("event {n} did not arrive within a second"));
        assert!(started.elapsed() < Duration::from_secs(1));
        assert_eq!(kind, "customer.updated");
        assert_eq!(data["data"]["n"], n, "in commit order, without the event from before the stream");
        assert_eq!(data["id"], id.as_str());
        assert_eq!(data["company_id"], app.company_id);
    }
    // Another company's changes never reach this stream.
    let (other, _) = app.new_company("Other").await;
    let mut change = Change::begin(&app.db, other).await.unwrap();
    change.record("customer.updated", None, &json!({"n": 99})).unwrap();
    change.commit().await.unwrap();
    assert!(stream.next(Duration::from_millis(700)).await.is_none());
}

/// Without a cursor a stream starts with the changes committed after it connected, also when an
/// older transaction still runs on PostgreSQL (it holds the feed's horizon below changes that
/// committed before the stream: those are not sent, the running one's are).
async fn a_stream_without_a_cursor_starts_after_the_changes_committed_before_it(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    commit_event(&app, 0).await;
    // SQLite's one writer commits in order: nothing older can still be running there.
    let older = match backend {
        Backend::Postgres => {
            let held = HeldWrite::begin(&app).await;
            held.run("SELECT pg_current_xact_id()", &[]).await;
            Some(held)
        }
        Backend::Sqlite => None,
    };
    commit_event(&app, 1).await;
    let mut stream = SseReader::open(&app.base, &app.admin_key, "", None).await;
    if let Some(older) = older {
        older.run("INSERT INTO events (company_id, type, data, created_at) VALUES ($1, 'customer.updated', '{\"n\": 2}', 0)", &[app.company_id]).await;
        older.commit().await;
    }
    commit_event(&app, 3).await;
    let mut sent = Vec::new();
    while let Some((_, _, data)) = stream.next(Duration::from_millis(1500)).await {
        sent.push(data["data"]["n"].as_i64().unwrap());
    }
    let expected = if backend == Backend::Postgres { vec![2, 3] } else { vec![3] };
    assert_eq!(sent, expected, "the events committed after the stream connected, in feed order");
}

async fn streams_resume_after_last_event_id(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    for n in 0..5 {
        commit_event(&app, n).await;
    }
    let mut feed = Vec::new();
    for _ in 0..200 {
        feed = app.get(&app.admin_key, "/api/v1/events?filter[type]=customer.updated").await.body["data"].as_array().unwrap().clone();
        if feed.len() == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let second = feed[1]["id"].as_str().unwrap();
    let mut stream = SseReader::open(&app.base, &app.admin_key, "", Some(second)).await;
    for n in 2..5 {
        let (_, _, data) = stream.next(Duration::from_secs(2)).await.expect("replayed event");
        assert_eq!(data["data"]["n"], n);
    }
    let mut stream = SseReader::open(&app.base, &app.admin_key, &format!("?after={}", feed[3]["id"].as_str().unwrap()), None).await;
    assert_eq!(stream.next(Duration::from_secs(2)).await.unwrap().2["data"]["n"], 4);
    let bad = app.client.get(format!("{}/api/v1/events/stream", app.base)).bearer_auth(&app.admin_key).header("last-event-id", "nope").send().await.unwrap();
    assert_eq!(bad.status(), 422);
    let body: Value = bad.json().await.unwrap();
    assert!(body["errors"]["Last-Event-ID"].is_array(), "{body}");
    // An empty Last-Event-ID counts as absent: the query's cursor is still validated.
    let bad = app.client.get(format!("{}/api/v1/events/stream?after=AAA", app.base)).bearer_auth(&app.admin_key).header("last-event-id", "").send().await.unwrap();
    assert_eq!(bad.status(), 422);
    let body: Value = bad.json().await.unwrap();
    assert!(body["errors"]["after"].is_array(), "{body}");
}

/// The stream's promise over the real write path: while three servers take 120 creates at once
/// in two shops (a third of them keyed and sent to two servers), a stream on a fourth server
/// (all shops) and one on a fifth (a key limited to one shop) each carry exactly the events
/// the feed shows that key afterwards: none missing, none twice, none of the other shop, in the
/// feed's order. On PostgreSQL each server has its own pool and learns of the others' commits
/// by notice only.
async fn streams_on_two_replicas_carry_the_feed_exactly_while_three_servers_create(backend: Backend) {
    const CREATES: usize = 120;
    let config = autoshop::config::AppConfig { rate_limit: 0.0, ..crate::support::test_config() };
    let app = Arc::new(TestApp::spawn_with(backend, config.clone()).await);
    let servers = [app.base.clone(), app.spawn_replica_with(config.clone()).await, app.spawn_replica_with(config.clone()).await];
    let (all_base, one_base) = (app.spawn_replica_with(config.clone()).await, app.spawn_replica_with(config).await);
    let a = app.create_shop(&app.admin_key, "A", "UTC").await;
    let b = app.create_shop(&app.admin_key, "B", "UTC").await;
    app.create_bay(&app.admin_key, a, "Lift", 0).await;
    let shop_a_key = app.create_key(&app.admin_key, "read", Some(vec![a])).await;
    let created = "?filter[type]=appointment.created";

    // Each stream is read on a task of its own while the creates run, until it carried as many
    // events as the key may see (or a minute passed), then half a second more for any extra.
    // (On PostgreSQL an event shows only once no older transaction of the cluster is open, and
    // other tests hold some open for a while: no quiet spell means the stream is done.)
    let read = |mut stream: SseReader, expected: usize| {
        tokio::spawn(async move {
            let (mut seen, deadline) = (Vec::new(), Instant::now() + Duration::from_secs(60));
            while seen.len() < expected && Instant::now() < deadline {
                if let Some(event) = stream.next(Duration::from_secs(1)).await {
                    seen.push(event);
                }
            }
            while let Some(event) = stream.next(Duration::from_millis(500)).await {
                seen.push(event);
            }
            seen.into_iter()
                .map(|(id, kind, data)| {
                    assert_eq!(kind, "appointment.created");
                    assert_eq!(data["id"], id.as_str());
                    data
                })
                .collect::<Vec<_>>()
        })
    };
    let all_shops = read(SseReader::open(&all_base, &app.admin_key, created, None).await, CREATES);
    let shop_a = read(SseReader::open(&one_base, &shop_a_key, created, None).await, CREATES / 2);

    let bodies = (0..CREATES)
        .map(|n| {
            let mut body = crate::appointments::body(if n % 2 == 0 { a } else { b }, &format!("2030-04-{:02}T10:00:00Z", n % 28 + 1));
            body["last_name"] = json!(format!("Stream{n}"));
            if n % 4 == 0 {
                body["column"] = json!("Lift");
            }
            body
        })
        .collect();
    crate::support::create_across(&app, &servers, bodies, Some("stream")).await;

    for (stream, key, count) in [(all_shops, &app.admin_key, CREATES), (shop_a, &shop_a_key, CREATES / 2)] {
        let seen = stream.await.unwrap();
        let path = format!("/api/v1/events{created}&limit=1000");
        let feed = app.eventually(key, &path, |b| b["data"].as_array().is_some_and(|d| d.len() >= count)).await;
        let feed = feed["data"].as_array().unwrap().clone();
        assert_eq!(feed.len(), count, "the feed shows the key every creation it may see");
        let ids = |events: &[Value]| events.iter().map(|e| e["id"].as_str().unwrap().to_owned()).collect::<Vec<_>>();
        assert_eq!(ids(&seen), ids(&feed), "the stream carried the feed: every event once, in its order");
        assert_eq!(seen, feed, "with the same contents");
    }
}
