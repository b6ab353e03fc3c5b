//! The change feed's promise: a client paging with `after` sees every committed event exactly
//! once, in one stable order, even while many writers commit out of id order (on PostgreSQL,
//! ids are taken before commit, so a later id can commit first).

use std::{
    collections::BTreeSet,
    sync::Arc,
    time::{Duration, Instant},
};

use autoshop::{
    db::{Db, DbConfig},
    events::store::{NewEvent, insert},
};
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::support::{Backend, TestApp};

crate::backend_tests!(
    concurrent_writers_never_make_the_feed_skip_or_repeat,
    a_reader_polling_while_three_servers_create_sees_each_creation_once,
    feed_parameters_are_checked,
    retention_deletes_old_events_and_their_cursors_answer_410,
);

const WRITERS: u64 = 12;
const CHANGES: u64 = 25;

/// xorshift: reproducible delays without a dependency.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// A page of the test's own events (`customer.updated`; the company's creation records an
/// `api_key.created` before them).
async fn read_page(app: &TestApp, key: &str, after: Option<&str>, limit: u32) -> (Vec<Value>, Option<String>) {
    let path = match after {
        Some(a) => format!("/api/v1/events?after={a}&limit={limit}&filter[type]=customer.updated"),
        None => format!("/api/v1/events?limit={limit}&filter[type]=customer.updated"),
    };
    let r = app.get(key, &path).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let next = r.body["next_after"].as_str().map(str::to_owned);
    (r.body["data"].as_array().unwrap().clone(), next)
}

async fn concurrent_writers_never_make_the_feed_skip_or_repeat(backend: Backend) {
    let app = Arc::new(TestApp::spawn(backend).await);
    let key = app.admin_key.clone();
    let committed = Arc::new(Mutex::new(BTreeSet::new()));
    // The writers get a pool of their own (another replica, as it were), large enough that they
    // all overlap and the reader is never starved of a connection.
    let writer_db = match backend {
        Backend::Sqlite => app.db.clone(),
        Backend::Postgres => Db::connect(&DbConfig { url: app.db_url.clone(), max_connections: WRITERS as u32 }).await.unwrap(),
    };
    // Long holds would stall SQLite's single writer; PostgreSQL gets real overlap.
    let max_delay_ms = if backend == Backend::Postgres { 25 } else { 2 };
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let (app, committed, db) = (app.clone(), committed.clone(), writer_db.clone());
        writers.push(tokio::spawn(async move {
            let mut rng = 0x9e37_79b9_7f4a_7c15 ^ (w + 1);
            for n in 0..CHANGES {
                let mut tx = db.begin().await.unwrap();
                let event = NewEvent { kind: "customer.updated", shop_id: None, data: json!({"writer": w, "n": n}).to_string() };
                // The event's id is taken now; the commit comes after a random delay, so later
                // ids often commit first.
                insert(&mut tx, app.company_id, &[event], autoshop::db::now_micros()).await.unwrap();
                tokio::time::sleep(Duration::from_millis(next(&mut rng) % (max_delay_ms + 1))).await;
                if next(&mut rng) % 10 == 0 {
                    drop(tx); // rolled back: must never appear
                    continue;
                }
                tx.commit().await.unwrap();
                committed.lock().await.insert((w, n));
            }
        }));
    }

    // The reader follows the feed while the writers run, then until it has seen every committed
    // event. The feed holds an event back while any transaction that began before it still runs
    // (another test's too: a test waiting a second for PostgreSQL's deadlock check made the old
    // stop-at-the-first-empty-page drain give up early), so the drain waits for the horizon, up
    // to a deadline; an event the feed skipped never comes, and fails below.
    let mut seen: Vec<(String, u64, u64)> = Vec::new();
    let mut after: Option<String> = None;
    let mut limit = 1;
    let mut draining_since: Option<Instant> = None;
    loop {
        let done = writers.iter().all(|w| w.is_finished());
        let (page, next) = read_page(&app, &key, after.as_deref(), limit).await;
        for e in &page {
            seen.push((e["id"].as_str().unwrap().to_owned(), e["data"]["writer"].as_u64().unwrap(), e["data"]["n"].as_u64().unwrap()));
        }
        if next.is_some() {
            after = next;
        }
        limit = limit % 9 + 1;
        if done && page.is_empty() {
            let since = *draining_since.get_or_insert_with(Instant::now);
            let committed = committed.lock().await;
            let seen_all = committed.iter().all(|&(w, n)| seen.iter().any(|&(_, sw, sn)| (sw, sn) == (w, n)));
            if seen_all || since.elapsed() > Duration::from_secs(20) {
                break;
            }
        }
        // Draining, it polls as a client would (and under the key's rate limit).
        tokio::time::sleep(Duration::from_millis(if draining_since.is_some() { 50 } else { 3 })).await;
    }
    for w in writers {
        w.await.unwrap();
    }

    let ids: Vec<&String> = seen.iter().map(|(id, _, _)| id).collect();
    assert!(ids.windows(2).all(|p| p[0] < p[1]), "ids are not strictly increasing: the feed repeated or reordered events");
    let got: BTreeSet<(u64, u64)> = seen.iter().map(|(_, w, n)| (*w, *n)).collect();
    assert_eq!(got.len(), seen.len(), "an event was delivered twice");
    let committed = committed.lock().await.clone();
    let missing: Vec<_> = committed.difference(&got).collect();
    assert!(missing.is_empty(), "committed events the reader never saw: {missing:?}");
    assert!(got.is_subset(&committed), "the reader saw events of rolled-back changes");

    // Stable order: reading everything again from the start gives the same sequence.
    let mut again = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let (page, next) = read_page(&app, &key, after.as_deref(), 1000).await;
        if page.is_empty() {
            break;
        }
        again.extend(page.iter().map(|e| e["id"].as_str().unwrap().to_owned()));
        after = next;
    }
    assert_eq!(again, ids.into_iter().cloned().collect::<Vec<_>>());
}

