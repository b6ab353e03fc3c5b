//! Webhooks (decisions §11): settings, roles and scope, signed deliveries to a real receiver,
//! retries, disabling, the test ping, private addresses, and one attempt per delivery across
//! replicas.

use std::{collections::BTreeSet, time::Duration};

use autoshop::{config::AppConfig, db::Query};
use serde_json::{Value, json};

use crate::{
    appointments::{body, create_customer},
    receiver::Receiver,
    support::{Backend, TestApp, test_config},
};

crate::backend_tests!(
    settings_roles_scope_and_validation,
    deliveries_are_signed_retried_and_logged,
    gone_disables_and_failures_give_up,
    test_ping_and_private_addresses_at_delivery,
    each_delivery_is_attempted_once_across_replicas,
    retries_across_replicas_attempt_each_delivery_in_turn,
    changes_beside_webhook_deletes_never_fail,
    a_late_attempt_leaves_a_newer_delivery_alone,
);

/// Creates a webhook for `receiver` and gives the receiver its secret; returns the webhook id.
async fn subscribe(app: &TestApp, receiver: &Receiver, events: Value, shop_ids: Option<Vec<i64>>) -> i64 {
    let mut body = json!({"url": receiver.url, "events": events});
    if let Some(ids) = shop_ids {
        body["shop_ids"] = json!(ids);
    }
    let r = app.post(&app.admin_key, "/api/v1/webhooks", body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    receiver.set_secret(r.body["secret"].as_str().unwrap());
    r.body["id"].as_i64().unwrap()
}

async fn eventually(app: &TestApp, path: &str, check: impl Fn(&Value) -> bool) -> Value {
    app.eventually(&app.admin_key, path, check).await
}

async fn settings_roles_scope_and_validation(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let mine = app.create_shop(key, "Mine", "America/Chicago").await;
    let theirs = app.create_shop(key, "Theirs", "America/Chicago").await;

    let r = app.post(key, "/api/v1/webhooks", json!({"url": "https://hooks.example.com/a", "events": ["appointment.*"], "description": " Sync "})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let secret = r.body["secret"].as_str().unwrap();
    assert!(secret.starts_with("whsec_") && secret.len() >= 6 + 32, "{secret}");
    let id = r.body["id"].as_i64().unwrap();
    let path = format!("/api/v1/webhooks/{id}");
    assert_eq!(r.header("location"), Some(path.as_str()));
    let got = app.get(key, &path).await.ok().clone();
    assert!(got.get("secret").is_none(), "the secret is shown once");
    let mut created = r.body.clone();
    created.as_object_mut().unwrap().remove("secret");
    assert_eq!(got, created);
    assert_eq!(got["description"], "Sync");
    assert_eq!((got["enabled"].clone(), got["shop_ids"].clone()), (json!(true), Value::Null));

    let r = app.put(key, &path, json!({"url": "https://hooks.example.com/b", "events": ["customer.created", "customer.updated"], "enabled": false})).await;
    assert_eq!((r.ok()["enabled"].clone(), r.body["events"].clone()), (json!(false), json!(["customer.created", "customer.updated"])));
    assert_eq!(r.body["description"], "", "PUT replaces: an omitted description is empty");
    app.put(key, &path, json!({"events": ["*"]})).await.invalid("url");
    let r = app.post(key, "/api/v1/webhooks", json!({"url": "ftp://hooks.example.com", "events": []})).await;
    r.invalid("url");
    r.invalid("events");
    app.post(key, "/api/v1/webhooks", json!({"url": "https://x.example.com", "events": ["nope.*"]})).await.invalid("events.0");
    // The description's 255 characters count as sent (the stored value is trimmed).
    let padded = format!("{} ", "d".repeat(255));
    app.post(key, "/api/v1/webhooks", json!({"url": "https://x.example.com", "events": ["*"], "description": padded})).await.invalid("description");
    app.post(key, "/api/v1/webhooks", json!({"url": "https://x.example.com", "events": ["bay.*", "bay.*"]})).await.invalid("events.1");
    app.post(key, "/api/v1/webhooks", json!({"url": "https://x.example.com", "events": ["*"], "shop_ids": [999999]})).await.invalid("shop_ids.0");

    // Without --webhook-allow-private, internal addresses are refused.
    let strict = TestApp::spawn_isolated(backend, AppConfig { webhook_allow_private: false, ..test_config() }).await;
    for url in ["http://127.0.0.1:9/x", "http://localhost/x", "http://[::1]/x", "http://10.1.2.3/x", "http://169.254.169.254/latest", "http://metadata.google.internal/"] {
        let r = strict.post(&strict.admin_key, "/api/v1/webhooks", json!({"url": url, "events": ["*"]})).await;
        r.invalid("url");
    }

    // Roles: only admin keys; other companies see nothing.
    for role in ["read", "write"] {
        let k = app.create_key(key, role, None).await;
        app.get(&k, "/api/v1/webhooks").await.problem(403);
        app.post(&k, "/api/v1/webhooks", json!({"url": "https://x.example.com", "events": ["*"]})).await.problem(403);
        app.get(&k, &path).await.problem(403);
        app.delete(&k, &path).await.problem(403);
        app.post(&k, &format!("{path}/test"), json!({})).await.problem(403);
    }
    let (_, stranger) = app.new_company("Stranger").await;
    app.get(&stranger, &path).await.problem(404);
    app.put(&stranger, &path, json!({"url": "https://x.example.com", "events": ["*"]})).await.problem(404);
    app.get(&stranger, &format!("{path}/deliveries")).await.problem(404);
    app.post(&stranger, &format!("{path}/test"), json!({})).await.problem(404);
    app.delete(&stranger, &path).await.problem(404);
    assert_eq!(app.get(&stranger, "/api/v1/webhooks").await.ok()["meta"]["total"], 0);

    // A key limited to shops manages webhooks limited to (some of) its shops, and only those.
    let scoped = app.create_key(key, "admin", Some(vec![mine])).await;
    app.post(&scoped, "/api/v1/webhooks", json!({"url": "https://x.example.com", "events": ["*"]})).await.invalid("shop_ids");
    app.post(&scoped, "/api/v1/webhooks", json!({"url": "https://x.example.com", "events": ["*"], "shop_ids": [theirs]})).await.invalid("shop_ids.0");
    let r = app.post(&scoped, "/api/v1/webhooks", json!({"url": "https://x.example.com", "events": ["*"], "shop_ids": [mine, mine]})).await;
    assert_eq!(r.ok()["shop_ids"], json!([mine]));
    let scoped_id = r.body["id"].as_i64().unwrap();
    let listed = app.get(&scoped, "/api/v1/webhooks").await;
    assert_eq!(listed.ids("id"), vec![scoped_id]);
    app.get(&scoped, &path).await.problem(404);
    assert_eq!(app.get(key, "/api/v1/webhooks").await.ids("id"), vec![id, scoped_id]);

    assert_eq!(app.delete(key, &path).await.status, 204);
    app.get(key, &path).await.problem(404);
    app.delete(key, &path).await.problem(404);
}

async fn deliveries_are_signed_retried_and_logged(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "Chicago", "America/Chicago").await;
    let other_shop = app.create_shop(key, "Other", "America/Chicago").await;
    let appointments = Receiver::start(200).await;
    appointments.script(&[500]);
    let hook = subscribe(&app, &appointments, json!(["appointment.*"]), None).await;
    let customers = Receiver::start(200).await;
    subscribe(&app, &customers, json!(["customer.created"]), Some(vec![other_shop])).await;

    let started = chrono::Utc::now().timestamp();
    let created = app.post(key, "/api/v1/appointments", body(shop, "2030-01-07T09:00:00-06:00")).await;
    created.ok();
    let got = appointments.wait_for(2, 30).await;
    assert_eq!(got.len(), 2, "a failed attempt is retried once it succeeds: {got:?}");
    assert_eq!(got[0].webhook_id, got[1].webhook_id, "the same webhook-id on every attempt");
    assert!(got.iter().all(|r| r.signature_ok), "{got:?}");
    assert!(got.iter().all(|r| (r.timestamp - started).abs() < 60));
    let feed = app.get(key, "/api/v1/events?filter[type]=appointment.created").await;
    let event = feed.ok()["data"][0].clone();
    assert_eq!(got[0].body, event, "the body is the feed's event");
    assert_eq!(got[0].webhook_id, event["id"]);
    assert_eq!(event["data"], created.body);

    let log = eventually(&app, &format!("/api/v1/webhooks/{hook}/deliveries"), |b| b["data"][0]["state"] == "succeeded").await;
    let entry = &log["data"][0];
    assert_eq!((entry["attempt"].clone(), entry["status_code"].clone(), entry["next_retry_at"].clone()), (json!(2), json!(200), Value::Null));
    assert_eq!(entry["event_id"], event["id"]);
    assert_eq!(entry["event_type"], "appointment.created");

    // Patterns and shops select what a webhook gets.
    create_customer(&app, key, shop, "Ann", "Lee", "ann@example.com").await;
    create_customer(&app, key, other_shop, "Bo", "Kim", "bo@example.com").await;
    let got = customers.wait_for(1, 30).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let got_later = customers.received();
    assert_eq!(got_later.len(), 1, "only the other shop's customer: {got_later:?}");
    assert_eq!(got[0].body["data"]["shop_id"], other_shop);
    assert_eq!(appointments.received().len(), 2, "customer events are not appointment events");
}

async fn gone_disables_and_failures_give_up(backend: Backend) {
    // Counts attempts exactly, so on a database of its own: on the shared one, another test's
    // server may claim an attempt and end with its test before sending it, and the delivery
    // then waits out its 15 s lease with an attempt counted that never arrived.
    let app = TestApp::spawn_isolated(backend, test_config()).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "Chicago", "America/Chicago").await;
    let gone = Receiver::start(410).await;
    let gone_id = subscribe(&app, &gone, json!(["bay.*"]), None).await;
    let failing = Receiver::start(503).await;
    let failing_id = subscribe(&app, &failing, json!(["bay.*"]), None).await;

    app.create_bay(key, shop, "Lift 1", 0).await;
    gone.wait_for(1, 30).await;
    eventually(&app, &format!("/api/v1/webhooks/{gone_id}"), |b| b["enabled"] == false).await;
    // The test servers retry three times, 0.3 s apart: four attempts, then the delivery failed.
    failing.wait_for(4, 30).await;
    let log = eventually(&app, &format!("/api/v1/webhooks/{failing_id}/deliveries"), |b| b["data"][0]["state"] == "failed").await;
    assert_eq!((log["data"][0]["attempt"].clone(), log["data"][0]["status_code"].clone()), (json!(4), json!(503)));
    assert_eq!(log["data"][0]["next_retry_at"], Value::Null);
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(failing.received().len(), 4, "no attempt after the last retry");

    app.create_bay(key, shop, "Lift 2", 1).await;
    failing.wait_for(5, 30).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(gone.received().len(), 1, "a disabled webhook gets nothing");
    assert_eq!(app.get(key, &format!("/api/v1/webhooks/{failing_id}")).await.body["enabled"], true, "failing for less than 3 days");

    // Enabled again, it gets new events.
    let r = app.put(key, &format!("/api/v1/webhooks/{gone_id}"), json!({"url": gone.url, "events": ["bay.*"], "enabled": true})).await;
    assert_eq!(r.ok()["enabled"], true);
    gone.script(&[200]);
    app.create_bay(key, shop, "Lift 3", 2).await;
    let got = gone.wait_for(2, 30).await;
    assert_eq!(got[1].body["data"]["title"], "Lift 3");
    // Every attempt of Lift 2 and Lift 3 at the failing webhook (four each) sent and recorded
    // before its clock is aged below: one recorded after would turn it off before Lift 4's.
    failing.wait_for(12, 30).await;
    let path = format!("/api/v1/webhooks/{failing_id}/deliveries");
    let log = eventually(&app, &path, |b| b["data"].as_array().is_some_and(|d| d.len() == 3 && d.iter().all(|d| d["state"] == "failed"))).await;
    assert_eq!(log["data"][0]["attempt"], 4);

    // Failing for 3 days: the next failed attempt turns it off, and nothing more is sent.
    let three_days_ago = autoshop::db::now_micros() - 3 * 86_400_000_000 - 1_000_000;
    let age = Query::new("UPDATE webhooks SET failing_since = $1 WHERE company_id = $2 AND id = $3").bind(three_days_ago).bind(app.company_id).bind(failing_id);
    assert_eq!(app.db.execute(&age).await.unwrap(), 1);
    let before = failing.received().len();
    app.create_bay(key, shop, "Lift 4", 3).await;
    failing.wait_for(before + 1, 30).await;
    eventually(&app, &format!("/api/v1/webhooks/{failing_id}"), |b| b["enabled"] == false).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let after_off = failing.received().len();
    app.create_bay(key, shop, "Lift 5", 4).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(failing.received().len(), after_off, "a webhook turned off after 3 days of failures gets nothing");

    // On again: the failure clock starts over, so a failed delivery leaves it on.
    let r = app.put(key, &format!("/api/v1/webhooks/{failing_id}"), json!({"url": failing.url, "events": ["bay.*"], "enabled": true})).await;
    assert_eq!(r.ok()["enabled"], true);
    app.create_bay(key, shop, "Lift 6", 5).await;
    failing.wait_for(after_off + 4, 30).await;
    eventually(&app, &format!("/api/v1/webhooks/{failing_id}/deliveries"), |b| b["data"][0]["state"] == "failed").await;
    assert_eq!(app.get(key, &format!("/api/v1/webhooks/{failing_id}")).await.body["enabled"], true, "the clock restarted when it was turned on");
}

