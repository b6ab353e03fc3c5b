use reqwest::Method;
use serde_json::json;

use crate::support::{Backend, TestApp};

crate::backend_tests!(
    framework_rejections_are_problem_json,
    request_bodies_are_checked_in_order,
    database_outage_is_503,
    a_deadlock_victim_is_told_to_retry,
    openapi_describes_every_route_and_error,
    responses_are_gzipped_on_request,
);

async fn framework_rejections_are_problem_json(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let r = app.get(key, "/api/v1/nothing-here").await;
    r.problem(404);
    let r = app.request(Method::PATCH, Some(key), "/api/v1/bays", None).await;
    r.problem(405);
    assert!(r.header("allow").unwrap().contains("GET"));
    let r = app.request(Method::DELETE, None, "/api/v1/bays", None).await;
    assert_eq!(r.status, 405, "the method is checked before the key");
    app.get(key, "/api/v1/bays/12abc").await.problem(404);
}

async fn request_bodies_are_checked_in_order(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "A", "UTC").await;
    let url = format!("{}/api/v1/bays", app.base);
    let send = |body: Vec<u8>, content_type: Option<&'static str>| {
        let mut req = app.client.post(&url).bearer_auth(key).body(body);
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        req.send()
    };
    let status_and_type = |r: reqwest::Response| {
        (r.status().as_u16(), r.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned()))
    };
    let problem = Some("application/problem+json".to_owned());
    assert_eq!(status_and_type(send(b"{}".to_vec(), None).await.unwrap()), (415, problem.clone()));
    assert_eq!(status_and_type(send(b"title=x".to_vec(), Some("application/x-www-form-urlencoded")).await.unwrap()), (415, problem.clone()));
    assert_eq!(status_and_type(send(b"{\"title\": ".to_vec(), Some("application/json")).await.unwrap()), (400, problem.clone()));
    let big = format!("{{\"shop_id\": {shop}, \"title\": \"{}\"}}", "x".repeat(1024 * 1024 + 10));
    assert_eq!(status_and_type(send(big.into_bytes(), Some("application/json")).await.unwrap()), (413, problem.clone()));
    app.post(key, "/api/v1/bays", json!([1, 2])).await.invalid("body");
    app.post(key, "/api/v1/bays", json!({"shop_id": shop, "title": "T", "order": "first"})).await.invalid("order");
    app.post(key, "/api/v1/bays", json!({"shop_id": shop, "title": "T", "active": "yes"})).await.invalid("active");
    // NUL characters cannot be stored as text (PostgreSQL refuses them): a 422, not a 500.
    app.post(key, "/api/v1/bays", json!({"shop_id": shop, "title": "T\u{0}"})).await.invalid("title");
    app.post(key, "/api/v1/shops", json!({"name": "ok", "address": "a\u{0}"})).await.invalid("address");
    app.put(key, "/api/v1/settings/shop_hours", json!({"shop_id": shop, "hours": [{"day": 1, "open": "08:00", "close": "\u{0}"}]}))
        .await
        .invalid("hours.0.close");
    // Unknown fields are ignored, NUL characters in them included: nothing reads or stores them.
    assert_eq!(app.post(key, "/api/v1/shops", json!({"name": "ok", "extra\u{0}": {"x": ["\u{0}"]}})).await.status, 201);
    // Inside a nested object too (found by the contract's fuzzing in `phone`), while its known
    // keys are still checked.
    let customer = json!({"shop_id": shop, "first_name": "Nul", "last_name": "Keys", "address": "1 Main", "city": "X", "state": "CA",
        "zip": "1", "business_name": "", "phone": {"tZ\u{0}": {}, "other": "a\u{0}", "cell": "555-0100"}});
    let r = app.post(key, "/api/v1/customers", customer.clone()).await;
    assert_eq!(r.ok()["phone"]["cell"], "555-0100");
    let mut nul_cell = customer;
    nul_cell["phone"]["cell"] = json!("5\u{0}");
    app.post(key, "/api/v1/customers", nul_cell).await.invalid("phone.cell");
    // A whole number written with a fraction is that integer (as JSON Schema reads it).
    let r = app.post(key, "/api/v1/bays", json!({"shop_id": shop as f64, "title": "Whole", "order": 2.0})).await;
    assert_eq!((r.ok()["shop_id"].as_i64(), r.body["order"].as_i64()), (Some(shop), Some(2)));
    app.post(key, "/api/v1/bays", json!({"shop_id": shop, "title": "Half", "order": 2.5})).await.invalid("order");
    // So does a query parameter (a client copying `shop_id` from a body prints `2.0`).
    let r = app.get(key, &format!("/api/v1/bays?filter%5Bshop_id%5D={shop}.0&page=1.00&pageSize=5.0")).await;
    assert_eq!((r.ok()["meta"]["total"].as_i64(), r.body["meta"]["per_page"].as_i64()), (Some(1), Some(5)), "{:?}", r.body);
    app.get(key, &format!("/api/v1/bays?filter%5Bshop_id%5D={shop}.5")).await.invalid("filter[shop_id]");
    app.get(key, "/api/v1/customers?customer_id=1.0&pageSize=2.5").await.invalid("pageSize");
    app.get(key, "/api/v1/customers?filter%5Blast_name%5D=a%00").await.invalid("filter[last_name]");
    // `maxLength` counts the text as sent, white space the server trims included, as the
    // document says it; the stored value is trimmed.
    let (full, padded) = ("n".repeat(255), format!(" {} ", "n".repeat(254)));
    let person = |last: &str| {
        json!({"shop_id": shop, "first_name": "Len", "last_name": last, "address": "1 Main", "city": "X", "state": "CA",
            "zip": "1", "business_name": "", "terms": format!(" {}", "t".repeat(255))})
    };
    let r = app.post(key, "/api/v1/customers", person(&padded)).await;
    r.invalid("last_name");
    assert!(r.body["errors"]["terms"].is_array(), "{:?}", r.body);
    let mut fits = person(&full);
    fits["terms"] = json!(format!(" {} ", "t".repeat(253)));
    assert_eq!(app.post(key, "/api/v1/customers", fits).await.ok()["last_name"], full.as_str());
    app.post(key, "/api/v1/shops", json!({"name": format!("{full} ")})).await.invalid("name");
    // An e-mail with white space around it (which the document's pattern allows) is stored trimmed.
    let r = app.post(key, "/api/v1/shops", json!({"name": "Padded", "email": "\u{3000} desk@shop.example \t"})).await;
    assert_eq!(r.ok()["email"], "desk@shop.example");
    // A charset parameter and unknown fields are fine.
    let r = send(format!("{{\"shop_id\": {shop}, \"title\": \"T\", \"colour\": \"red\"}}").into_bytes(), Some("application/json; charset=utf-8"))
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    // None of the rejected bodies left anything behind.
    assert_eq!(app.get(key, "/api/v1/bays").await.body["meta"]["total"], 2, "the bay with whole-number fields");

    // A PUT: the resource must exist (404), and a deleted appointment is read-only (409), before
    // the body's types are checked (422); a body that is not JSON is refused first (400).
    let mistyped = json!({"shop_id": "x", "title": 7, "first_name": 7});
    for path in ["/api/v1/bays/999999", "/api/v1/appointments/999999", "/api/v1/customers/999999", "/api/v1/shops/999999",
        "/api/v1/settings/sources/999999", "/api/v1/webhooks/999999"] {
        app.put(key, path, mistyped.clone()).await.problem(404);
    }
    let customer = app.get(key, "/api/v1/customers").await.ids("customer_id")[0];
    app.put(key, &format!("/api/v1/customers/{customer}/ship_tos/999999"), json!({"name": 7})).await.problem(404);
    let appointment = app.post(key, "/api/v1/appointments", crate::appointments::body(shop, "2030-01-07T09:00:00Z")).await.ok()["appointment_id"].clone();
    app.put(key, &format!("/api/v1/appointments/{appointment}"), mistyped.clone()).await.invalid("first_name");
    assert_eq!(app.delete(key, &format!("/api/v1/appointments/{appointment}")).await.status, 204);
    app.put(key, &format!("/api/v1/appointments/{appointment}"), mistyped).await.problem(409);
    let r = app.client.put(format!("{}/api/v1/bays/999999", app.base)).bearer_auth(key).header("content-type", "application/json");
    assert_eq!(status_and_type(r.body("{\"title\": ").send().await.unwrap()), (400, problem));
}

