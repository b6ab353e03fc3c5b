use serde_json::json;

use autoshop::config::AppConfig;

use crate::support::{Backend, HeldWrite, TestApp};

crate::backend_tests!(
    keys_are_shown_once_listed_without_secrets_and_revoked_at_once,
    roles_limit_what_a_key_may_do,
    shop_lists_limit_what_a_key_sees,
    key_creation_is_validated,
    bad_credentials_are_401_with_a_challenge,
    rate_limits_are_per_key_and_reported_on_every_response,
    revocation_is_immediate_on_every_replica,
    roles_are_checked_before_the_body,
    two_admin_keys_revoking_each_other_leave_one,
    a_key_revoked_while_it_creates_a_key_creates_none,
);

async fn keys_are_shown_once_listed_without_secrets_and_revoked_at_once(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = &app.admin_key;
    let r = app.post(admin, "/api/v1/api_keys", json!({"name": "Booking site", "role": "write"})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let key = r.body["api_key"].as_str().unwrap().to_owned();
    let id = r.body["id"].as_i64().unwrap();
    assert!(key.starts_with("ask_") && key.len() >= 4 + 64);
    assert_eq!((r.body["role"].as_str(), r.body["name"].as_str()), (Some("write"), Some("Booking site")));
    assert!(r.body["shop_ids"].is_null() && r.body["revoked_at"].is_null());
    assert!(key.starts_with(r.body["prefix"].as_str().unwrap()));

    assert_eq!(app.get(&key, "/api/v1/bays").await.status, 200);
    // last_used_at is recorded in the background; give it a moment.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let list = app.get(admin, "/api/v1/api_keys").await;
    let record = list.ok()["data"].as_array().unwrap().iter().find(|k| k["id"] == id).unwrap().clone();
    assert!(record.get("api_key").is_none(), "the key is never listed");
    assert!(record["last_used_at"].is_string(), "{record}");
    assert!(!list.body.to_string().contains(&key[4..]), "no secret material in the list");

    let r = app.delete(admin, &format!("/api/v1/api_keys/{id}")).await;
    assert_eq!(r.status, 204);
    app.get(&key, "/api/v1/bays").await.problem(401);
    let list = app.get(admin, "/api/v1/api_keys").await;
    let record = list.body["data"].as_array().unwrap().iter().find(|k| k["id"] == id).unwrap().clone();
    assert!(record["revoked_at"].is_string());
    // Revoking again is harmless; an unknown id is 404.
    assert_eq!(app.delete(admin, &format!("/api/v1/api_keys/{id}")).await.status, 204);
    app.delete(admin, "/api/v1/api_keys/999999").await.problem(404);
    // A key cannot revoke itself.
    let own_id = app.get(admin, "/api/v1/api_keys").await.ids("id")[0];
    app.delete(admin, &format!("/api/v1/api_keys/{own_id}")).await.invalid("id");
    assert_eq!(app.get(admin, "/api/v1/bays").await.status, 200);
}

async fn roles_limit_what_a_key_may_do(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = &app.admin_key;
    let shop = app.create_shop(admin, "A", "UTC").await;
    let bay = app.create_bay(admin, shop, "Lift", 0).await;
    let read = app.create_key(admin, "read", None).await;
    let write = app.create_key(admin, "write", None).await;

    for key in [&read, &write] {
        for path in ["/api/v1/bays", "/api/v1/settings/shop_info", "/api/v1/settings/shop_hours"] {
            assert_eq!(app.get(key, path).await.status, 200, "{path}");
        }
        // Settings writes are for admins only.
        app.post(key, "/api/v1/bays", json!({"shop_id": shop, "title": "New"})).await.problem(403);
        app.put(key, &format!("/api/v1/bays/{bay}"), json!({"order": 3})).await.problem(403);
        app.post(key, "/api/v1/settings/sources", json!({"shop_id": shop, "name": "X"})).await.problem(403);
        app.put(key, "/api/v1/settings/shop_hours", json!({"shop_id": shop, "hours": []})).await.problem(403);
        app.post(key, "/api/v1/shops", json!({"name": "X"})).await.problem(403);
        app.put(key, &format!("/api/v1/shops/{shop}"), json!({"name": "X"})).await.problem(403);
        app.get(key, "/api/v1/api_keys").await.problem(403);
        app.post(key, "/api/v1/api_keys", json!({"name": "x", "role": "admin"})).await.problem(403);
    }
    // Nothing was changed by the refused writes.
    assert_eq!(app.get(admin, &format!("/api/v1/bays/{bay}")).await.body["order"], 0);
}

async fn shop_lists_limit_what_a_key_sees(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = &app.admin_key;
    let mine = app.create_shop(admin, "Mine", "UTC").await;
    let other = app.create_shop(admin, "Other", "UTC").await;
    let my_bay = app.create_bay(admin, mine, "Lift", 0).await;
    let other_bay = app.create_bay(admin, other, "Lift", 0).await;
    app.put(admin, "/api/v1/settings/shop_hours", json!({"shop_id": other, "hours": [{"day": 1, "open": "08:00", "close": "09:00"}]})).await.ok();
    let scoped = app.create_key(admin, "admin", Some(vec![mine])).await;

    assert_eq!(app.get(&scoped, "/api/v1/bays").await.ids("id"), vec![my_bay]);
    app.get(&scoped, &format!("/api/v1/bays?filter[shop_id]={other}")).await.problem(404);
    app.get(&scoped, &format!("/api/v1/bays/{other_bay}")).await.problem(404);
    app.put(&scoped, &format!("/api/v1/bays/{other_bay}"), json!({"order": 1})).await.problem(404);
    app.post(&scoped, "/api/v1/bays", json!({"shop_id": other, "title": "Sneaky"})).await.invalid("shop_id");
    app.put(&scoped, &format!("/api/v1/bays/{my_bay}"), json!({"shop_id": other})).await.invalid("shop_id");
    assert_eq!(app.get(&scoped, "/api/v1/settings/shop_info").await.ids("shop_id"), vec![mine]);
    assert_eq!(app.get(&scoped, "/api/v1/settings/shop_hours").await.body["data"], json!([]));
    app.get(&scoped, &format!("/api/v1/settings/sources?filter[shop_id]={other}")).await.problem(404);
    app.get(&scoped, &format!("/api/v1/shops/{other}")).await.problem(404);
    app.put(&scoped, "/api/v1/settings/shop_hours", json!({"shop_id": other, "hours": []})).await.invalid("shop_id");
    // A scoped admin manages its shops' settings, but not shops or keys company-wide.
    assert_eq!(app.post(&scoped, "/api/v1/bays", json!({"shop_id": mine, "title": "Second"})).await.status, 201);
    app.post(&scoped, "/api/v1/shops", json!({"name": "New"})).await.problem(403);
    app.get(&scoped, "/api/v1/api_keys").await.problem(403);
    // The other shop's hours are intact.
    assert_eq!(app.get(admin, &format!("/api/v1/settings/shop_hours?filter[shop_id]={other}")).await.body["data"].as_array().unwrap().len(), 1);
}

async fn key_creation_is_validated(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = &app.admin_key;
    let r = app.post(admin, "/api/v1/api_keys", json!({"role": "owner"})).await;
    r.invalid("name");
    r.invalid("role");
    app.post(admin, "/api/v1/api_keys", json!({"name": "x", "role": "read", "shop_ids": []})).await.invalid("shop_ids");
    app.post(admin, "/api/v1/api_keys", json!({"name": "x", "role": "read", "shop_ids": [999999]})).await.invalid("shop_ids.0");
    let (_, other_admin) = app.new_company("Other").await;
    let foreign = app.create_shop(&other_admin, "Foreign", "UTC").await;
    app.post(admin, "/api/v1/api_keys", json!({"name": "x", "role": "read", "shop_ids": [foreign]})).await.invalid("shop_ids.0");
}

async fn bad_credentials_are_401_with_a_challenge(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let no_key = app.request(reqwest::Method::GET, None, "/api/v1/bays", None).await;
    no_key.problem(401);
    assert_eq!(no_key.header("www-authenticate"), Some("Bearer"));
    app.get("ask_0000", "/api/v1/bays").await.problem(401);
    let basic = app.client.get(format!("{}/api/v1/bays", app.base)).header("authorization", "Basic dXNlcjpwYXNz").send().await.unwrap();
    assert_eq!(basic.status(), 401);
    // Public endpoints need no key.
    for path in ["/healthz", "/readyz", "/metrics", "/api/v1/openapi.json", "/docs/", "/board"] {
        assert_eq!(app.request(reqwest::Method::GET, None, path, None).await.status, 200, "{path}");
    }
}

async fn rate_limits_are_per_key_and_reported_on_every_response(backend: Backend) {
    let config = AppConfig { rate_limit: 0.5, rate_limit_burst: 3.0, ..crate::support::test_config() };
    let app = TestApp::spawn_with(backend, config).await;
    let admin = &app.admin_key;
    let other = app.create_key(admin, "read", None).await;
    let mut remaining = Vec::new();
    // create_key used one of the admin key's three.
    for _ in 0..2 {
        let r = app.get(admin, "/api/v1/bays").await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("ratelimit-limit"), Some("3"));
        assert!(r.header("ratelimit-reset").is_some());
        remaining.push(r.header("ratelimit-remaining").unwrap().to_owned());
    }
    assert_eq!(remaining, vec!["1", "0"]);
    let r = app.get(admin, "/api/v1/bays").await;
    r.problem(429);
    assert_eq!(r.header("retry-after"), Some("2"));
    assert_eq!(r.header("ratelimit-remaining"), Some("0"));
    // Other keys have their own allowance; public endpoints are not limited.
    assert_eq!(app.get(&other, "/api/v1/bays").await.status, 200);
    assert_eq!(app.request(reqwest::Method::GET, None, "/healthz", None).await.status, 200);
}

