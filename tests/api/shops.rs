use serde_json::json;

use crate::support::{Backend, HeldWrite, TestApp};

crate::backend_tests!(
    creates_and_updates_shops_with_validation,
    lists_the_time_zones_a_shop_accepts,
    a_shop_put_keeps_what_omitted_fields_hold_when_it_lands,
);

async fn creates_and_updates_shops_with_validation(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let r = app
        .post(key, "/api/v1/shops", json!({"name": "North", "city": "Chicago", "timezone": "America/Chicago", "email": "n@example.com"}))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.body["shop_id"].as_i64().unwrap();
    assert_eq!(r.header("location"), Some(format!("/api/v1/shops/{id}").as_str()));
    assert_eq!(r.body["company_id"], app.company_id);
    assert_eq!(r.body["address"], "", "omitted text fields are empty strings");
    assert_eq!(app.get(key, &format!("/api/v1/shops/{id}")).await.body, r.body);

    // Default time zone is UTC.
    let r = app.post(key, "/api/v1/shops", json!({"name": "South"})).await;
    assert_eq!(r.body["timezone"], "UTC");

    let r = app.post(key, "/api/v1/shops", json!({"timezone": "Mars/Olympus", "email": "nope"})).await;
    for field in ["name", "timezone", "email"] {
        r.invalid(field);
    }
    app.post(key, "/api/v1/shops", json!({"name": "  "})).await.invalid("name");

    // PUT validates like create (`name` required) and keeps omitted optional fields.
    app.put(key, &format!("/api/v1/shops/{id}"), json!({"phone": "555-0100"})).await.invalid("name");
    let r = app.put(key, &format!("/api/v1/shops/{id}"), json!({"name": "North", "phone": "555-0100"})).await;
    assert_eq!((r.ok()["name"].as_str(), r.body["phone"].as_str(), r.body["city"].as_str()), (Some("North"), Some("555-0100"), Some("Chicago")));
    app.put(key, &format!("/api/v1/shops/{id}"), json!({"name": "North", "timezone": "Nowhere"})).await.invalid("timezone");
    assert_eq!(app.get(key, &format!("/api/v1/shops/{id}")).await.body["timezone"], "America/Chicago");
    app.put(key, "/api/v1/shops/999999", json!({"name": "x"})).await.problem(404);
    app.get(key, "/api/v1/shops/not-a-number").await.problem(404);

    // The other texts: at most 255 characters as sent, stored trimmed.
    let long = "x".repeat(256);
    let fields = ["address", "city", "state", "zip", "phone", "website", "email"];
    let mut body = json!({"name": "North"});
    for field in fields {
        body[field] = json!(long);
    }
    let r = app.put(key, &format!("/api/v1/shops/{id}"), body).await;
    for field in fields {
        r.invalid(field);
    }
    let r = app.put(key, &format!("/api/v1/shops/{id}"), json!({"name": "North", "address": " 1 Main St ", "zip": format!(" {} ", "9".repeat(253))})).await;
    assert_eq!((r.ok()["address"].as_str(), r.body["zip"].as_str()), (Some("1 Main St"), Some("9".repeat(253).as_str())));
}

async fn lists_the_time_zones_a_shop_accepts(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let reader = app.create_key(&app.admin_key, "read", None).await;
    let names = app.get(&reader, "/api/v1/settings/timezones").await.ok()["data"].clone();
    let names: Vec<&str> = names.as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    // The names the issue found collapsing into one identifier are all there, as distinct values.
    for name in ["America/Chicago", "UTC", "GMT0", "GMT+0", "GMT-0"] {
        assert!(names.contains(&name), "{name}");
    }
    // Each listed name is accepted; anything else is a 422 on `timezone`.
    let key = &app.admin_key;
    for name in ["GMT+0", "Asia/Kolkata", names[names.len() - 1]] {
        let r = app.post(key, "/api/v1/shops", json!({"name": name, "timezone": name})).await;
        assert_eq!(r.ok()["timezone"], name);
    }
    app.post(key, "/api/v1/shops", json!({"name": "x", "timezone": "america/chicago"})).await.invalid("timezone");
}

/// A shop PUT that read the shop before another write changed its phone, and lands after that
/// write committed: the omitted phone keeps the other write's value (the rename is not written
/// over the shop as first read).
async fn a_shop_put_keeps_what_omitted_fields_hold_when_it_lands(backend: Backend) {
    let app = std::sync::Arc::new(TestApp::spawn(backend).await);
    let key = app.admin_key.clone();
    let shop = app.create_shop(&key, "North", "America/Chicago").await;
    let held = HeldWrite::begin(&app).await;
    held.lock_row_on_postgres("shops", app.company_id, shop).await;
    held.run("UPDATE shops SET phone = '555-0199' WHERE company_id = $1 AND id = $2", &[app.company_id, shop]).await;
    let put = crate::support::put_across(&app, held, &key, &format!("/api/v1/shops/{shop}"), json!({"name": "North Side"})).await;
    assert_eq!((put.ok()["name"].clone(), put.body["phone"].clone()), (json!("North Side"), json!("555-0199")));
}