async fn test_ping_and_private_addresses_at_delivery(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let receiver = Receiver::start(200).await;
    let hook = subscribe(&app, &receiver, json!(["appointment.created"]), None).await;
    let r = app.post(key, &format!("/api/v1/webhooks/{hook}/test"), json!({})).await;
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!((r.body["event_type"].clone(), r.body["attempt"].clone(), r.body["state"].clone()), (json!("webhook.test"), json!(0), json!("pending")));
    let got = receiver.wait_for(1, 30).await;
    assert!(got[0].signature_ok);
    assert_eq!(got[0].body["type"], "webhook.test");
    assert_eq!(got[0].body["data"]["webhook_id"], hook);
    assert_eq!(got[0].webhook_id, r.body["event_id"]);
    assert!(app.get(key, "/api/v1/events?filter[type]=appointment.*").await.ok()["data"].as_array().unwrap().is_empty());

    // A webhook stored with an internal address (as if a name had been re-pointed since) is
    // refused when delivering, by a server without --webhook-allow-private.
    let strict = TestApp::spawn_isolated(backend, AppConfig { webhook_allow_private: false, ..test_config() }).await;
    let internal = Receiver::start(200).await;
    let fields = autoshop::webhooks::store::WebhookFields {
        url: internal.url.clone(),
        events: "[\"*\"]".into(),
        description: String::new(),
        shop_ids: None,
        enabled: Some(true),
    };
    let mut tx = strict.db.begin().await.unwrap();
    let row = autoshop::webhooks::store::insert(&mut tx, strict.company_id, &fields, &autoshop::webhooks::signing::new_secret()).await.unwrap();
    tx.commit().await.unwrap();
    let shop = strict.create_shop(&strict.admin_key, "Chicago", "America/Chicago").await;
    strict.create_bay(&strict.admin_key, shop, "Lift 1", 0).await;
    let log = eventually(&strict, &format!("/api/v1/webhooks/{}/deliveries?pageSize=100", row.id), |b| {
        b["data"].as_array().is_some_and(|d| !d.is_empty() && d.iter().all(|x| x["state"] == "failed"))
    })
    .await;
    assert!(log["data"][0]["error"].as_str().unwrap().contains("private"), "{log}");
    assert!(internal.received().is_empty(), "nothing reached the internal address");
}

