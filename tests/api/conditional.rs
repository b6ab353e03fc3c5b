//! Conditional requests (decisions §13): ETags on every single resource, 304 on
//! `If-None-Match`, 412 on a stale `If-Match`, and one winner among writers holding one ETag.

use std::{collections::HashMap, sync::Arc};

use proptest::{
    prelude::*,
    strategy::{Strategy, ValueTree},
    test_runner::TestRunner,
};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{
    events_recorded::{feed_end, nothing_recorded, recorded_since},
    appointments::{body, body_with, create_customer},
    support::{Backend, HeldWrite, TestApp},
};

crate::backend_tests!(
    single_resources_carry_etags_and_answer_304,
    a_stale_if_match_writes_nothing_on_every_route,
    racing_writers_holding_one_etag_have_one_winner,
    a_put_and_a_delete_holding_one_etag_have_one_winner,
    etags_change_exactly_when_the_representation_does,
    if_match_star_writes_over_a_change_made_while_it_waited,
);

fn ship_to_body(number: &str, name: &str) -> Value {
    json!({"number": number, "name": name, "address": "2 Dock Rd", "city": "Port", "state": "IL", "zip": "60000",
        "email": null, "work_phone": "555-1", "fax": "", "home_phone": "", "cell_phone": ""})
}

struct Answer {
    status: StatusCode,
    etag: Option<String>,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    #[track_caller]
    fn etag(&self) -> String {
        let tag = self.etag.clone().unwrap_or_else(|| panic!("no ETag on a {} answer: {}", self.status, self.body));
        assert!(tag.starts_with('"') && tag.ends_with('"') && !tag.starts_with("W/"), "strong quoted ETag: {tag}");
        tag
    }
}

async fn send(app: &TestApp, base: &str, method: Method, path: &str, headers: &[(&str, &str)], body: Option<&Value>) -> Answer {
    let mut req = app.client.request(method, format!("{base}{path}")).bearer_auth(&app.admin_key);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    if let Some(body) = body {
        req = req.json(body);
    }
    let r = req.send().await.unwrap();
    let status = r.status();
    let etag = r.headers().get("etag").map(|v| v.to_str().unwrap().to_owned());
    Answer { status, etag, body: r.text().await.unwrap() }
}

async fn get(app: &TestApp, path: &str, headers: &[(&str, &str)]) -> Answer {
    send(app, &app.base, Method::GET, path, headers, None).await
}

