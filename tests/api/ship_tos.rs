use serde_json::{Value, json};

use crate::{
    customers::create_customer,
    support::{Backend, TestApp},
};

crate::backend_tests!(creates_lists_and_updates_ship_tos, validates_ship_to_bodies, ship_tos_belong_to_their_customer, numbers_sort_ignoring_case);

fn body(number: &str, name: &str) -> Value {
    json!({"number": number, "name": name, "address": "2 Dock Rd", "city": "Port", "state": "IL", "zip": "60000",
        "email": null, "work_phone": "555-1", "fax": "", "home_phone": "", "cell_phone": ""})
}

async fn create(app: &TestApp, key: &str, customer: i64, number: &str, name: &str) -> i64 {
    let r = app.post(key, &format!("/api/v1/customers/{customer}/ship_tos"), body(number, name)).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["id"].as_i64().unwrap()
}

async fn creates_lists_and_updates_ship_tos(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "A", "UTC").await;
    let other_shop = app.create_shop(key, "B", "UTC").await;
    let c = create_customer(&app, key, shop, "Ann", "Lee", json!({})).await;
    let base = format!("/api/v1/customers/{c}/ship_tos");

    let r = app.post(key, &base, body("10", "warehouse")).await;
    assert_eq!(r.status, 201);
    let s1 = r.body["id"].as_i64().unwrap();
    assert_eq!(r.header("location"), Some(format!("{base}/{s1}").as_str()));
    assert_eq!(r.body, json!({"id": s1, "customer_id": c, "number": "10", "name": "warehouse", "address": "2 Dock Rd",
        "city": "Port", "state": "IL", "zip": "60000", "email": null, "work_phone": "555-1", "fax": "", "home_phone": "", "cell_phone": ""}));
    assert_eq!(app.get(key, &format!("{base}/{s1}")).await.ok(), &r.body);
    let s2 = create(&app, key, c, "2", "Depot").await;
    let s3 = create(&app, key, c, "3", "annex").await;

    let ids = |q: &str| {
        let path = format!("{base}?{q}");
        let app = &app;
        async move { app.get(key, &path).await.ids("id") }
    };
    assert_eq!(ids("").await, vec![s1, s2, s3]);
    assert_eq!(ids("sort=number").await, vec![s1, s2, s3]);
    assert_eq!(ids("sort=-number").await, vec![s3, s2, s1]);
    assert_eq!(ids("sort=name").await, vec![s3, s2, s1]);
    assert_eq!(ids("sort=-name").await, vec![s1, s2, s3]);
    assert_eq!(ids("pageSize=2&page=2").await, vec![s3]);
    assert_eq!(app.get(key, &format!("{base}?pageSize=2")).await.body["meta"]["total"], 3);
    assert_eq!(ids(&format!("filter[shop_id]={shop}")).await, vec![s1, s2, s3]);
    // Another shop of the company: not the customer's shop, so nothing.
    let r = app.get(key, &format!("{base}?filter[shop_id]={other_shop}")).await;
    assert_eq!((r.ids("id"), r.body["meta"]["total"].as_i64()), (vec![], Some(0)));
    app.get(key, &format!("{base}?filter[shop_id]=999999")).await.problem(404);
    app.get(key, &format!("{base}?sort=city")).await.problem(400);
    app.get(key, &format!("{base}?filter[name]=x")).await.problem(400);

    // Update takes the full body; email may be set and cleared.
    let mut new = body("11", "Main warehouse");
    new["email"] = json!("dock@example.com");
    let r = app.put(key, &format!("{base}/{s1}"), new).await;
    assert_eq!((r.ok()["number"].as_str(), r.body["name"].as_str(), r.body["email"].as_str()), (Some("11"), Some("Main warehouse"), Some("dock@example.com")));
    let r = app.put(key, &format!("{base}/{s1}"), body("11", "Main warehouse")).await;
    assert_eq!(r.ok()["email"], Value::Null);
    // Numbers are unique per customer, on create and update; another customer may reuse one.
    app.post(key, &base, body("2", "Dup")).await.invalid("number");
    app.put(key, &format!("{base}/{s1}"), body("3", "Dup")).await.invalid("number");
    assert_eq!(app.get(key, &format!("{base}/{s1}")).await.body["number"], "11");
    let c2 = create_customer(&app, key, shop, "Bob", "Ray", json!({})).await;
    create(&app, key, c2, "2", "Reused number").await;
}