async fn feed_parameters_are_checked(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    app.get(key, "/api/v1/events?after=evt_nope").await.invalid("after");
    app.get(key, "/api/v1/events?limit=0").await.invalid("limit");
    app.get(key, "/api/v1/events?limit=1001").await.invalid("limit");
    app.get(key, "/api/v1/events?filter[type]=appointment.exploded").await.invalid("filter[type]");
    app.get(key, "/api/v1/events?filter[color]=red").await.problem(400);
    app.get(key, "/api/v1/events?filter[shop_id]=999999").await.problem(404);
    let r = app.get(key, "/api/v1/events?filter[type]=appointment.*").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["next_after"], Value::Null, "an empty feed without after has no cursor yet");
    let after = "evt_00000000000000000000000000000001";
    assert_eq!(app.get(key, &format!("/api/v1/events?after={after}&filter[type]=appointment.*")).await.body["next_after"], after);
}

async fn retention_deletes_old_events_and_their_cursors_answer_410(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let now = autoshop::db::now_micros();
    let day = 86_400_000_000;
    for (n, age_days) in [(0, 40), (1, 31), (2, 29), (3, 0)] {
        let mut tx = app.db.begin().await.unwrap();
        let event = NewEvent { kind: "customer.updated", shop_id: None, data: json!({"n": n}).to_string() };
        insert(&mut tx, app.company_id, &[event], now - age_days * day).await.unwrap();
        tx.commit().await.unwrap();
    }
    // On PostgreSQL an event shows once every older transaction of the cluster has ended.
    let mut all = Vec::new();
    for _ in 0..500 {
        all = read_page(&app, key, None, 100).await.0;
        if all.len() == 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let ids: Vec<String> = all.iter().map(|e| e["id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(ids.len(), 4);
    // Another company's old events are its own business: the mark is per company.
    let deleted = autoshop::events::store::purge(&app.db, now - 30 * day, 1000).await.unwrap();
    assert!(deleted >= 2, "{deleted}");
    let (kept, _) = read_page(&app, key, None, 100).await;
    let numbers: Vec<u64> = kept.iter().map(|e| e["data"]["n"].as_u64().unwrap()).collect();
    assert_eq!(numbers, vec![2, 3], "events older than the window are gone, the rest stay in order");
    for purged in &ids[..2] {
        app.get(key, &format!("/api/v1/events?after={purged}")).await.problem(410);
    }
    let (after_kept, _) = read_page(&app, key, Some(&ids[2]), 100).await;
    assert_eq!(after_kept.len(), 1, "a cursor inside the window still works");
}

/// The feed's promise over the real write path: three servers (replicas on PostgreSQL, each with
/// its own pool, sending a create and its event as one statement or sharing statements between
/// requests) take 150 creates at once, a third of them keyed and sent to two servers, while a
/// reader polls a fourth with small, changing page sizes. The reader sees every creation's event
/// exactly once, ids only rising, and what it saw is what one read of the whole feed shows.
async fn a_reader_polling_while_three_servers_create_sees_each_creation_once(backend: Backend) {
    const CREATES: usize = 150;
    let config = autoshop::config::AppConfig { rate_limit: 0.0, ..crate::support::test_config() };
    let app = Arc::new(TestApp::spawn_with(backend, config.clone()).await);
    let servers = [app.base.clone(), app.spawn_replica_with(config.clone()).await, app.spawn_replica_with(config.clone()).await];
    let reader_base = app.spawn_replica_with(config).await;
    let shop = app.create_shop(&app.admin_key, "Busy", "UTC").await;
    app.create_bay(&app.admin_key, shop, "Lift", 0).await;

    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (app, done, base) = (app.clone(), done.clone(), reader_base.clone());
        tokio::spawn(async move {
            let (mut seen, mut after, mut rng) = (Vec::<Value>::new(), None::<String>, 0x9e37_79b9_7f4a_7c15u64);
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                let limit = next(&mut rng) % 9 + 1;
                let path = match &after {
                    Some(a) => format!("{base}/api/v1/events?after={a}&limit={limit}&filter[type]=appointment.created"),
                    None => format!("{base}/api/v1/events?limit={limit}&filter[type]=appointment.created"),
                };
                let page: Value = app.client.get(&path).bearer_auth(&app.admin_key).send().await.unwrap().json().await.unwrap();
                let data = page["data"].as_array().unwrap_or_else(|| panic!("{page}"));
                seen.extend(data.iter().cloned());
                after = page["next_after"].as_str().map(str::to_owned).or(after);
                let finished = done.load(std::sync::atomic::Ordering::SeqCst);
                if finished && seen.len() >= CREATES {
                    return seen;
                }
                assert!(Instant::now() < deadline, "the reader saw {} of {CREATES} creations", seen.len());
                if data.is_empty() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        })
    };

    let bodies = (0..CREATES)
        .map(|n| {
            let mut b = crate::appointments::body(shop, &format!("2030-03-{:02}T10:00:00Z", n % 28 + 1));
            b["last_name"] = json!(format!("Feed{n}"));
            if n % 4 == 0 {
                b["column"] = json!("Lift");
            }
            b
        })
        .collect();
    let ids = crate::support::create_across(&app, &servers, bodies, Some("feed")).await;
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let seen = reader.await.unwrap();

    let event_ids: Vec<&str> = seen.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert!(event_ids.windows(2).all(|w| w[0] < w[1]), "ids only rise, none twice");
    let appointments: Vec<i64> = seen.iter().map(|e| e["data"]["appointment_id"].as_i64().unwrap()).collect();
    assert_eq!(appointments.len(), CREATES, "one event per creation, none more");
    assert_eq!(appointments.iter().copied().collect::<BTreeSet<_>>(), ids, "every creation's event");
    let whole = app.get(&app.admin_key, "/api/v1/events?limit=1000&filter[type]=appointment.created").await;
    assert_eq!(whole.ok()["data"].as_array().unwrap(), &seen, "the polled feed is the feed");
}