async fn single_resources_carry_etags_and_answer_304(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let shop = app.create_shop(&app.admin_key, "Tags", "America/Chicago").await;
    let bay = app.create_bay(&app.admin_key, shop, "Bay 1", 1).await;
    let created = send(
        &app,
        &app.base,
        Method::POST,
        "/api/v1/appointments",
        &[],
        Some(&body_with(shop, "2030-01-07T09:00:00-06:00", json!({"column": "Bay 1"}))),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let path = format!("/api/v1/appointments/{}", created.json()["appointment_id"]);

    let first = get(&app, &path, &[]).await;
    assert_eq!(first.status, StatusCode::OK);
    let tag = first.etag();
    assert_eq!(created.etag(), tag, "the 201 carries the ETag a GET then shows");
    assert_eq!(get(&app, &path, &[]).await.etag(), tag, "nothing changed, same ETag");

    for condition in [tag.clone(), format!("W/{tag}"), format!("\"nope\", {tag}"), "*".to_owned()] {
        let cached = get(&app, &path, &[("if-none-match", &condition)]).await;
        assert_eq!(cached.status, StatusCode::NOT_MODIFIED, "If-None-Match: {condition}");
        assert_eq!(cached.etag(), tag, "a 304 carries the ETag");
        assert!(cached.body.is_empty(), "a 304 has no body");
    }
    let other = get(&app, &path, &[("if-none-match", "\"something-else\"")]).await;
    assert_eq!(other.status, StatusCode::OK);
    assert_eq!(other.body, first.body);
    let malformed = get(&app, &path, &[("if-none-match", "no-quotes")]).await;
    assert_eq!(malformed.status, StatusCode::BAD_REQUEST, "{}", malformed.body);

    // A bay rename changes the representation of its appointments, so their ETags.
    let renamed = send(&app, &app.base, Method::PUT, &format!("/api/v1/bays/{bay}"), &[], Some(&json!({"shop_id": shop, "title": "Bay One"}))).await;
    assert_eq!(renamed.status, StatusCode::OK, "{}", renamed.body);
    let after = get(&app, &path, &[("if-none-match", &tag)]).await;
    assert_eq!(after.status, StatusCode::OK, "the old ETag no longer matches");
    assert_eq!(after.json()["column"], "Bay One");
    assert_ne!(after.etag(), tag);

    // Every single-resource GET carries one; lists do not.
    let customer = create_customer(&app, &app.admin_key, shop, "Ada", "Tag", "ada@example.com").await;
    let ship_to = app.post(&app.admin_key, &format!("/api/v1/customers/{customer}/ship_tos"), ship_to_body("1", "Home")).await;
    assert_eq!(ship_to.status, 201, "{}", ship_to.body);
    let receivable = app
        .post(
            &app.admin_key,
            &format!("/api/v1/customers/{customer}/accounts_receivable"),
            json!({"shop_id": shop, "reference": "INV-1", "date": "2030-01-02", "due_date": "2030-02-01", "amount": 12.5}),
        )
        .await;
    assert_eq!(receivable.status, 201, "{}", receivable.body);
    let source = app.get(&app.admin_key, &format!("/api/v1/settings/sources?filter[shop_id]={shop}")).await.ids("id")[0];
    let webhook =
        send(&app, &app.base, Method::POST, "/api/v1/webhooks", &[], Some(&json!({"url": "http://127.0.0.1:9/hook", "events": ["*"]}))).await;
    assert_eq!(webhook.status, StatusCode::CREATED, "{}", webhook.body);
    assert!(webhook.json()["secret"].is_string());
    let webhook_path = format!("/api/v1/webhooks/{}", webhook.json()["id"]);
    assert_eq!(webhook.etag(), get(&app, &webhook_path, &[]).await.etag(), "the create's ETag leaves the secret out, as GET does");
    for path in [
        format!("/api/v1/customers/{customer}"),
        format!("/api/v1/customers/{customer}/ship_tos/{}", ship_to.body["id"]),
        format!("/api/v1/customers/{customer}/accounts_receivable/{}", receivable.body["id"]),
        format!("/api/v1/shops/{shop}"),
        format!("/api/v1/bays/{bay}"),
        format!("/api/v1/settings/sources/{source}"),
        webhook_path,
    ] {
        let one = get(&app, &path, &[]).await;
        assert_eq!(one.status, StatusCode::OK, "{path}: {}", one.body);
        let tag = one.etag();
        assert_eq!(get(&app, &path, &[("if-none-match", &tag)]).await.status, StatusCode::NOT_MODIFIED, "{path}");
    }
    assert!(get(&app, "/api/v1/appointments", &[]).await.etag.is_none(), "lists carry no ETag");
}

async fn a_stale_if_match_writes_nothing_on_every_route(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let shop = app.create_shop(&app.admin_key, "Match", "America/Chicago").await;
    let bay = app.create_bay(&app.admin_key, shop, "Lift", 1).await;
    let customer = create_customer(&app, &app.admin_key, shop, "Bo", "Match", "bo@example.com").await;
    let ship_to = app.post(&app.admin_key, &format!("/api/v1/customers/{customer}/ship_tos"), ship_to_body("7", "Work")).await.body["id"].clone();
    let source = app.get(&app.admin_key, &format!("/api/v1/settings/sources?filter[shop_id]={shop}")).await.ids("id")[0];
    let appointment = crate::appointments::create_id(&app, &app.admin_key, body(shop, "2030-01-07T09:00:00-06:00")).await;
    let webhook = app.post(&app.admin_key, "/api/v1/webhooks", json!({"url": "http://127.0.0.1:9/hook", "events": ["*"]})).await.body["id"].clone();

    let writes: Vec<(String, Value)> = vec![
        (format!("/api/v1/appointments/{appointment}"), body_with(shop, "2030-01-07T10:00:00-06:00", json!({"reason": "brakes"}))),
        (
            format!("/api/v1/customers/{customer}"),
            json!({"shop_id": shop, "business_name": "", "first_name": "Bo", "last_name": "Matched",
            "address": "1 Elm St", "city": "Springfield", "state": "IL", "zip": "62701", "email": "bo@example.com"}),
        ),
        (format!("/api/v1/customers/{customer}/ship_tos/{ship_to}"), ship_to_body("7", "Office")),
        (format!("/api/v1/shops/{shop}"), json!({"name": "Match Two"})),
        (format!("/api/v1/bays/{bay}"), json!({"shop_id": shop, "title": "Lift 2"})),
        (format!("/api/v1/settings/sources/{source}"), json!({"shop_id": shop, "name": "Walk-in 2"})),
        (format!("/api/v1/webhooks/{webhook}"), json!({"url": "http://127.0.0.1:9/other", "events": ["*"]})),
    ];
    for (path, new_body) in &writes {
        let mut cursor = feed_end(&app, &app.admin_key).await;
        let before = get(&app, path, &[]).await;
        let tag = before.etag();
        let stale = send(&app, &app.base, Method::PUT, path, &[("if-match", "\"0000\"")], Some(new_body)).await;
        assert_eq!(stale.status, StatusCode::PRECONDITION_FAILED, "{path}: {}", stale.body);
        assert_eq!(stale.json()["status"], 412);
        let weak = send(&app, &app.base, Method::PUT, path, &[("if-match", &format!("W/{tag}"))], Some(new_body)).await;
        assert_eq!(weak.status, StatusCode::PRECONDITION_FAILED, "{path}: a weak tag never matches If-Match");
        assert_eq!(get(&app, path, &[]).await.body, before.body, "{path}: a 412 changed nothing");
        let bad = send(&app, &app.base, Method::PUT, path, &[("if-match", "unquoted")], Some(new_body)).await;
        assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{path}: {}", bad.body);
        nothing_recorded(&app, &app.admin_key, &mut cursor, &format!("PUT {path} refused")).await;

        let fresh = send(&app, &app.base, Method::PUT, path, &[("if-match", &format!("\"other\", {tag}"))], Some(new_body)).await;
        assert_eq!(fresh.status, StatusCode::OK, "{path}: {}", fresh.body);
        let after = get(&app, path, &[]).await;
        assert_ne!(after.etag(), tag, "{path}: the write changed the ETag");
        assert_eq!(fresh.etag(), after.etag(), "{path}: the PUT answer carries the new ETag");
        let reused = send(&app, &app.base, Method::PUT, path, &[("if-match", &tag)], Some(new_body)).await;
        assert_eq!(reused.status, StatusCode::PRECONDITION_FAILED, "{path}: the old ETag is stale now");
        let any = send(&app, &app.base, Method::PUT, path, &[("if-match", "*")], Some(new_body)).await;
        assert_eq!(any.status, StatusCode::OK, "{path}: * matches any current representation");
    }

    for path in [format!("/api/v1/appointments/{appointment}"), format!("/api/v1/webhooks/{webhook}")] {
        let mut cursor = feed_end(&app, &app.admin_key).await;
        let tag = get(&app, &path, &[]).await.etag();
        let stale = send(&app, &app.base, Method::DELETE, &path, &[("if-match", "\"0000\"")], None).await;
        assert_eq!(stale.status, StatusCode::PRECONDITION_FAILED, "{path}: {}", stale.body);
        nothing_recorded(&app, &app.admin_key, &mut cursor, &format!("DELETE {path} refused")).await;
        assert_eq!(get(&app, &path, &[]).await.etag(), tag, "{path}: a refused DELETE deleted nothing");
        let deleted = send(&app, &app.base, Method::DELETE, &path, &[("if-match", &tag)], None).await;
        assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{path}: {}", deleted.body);
    }
    // A soft-deleted appointment stays readable with a new representation.
    let gone = get(&app, &format!("/api/v1/appointments/{appointment}"), &[]).await;
    assert!(gone.json()["deleted"].is_string());
    let missing = send(&app, &app.base, Method::PUT, "/api/v1/bays/999999999", &[("if-match", "*")], Some(&json!({"title": "x"}))).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "an unknown resource is a 404 whatever If-Match says");
}