async fn database_outage_is_503(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.admin_key.clone();
    app.db.close().await;
    let r = app.get(&key, "/api/v1/bays").await;
    r.problem(503);
    assert!(r.header("retry-after").is_some());
    // An export answers only once its rows come: a 503 too, not a 200 whose body then breaks.
    for path in ["/api/v1/customers/export", "/api/v1/appointments/export"] {
        let r = app.get(&key, path).await;
        r.problem(503);
        assert!(r.header("retry-after").is_some(), "{path}");
    }
    let r = app.request(Method::GET, None, "/readyz", None).await;
    r.problem(503);
    assert_eq!(app.request(Method::GET, None, "/healthz", None).await.status, 200);
}

async fn openapi_describes_every_route_and_error(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let doc = app.request(Method::GET, None, "/api/v1/openapi.json", None).await.body;
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    let paths = doc["paths"].as_object().unwrap();
    for (path, methods) in [
        ("/api/v1/bays", vec!["get", "post"]),
        ("/api/v1/bays/{id}", vec!["get", "put"]),
        ("/api/v1/settings/shop_hours", vec!["get", "put"]),
        ("/api/v1/settings/sources", vec!["get", "post"]),
        ("/api/v1/settings/sources/{id}", vec!["get", "put"]),
        ("/api/v1/settings/shop_info", vec!["get"]),
        ("/api/v1/shops", vec!["post"]),
        ("/api/v1/shops/{id}", vec!["get", "put"]),
        ("/api/v1/api_keys", vec!["get", "post"]),
        ("/api/v1/api_keys/{id}", vec!["delete"]),
    ] {
        for method in methods {
            let op = &paths[path][method];
            assert!(op.is_object(), "{method} {path} is documented");
            assert_eq!(op["security"][0]["bearer"], json!([]), "{method} {path} requires the key");
            for status in ["401", "403", "500", "503"] {
                assert!(op["responses"][status]["content"]["application/problem+json"].is_object(), "{method} {path} {status}");
            }
        }
    }
    let params: Vec<&str> = paths["/api/v1/bays"]["get"]["parameters"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(params, vec!["page", "pageSize", "sort", "filter[shop_id]", "filter[active]"]);
    assert!(doc["components"]["securitySchemes"]["bearer"].is_object());
    // The docs page is served from the binary.
    let page = app.client.get(format!("{}/docs/", app.base)).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("swagger"), "docs page");
}

