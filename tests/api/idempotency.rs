//! Safe retries (decisions §12): a keyed POST runs once; repeats replay its answer.

use std::collections::BTreeMap;

use reqwest::StatusCode;
use serde_json::{Value, json};

use autoshop::config::AppConfig;

use crate::{
    appointments::body,
    support::{Backend, HeldWrite, TestApp},
};

crate::backend_tests!(
    fifty_concurrent_repeats_write_once_and_answer_alike,
    replicas_racing_on_many_keys_write_each_once,
    a_repeat_while_the_first_runs_is_told_to_retry,
    replays_mismatches_and_failures,
    stored_answers_never_hold_secrets,
    route_checks_run_key_then_idempotency_key_then_condition,
);

async fn keyed_post(app: &TestApp, key: &str, path: &str, idem: &str, body: &Value) -> (StatusCode, reqwest::header::HeaderMap, String) {
    let r = app
        .client
        .post(format!("{}{path}", app.base))
        .bearer_auth(key)
        .header("idempotency-key", idem)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let (status, headers) = (r.status(), r.headers().clone());
    (status, headers, r.text().await.unwrap())
}

async fn appointments_named(app: &TestApp, last_name: &str) -> Vec<i64> {
    let r = app.get(&app.admin_key, &format!("/api/v1/appointments?filter[last_name]={last_name}&filter[trashed]=with&pageSize=100")).await;
    r.ids("appointment_id")
}

async fn fifty_concurrent_repeats_write_once_and_answer_alike(backend: Backend) {
    let app = std::sync::Arc::new(TestApp::spawn(backend).await);
    let shop = app.create_shop(&app.admin_key, "Chicago", "America/Chicago").await;
    let mut b = body(shop, "2030-01-07T09:00:00-06:00");
    b["last_name"] = json!("Onceonly");
    let replica = app.spawn_replica().await;
    let mut clients = Vec::new();
    for n in 0..50 {
        let (app, b, replica) = (app.clone(), b.clone(), replica.clone());
        clients.push(tokio::spawn(async move {
            // Half the clients go through another server (another replica on PostgreSQL).
            let base = if n % 2 == 0 { app.base.clone() } else { replica };
            let r = app
                .client
                .post(format!("{base}/api/v1/appointments"))
                .bearer_auth(&app.admin_key)
                .header("idempotency-key", "booking-7f3a")
                .json(&b)
                .send()
                .await
                .unwrap();
            let replayed = r.headers().get("idempotent-replayed").is_some();
            let retry_after = r.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
            (r.status(), replayed, retry_after, r.text().await.unwrap())
        }));
    }
    let mut answers = Vec::new();
    for c in clients {
        answers.push(c.await.unwrap());
    }
    let created: Vec<_> = answers.iter().filter(|a| a.0 == StatusCode::CREATED).collect();
    let fresh: Vec<_> = created.iter().filter(|a| !a.1).collect();
    assert_eq!(fresh.len(), 1, "exactly one request ran: {:?}", answers.iter().map(|a| (a.0, a.1)).collect::<Vec<_>>());
    for a in &answers {
        match a.0 {
            StatusCode::CREATED => assert_eq!(
                serde_json::from_str::<Value>(&a.3).unwrap(),
                serde_json::from_str::<Value>(&fresh[0].3).unwrap(),
                "a replay answers what the first did"
            ),
            StatusCode::CONFLICT => assert_eq!(a.2.as_deref(), Some("1"), "409 while the first runs carries Retry-After: 1"),
            other => panic!("unexpected {other}: {}", a.3),
        }
    }
    assert_eq!(appointments_named(&app, "onceonly").await.len(), 1, "one appointment, whatever the race");
    // Once it is done, every repeat is a replay.
    let (status, headers, text) = keyed_post(&app, &app.admin_key, "/api/v1/appointments", "booking-7f3a", &b).await;
    assert_eq!((status, headers.get("idempotent-replayed").map(|v| v.to_str().unwrap())), (StatusCode::CREATED, Some("true")));
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), serde_json::from_str::<Value>(&fresh[0].3).unwrap());
    assert_eq!(headers.get("location").map(|v| v.to_str().unwrap().to_owned()), Some(format!("/api/v1/appointments/{}", serde_json::from_str::<Value>(&text).unwrap()["appointment_id"])));
}