async fn revocation_is_immediate_on_every_replica(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = &app.admin_key;
    let replica = app.spawn_replica().await;
    let key = app.create_key(admin, "read", None).await;
    let id = app.get(admin, "/api/v1/api_keys").await.body["data"].as_array().unwrap().iter().find(|k| key.starts_with(k["prefix"].as_str().unwrap())).unwrap()["id"].as_i64().unwrap();
    let on_replica = |k: String| {
        let client = app.client.clone();
        let url = format!("{replica}/api/v1/bays");
        async move { client.get(url).bearer_auth(k).send().await.unwrap().status().as_u16() }
    };
    // Let the replica start hearing revocations, then warm its key cache.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    for _ in 0..3 {
        assert_eq!(on_replica(key.clone()).await, 200);
    }
    // The cached key is not accepted under another scheme.
    let basic = app.client.get(format!("{replica}/api/v1/bays")).header("authorization", format!("Basic {key}")).send().await.unwrap();
    assert_eq!(basic.status(), 401);
    let twice = app.client.get(format!("{replica}/api/v1/bays")).header("authorization", format!("{key} {key}")).send().await.unwrap();
    assert_eq!(twice.status(), 401);

    assert_eq!(app.delete(admin, &format!("/api/v1/api_keys/{id}")).await.status, 204);
    // PostgreSQL delivers the notice asynchronously; allow it a moment, far under a second.
    let mut refused = false;
    for _ in 0..20 {
        if on_replica(key.clone()).await == 401 {
            refused = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert!(refused, "the other replica still accepts the revoked key");
}

async fn roles_are_checked_before_the_body(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = &app.admin_key;
    let shop = app.create_shop(admin, "A", "UTC").await;
    let read = app.create_key(admin, "read", None).await;
    let write = app.create_key(admin, "write", None).await;
    let scoped_admin = app.create_key(admin, "admin", Some(vec![shop])).await;
    let customer = app
        .post(admin, "/api/v1/customers", json!({"shop_id": shop, "business_name": "", "first_name": "A", "last_name": "B",
            "address": "1", "city": "c", "state": "s", "zip": "z"}))
        .await
        .ok()["customer_id"]
        .as_i64()
        .unwrap();
    let malformed = |key: &str, method: reqwest::Method, path: String| {
        app.client.request(method, format!("{}{path}", app.base)).bearer_auth(key.to_owned()).header("content-type", "application/json").body("{bad").send()
    };
    for (key, method, path) in [
        (&read, reqwest::Method::POST, "/api/v1/customers".to_owned()),
        (&read, reqwest::Method::PUT, format!("/api/v1/customers/{customer}")),
        (&read, reqwest::Method::POST, format!("/api/v1/customers/{customer}/ship_tos")),
        (&read, reqwest::Method::POST, "/api/v1/appointments".to_owned()),
        (&write, reqwest::Method::POST, format!("/api/v1/customers/{customer}/accounts_receivable")),
        (&write, reqwest::Method::POST, "/api/v1/bays".to_owned()),
        (&scoped_admin, reqwest::Method::POST, "/api/v1/shops".to_owned()),
        (&scoped_admin, reqwest::Method::POST, "/api/v1/api_keys".to_owned()),
    ] {
        let status = malformed(key, method.clone(), path.clone()).await.unwrap().status();
        assert_eq!(status, 403, "{method} {path}");
    }
    // With an `Idempotency-Key`, whose body is read before the handler runs, a `read` key is
    // still refused before its body: a body over the limit, of the wrong type or malformed.
    for (content_type, body) in [("application/json", "{bad".to_owned()), ("text/plain", "x".repeat(2 << 20)), ("application/json", "x".repeat(2 << 20))] {
        let r = app
            .client
            .post(format!("{}/api/v1/appointments", app.base))
            .bearer_auth(&read)
            .header("content-type", content_type)
            .header("idempotency-key", "k-1")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{content_type}");
    }
    let r = app.client.post(format!("{}/api/v1/appointments", app.base)).bearer_auth(&read).header("idempotency-key", "has space").json(&json!({})).send().await.unwrap();
    assert_eq!(r.status(), 403, "a malformed Idempotency-Key from a read key");
}

/// Two admin keys that revoke each other at the same moment, through two servers: one wins and
/// the other gets 401 (it was revoked first), so the company never loses both. Each key is used
/// once before, so both servers hold it in their key cache.
async fn two_admin_keys_revoking_each_other_leave_one(backend: Backend) {
    let config = AppConfig { rate_limit: 0.0, ..crate::support::test_config() };
    let app = TestApp::spawn_with(backend, config.clone()).await;
    let replica = app.spawn_replica_with(config).await;
    let mut outcomes = std::collections::BTreeMap::new();
    for round in 0..24 {
        let mut keys = Vec::new();
        for _ in 0..2 {
            let r = app.post(&app.admin_key, "/api/v1/api_keys", json!({"name": "admin", "role": "admin"})).await;
            keys.push((r.body["id"].as_i64().unwrap(), r.body["api_key"].as_str().unwrap().to_owned()));
        }
        for (_, key) in &keys {
            for base in [&app.base, &replica] {
                let r = app.client.get(format!("{base}/api/v1/bays")).bearer_auth(key).send().await.unwrap();
                assert_eq!(r.status(), 200);
            }
        }
        let revocations = [(&keys[0], &keys[1]), (&keys[1], &keys[0])].into_iter().enumerate().map(|(n, (revoker, revoked))| {
            let base = if (n + round) % 2 == 0 { &app.base } else { &replica };
            app.client.delete(format!("{base}/api/v1/api_keys/{}", revoked.0)).bearer_auth(&revoker.1)
        });
        let mut statuses = crate::support::together(revocations.collect()).await;
        statuses.sort();
        assert_ne!(statuses, vec![204, 204], "round {round}: both admin keys revoked each other");
        // Exactly one key still works on both servers (PostgreSQL tells the other server of
        // the revocation asynchronously, within milliseconds).
        let mut working = 0;
        for _ in 0..40 {
            working = 0;
            for (_, key) in &keys {
                for base in [&app.base, &replica] {
                    let r = app.client.get(format!("{base}/api/v1/bays")).bearer_auth(key).send().await.unwrap();
                    working += usize::from(r.status() == 200);
                }
            }
            if working == 2 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        assert_eq!(working, 2, "round {round}: {statuses:?}");
        *outcomes.entry(statuses).or_insert(0) += 1;
    }
    // Both orders of arrival were seen: the race was run, not avoided.
    assert!(outcomes.contains_key(&vec![204, 401]), "{outcomes:?}");
}

/// A key authenticated before its revocation commits (a replica's cache, or the moment before)
/// must not create a key that outlives it: the create checks its own key, locked, in its
/// transaction. Here the revocation is the test's own transaction, committed while the create
/// waits.
async fn a_key_revoked_while_it_creates_a_key_creates_none(backend: Backend) {
    let app = std::sync::Arc::new(TestApp::spawn(backend).await);
    let doomed = app.create_key(&app.admin_key, "admin", None).await;
    let records = app.get(&app.admin_key, "/api/v1/api_keys?pageSize=100").await;
    let doomed_id = records.body["data"].as_array().unwrap().iter().find(|k| doomed.starts_with(k["prefix"].as_str().unwrap())).unwrap()["id"].as_i64().unwrap();
    let before = records.body["data"].as_array().unwrap().len();
    app.get(&doomed, "/api/v1/api_keys").await.ok();

    let held = HeldWrite::begin(&app).await;
    assert_eq!(held.run("UPDATE api_keys SET revoked_at = 1 WHERE company_id = $1 AND id = $2", &[app.company_id, doomed_id]).await, 1);
    let create = {
        let (app, doomed) = (app.clone(), doomed.clone());
        tokio::spawn(async move { app.post(&doomed, "/api/v1/api_keys", json!({"name": "heir", "role": "admin"})).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert!(!create.is_finished(), "the create waits for its key's row");
    held.commit().await;
    create.await.unwrap().problem(401);
    let after = app.get(&app.admin_key, "/api/v1/api_keys?pageSize=100").await;
    assert_eq!(after.body["data"].as_array().unwrap().len(), before, "no key was created: {}", after.body);
}