#[tokio::test]
async fn metrics_count_requests_by_route_and_report_pools() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    assert_eq!(app.get(&app.admin_key, "/api/v1/bays").await.status, 200);
    let text = app.request(Method::GET, None, "/metrics", None).await.body;
    let text = text.as_str().unwrap();
    assert!(text.contains(r#"http_requests_total{method="GET",route="/api/v1/bays",status="200"}"#), "{text}");
    assert!(text.contains("http_request_duration_seconds_bucket"), "{text}");
    // Later requests of the same route count through the cached handles (the recorder is shared
    // by every test of this binary, so the count may grow by more, never by less).
    let bays_ok = |text: &str| -> f64 {
        let line = text.lines().find(|l| l.starts_with(r#"http_requests_total{method="GET",route="/api/v1/bays",status="200"}"#));
        line.and_then(|l| l.rsplit(' ').next()?.parse().ok()).unwrap_or(0.0)
    };
    let before = bays_ok(text);
    for _ in 0..3 {
        assert_eq!(app.get(&app.admin_key, "/api/v1/bays").await.status, 200);
    }
    let after = app.request(Method::GET, None, "/metrics", None).await.body;
    assert!(bays_ok(after.as_str().unwrap()) >= before + 3.0, "{before} -> {after}");
    assert!(text.contains(r#"db_pool_connections{pool="sqlite_reader"}"#), "{text}");
    // SQLite's own memory (its caches hold pages after the request above), apart from the rest.
    let sqlite_bytes: f64 = text
        .lines()
        .find_map(|line| line.strip_prefix("sqlite_memory_bytes ")?.parse().ok())
        .unwrap_or_else(|| panic!("no sqlite_memory_bytes in {text}"));
    assert!(sqlite_bytes > 0.0, "{text}");
}

async fn responses_are_gzipped_on_request(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let url = format!("{}/api/v1/openapi.json", app.base);
    let gz = app.client.get(&url).header("accept-encoding", "gzip").send().await.unwrap();
    assert_eq!(gz.headers().get("content-encoding").map(|v| v.to_str().unwrap()), Some("gzip"));
    let compressed = gz.bytes().await.unwrap().len();
    let plain = app.client.get(&url).send().await.unwrap();
    assert!(plain.headers().get("content-encoding").is_none());
    let plain = plain.bytes().await.unwrap().len();
    assert!(compressed * 3 < plain, "{compressed} vs {plain} bytes");
}

/// PostgreSQL undoes one of two transactions that wait for each other (after `deadlock_timeout`,
/// a second). Its writer gets `Unavailable`, a 503 with `Retry-After` (nothing was written, and
/// a retry most likely goes through), not the 500 of an unexpected error.
async fn a_deadlock_victim_is_told_to_retry(backend: Backend) {
    use autoshop::db::{DbError, Query};
    let app = TestApp::spawn(backend).await;
    if backend == Backend::Sqlite {
        // One writer runs one transaction at a time: two cannot wait for each other.
        return;
    }
    let (other, _) = app.new_company("Other").await;
    let touch = |company: i64| Query::new("UPDATE companies SET name = name WHERE id = $1").bind(company);
    let (mut a, mut b) = (app.db.begin().await.unwrap(), app.db.begin().await.unwrap());
    a.execute(&touch(app.company_id)).await.unwrap();
    b.execute(&touch(other)).await.unwrap();
    let (cross_a, cross_b) = (touch(other), touch(app.company_id));
    let (first, second) = tokio::join!(a.execute(&cross_a), b.execute(&cross_b));
    let outcomes = [first, second];
    assert_eq!(outcomes.iter().filter(|o| o.is_ok()).count(), 1, "one of the two goes on: {outcomes:?}");
    assert!(outcomes.iter().any(|o| matches!(o, Err(DbError::Unavailable(e)) if e.contains("deadlock"))), "{outcomes:?}");
}