/// A repeat that comes while the key's first request is still running (held up here at its
/// write) is a 409 with `Retry-After: 1`, and does not run; once the first is done, the repeat
/// replays its answer.
async fn a_repeat_while_the_first_runs_is_told_to_retry(backend: Backend) {
    let app = std::sync::Arc::new(TestApp::spawn(backend).await);
    let shop = app.create_shop(&app.admin_key, "Slow", "America/Chicago").await;
    let mut b = body(shop, "2030-01-07T09:00:00-06:00");
    b["last_name"] = json!("Heldup");
    // An appointment's insert needs its foreign key's share lock on the shop's row.
    let stall = HeldWrite::begin(&app).await;
    stall.lock_row_on_postgres("shops", app.company_id, shop).await;
    let first = {
        let (app, b) = (app.clone(), b.clone());
        tokio::spawn(async move { keyed_post(&app, &app.admin_key, "/api/v1/appointments", "held-1", &b).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert!(!first.is_finished(), "the first request waits for the lock");
    let (status, headers, text) = keyed_post(&app, &app.admin_key, "/api/v1/appointments", "held-1", &b).await;
    assert_eq!(status, StatusCode::CONFLICT, "{text}");
    assert_eq!(headers.get("retry-after").map(|v| v.to_str().unwrap()), Some("1"));
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["status"], 409);
    stall.commit().await;
    let (status, _, created) = first.await.unwrap();
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let (status, headers, replayed) = keyed_post(&app, &app.admin_key, "/api/v1/appointments", "held-1", &b).await;
    assert_eq!((status, headers.get("idempotent-replayed").map(|v| v.to_str().unwrap())), (StatusCode::CREATED, Some("true")));
    assert_eq!(serde_json::from_str::<Value>(&replayed).unwrap(), serde_json::from_str::<Value>(&created).unwrap());
    assert_eq!(appointments_named(&app, "heldup").await.len(), 1, "the 409 ran nothing");
}

/// Servers do not see each other's running requests: for each of many keys, both servers get
/// the request at the same moment and may both run it; the write whose answer is stored second
/// must roll back and answer the first's answer.
async fn replicas_racing_on_many_keys_write_each_once(backend: Backend) {
    let app = std::sync::Arc::new(TestApp::spawn(backend).await);
    let shop = app.create_shop(&app.admin_key, "Chicago", "America/Chicago").await;
    let replica = app.spawn_replica().await;
    let mut races = Vec::new();
    for n in 0..30 {
        let mut b = body(shop, "2030-01-08T09:00:00-06:00");
        // Names of one length: none contains another (the filter matches substrings).
        b["last_name"] = json!(format!("Racer{}{}", char::from(b'a' + (n / 26) as u8), char::from(b'a' + (n % 26) as u8)));
        for base in [app.base.clone(), replica.clone()] {
            let (app, b) = (app.clone(), b.clone());
            races.push(tokio::spawn(async move {
                let r = app
                    .client
                    .post(format!("{base}/api/v1/appointments"))
                    .bearer_auth(&app.admin_key)
                    .header("idempotency-key", format!("race-{n}"))
                    .json(&b)
                    .send()
                    .await
                    .unwrap();
                (n, r.status(), r.text().await.unwrap())
            }));
        }
    }
    let mut answers: BTreeMap<usize, Vec<(StatusCode, String)>> = BTreeMap::new();
    for race in races {
        let (n, status, text) = race.await.unwrap();
        answers.entry(n).or_default().push((status, text));
    }
    for (n, pair) in &answers {
        let statuses: Vec<StatusCode> = pair.iter().map(|a| a.0).collect();
        assert!(statuses.iter().all(|s| *s == StatusCode::CREATED), "key race-{n}: both answers are the one creation: {pair:?}");
        let ids: Vec<Value> = pair.iter().map(|a| serde_json::from_str::<Value>(&a.1).unwrap()["appointment_id"].clone()).collect();
        assert_eq!(ids[0], ids[1], "key race-{n}: both callers get the same appointment");
        let last_name = serde_json::from_str::<Value>(&pair[0].1).unwrap()["last_name"].as_str().unwrap().to_lowercase();
        assert_eq!(appointments_named(&app, &last_name).await.len(), 1, "key race-{n}: written once");
    }
}

async fn replays_mismatches_and_failures(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "Chicago", "America/Chicago").await;
    let mut b = body(shop, "2030-01-07T09:00:00-06:00");
    b["last_name"] = json!("Keyed");

    // Invalid keys are a 400 and run nothing.
    for bad in ["has space", &"x".repeat(256)] {
        let (status, _, _) = keyed_post(&app, key, "/api/v1/appointments", bad, &b).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad:?}");
    }
    assert!(appointments_named(&app, "keyed").await.is_empty());

    // A failed first request stores nothing: the corrected retry with the same key runs.
    let mut broken = b.clone();
    broken["make"] = json!("");
    let (status, _, _) = keyed_post(&app, key, "/api/v1/appointments", "k1", &broken).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, headers, first) = keyed_post(&app, key, "/api/v1/appointments", "k1", &b).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    assert!(headers.get("idempotent-replayed").is_none());
    // The same key with another body, path or method is a 422 on the header.
    let mut other = b.clone();
    other["reason"] = json!("something else");
    let (status, _, text) = keyed_post(&app, key, "/api/v1/appointments", "k1", &other).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(serde_json::from_str::<Value>(&text).unwrap()["errors"]["Idempotency-Key"].is_array(), "{text}");
    let (status, _, _) = keyed_post(&app, key, "/api/v1/bays", "k1", &json!({"shop_id": shop, "title": "Lift"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    // Byte for byte: the same JSON with other spacing is another body.
    let spaced = app
        .client
        .post(format!("{}/api/v1/appointments", app.base))
        .bearer_auth(key)
        .header("idempotency-key", "k1")
        .header("content-type", "application/json")
        .body(serde_json::to_string_pretty(&b).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(spaced.status(), StatusCode::UNPROCESSABLE_ENTITY);
    // Keys belong to the API key: another key may use the same value for its own request.
    let writer = app.create_key(key, "write", None).await;
    let (status, headers, _) = keyed_post(&app, &writer, "/api/v1/appointments", "k1", &b).await;
    assert_eq!(status, StatusCode::CREATED);
    assert!(headers.get("idempotent-replayed").is_none());
    assert_eq!(appointments_named(&app, "keyed").await.len(), 2);
    // Without the header nothing changes: each POST writes.
    app.post(key, "/api/v1/appointments", b.clone()).await.ok();
    assert_eq!(appointments_named(&app, "keyed").await.len(), 3);
    // Other POSTs replay too (payments: a retried payment must not be taken twice).
    let customer = crate::appointments::create_customer(&app, key, shop, "Ann", "Lee", "ann@example.com").await;
    let entry = json!({"shop_id": shop, "reference": "INV-1", "date": "2024-07-01", "due_date": "2024-07-31", "amount": 100});
    let r = app.post(key, &format!("/api/v1/customers/{customer}/accounts_receivable"), entry).await;
    let payments = format!("/api/v1/customers/{customer}/accounts_receivable/{}/payments", r.ok()["id"]);
    let mut balances = BTreeMap::new();
    for _ in 0..3 {
        let (status, _, text) = keyed_post(&app, key, &payments, "pay-1", &json!({"amount": 30, "date": "2024-07-02"})).await;
        assert_eq!(status, StatusCode::CREATED);
        *balances.entry(serde_json::from_str::<Value>(&text).unwrap()["balance"].to_string()).or_insert(0) += 1;
    }
    assert_eq!(balances.len(), 1, "{balances:?}");
    let entry = app.get(key, &payments.trim_end_matches("/payments").to_owned()).await;
    assert_eq!(entry.ok()["balance"], json!(70.0), "paid once");
    // A repeat whose write would now be refused (the balance is paid off: a second payment of
    // 70 is above it) still answers the first's answer: on PostgreSQL, where a repeat runs until
    // it meets the stored answer, the refusal gives way to the replay.
    let (status, headers, first) = keyed_post(&app, key, &payments, "pay-off", &json!({"amount": 70, "date": "2024-07-03"})).await;
    assert_eq!((status, headers.get("idempotent-replayed").is_some()), (StatusCode::CREATED, false), "{first}");
    let (status, headers, again) = keyed_post(&app, key, &payments, "pay-off", &json!({"amount": 70, "date": "2024-07-03"})).await;
    assert_eq!((status, headers.get("idempotent-replayed").is_some()), (StatusCode::CREATED, true), "{again}");
    assert_eq!(serde_json::from_str::<Value>(&again).unwrap(), serde_json::from_str::<Value>(&first).unwrap());
    // The same key with another body that would be refused anyway is still the key's 422.
    let (status, _, text) = keyed_post(&app, key, &payments, "pay-off", &json!({"amount": 71, "date": "2024-07-03"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(serde_json::from_str::<Value>(&text).unwrap()["errors"]["Idempotency-Key"].is_array(), "{text}");
    let entry = app.get(key, &payments.trim_end_matches("/payments").to_owned()).await;
    assert_eq!(entry.ok()["balance"], json!(0.0), "paid off once");
}

async fn stored_answers_never_hold_secrets(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let body = json!({"name": "site", "role": "read"});
    let (status, _, first) = keyed_post(&app, key, "/api/v1/api_keys", "new-key", &body).await;
    assert_eq!(status, StatusCode::CREATED);
    let first: Value = serde_json::from_str(&first).unwrap();
    assert!(first["api_key"].as_str().unwrap().starts_with("ask_"));
    let (status, headers, again) = keyed_post(&app, key, "/api/v1/api_keys", "new-key", &body).await;
    assert_eq!((status, headers.get("idempotent-replayed").is_some()), (StatusCode::CREATED, true));
    let again: Value = serde_json::from_str(&again).unwrap();
    assert_eq!(again["api_key"], Value::Null, "the key is never stored");
    assert_eq!(again["id"], first["id"]);
    assert_eq!(app.get(key, "/api/v1/api_keys?pageSize=100").await.ok()["meta"]["total"], 2, "one key created");

    let hook = json!({"url": "https://hooks.example.com/x", "events": ["*"]});
    let (_, _, first) = keyed_post(&app, key, "/api/v1/webhooks", "new-hook", &hook).await;
    assert!(serde_json::from_str::<Value>(&first).unwrap()["secret"].as_str().unwrap().starts_with("whsec_"));
    let (_, _, again) = keyed_post(&app, key, "/api/v1/webhooks", "new-hook", &hook).await;
    assert_eq!(serde_json::from_str::<Value>(&again).unwrap()["secret"], Value::Null);
    assert_eq!(app.get(key, "/api/v1/webhooks").await.ok()["meta"]["total"], 1);
}

/// The checks every `/api/v1` route runs before its handler (`app::api_checks`), in their order:
/// the API key, then the `Idempotency-Key`, then `If-None-Match`; the key's rate limit is
/// reported on the answers of the later two.
async fn route_checks_run_key_then_idempotency_key_then_condition(backend: Backend) {
    let config = AppConfig { rate_limit: 0.5, rate_limit_burst: 20.0, ..crate::support::test_config() };
    let app = TestApp::spawn_with(backend, config).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "Chicago", "America/Chicago").await;
    let b = body(shop, "2030-01-07T09:00:00-06:00");

    // A wrong API key is a 401 before the malformed Idempotency-Key is looked at.
    let (status, _, _) = keyed_post(&app, "not-a-key", "/api/v1/appointments", "has space", &b).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // With a right one, the malformed Idempotency-Key is a 400 that reports the limit.
    let (status, headers, _) = keyed_post(&app, key, "/api/v1/appointments", "has space", &b).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(headers.get("ratelimit-remaining").is_some());

    // A replay is answered by the Idempotency-Key's check, and still reports the limit.
    let (status, _, first) = keyed_post(&app, key, "/api/v1/appointments", "in-order", &b).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let (status, headers, again) = keyed_post(&app, key, "/api/v1/appointments", "in-order", &b).await;
    assert_eq!((status, &again), (StatusCode::CREATED, &first));
    assert!(headers.get("idempotent-replayed").is_some());
    let remaining: u32 = headers["ratelimit-remaining"].to_str().unwrap().parse().unwrap();

    // If-None-Match runs last: a 304 for the current ETag, which also reports the limit.
    let id = serde_json::from_str::<Value>(&first).unwrap()["appointment_id"].as_i64().unwrap();
    let url = format!("{}/api/v1/appointments/{id}", app.base);
    let current = app.client.get(&url).bearer_auth(key).send().await.unwrap();
    let etag = current.headers()["etag"].clone();
    let cached = app.client.get(&url).bearer_auth(key).header("if-none-match", etag.clone()).send().await.unwrap();
    assert_eq!(cached.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(cached.headers()["etag"], etag);
    let after: u32 = cached.headers()["ratelimit-remaining"].to_str().unwrap().parse().unwrap();
    assert!(after < remaining, "the 304 counted against the limit: {after} after {remaining}");
}
