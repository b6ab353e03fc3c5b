//! Every change records its event in the same transaction, with `data` equal to what the
//! resource's own GET shows right after the change; a refused change records nothing.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use crate::{
    appointments::{body, create_customer},
    receiver::Receiver,
    support::{Backend, TestApp, test_config},
};

/// Events a new shop records: itself and its default sources.
const SHOP_EVENTS: usize = 1 + autoshop::sources::model::APPOINTMENT_SOURCES.len();

crate::backend_tests!(
    every_write_records_its_event_with_the_get_representation,
    refused_writes_record_nothing,
    scoped_keys_see_only_their_shops_events,
    racing_creates_record_one_event_and_one_delivery_each,
    creates_reach_webhooks_made_on_another_replica,
    a_statement_sent_alone_writes_all_or_nothing,
    changes_sharing_a_statement_keep_their_own_outcome,
    a_shared_statement_refuses_when_any_of_its_companies_has_webhooks,
    an_event_needs_its_company,
    shared_statements_write_their_changes_in_lock_order,
    a_change_whose_request_is_gone_is_not_sent,
    racing_creates_of_several_shops_share_statements_in_shop_order,
);

/// Reads the feed after `cursor` until `n` events came (PostgreSQL shows an event once every
/// older transaction of the database has ended, and other tests write concurrently), then
/// checks that no more arrive. Moves `cursor` past them.
async fn next_events(app: &TestApp, key: &str, cursor: &mut Option<String>, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut got: Vec<Value> = Vec::new();
    loop {
        let path = match cursor.as_deref() {
            Some(after) => format!("/api/v1/events?limit=1000&after={after}"),
            None => "/api/v1/events?limit=1000".to_owned(),
        };
        let r = app.get(key, &path).await;
        assert_eq!(r.status, 200, "{}", r.body);
        got.extend(r.body["data"].as_array().unwrap().iter().cloned());
        *cursor = r.body["next_after"].as_str().map(str::to_owned);
        if got.len() >= n || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let types: Vec<&str> = got.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(got.len(), n, "expected {n} events, got {types:?}");
    got
}

/// The events recorded after `cursor`, up to a sentinel this writes (a read key is created),
/// and `cursor` moved past it. The feed is in commit order, so every change committed before
/// the sentinel is among them (waiting for a count instead could stop before a late event).
pub(crate) async fn recorded_since(app: &TestApp, key: &str, cursor: &mut Option<String>) -> Vec<Value> {
    let sentinel = app.post(key, "/api/v1/api_keys", json!({"name": "sentinel", "role": "read"})).await.ok()["id"].clone();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut before = Vec::new();
    loop {
        let path = cursor.as_deref().map_or("/api/v1/events?limit=1000".to_owned(), |after| format!("/api/v1/events?limit=1000&after={after}"));
        let r = app.get(key, &path).await;
        let data = r.ok()["data"].as_array().unwrap().clone();
        *cursor = r.body["next_after"].as_str().map(str::to_owned).or(cursor.take());
        for event in &data {
            if event["type"] == "api_key.created" && event["data"]["id"] == sentinel {
                assert_eq!(data.last(), Some(event), "nothing is written after the sentinel");
                return before;
            }
            before.push(event.clone());
        }
        assert!(Instant::now() < deadline, "the sentinel never showed in the feed");
        if data.is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Asserts that nothing was recorded after `cursor` (see [`recorded_since`]).
pub(crate) async fn nothing_recorded(app: &TestApp, key: &str, cursor: &mut Option<String>, after: &str) {
    let recorded = recorded_since(app, key, cursor).await;
    assert!(recorded.is_empty(), "{after} recorded {recorded:?}");
}

/// A cursor past every event recorded so far (see [`recorded_since`]).
pub(crate) async fn feed_end(app: &TestApp, key: &str) -> Option<String> {
    let mut cursor = None;
    recorded_since(app, key, &mut cursor).await;
    cursor
}

/// The one event a write recorded: its type, shop and data (checked against `get_path`).
async fn expect_one(app: &TestApp, cursor: &mut Option<String>, kind: &str, shop: Option<i64>, get_path: &str) -> Value {
    let events = next_events(app, &app.admin_key, cursor, 1).await;
    let event = &events[0];
    assert_eq!(event["type"], kind, "{event}");
    assert_eq!(event["shop_id"], json!(shop), "{event}");
    assert_eq!(event["company_id"], app.company_id, "{event}");
    let get = app.get(&app.admin_key, get_path).await;
    assert_eq!(event["data"], get.ok().clone(), "{kind}: the event's data must be the GET representation");
    event["data"].clone()
}

async fn every_write_records_its_event_with_the_get_representation(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key.clone();
    // The company's bootstrap admin key (created by the CLI's code path) is the first event.
    let mut cursor = None;
    let first = next_events(&app, key, &mut cursor, 1).await;
    assert_eq!(first[0]["type"], "api_key.created");
    assert_eq!(first[0]["shop_id"], Value::Null);
    assert!(first[0]["data"].get("api_key").is_none(), "a key event never carries the key");

    // A shop comes with its default sources: one event each.
    let r = app.post(key, "/api/v1/shops", json!({"name": "Chicago", "timezone": "America/Chicago"})).await;
    let shop = r.ok()["shop_id"].as_i64().unwrap();
    let sources = app.get(key, &format!("/api/v1/settings/sources?filter[shop_id]={shop}&pageSize=100")).await;
    let sources = sources.ok()["data"].as_array().unwrap().clone();
    let events = next_events(&app, key, &mut cursor, 1 + sources.len()).await;
    assert_eq!(events[0]["type"], "shop.created");
    assert_eq!(events[0]["data"], app.get(key, &format!("/api/v1/shops/{shop}")).await.ok().clone());
    for source in &sources {
        assert!(events[1..].iter().any(|e| e["type"] == "source.created" && e["data"] == *source), "no event for {source}");
    }

    let bay = app.create_bay(key, shop, "Lift 1", 0).await;
    expect_one(&app, &mut cursor, "bay.created", Some(shop), &format!("/api/v1/bays/{bay}")).await;
    app.put(key, &format!("/api/v1/bays/{bay}"), json!({"shop_id": shop, "title": "Lift A"})).await.ok();
    expect_one(&app, &mut cursor, "bay.updated", Some(shop), &format!("/api/v1/bays/{bay}")).await;

    let r = app.post(key, "/api/v1/settings/sources", json!({"shop_id": shop, "name": "Radio"})).await;
    let source = r.ok()["id"].as_i64().unwrap();
    expect_one(&app, &mut cursor, "source.created", Some(shop), &format!("/api/v1/settings/sources/{source}")).await;
    app.put(key, &format!("/api/v1/settings/sources/{source}"), json!({"shop_id": shop, "name": "Radio", "active": false})).await.ok();
    expect_one(&app, &mut cursor, "source.updated", Some(shop), &format!("/api/v1/settings/sources/{source}")).await;

    let week = json!({"shop_id": shop, "hours": [{"day": 1, "open": "08:00", "close": "17:00"}]});
    app.put(key, "/api/v1/settings/shop_hours", week).await.ok();
    let events = next_events(&app, key, &mut cursor, 1).await;
    assert_eq!(events[0]["type"], "shop_hours.updated");
    let hours = app.get(key, &format!("/api/v1/settings/shop_hours?filter[shop_id]={shop}")).await;
    assert_eq!(events[0]["data"], hours.ok()["data"]);

    let customer = create_customer(&app, key, shop, "Ann", "Lee", "ann@example.com").await;
    let customer_path = format!("/api/v1/customers/{customer}");
    expect_one(&app, &mut cursor, "customer.created", Some(shop), &customer_path).await;
    app.put(key, &customer_path, json!({"first_name": "Anna"})).await.ok();
    let data = expect_one(&app, &mut cursor, "customer.updated", Some(shop), &customer_path).await;
    assert_eq!(data["first_name"], "Anna");

    let ship_to = json!({"number": "1", "name": "Dock", "address": "2 Dock Rd", "city": "Port", "state": "IL", "zip": "60000",
        "email": null, "work_phone": "", "fax": "", "home_phone": "", "cell_phone": ""});
    let r = app.post(key, &format!("{customer_path}/ship_tos"), ship_to.clone()).await;
    let ship_to_path = format!("{customer_path}/ship_tos/{}", r.ok()["id"]);
    expect_one(&app, &mut cursor, "ship_to.created", Some(shop), &ship_to_path).await;
    let mut renamed = ship_to;
    renamed["name"] = json!("Dock 2");
    app.put(key, &ship_to_path, renamed).await.ok();
    expect_one(&app, &mut cursor, "ship_to.updated", Some(shop), &ship_to_path).await;

    let entry = json!({"shop_id": shop, "reference": "INV-1", "date": "2024-07-01", "due_date": "2024-07-31", "amount": 100});
    let r = app.post(key, &format!("{customer_path}/accounts_receivable"), entry).await;
    let entry_path = format!("{customer_path}/accounts_receivable/{}", r.ok()["id"]);
    expect_one(&app, &mut cursor, "receivable.created", Some(shop), &entry_path).await;
    app.post(key, &format!("{entry_path}/payments"), json!({"amount": 40, "date": "2024-07-10"})).await.ok();
    let data = expect_one(&app, &mut cursor, "payment.created", Some(shop), &entry_path).await;
    assert_eq!(data["balance"], json!(60.0));

    let mut new = body(shop, "2030-01-07T09:00:00-06:00");
    new["column"] = json!("Lift A");
    let r = app.post(key, "/api/v1/appointments", new).await;
    let appointment_path = format!("/api/v1/appointments/{}", r.ok()["appointment_id"]);
    let data = expect_one(&app, &mut cursor, "appointment.created", Some(shop), &appointment_path).await;
    assert_eq!(data["column"], "Lift A");
    let mut change = body(shop, "2030-01-07T10:00:00-06:00");
    change["reason"] = json!("Brakes");
    app.put(key, &appointment_path, change).await.ok();
    expect_one(&app, &mut cursor, "appointment.updated", Some(shop), &appointment_path).await;
    assert_eq!(app.delete(key, &appointment_path).await.status, 204);
    let data = expect_one(&app, &mut cursor, "appointment.deleted", Some(shop), &appointment_path).await;
    assert!(data["deleted"].is_string());
    // Deleting again changes nothing and records nothing.
    assert_eq!(app.delete(key, &appointment_path).await.status, 204);

    // A new time zone re-localises the shop's appointments: one event stands for all of it.
    app.put(key, &format!("/api/v1/shops/{shop}"), json!({"name": "Chicago", "timezone": "America/New_York"})).await.ok();
    let data = expect_one(&app, &mut cursor, "shop.updated", Some(shop), &format!("/api/v1/shops/{shop}")).await;
    assert_eq!(data["timezone"], "America/New_York");

    // Keys: company-wide events, never carrying the key itself.
    let r = app.post(key, "/api/v1/api_keys", json!({"name": "site", "role": "read"})).await;
    let key_path = format!("/api/v1/api_keys/{}", r.ok()["id"]);
    let data = expect_one(&app, &mut cursor, "api_key.created", None, &key_path).await;
    assert!(data.get("api_key").is_none() || data["api_key"].is_null(), "{data}");
    assert_eq!(app.delete(key, &key_path).await.status, 204);
    let data = expect_one(&app, &mut cursor, "api_key.revoked", None, &key_path).await;
    assert!(data["revoked_at"].is_string());
    assert_eq!(app.delete(key, &key_path).await.status, 204);
    nothing_recorded(&app, key, &mut cursor, "revoking a revoked key").await;
}

async fn refused_writes_record_nothing(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key.clone();
    let shop = app.create_shop(key, "Chicago", "America/Chicago").await;
    let mut cursor = None;
    let all = next_events(&app, key, &mut cursor, 1 + SHOP_EVENTS).await;
    assert!(all.iter().filter(|e| e["type"] == "source.created").count() > 0);
    let customer = create_customer(&app, key, shop, "Ann", "Lee", "ann@example.com").await;
    next_events(&app, key, &mut cursor, 1).await;

    // Validation, a duplicate number (refused by the database inside the change), a missing
    // resource, a deleted appointment, a balance overdraw.
    app.post(key, "/api/v1/customers", json!({"shop_id": shop})).await.problem(422);
    nothing_recorded(&app, key, &mut cursor, "an invalid customer").await;
    let dup = json!({"shop_id": shop, "business_name": "", "first_name": "B", "last_name": "C", "address": "1 Elm St",
        "city": "Springfield", "state": "IL", "zip": "62701", "email": "b@example.com", "customer_number": "C1"});
    app.post(key, "/api/v1/customers", dup.clone()).await.ok();
    next_events(&app, key, &mut cursor, 1).await;
    app.post(key, "/api/v1/customers", dup).await.invalid("customer_number");
    nothing_recorded(&app, key, &mut cursor, "a duplicate customer_number").await;
    app.put(key, "/api/v1/bays/999999", json!({"shop_id": shop, "title": "x"})).await.problem(404);
    nothing_recorded(&app, key, &mut cursor, "a missing bay").await;
    let id = crate::appointments::create_id(&app, key, body(shop, "2030-01-07T09:00:00-06:00")).await;
    next_events(&app, key, &mut cursor, 1).await;
    assert_eq!(app.delete(key, &format!("/api/v1/appointments/{id}")).await.status, 204);
    next_events(&app, key, &mut cursor, 1).await;
    app.put(key, &format!("/api/v1/appointments/{id}"), body(shop, "2030-01-07T10:00:00-06:00")).await.problem(409);
    nothing_recorded(&app, key, &mut cursor, "a PUT of a deleted appointment").await;
    let entry = json!({"shop_id": shop, "reference": "INV-1", "date": "2024-07-01", "due_date": "2024-07-31", "amount": 10});
    let r = app.post(key, &format!("/api/v1/customers/{customer}/accounts_receivable"), entry).await;
    let entry_id = r.ok()["id"].as_i64().unwrap();
    next_events(&app, key, &mut cursor, 1).await;
    let payments = format!("/api/v1/customers/{customer}/accounts_receivable/{entry_id}/payments");
    app.post(key, &payments, json!({"amount": 11, "date": "2024-07-02"})).await.invalid("amount");
    nothing_recorded(&app, key, &mut cursor, "an overdrawing payment").await;
}

async fn scoped_keys_see_only_their_shops_events(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key.clone();
    let mine = app.create_shop(key, "Mine", "America/Chicago").await;
    let theirs = app.create_shop(key, "Theirs", "America/Chicago").await;
    let scoped = app.create_key(key, "read", Some(vec![mine])).await;
    app.create_bay(key, mine, "A", 0).await;
    app.create_bay(key, theirs, "B", 0).await;
    let (_, other_admin) = app.new_company("Other").await;
    let other_shop = app.create_shop(&other_admin, "Elsewhere", "UTC").await;
    app.create_bay(&other_admin, other_shop, "C", 0).await;

    // Everything the admin sees: both shops and the keys; the scoped key: its shop only.
    let mut cursor = None;
    let all = next_events(&app, key, &mut cursor, 1 + 2 * SHOP_EVENTS + 1 + 2).await;
    assert!(all.iter().all(|e| e["company_id"] == app.company_id));
    let mut cursor = None;
    let seen = next_events(&app, &scoped, &mut cursor, SHOP_EVENTS + 1).await;
    assert!(seen.iter().all(|e| e["shop_id"] == mine), "{seen:?}");
    assert_eq!(seen.iter().filter(|e| e["type"] == "bay.created").count(), 1);

    // Key records only for keys that may read them (GET /api/v1/api_keys): an admin key without
    // a shop list. Other unscoped keys see every other company-wide event.
    for role in ["read", "write"] {
        let unscoped = app.create_key(key, role, None).await;
        let mut cursor = None;
        let seen = next_events(&app, &unscoped, &mut cursor, 2 * SHOP_EVENTS + 2).await;
        assert!(seen.iter().all(|e| !e["type"].as_str().unwrap().starts_with("api_key.")), "{role}: {seen:?}");
        let keys = app.get(&unscoped, "/api/v1/events?filter[type]=api_key.*").await;
        assert_eq!(keys.ok()["data"], json!([]), "{role}");
    }
    // The admin's, the scoped, the read and the write key.
    app.eventually(key, "/api/v1/events?filter[type]=api_key.*", |page| page["data"].as_array().unwrap().len() == 4).await;
}

/// Appointment creates race on two servers (replicas with their own pools on PostgreSQL, where
/// each reserves ids for the rows it inserts and sends the insert and its event as one
/// statement), half of them keyed and sent to both servers at once: every appointment has
/// exactly one `appointment.created` event, whose data is its GET representation, and one
/// webhook delivery; no id is given twice; a keyed repeat writes nothing more.
async fn racing_creates_record_one_event_and_one_delivery_each(backend: Backend) {
    // A database of its own: only these servers deliver its webhooks.
    let app = Arc::new(TestApp::spawn_isolated(backend, test_config()).await);
    let key = app.admin_key.clone();
    let shop = app.create_shop(&key, "Race", "UTC").await;
    app.create_bay(&key, shop, "Lift 1", 0).await;
    let receiver = Receiver::start(200).await;
    let r = app.post(&key, "/api/v1/webhooks", json!({"url": receiver.url, "events": ["appointment.created"]})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    receiver.set_secret(r.body["secret"].as_str().unwrap());
    let replica = app.spawn_replica().await;

    let mut races = Vec::new();
    for n in 0..40usize {
        let mut b = body(shop, &format!("2030-02-{:02}T09:00:00Z", n % 28 + 1));
        b["last_name"] = json!(format!("Racer{n}"));
        if n % 3 == 0 {
            b["column"] = json!("Lift 1");
        }
        let keyed = n % 2 == 0;
        let bases = if keyed { vec![app.base.clone(), replica.clone()] } else { vec![[&app.base, &replica][n % 4 / 2].clone()] };
        for base in bases {
            races.push((n, crate::support::spawn_create(&app, &base, &b, keyed.then(|| format!("created-{n}")))));
        }
    }
    let mut created: BTreeMap<usize, BTreeSet<i64>> = BTreeMap::new();
    for (n, race) in races {
        let (status, answer) = race.await.unwrap();
        assert_eq!(status, 201, "create {n}: {answer}");
        created.entry(n).or_default().insert(answer["appointment_id"].as_i64().unwrap());
    }
    assert!(created.values().all(|ids| ids.len() == 1), "a keyed repeat answers the same appointment: {created:?}");
    let ids: BTreeSet<i64> = created.values().flatten().copied().collect();
    assert_eq!(ids.len(), 40, "every create has an id of its own: {created:?}");

    let mut cursor = None;
    // The admin key's, the shop's, the bay's, then the creates'.
    let events = next_events(&app, &key, &mut cursor, 1 + SHOP_EVENTS + 1 + 40).await;
    let event_ids = created_events_match(&app, &events, &ids).await;
    receiver.wait_for(40, 30).await;
    // A second copy (two replicas sending one delivery, a rolled-back keyed repeat that queued
    // one) would come as soon as the first: give it the time a wake takes, then count.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let delivered = receiver.received();
    let delivered_ids: BTreeSet<String> = delivered.iter().map(|d| d.webhook_id.clone()).collect();
    assert_eq!(delivered_ids, event_ids, "a delivery for each event");
    assert_eq!(delivered.len(), 40, "each event delivered once: {:?}", delivered.iter().map(|d| &d.webhook_id).collect::<Vec<_>>());
    assert!(delivered.iter().all(|d| d.signature_ok));
}

/// Creates `n` appointments at once, spread over `bases`; their ids.
async fn create_racing(app: &Arc<TestApp>, bases: &[String], shop: i64, n: usize, tag: &str) -> BTreeSet<i64> {
    let mut races = Vec::new();
    for i in 0..n {
        let mut b = body(shop, &format!("2030-03-{:02}T10:00:00Z", i % 28 + 1));
        b["last_name"] = json!(format!("{tag}{i}"));
        b["column"] = json!("Lift 1");
        races.push(crate::support::spawn_create(app, &bases[i % bases.len()], &b, None));
    }
    let mut ids = BTreeSet::new();
    for race in races {
        let (status, answer) = race.await.unwrap();
        assert_eq!(status, 201, "{answer}");
        ids.insert(answer["appointment_id"].as_i64().unwrap());
    }
    assert_eq!(ids.len(), n, "every create has an id of its own");
    ids
}

/// Checks that `events` hold exactly one `appointment.created` for each of `ids`, showing its
/// GET; their event ids.
async fn created_events_match(app: &TestApp, events: &[Value], ids: &BTreeSet<i64>) -> BTreeSet<String> {
    let created: Vec<&Value> = events.iter().filter(|e| e["type"] == "appointment.created").collect();
    let seen: BTreeSet<i64> = created.iter().map(|e| e["data"]["appointment_id"].as_i64().unwrap()).collect();
    assert_eq!(created.len(), ids.len(), "one event per create");
    assert_eq!(&seen, ids);
    for e in &created {
        let get = app.get(&app.admin_key, &format!("/api/v1/appointments/{}", e["data"]["appointment_id"])).await;
        assert_eq!(&e["data"], get.ok(), "the event's data must be the GET representation");
    }
    created.iter().map(|e| e["id"].as_str().unwrap().to_owned()).collect()
}

/// On PostgreSQL a create of a company without webhooks is one statement sent outside any
/// transaction; one with webhooks needs its deliveries in the same transaction. A webhook made
/// on one replica must get every create sent after it on any replica (the statement sent alone
/// refuses to run once the company has one), and a create and its event commit together
/// whichever way it went.
async fn creates_reach_webhooks_made_on_another_replica(backend: Backend) {
    let app = Arc::new(TestApp::spawn_isolated(backend, test_config()).await);
    let key = app.admin_key.clone();
    let shop = app.create_shop(&key, "Relay", "UTC").await;
    app.create_bay(&key, shop, "Lift 1", 0).await;
    let replica = app.spawn_replica().await;
    let bases = [app.base.clone(), replica.clone()];
    let mut cursor = None;
    next_events(&app, &key, &mut cursor, 1 + SHOP_EVENTS + 1).await;

    // The first server's changes sent as one statement (PostgreSQL).
    let alone = || app.db.one_statement_changes().unwrap_or_default();

    // No webhook yet: nothing to deliver; the first server's creates (every other one) each went
    // as one statement.
    let start = alone();
    let before = create_racing(&app, &bases, shop, 20, "Before").await;
    created_events_match(&app, &next_events(&app, &key, &mut cursor, 20).await, &before).await;
    if backend == Backend::Postgres {
        let now = alone();
        assert_eq!((now.committed, now.refused), (start.committed + 10, start.refused), "committed, refused");
    }

    // A webhook made on the replica: both servers' creates reach it from now on.
    let receiver = Receiver::start(200).await;
    let r = app.client.post(format!("{replica}/api/v1/webhooks")).bearer_auth(&key)
        .json(&json!({"url": receiver.url, "events": ["appointment.created"]})).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let webhook: Value = r.json().await.unwrap();
    receiver.set_secret(webhook["secret"].as_str().unwrap());
    let start = alone();
    let during = create_racing(&app, &bases, shop, 20, "During").await;
    let events = next_events(&app, &key, &mut cursor, 20).await;
    let delivered_for = created_events_match(&app, &events, &during).await;
    if backend == Backend::Postgres {
        // The first server learnt of the webhook from a refused statement, not from the replica.
        let now = alone();
        assert_eq!(now.committed, start.committed, "a create went alone past the webhook");
        assert!(now.refused > start.refused, "no statement refused to run alone");
    }

    // Delivered before the webhook is disabled (a disabled webhook's pending deliveries fail).
    let delivered = receiver.wait_for(20, 30).await;
    let ids: BTreeSet<String> = delivered.iter().map(|d| d.webhook_id.clone()).collect();
    assert_eq!(ids, delivered_for, "one delivery per create made while the webhook was enabled");
    assert!(delivered.iter().all(|d| d.signature_ok));

    // Disabled: creates record their events and queue nothing.
    let r = app.put(&key, &format!("/api/v1/webhooks/{}", webhook["id"]), json!({"url": receiver.url, "events": ["appointment.created"], "enabled": false})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let after = create_racing(&app, &bases, shop, 10, "After").await;
    let events = next_events(&app, &key, &mut cursor, 10).await;
    created_events_match(&app, &events, &after).await;

    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(receiver.received().len(), 20, "a disabled webhook got deliveries");

    // Operators see the counts in /metrics (the recorder is shared by this binary's servers, so
    // a count there is at least this server's).
    if backend == Backend::Postgres {
        let autoshop::db::OneStatementCounts { committed, refused, .. } = alone();
        let text = app.request(reqwest::Method::GET, None, "/metrics", None).await.body;
        let count = |outcome: &str| -> u64 {
            let prefix = format!("db_one_statement_changes_total{{outcome=\"{outcome}\"}} ");
            let line = text.as_str().unwrap().lines().find_map(|l| l.strip_prefix(prefix.as_str()).map(str::to_owned));
            line.unwrap_or_else(|| panic!("no {prefix}in /metrics")).parse().unwrap()
        };
        assert!(count("committed") >= committed && committed >= 10, "{committed}");
        assert!(count("refused") >= refused && refused >= 1, "{refused}");
    }
}

/// A `shop.updated` event of `company` with `data`, as a whole insert: a change's last write
/// (`lead`) in the tests of statements sent alone.
fn lead_insert(company: i64, data: impl Into<String>) -> autoshop::db::Query {
    autoshop::events::store::insert_queries(company, shop_updated(data), 10, 1).remove(0)
}

/// The same event as a change's events: a `VALUES` list.
fn event_values(company: i64, data: impl Into<String>) -> autoshop::db::Query {
    autoshop::events::store::value_lists(company, shop_updated(data), 10, 1).remove(0)
}

fn shop_updated(data: impl Into<String>) -> Vec<autoshop::events::store::NewEvent> {
    vec![autoshop::events::store::NewEvent { kind: "shop.updated", shop_id: None, data: data.into() }]
}

/// No foreign key checks an event's company on PostgreSQL (migration 0017): a change that
/// records an event before its company exists fails, and writes nothing.
async fn an_event_needs_its_company(backend: Backend) {
    use autoshop::{change::Change, db::Query};
    let app = TestApp::spawn(backend).await;
    let count = Query::new("SELECT COUNT(*) FROM events WHERE company_id = 0");
    let mut change = Change::begin_new_company(&app.db).await.unwrap();
    assert!(change.record("shop.updated", None, &json!({"name": "orphan"})).is_err(), "an event without its company was recorded");
    change.commit().await.unwrap();
    assert_eq!(app.db.fetch_optional::<(i64,)>(&count).await.unwrap().unwrap().0, 0);
}

/// The statement a change sends alone on PostgreSQL (its last write with its event) writes
/// both or neither: refused when the company has a webhook, it leaves no trace.
async fn a_statement_sent_alone_writes_all_or_nothing(backend: Backend) {
    use autoshop::{db::Query, webhooks::store::one_statement};
    let app = TestApp::spawn(backend).await;
    let company = app.company_id;
    let (lead, event) = (|data: &str| lead_insert(company, data), |data: &str| event_values(company, data));
    let count = |data: &'static str| {
        let q = Query::new("SELECT COUNT(*) FROM events WHERE company_id = $1 AND data = $2").bind(company).bind(data);
        let db = app.db.clone();
        async move { db.fetch_optional::<(i64,)>(&q).await.unwrap().unwrap().0 }
    };
    let mut tx = app.db.begin().await.unwrap();
    if backend == Backend::Sqlite {
        assert!(!tx.can_commit_alone(), "SQLite's writer commits a change in one hand-off already");
        return;
    }
    assert!(tx.can_commit_alone());
    // Two writes in one statement: the lead and the event.
    let change = one_statement(Some(lead("\"lead 1\"")), Some(event("\"event 1\"")), None, None, company);
    assert_eq!(tx.commit_alone(change).await.unwrap(), Ok(()));
    assert_eq!((count("\"lead 1\"").await, count("\"event 1\"").await), (1, 1));
    // A change without events has nothing to check.
    let mut tx = app.db.begin().await.unwrap();
    assert_eq!(tx.commit_alone(one_statement(Some(lead("\"lead only\"")), None, None, None, company)).await.unwrap(), Ok(()));
    assert_eq!(count("\"lead only\"").await, 1);

    // A third write that must change exactly one row and changes none: all undone.
    let none = Query::new("UPDATE events SET type = type WHERE company_id = $1 AND id < 0").bind(company);
    let mut tx = app.db.begin().await.unwrap();
    let change = one_statement(Some(lead("\"lead 2\"")), Some(event("\"event 2\"")), Some(none), None, company);
    let refused = tx.commit_alone(change).await.unwrap();
    assert_eq!(refused, Err(autoshop::webhooks::store::CHANGED_NO_ROW.to_owned()));
    assert_eq!((count("\"lead 2\"").await, count("\"event 2\"").await), (0, 0), "the refused statement undid itself");

    // A guard (Change::require) that finds no row: all undone; one that finds its row: written.
    let shop = app.create_shop(&app.admin_key, "Guarded", "UTC").await;
    let guard = |zone: &str| Query::new("SELECT id FROM shops WHERE company_id = $1 AND id = $2 AND timezone = $3").bind(company).bind(shop).bind(zone);
    let mut tx = app.db.begin().await.unwrap();
    let change = one_statement(Some(lead("\"lead 4\"")), Some(event("\"event 4\"")), None, Some(guard("Asia/Tokyo")), company);
    assert_eq!(tx.commit_alone(change).await.unwrap(), Err(autoshop::webhooks::store::OUTDATED.to_owned()));
    assert_eq!((count("\"lead 4\"").await, count("\"event 4\"").await), (0, 0), "the refused statement undid itself");
    let mut tx = app.db.begin().await.unwrap();
    let change = one_statement(Some(lead("\"lead 5\"")), Some(event("\"event 5\"")), None, Some(guard("UTC")), company);
    assert_eq!(tx.commit_alone(change).await.unwrap(), Ok(()));
    assert_eq!((count("\"lead 5\"").await, count("\"event 5\"").await), (1, 1));

    let r = app.post(&app.admin_key, "/api/v1/webhooks", json!({"url": "https://hooks.example.com/a", "events": ["*"]})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let change = one_statement(Some(lead("\"lead 3\"")), Some(event("\"event 3\"")), None, None, company);
    let refused = tx.commit_alone(change).await.unwrap();
    assert_eq!(refused, Err(autoshop::webhooks::store::HAS_WEBHOOKS.to_owned()), "a company with a webhook needs a transaction");
    assert_eq!((count("\"lead 3\"").await, count("\"event 3\"").await), (0, 0), "the refused statement undid itself");
    // Once a statement began the transaction, it is no longer alone.
    tx.execute(&Query::new("SELECT 1")).await.unwrap();
    assert!(!tx.can_commit_alone());
}

/// A test app on PostgreSQL, where changes are sent as one statement ([`Tx::commit_alone`]); on
/// SQLite `None`, after checking that its writer never sends a change that way (it commits a
/// change in one hand-off already).
///
/// [`Tx::commit_alone`]: autoshop::db::Tx::commit_alone
async fn app_sending_changes_alone(backend: Backend) -> Option<TestApp> {
    let app = TestApp::spawn(backend).await;
    if backend == Backend::Sqlite {
        assert!(!app.db.begin().await.unwrap().can_commit_alone(), "SQLite's writer commits a change in one hand-off already");
        return None;
    }
    Some(app)
}

/// On PostgreSQL, changes sent alone at the same moment share statements (`db::merged`), and
/// each must still commit or refuse on its own. 24 changes race, twice: first all good (some
/// must share a statement: four statements of a shape at most are on their way at once), then
/// with every other one's third write changing no row (the same statement text as the others',
/// whose third write changes one: one shape, so they merge). Those refuse and leave no trace,
/// and each of the others is written once, also when it had been merged with a refused one
/// (its statement was undone and it went again alone). A third round mixes in changes that the
/// database rejects (an event without a type): each of those fails alone.
async fn changes_sharing_a_statement_keep_their_own_outcome(backend: Backend) {
    use autoshop::{db::Query, webhooks::store::{CHANGED_NO_ROW, one_statement}};
    let Some(app) = app_sending_changes_alone(backend).await else { return };
    let company = app.company_id;
    let (lead, event) = (move |data: String| lead_insert(company, data), move |data: String| event_values(company, data));
    // Each change's third write touches its own marker row, which exists unless it should refuse.
    let markers = Query::new("INSERT INTO events (company_id, type, shop_id, data, created_at) SELECT $1, 'shop.created', NULL, 'marker ' || n, 1 FROM generate_series(0, 23) n").bind(company);
    app.db.execute(&markers).await.unwrap();
    let marker = |round: usize, i: usize, refuses: bool| {
        let data = if refuses { format!("no marker {i}") } else { format!("marker {i}") };
        Query::new("UPDATE events SET created_at = created_at + $3 WHERE company_id = $1 AND type = 'shop.created' AND data = $2")
            .bind(company)
            .bind(data)
            .bind(round as i64)
    };
    let race = |round: usize, refuses: fn(usize) -> bool, rejected: fn(usize) -> bool| {
        let db = app.db.clone();
        futures_util::future::join_all((0..24).map(move |i| {
            let lead = match rejected(i) {
                true => {
                    // The others' statement text, without a type: the database rejects the row.
                    let good = lead(format!("\"lead {round}.{i}\""));
                    let sql = good.sql().to_owned();
                    let args = good.into_args().into_iter().enumerate();
                    args.fold(Query::new(sql), |q, (n, arg)| q.bind(if n == 1 { autoshop::db::Arg::Text(None) } else { arg }))
                }
                false => lead(format!("\"lead {round}.{i}\"")),
            };
            let (db, ev) = (db.clone(), event(format!("\"event {round}.{i}\"")));
            let exactly_one = Some(marker(round, i, refuses(i)));
            async move {
                let mut tx = db.begin().await.unwrap();
                tx.commit_alone(one_statement(Some(lead), Some(ev), exactly_one, None, company)).await
            }
        }))
    };
    let written = || async {
        let q = Query::new("SELECT data, COUNT(*) FROM events WHERE company_id = $1 AND type = 'shop.updated' GROUP BY data").bind(company);
        app.db.fetch_all::<(String, i64)>(&q).await.unwrap().into_iter().collect::<BTreeMap<String, i64>>()
    };
    let expected = |rounds: &[(usize, fn(usize) -> bool)]| -> BTreeMap<String, i64> {
        rounds
            .iter()
            .flat_map(|&(round, refuses)| (0..24).filter(move |i| !refuses(*i)).map(move |i| (round, i)))
            .flat_map(|(round, i)| [(format!("\"lead {round}.{i}\""), 1), (format!("\"event {round}.{i}\""), 1)])
            .collect()
    };
    let (never, odd): (fn(usize) -> bool, fn(usize) -> bool) = (|_| false, |i| i % 2 == 1);

    let before = app.db.one_statement_changes().unwrap();
    assert!(race(1, never, never).await.into_iter().all(|o| o.unwrap() == Ok(())));
    let after = app.db.one_statement_changes().unwrap();
    assert_eq!((after.committed - before.committed, after.refused - before.refused), (24, 0));
    assert!(after.shared > before.shared, "no change shared a statement");
    assert_eq!(written().await, expected(&[(1, never)]));

    let before = after;
    for (i, outcome) in race(2, odd, never).await.into_iter().enumerate() {
        let expected = if odd(i) { Err(CHANGED_NO_ROW.to_owned()) } else { Ok(()) };
        assert_eq!(outcome.unwrap(), expected, "change {i}");
    }
    let after = app.db.one_statement_changes().unwrap();
    assert_eq!((after.committed - before.committed, after.refused - before.refused), (12, 12), "each refusal counted once");
    assert_eq!(written().await, expected(&[(1, never), (2, odd)]), "each change written once, the refused ones not at all");

    let third: fn(usize) -> bool = |i| i % 3 == 0;
    let before = after;
    for (i, outcome) in race(3, never, third).await.into_iter().enumerate() {
        match outcome {
            Ok(outcome) => assert!(!third(i) && outcome == Ok(()), "change {i}: {outcome:?}"),
            Err(e) => assert!(third(i), "change {i} failed: {e}"),
        }
    }
    let after = app.db.one_statement_changes().unwrap();
    assert_eq!((after.committed - before.committed, after.refused - before.refused), (16, 0));
    assert_eq!(written().await, expected(&[(1, never), (2, odd), (3, third)]), "the rejected changes wrote nothing, the others once");
}

/// A shared statement looks up the webhooks of all its changes' companies at once: 24 changes
/// race, every other one of a company with an enabled webhook. Those must each refuse (their
/// deliveries need a transaction), also when they shared a statement with changes of the
/// company without webhooks, which commit once each.
async fn a_shared_statement_refuses_when_any_of_its_companies_has_webhooks(backend: Backend) {
    use autoshop::webhooks::store::{HAS_WEBHOOKS, one_statement};
    let Some(app) = app_sending_changes_alone(backend).await else { return };
    let (hooked, hooked_key) = app.new_company("Hooked").await;
    let r = app.post(&hooked_key, "/api/v1/webhooks", json!({"url": "https://hooks.example.com/a", "events": ["*"]})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let company_of = |i: usize| if i % 2 == 1 { hooked } else { app.company_id };
    let outcomes = futures_util::future::join_all((0..24).map(|i| {
        let (db, company) = (app.db.clone(), company_of(i));
        let change = one_statement(Some(lead_insert(company, format!("\"lead {i}\""))), Some(event_values(company, format!("\"event {i}\""))), None, None, company);
        async move { db.begin().await.unwrap().commit_alone(change).await }
    }))
    .await;
    for (i, outcome) in outcomes.into_iter().enumerate() {
        let expected = if company_of(i) == hooked { Err(HAS_WEBHOOKS.to_owned()) } else { Ok(()) };
        assert_eq!(outcome.unwrap(), expected, "change {i}");
    }
    let q = autoshop::db::Query::new("SELECT company_id, data FROM events WHERE type = 'shop.updated' AND company_id IN ($1, $2) ORDER BY data")
        .bind(app.company_id)
        .bind(hooked);
    let written = app.db.fetch_all::<(i64, String)>(&q).await.unwrap();
    let expected: Vec<(i64, String)> = {
        let mut rows: Vec<_> = (0..24)
            .filter(|i| company_of(*i) != hooked)
            .flat_map(|i| [(app.company_id, format!("\"event {i}\"")), (app.company_id, format!("\"lead {i}\""))])
            .collect();
        rows.sort_by(|a, b| a.1.cmp(&b.1));
        rows
    };
    assert_eq!(written, expected, "the hooked company's changes wrote nothing, the others once each");
}

/// Two statements that write rows of the same shops (their counter rows) must lock them in one
/// order, or they deadlock (PostgreSQL breaks it after a second). So a shared statement writes
/// its changes in their lock order: 48 changes with shuffled orders race, and within every
/// statement (one `xid`) the rows' ids, given as PostgreSQL writes them, follow the orders, in
/// the same direction in every statement.
async fn shared_statements_write_their_changes_in_lock_order(backend: Backend) {
    use autoshop::{db::Query, webhooks::store::one_statement};
    let Some(app) = app_sending_changes_alone(backend).await else { return };
    let company = app.company_id;
    const CHANGES: i64 = 48;
    let outcomes = futures_util::future::join_all((0..CHANGES).map(|i| {
        let lock_order = (i * 29) % CHANGES;
        let lead = lead_insert(company, format!("\"order {lock_order}\""));
        let db = app.db.clone();
        async move { db.begin().await.unwrap().commit_alone(one_statement(Some(lead), None, None, None, company).with_lock_order(lock_order)).await }
    }))
    .await;
    assert!(outcomes.into_iter().all(|o| o.unwrap() == Ok(())));

    let q = Query::new("SELECT xid, data FROM events WHERE company_id = $1 AND data LIKE '\"order %' ORDER BY id").bind(company);
    let mut statements: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for (xid, data) in app.db.fetch_all::<(i64, String)>(&q).await.unwrap() {
        let order = data.trim_matches('"').trim_start_matches("order ").parse().unwrap();
        statements.entry(xid).or_default().push(order);
    }
    assert_eq!(statements.values().map(Vec::len).sum::<usize>(), CHANGES as usize);
    let shared: Vec<&Vec<i64>> = statements.values().filter(|orders| orders.len() > 1).collect();
    assert!(!shared.is_empty(), "no statement was shared: {statements:?}");
    assert_written_in_one_order(&shared);
}

/// Each statement's lock orders, as it wrote them, run one way (ties aside), and the same way in
/// every statement.
fn assert_written_in_one_order(statements: &[&Vec<i64>]) {
    let first = statements[0];
    let ascending = first.first() < first.last();
    for orders in statements {
        assert!(
            orders.windows(2).all(|w| w[0] == w[1] || (w[0] < w[1]) == ascending),
            "a statement wrote its changes out of lock order ({}): {orders:?}",
            if ascending { "ascending" } else { "descending" }
        );
    }
}

/// A change that waits for a statement (every connection busy) leaves with its request: when
/// the client goes or the deadline answers 503, nothing of it is written later, so a client that
/// retries after the 503 makes no duplicate. The test holds the one connection of a pool of its
/// own, queues twelve changes, drops every other one's request, then frees the connection: the
/// six kept are written once each, the six dropped never.
async fn a_change_whose_request_is_gone_is_not_sent(backend: Backend) {
    use autoshop::{
        db::{Db, DbConfig, Query},
        webhooks::store::one_statement,
    };
    let Some(app) = app_sending_changes_alone(backend).await else { return };
    let company = app.company_id;
    let pool = Db::connect(&DbConfig { url: app.db_url.clone(), max_connections: 1 }).await.unwrap();
    let mut held = pool.begin().await.unwrap();
    held.execute(&Query::new("SELECT 1")).await.unwrap();
    let label = |i: usize| if i % 2 == 0 { format!("\"kept {i}\"") } else { format!("\"gone {i}\"") };
    let changes: Vec<_> = (0..12)
        .map(|i| {
            let lead = lead_insert(company, label(i));
            let db = pool.clone();
            tokio::spawn(async move { db.begin().await.unwrap().commit_alone(one_statement(Some(lead), None, None, None, company)).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut kept = Vec::new();
    for (i, change) in changes.into_iter().enumerate() {
        if i % 2 == 0 {
            kept.push(change);
        } else {
            change.abort();
            assert!(change.await.unwrap_err().is_cancelled(), "change {i} finished while the connection was held");
        }
    }
    drop(held);
    for change in kept {
        assert_eq!(change.await.unwrap().unwrap(), Ok(()));
    }
    let q = Query::new("SELECT data, COUNT(*) FROM events WHERE company_id = $1 AND type = 'shop.updated' GROUP BY data").bind(company);
    let written: BTreeMap<String, i64> = app.db.fetch_all::<(String, i64)>(&q).await.unwrap().into_iter().collect();
    let expected: BTreeMap<String, i64> = (0..12).step_by(2).map(|i| (label(i), 1)).collect();
    assert_eq!(written, expected, "the kept changes written once each, the dropped ones never");
}

/// Through HTTP: creates of four shops race on PostgreSQL, and those that share a statement are
/// written in the order of their shops (the lock order `Change` gives each, so two statements
/// cannot deadlock on the shops' counter rows). Rounds of 48 creates run until four statements
/// held several shops, so the check cannot pass on statements that had nothing to order.
async fn racing_creates_of_several_shops_share_statements_in_shop_order(backend: Backend) {
    use autoshop::db::Query;
    let Some(app) = app_sending_changes_alone(backend).await else { return };
    let app = Arc::new(app);
    let key = app.admin_key.clone();
    let mut shops = Vec::new();
    for name in ["North", "East", "South", "West"] {
        shops.push(app.create_shop(&key, name, "UTC").await);
    }
    let q = Query::new("SELECT xid, shop_id FROM events WHERE company_id = $1 AND type = 'appointment.created' ORDER BY id").bind(app.company_id);
    let mut statements: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for round in 0..8 {
        let races: Vec<_> = (0..48)
            .map(|i| {
                let b = body(shops[(i + round) % shops.len()], &format!("2031-01-{:02}T09:00:00Z", i % 28 + 1));
                let app = app.clone();
                tokio::spawn(async move { app.post(&app.admin_key, "/api/v1/appointments", b).await })
            })
            .collect();
        for race in races {
            let r = race.await.unwrap();
            assert_eq!(r.status, 201, "{}", r.body);
        }
        statements = BTreeMap::new();
        for (xid, shop) in app.db.fetch_all::<(i64, i64)>(&q).await.unwrap() {
            statements.entry(xid).or_default().push(shop);
        }
        if statements.values().filter(|shops| shops.first() != shops.last()).count() >= 4 {
            break;
        }
    }
    let mixed: Vec<&Vec<i64>> = statements.values().filter(|shops| shops.first() != shops.last()).collect();
    assert!(mixed.len() >= 4, "too few statements held several shops to check their order: {statements:?}");
    assert_written_in_one_order(&mixed);
}