async fn validates_ship_to_bodies(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "A", "UTC").await;
    let c = create_customer(&app, key, shop, "Ann", "Lee", json!({})).await;
    let base = format!("/api/v1/customers/{c}/ship_tos");
    let r = app.post(key, &base, json!({})).await;
    for field in ["number", "name", "address", "city", "state", "zip", "email", "work_phone", "fax", "home_phone", "cell_phone"] {
        r.invalid(field);
    }
    let mut bad = body("", "X");
    bad["email"] = json!("nope");
    bad["zip"] = json!(60000);
    bad["fax"] = Value::Null;
    let r = app.post(key, &base, bad).await;
    for field in ["number", "email", "zip", "fax"] {
        r.invalid(field);
    }
    assert!(r.body["errors"].get("name").is_none());
    let s = create(&app, key, c, "1", "Depot").await;
    // PUT requires every field too, and changes nothing when rejected.
    app.put(key, &format!("{base}/{s}"), json!({"name": "Renamed"})).await.invalid("number");
    assert_eq!(app.get(key, &format!("{base}/{s}")).await.body["name"], "Depot");
}

async fn ship_tos_belong_to_their_customer(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = &app.admin_key;
    let a = app.create_shop(admin, "A", "UTC").await;
    let b = app.create_shop(admin, "B", "UTC").await;
    let ca = create_customer(&app, admin, a, "Ann", "Lee", json!({})).await;
    let cb = create_customer(&app, admin, b, "Bob", "Ray", json!({})).await;
    let sa = create(&app, admin, ca, "1", "A site").await;
    let sb = create(&app, admin, cb, "1", "B site").await;

    // Another customer's ship-to id through this customer's path: 404, unchanged.
    app.get(admin, &format!("/api/v1/customers/{ca}/ship_tos/{sb}")).await.problem(404);
    app.put(admin, &format!("/api/v1/customers/{ca}/ship_tos/{sb}"), body("9", "Moved")).await.problem(404);
    assert_eq!(app.get(admin, &format!("/api/v1/customers/{cb}/ship_tos/{sb}")).await.body["name"], "B site");
    app.put(admin, &format!("/api/v1/customers/{ca}/ship_tos/abc"), body("9", "x")).await.problem(404);
    app.get(admin, "/api/v1/customers/999999/ship_tos").await.problem(404);

    // Roles.
    let read = app.create_key(admin, "read", None).await;
    assert_eq!(app.get(&read, &format!("/api/v1/customers/{ca}/ship_tos")).await.ids("id"), vec![sa]);
    app.post(&read, &format!("/api/v1/customers/{ca}/ship_tos"), body("2", "x")).await.problem(403);
    app.put(&read, &format!("/api/v1/customers/{ca}/ship_tos/{sa}"), body("2", "x")).await.problem(403);
    let write = app.create_key(admin, "write", None).await;
    create(&app, &write, ca, "2", "By writer").await;

    // A key limited to shop A cannot reach shop B's customer.
    let only_a = app.create_key(admin, "write", Some(vec![a])).await;
    assert_eq!(app.get(&only_a, &format!("/api/v1/customers/{ca}/ship_tos")).await.ids("id").len(), 2);
    app.get(&only_a, &format!("/api/v1/customers/{cb}/ship_tos")).await.problem(404);
    app.post(&only_a, &format!("/api/v1/customers/{cb}/ship_tos"), body("3", "x")).await.problem(404);
    app.put(&only_a, &format!("/api/v1/customers/{cb}/ship_tos/{sb}"), body("3", "x")).await.problem(404);

    // Another company: every route answers 404.
    let (_, other) = app.new_company("Other").await;
    app.get(&other, &format!("/api/v1/customers/{ca}/ship_tos")).await.problem(404);
    app.get(&other, &format!("/api/v1/customers/{ca}/ship_tos/{sa}")).await.problem(404);
    app.post(&other, &format!("/api/v1/customers/{ca}/ship_tos"), body("4", "x")).await.problem(404);
    app.put(&other, &format!("/api/v1/customers/{ca}/ship_tos/{sa}"), body("4", "x")).await.problem(404);
    assert_eq!(app.get(admin, &format!("/api/v1/customers/{ca}/ship_tos/{sa}")).await.body["name"], "A site");
}

/// `sort=number` ignores case, as every text sort does (docs/api.md, "Lists").
async fn numbers_sort_ignoring_case(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "A", "UTC").await;
    let c = create_customer(&app, key, shop, "Ann", "Lee", json!({})).await;
    let upper = create(&app, key, c, "B1", "one").await;
    let lower = create(&app, key, c, "a2", "two").await;
    let path = format!("/api/v1/customers/{c}/ship_tos");
    assert_eq!(app.get(key, &format!("{path}?sort=number")).await.ids("id"), vec![lower, upper]);
    assert_eq!(app.get(key, &format!("{path}?sort=-number")).await.ids("id"), vec![upper, lower]);
}