/// Ten writers (half of them through another server: another replica on PostgreSQL) send a
/// different `PUT` with the same `If-Match`: the check and the write are atomic, so one wins
/// and nine get 412, round after round; the stored appointment is the winner's.
async fn racing_writers_holding_one_etag_have_one_winner(backend: Backend) {
    let app = Arc::new(TestApp::spawn(backend).await);
    let replica = app.spawn_replica().await;
    let shop = app.create_shop(&app.admin_key, "Race", "America/Chicago").await;
    let id = crate::appointments::create_id(&app, &app.admin_key, body(shop, "2030-01-07T09:00:00-06:00")).await;
    let path = format!("/api/v1/appointments/{id}");
    for round in 0..6 {
        let tag = get(&app, &path, &[]).await.etag();
        let mut writers = Vec::new();
        for n in 0..10 {
            let (app, replica, path, tag) = (app.clone(), replica.clone(), path.clone(), tag.clone());
            writers.push(tokio::spawn(async move {
                let base = if n % 2 == 0 { app.base.clone() } else { replica };
                let reason = format!("round {round} writer {n}");
                let b = body_with(shop, "2030-01-07T09:00:00-06:00", json!({"reason": reason}));
                let answer = send(&app, &base, Method::PUT, &path, &[("if-match", &tag)], Some(&b)).await;
                (answer.status, reason, answer.body)
            }));
        }
        let mut winners = Vec::new();
        for w in writers {
            let (status, reason, answer) = w.await.unwrap();
            match status {
                StatusCode::OK => winners.push(reason),
                StatusCode::PRECONDITION_FAILED => {}
                other => panic!("round {round}: unexpected {other}: {answer}"),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: exactly one writer wins: {winners:?}");
        assert_eq!(get(&app, &path, &[]).await.json()["reason"], winners[0], "round {round}: the stored value is the winner's");
    }
}

/// A PUT and a DELETE holding one ETag race through two servers (replicas on PostgreSQL), round
/// after round on a fresh appointment: one wins. A PUT that wins leaves it live and the DELETE
/// gets 412; a DELETE that wins leaves a tombstone and the PUT gets 412 (or 409, the tombstone
/// being read-only); each round records exactly the winner's event.
async fn a_put_and_a_delete_holding_one_etag_have_one_winner(backend: Backend) {
    let app = Arc::new(TestApp::spawn(backend).await);
    let replica = app.spawn_replica().await;
    let shop = app.create_shop(&app.admin_key, "Race", "America/Chicago").await;
    let mut wins = [0; 2];
    for round in 0..12 {
        let id = crate::appointments::create_id(&app, &app.admin_key, body(shop, "2030-01-07T09:00:00-06:00")).await;
        let path = format!("/api/v1/appointments/{id}");
        let mut cursor = feed_end(&app, &app.admin_key).await;
        let tag = get(&app, &path, &[]).await.etag();
        let (put_base, delete_base) = if round % 2 == 0 { (app.base.clone(), replica.clone()) } else { (replica.clone(), app.base.clone()) };
        let b = body_with(shop, "2030-01-07T09:00:00-06:00", json!({"reason": format!("round {round}")}));
        let put = app.client.put(format!("{put_base}{path}")).bearer_auth(&app.admin_key).header("if-match", &tag).json(&b);
        let delete = app.client.delete(format!("{delete_base}{path}")).bearer_auth(&app.admin_key).header("if-match", &tag);
        // Each sent first in turn.
        let statuses = if round % 4 < 2 {
            crate::support::together(vec![put, delete]).await
        } else {
            let s = crate::support::together(vec![delete, put]).await;
            vec![s[1], s[0]]
        };
        let stored = get(&app, &path, &[]).await.json();
        let winner = match (statuses[0], statuses[1]) {
            (200, 412) => {
                assert!(stored["deleted"].is_null() && stored["reason"] == format!("round {round}"), "round {round}: {stored}");
                wins[0] += 1;
                "appointment.updated"
            }
            (409 | 412, 204) => {
                assert!(stored["deleted"].is_string() && stored["reason"] != format!("round {round}"), "round {round}: {stored}");
                wins[1] += 1;
                "appointment.deleted"
            }
            other => panic!("round {round}: one must win, the other be refused: {other:?}"),
        };
        let recorded = recorded_since(&app, &app.admin_key, &mut cursor).await;
        let types: Vec<&str> = recorded.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(types, [winner], "round {round}: exactly the winner's event");
    }
    eprintln!("PUT won {} rounds, DELETE {}", wins[0], wins[1]);
}

#[derive(Debug, Clone)]
enum Op {
    /// Replace the appointment with this reason (maybe the one it has).
    Put(u8),
    /// Rename the appointment's bay to one of a few titles (maybe its own).
    RenameBay(u8),
    /// Change another appointment of the same shop.
    TouchOther(u8),
    /// Only read.
    Read,
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![(0u8..3).prop_map(Op::Put), (0u8..3).prop_map(Op::RenameBay), (0u8..3).prop_map(Op::TouchOther), Just(Op::Read)];
    proptest::collection::vec(op, 1..12)
}

/// For any sequence of writes, the ETag after each step changes exactly when the body a GET
/// returns changed, and one ETag never stands for two bodies.
async fn etags_change_exactly_when_the_representation_does(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let shop = app.create_shop(&app.admin_key, "Props", "America/Chicago").await;
    let mut runner = TestRunner::default();
    for case in 0..8 {
        let sequence = ops().new_tree(&mut runner).unwrap().current();
        let bay_title = format!("Case {case}");
        let bay = app.create_bay(&app.admin_key, shop, &bay_title, case).await;
        let with_bay = |reason: String| body_with(shop, "2030-01-07T09:00:00-06:00", json!({"column": bay_title, "reason": reason}));
        let id = crate::appointments::create_id(&app, &app.admin_key, with_bay("r0".into())).await;
        let other = crate::appointments::create_id(&app, &app.admin_key, body(shop, "2030-01-08T09:00:00-06:00")).await;
        let path = format!("/api/v1/appointments/{id}");
        let mut bodies: HashMap<String, String> = HashMap::new();
        let first = get(&app, &path, &[]).await;
        let (mut tag, mut last) = (first.etag(), first.body);
        bodies.insert(tag.clone(), last.clone());
        for op in &sequence {
            match op {
                Op::Put(n) => {
                    let mut b = with_bay(format!("r{n}"));
                    b["column"] = get(&app, &path, &[]).await.json()["column"].clone();
                    let r = send(&app, &app.base, Method::PUT, &path, &[("if-match", &tag)], Some(&b)).await;
                    assert_eq!(r.status, StatusCode::OK, "{sequence:?}: {}", r.body);
                }
                Op::RenameBay(n) => {
                    let r = app.put(&app.admin_key, &format!("/api/v1/bays/{bay}"), json!({"shop_id": shop, "title": format!("Case {case} title {n}")})).await;
                    assert_eq!(r.status, 200, "{}", r.body);
                }
                Op::TouchOther(n) => {
                    let b = body_with(shop, "2030-01-08T09:00:00-06:00", json!({"reason": format!("other {n}")}));
                    assert_eq!(app.put(&app.admin_key, &format!("/api/v1/appointments/{other}"), b).await.status, 200);
                }
                Op::Read => {}
            }
            let now = get(&app, &path, &[]).await;
            let now_tag = now.etag();
            if now.body == last {
                assert_eq!(now_tag, tag, "{sequence:?}: unchanged after {op:?}, same ETag");
            } else {
                assert_ne!(now_tag, tag, "{sequence:?}: changed after {op:?}, new ETag");
            }
            if let Some(seen) = bodies.insert(now_tag.clone(), now.body.clone()) {
                assert_eq!(seen, now.body, "{sequence:?}: one ETag, two bodies");
            }
            (tag, last) = (now_tag, now.body);
        }
    }
}

/// `If-Match: *` is "whatever the resource is now": a PUT that waits while another write
/// changes the appointment (the test's transaction, committed while the PUT waits) still lands,
/// over the row as it is then (the other write's field kept); the same race with the ETag the
/// client read is a 412.
async fn if_match_star_writes_over_a_change_made_while_it_waited(backend: Backend) {
    let app = Arc::new(TestApp::spawn(backend).await);
    let shop = app.create_shop(&app.admin_key, "Star", "UTC").await;
    let date = "2030-01-07T09:00:00Z";
    let id = crate::appointments::create_id(&app, &app.admin_key, body(shop, date)).await;
    let path = format!("/api/v1/appointments/{id}");
    for (round, condition) in ["*", "seen"].into_iter().enumerate() {
        let seen = get(&app, &path, &[]).await.etag.unwrap();
        let condition = if condition == "*" { condition.to_owned() } else { seen };
        let held = HeldWrite::begin(&app).await;
        held.lock_row_on_postgres("appointments", app.company_id, id).await;
        let employee = 40 + round as i64;
        held.run("UPDATE appointments SET employee_id = $1 WHERE company_id = $2 AND id = $3", &[employee, app.company_id, id]).await;
        let put = {
            let (app, path, condition) = (app.clone(), path.clone(), condition.clone());
            let new_body = body_with(shop, date, json!({"repair_order_id": 70 + round}));
            tokio::spawn(async move { send(&app, &app.base, Method::PUT, &path, &[("if-match", &condition)], Some(&new_body)).await })
        };
        held.await_a_waiter(&app).await;
        assert!(!put.is_finished(), "the PUT waits for the row");
        held.commit().await;
        let put = put.await.unwrap();
        let stored = get(&app, &path, &[]).await.json();
        assert_eq!(stored["employee_id"], json!(employee), "the other write's field is kept");
        if condition == "*" {
            assert_eq!(put.status, StatusCode::OK, "{}", put.body);
            assert_eq!(put.json()["employee_id"], json!(employee), "written over the row as it was then");
            assert_eq!(stored["repair_order_id"], json!(70 + round));
        } else {
            assert_eq!(put.status, StatusCode::PRECONDITION_FAILED, "{}", put.body);
            assert_ne!(stored["repair_order_id"], json!(70 + round), "nothing written");
        }
    }
}