async fn each_delivery_is_attempted_once_across_replicas(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.admin_key.clone();
    let shop = app.create_shop(&key, "Chicago", "America/Chicago").await;
    let receiver = Receiver::start(200).await;
    subscribe(&app, &receiver, json!(["appointment.created"]), None).await;
    // Three servers, each with its own delivery loop (on PostgreSQL each with its own pool, as
    // replicas are), all writing and all delivering.
    let bases = vec![app.base.clone(), app.spawn_replica().await, app.spawn_replica().await];
    const N: usize = 60;
    let bodies = (0..N).map(|n| body(shop, &format!("2030-01-{:02}T09:00:00-06:00", 1 + n % 28))).collect();
    crate::support::create_across(&app, &bases, bodies, None).await;
    let got = receiver.wait_for(N, 20).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let got_later = receiver.received();
    let ids: BTreeSet<&str> = got_later.iter().map(|r| r.webhook_id.as_str()).collect();
    assert_eq!(ids.len(), N, "every event delivered");
    assert_eq!(got_later.len(), N, "and each exactly once (no attempt repeated by another replica): {} deliveries", got_later.len());
    assert!(got.iter().all(|r| r.signature_ok));
}

/// Retries are claimed like first attempts: three servers (replicas on PostgreSQL), all
/// delivering, and a receiver that fails the first three attempts of every delivery. Each
/// delivery is attempted exactly four times (the test schedule's last retry), one attempt at a
/// time (500, 503, 500, then 200; never two of one delivery in flight at once), never again
/// after it succeeded, and its log entry counts the attempts the receiver saw.
async fn retries_across_replicas_attempt_each_delivery_in_turn(backend: Backend) {
    // A database of its own: every server claims every company's deliveries, and another test's
    // servers stopping mid-attempt would leave this test's deliveries to their lease.
    let app = TestApp::spawn_isolated(backend, crate::support::test_config()).await;
    let key = app.admin_key.clone();
    let shop = app.create_shop(&key, "Chicago", "America/Chicago").await;
    let receiver = Receiver::start(200).await;
    receiver.script_per_delivery(&[500, 503, 500]);
    // Each answer takes 50 ms: an attempt made twice at once would be seen in flight twice.
    receiver.delay(Duration::from_millis(50));
    let hook = subscribe(&app, &receiver, json!(["appointment.created"]), None).await;
    let bases = [app.base.clone(), app.spawn_replica().await, app.spawn_replica().await];
    const N: usize = 60;
    let bodies = (0..N).map(|n| body(shop, &format!("2030-03-{:02}T09:00:00-06:00", 1 + n % 28))).collect();
    crate::support::create_across(&app, &bases, bodies, None).await;
    receiver.wait_for(4 * N, 30).await;
    let log = eventually(&app, &format!("/api/v1/webhooks/{hook}/deliveries?pageSize=100"), |b| {
        b["data"].as_array().is_some_and(|d| d.len() == N && d.iter().all(|e| e["state"] == "succeeded"))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let got = receiver.received();
    assert_eq!(got.len(), 4 * N, "four attempts a delivery, none more");
    for entry in log["data"].as_array().unwrap() {
        let id = entry["event_id"].as_str().unwrap();
        let statuses: Vec<u16> = got.iter().filter(|r| r.webhook_id == id).map(|r| r.status).collect();
        assert_eq!(statuses, [500, 503, 500, 200], "delivery of {id}: one attempt at a time, none after success");
        assert_eq!((entry["attempt"].clone(), entry["status_code"].clone()), (json!(4), json!(200)), "{entry}");
    }
    assert!(got.iter().all(|r| r.signature_ok));
    assert_eq!(receiver.most_in_flight(), 1, "never two attempts of one delivery at once");
}

/// A webhook deleted while changes are queuing its deliveries: every change still commits (on
/// PostgreSQL the delete used to land between the read of the subscriptions and the insert of
/// the deliveries, whose foreign key then failed the change with a 500), test pings answer 202
/// or 404, and nothing of a deleted webhook is left behind. Two servers (replicas on
/// PostgreSQL): creates and pings on both, deletes spread across the creates.
async fn changes_beside_webhook_deletes_never_fail(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.admin_key.clone();
    let shop = app.create_shop(&key, "Chicago", "America/Chicago").await;
    let receiver = Receiver::start(200).await;
    const HOOKS: usize = 24;
    const CREATES: usize = 96;
    let mut hooks = Vec::new();
    for _ in 0..HOOKS {
        hooks.push(subscribe(&app, &receiver, json!(["appointment.*"]), None).await);
    }
    let bases = [app.base.clone(), app.spawn_replica().await];
    let mut tasks = Vec::new();
    for n in 0..CREATES {
        let (client, base, create_key) = (app.client.clone(), bases[n % 2].clone(), key.clone());
        let b = body(shop, &format!("2030-02-{:02}T09:00:00-06:00", 1 + n % 28));
        tasks.push(tokio::spawn(async move {
            let r = client.post(format!("{base}/api/v1/appointments")).bearer_auth(&create_key).json(&b).send().await.unwrap();
            let status = r.status().as_u16();
            (status == 201).then_some(()).ok_or(format!("create: {status} {}", r.text().await.unwrap_or_default()))
        }));
        if n % (CREATES / HOOKS) == 0 {
            let (client, base, key, hook) = (app.client.clone(), bases[(n + 1) % 2].clone(), key.clone(), hooks[n / (CREATES / HOOKS)]);
            tasks.push(tokio::spawn(async move {
                let ping = client.post(format!("{base}/api/v1/webhooks/{hook}/test")).bearer_auth(&key).send();
                let delete = client.delete(format!("{base}/api/v1/webhooks/{hook}")).bearer_auth(&key).send();
                let (ping, delete) = tokio::join!(ping, delete);
                let (ping, delete) = (ping.unwrap().status().as_u16(), delete.unwrap().status().as_u16());
                (delete == 204 && (ping == 202 || ping == 404)).then_some(()).ok_or(format!("webhook {hook}: delete {delete}, ping {ping}"))
            }));
        }
    }
    let mut failures = Vec::new();
    for task in tasks {
        if let Err(e) = task.await.unwrap() {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{} requests failed: {failures:?}", failures.len());
    let list = app.get(&key, "/api/v1/webhooks").await;
    assert_eq!(list.body["data"].as_array().map(Vec::len), Some(0), "{}", list.body);
    let created = app.get(&key, &format!("/api/v1/appointments?filter[shop_id]={shop}&per_page=1")).await;
    assert_eq!(created.body["meta"]["total"], CREATES, "{}", created.body);
    for hook in hooks {
        let r = app.get(&key, &format!("/api/v1/webhooks/{hook}/deliveries")).await;
        assert_eq!(r.status, 404, "webhook {hook}: {}", r.body);
    }
    let count = Query::new("SELECT COUNT(*) FROM webhook_deliveries WHERE company_id = $1").bind(app.company_id);
    let left = app.db.fetch_optional::<(i64,)>(&count).await.unwrap();
    assert_eq!(left, Some((0,)), "deliveries of deleted webhooks left behind");
}

/// An attempt that ends after its webhook was deleted records nothing, and the deleted
/// webhook's id names nothing after it. (On SQLite the next webhook and delivery created once
/// took the deleted ones' ids, and the late answer, a 200, was written over the new delivery.)
async fn a_late_attempt_leaves_a_newer_delivery_alone(backend: Backend) {
    // Counts attempts exactly: a database of its own (see `gone_disables_and_failures_give_up`).
    let app = TestApp::spawn_isolated(backend, test_config()).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "Chicago", "America/Chicago").await;
    let slow = Receiver::start(200).await;
    slow.delay(Duration::from_secs(3));
    let deleted = subscribe(&app, &slow, json!(["bay.*"]), None).await;
    app.create_bay(key, shop, "Lift 1", 0).await;
    slow.wait_for(1, 30).await;
    assert_eq!(app.delete(key, &format!("/api/v1/webhooks/{deleted}")).await.status, 204, "deleted while its attempt waits for an answer");

    let failing = Receiver::start(500).await;
    let hook = subscribe(&app, &failing, json!(["bay.*"]), None).await;
    // A deleted webhook's id is never given again (SQLite did, to the next one created).
    assert!(hook > deleted, "a new webhook {hook} after the deleted {deleted}");
    app.get(key, &format!("/api/v1/webhooks/{deleted}")).await.problem(404);
    assert_eq!(app.delete(key, &format!("/api/v1/webhooks/{deleted}")).await.status, 404, "a retried DELETE removes nothing else");
    app.create_bay(key, shop, "Lift 2", 1).await;
    // Four attempts 0.3 s apart (the test servers' retries), all failed, before the slow one answers.
    let log_path = format!("/api/v1/webhooks/{hook}/deliveries");
    eventually(&app, &log_path, |b| b["data"][0]["state"] == "failed").await;
    // The slow receiver answers 200; the server records that attempt's outcome right after.
    slow.wait_answered(1, 30).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let log = app.get(key, &log_path).await;
    let entry = &log.body["data"][0];
    assert_eq!(
        (entry["state"].clone(), entry["attempt"].clone(), entry["status_code"].clone()),
        (json!("failed"), json!(4), json!(500)),
        "the late answer of the deleted webhook's attempt changed this delivery: {}",
        log.body
    );
    assert_eq!(entry["event_type"], "bay.created");
    assert_eq!(failing.received().len(), 4);
    assert_eq!(slow.received().len(), 1);
}
