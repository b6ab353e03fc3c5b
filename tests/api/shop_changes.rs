//! Appointment writes read their shop and its bays from each replica's cache: a change to the
//! shop or to a bay reaches the next write on the replica that made it at once, and another
//! replica's within a notice's delivery, well under the cache's one-second lifetime.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{
    appointments::body_with,
    support::{Backend, TestApp},
};

crate::backend_tests!(shop_and_bay_changes_reach_the_next_create_on_every_replica,);

/// Creates an appointment through the server at `base`: its status and body.
async fn create_on(app: &TestApp, base: &str, body: Value) -> (u16, Value) {
    let r = app.client.post(format!("{base}/api/v1/appointments")).bearer_auth(&app.admin_key).json(&body).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

/// Creates on `base` until `seen` holds for the answer: how long that took (at most 500 ms, half
/// the cache's lifetime, so only the change's notice can have made it hold).
async fn until_seen(app: &TestApp, base: &str, body: Value, seen: impl Fn(u16, &Value) -> bool) -> Duration {
    let started = Instant::now();
    loop {
        let (status, answer) = create_on(app, base, body.clone()).await;
        if seen(status, &answer) {
            return started.elapsed();
        }
        assert!(started.elapsed() < Duration::from_millis(500), "{base} still answers {status} {answer} after the change");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn shop_and_bay_changes_reach_the_next_create_on_every_replica(backend: Backend) {
    let app = &TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let replica = &app.spawn_replica().await;
    let servers = [app.base.as_str(), replica.as_str()];
    let shop = app.create_shop(key, "Zone", "UTC").await;
    let bay = app.create_bay(key, shop, "Lift 1", 1).await;
    // 23:30 UTC is the 1st in UTC and 08:30 on the 2nd in Tokyo.
    let at = |column: &str| body_with(shop, "2026-06-01T23:30:00Z", json!({"column": column}));
    let local_date = |answer: &Value| answer["schedule"]["date"].as_str().map(str::to_owned);
    // Let the replica start hearing changes.
    tokio::time::sleep(Duration::from_millis(300)).await;

    // A new time zone: the creates right after it store the new local date on both servers.
    // Each server makes one change while both hold the shop in their caches.
    for (i, (zone, before, expected)) in [("Asia/Tokyo", "2026-06-01", "2026-06-02"), ("UTC", "2026-06-02", "2026-06-01")].into_iter().enumerate() {
        for base in servers {
            for _ in 0..3 {
                let (status, answer) = create_on(app, base, at("Lift 1")).await;
                assert_eq!((status, local_date(&answer).as_deref()), (201, Some(before)), "{answer}");
            }
        }
        let changed_on = servers[i];
        let r = app.client.put(format!("{changed_on}/api/v1/shops/{shop}")).bearer_auth(key).json(&json!({"name": "Zone", "timezone": zone})).send().await.unwrap();
        assert_eq!(r.status(), 200);
        let (status, answer) = create_on(app, changed_on, at("Lift 1")).await;
        assert_eq!((status, local_date(&answer).as_deref()), (201, Some(expected)), "the replica that made the change: {answer}");
        let other = servers[1 - i];
        until_seen(app, other, at("Lift 1"), |status, answer| status == 201 && local_date(answer).as_deref() == Some(expected)).await;
    }

    // A renamed bay: its new title is accepted and its old one refused, on both servers.
    for base in servers {
        assert_eq!(create_on(app, base, at("Lift 1")).await.0, 201);
    }
    let r = app.put(key, &format!("/api/v1/bays/{bay}"), json!({"shop_id": shop, "title": "Lift A", "order": 1})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let (status, answer) = create_on(app, &app.base, at("Lift A")).await;
    assert_eq!((status, answer["column"].as_str()), (201, Some("Lift A")), "{answer}");
    assert_eq!(create_on(app, &app.base, at("Lift 1")).await.0, 422);
    until_seen(app, replica, at("Lift A"), |status, answer| status == 201 && answer["column"] == "Lift A").await;
    assert_eq!(create_on(app, replica, at("Lift 1")).await.0, 422);

    // A new bay, added through the replica, is bookable on both.
    let r = app.client.post(format!("{replica}/api/v1/bays")).bearer_auth(key).json(&json!({"shop_id": shop, "title": "Lift 2", "order": 2})).send().await.unwrap();
    assert_eq!(r.status(), 201);
    assert_eq!(create_on(app, replica, at("Lift 2")).await.0, 201);
    until_seen(app, &app.base, at("Lift 2"), |status, _| status == 201).await;
}
