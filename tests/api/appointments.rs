//! Appointments: create, update, validation, roles, scope and customers.

use serde_json::{Value, json};

use crate::support::{Backend, TestApp};

crate::backend_tests!(
    creates_an_appointment_with_every_field,
    create_validation_errors_are_keyed_by_field,
    updates_validate_like_create_and_keep_omitted_optional_fields,
    roles_shop_scope_and_companies_are_enforced,
    customers_fill_names_and_show_in_details,
    customer_details_list_appointments_and_vehicles,
    embedded_records_are_written_as_their_own_routes_write_them,
    concurrent_updates_keep_each_others_optional_fields,
    concurrent_relinks_to_customers_all_land,
);

/// A minimal valid body: the required fields, phones empty.
pub fn body(shop_id: i64, date: &str) -> Value {
    json!({"shop_id": shop_id, "date": date, "year": "2019", "make": "Toyota", "model": "Camry",
        "home_phone": "", "work_phone": "", "cell_phone": ""})
}

/// `body` with extra fields merged in.
pub fn body_with(shop_id: i64, date: &str, extra: Value) -> Value {
    let mut b = body(shop_id, date);
    for (k, v) in extra.as_object().unwrap() {
        b[k] = v.clone();
    }
    b
}

/// Creates an appointment and returns the response body.
pub async fn create(app: &TestApp, key: &str, body: Value) -> Value {
    let r = app.post(key, "/api/v1/appointments", body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body
}

pub async fn create_id(app: &TestApp, key: &str, body: Value) -> i64 {
    create(app, key, body).await["appointment_id"].as_i64().unwrap()
}

pub async fn create_customer(app: &TestApp, key: &str, shop_id: i64, first: &str, last: &str, email: &str) -> i64 {
    let r = app
        .post(key, "/api/v1/customers", json!({"shop_id": shop_id, "business_name": "", "first_name": first, "last_name": last,
            "address": "1 Elm St", "city": "Springfield", "state": "IL", "zip": "62701", "email": email}))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["customer_id"].as_i64().unwrap()
}

fn is_micros_timestamp(v: &Value) -> bool {
    let s = v.as_str().unwrap_or("");
    s.len() == 27 && s.ends_with('Z') && s.as_bytes()[10] == b'T' && s.as_bytes()[19] == b'.'
}

async fn creates_an_appointment_with_every_field(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "Chicago", "America/Chicago").await;
    app.create_bay(key, shop, "Lift 1", 0).await;
    let r = app
        .post(key, "/api/v1/appointments", json!({
            "shop_id": shop, "date": "2026-07-09T08:30:00", "year": "2019", "make": "Toyota", "model": "Camry",
            "home_phone": "555-0100", "work_phone": "555-0101", "cell_phone": "555-0102", "vehicle_id": 7,
            "repair_order_id": 8, "employee_id": 9, "column": "LIFT 1", "reason": "Brakes squeal", "status": "open",
            "first_name": "Ana", "last_name": "Smith", "hours": 1.5, "email": "ana@example.com", "done": false
        }))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.body["appointment_id"].as_i64().unwrap();
    assert_eq!(r.header("location"), Some(format!("/api/v1/appointments/{id}").as_str()));
    let mut b = r.body.clone();
    assert!(is_micros_timestamp(&b["timestamp"]), "{b}");
    assert_eq!(b["updated_at"], b["timestamp"]);
    b.as_object_mut().unwrap().remove("timestamp");
    b.as_object_mut().unwrap().remove("updated_at");
    assert_eq!(b, json!({
        "appointment_id": id, "shop_id": shop, "customer_id": null, "vehicle_id": 7, "repair_order_id": 8, "employee_id": 9,
        "first_name": "Ana", "last_name": "Smith",
        "vehicle": {"vehicle_id": 7, "year": "2019", "make": "Toyota", "model": "Camry"},
        "reason": "Brakes squeal", "phone": {"home": "555-0100", "work": "555-0101", "cell": "555-0102"},
        "hours": 1.5, "column": "Lift 1", "done": false, "email": "ana@example.com", "source": "API",
        "schedule": {"date": "2026-07-09", "time": "08:30:00", "start": "2026-07-09T13:30:00.000000Z",
            "end": "2026-07-09T15:00:00.000000Z", "hours": 1.5, "flag": "incomplete"},
        "deleted": null, "status": "open"
    }));
    assert_eq!(app.get(key, &format!("/api/v1/appointments/{id}")).await.body, r.body);

    // Defaults: hours 1, done false, source API, no column; an offset date is taken as given.
    let r = create(&app, key, body_with(shop, "2026-01-15T09:00:00+01:00", json!({"source": "Call Center", "done": true}))).await;
    assert_eq!(r["schedule"], json!({"date": "2026-01-15", "time": "02:00:00", "start": "2026-01-15T08:00:00.000000Z",
        "end": "2026-01-15T09:00:00.000000Z", "hours": 1.0, "flag": "complete"}));
    assert_eq!((r["source"].as_str(), r["column"].as_str(), r["done"].as_bool()), (Some("Call Center"), None, Some(true)));
    assert_eq!(r["phone"], json!({"home": "", "work": "", "cell": ""}));
    assert_eq!(r["hours"], 1.0);
}

async fn create_validation_errors_are_keyed_by_field(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "A", "UTC").await;
    let other_shop = app.create_shop(key, "B", "UTC").await;
    app.create_bay(key, other_shop, "Far Bay", 0).await;
    let (_, foreign_key) = app.new_company("Other").await;
    let foreign_shop = app.create_shop(&foreign_key, "F", "UTC").await;

    let r = app.post(key, "/api/v1/appointments", json!({})).await;
    for field in ["shop_id", "date", "year", "make", "model", "home_phone", "work_phone", "cell_phone"] {
        r.invalid(field);
    }
    assert!(r.body["errors"]["hours"].is_null() && r.body["errors"]["column"].is_null(), "{}", r.body);
    let d = "2026-05-01T10:00:00Z";
    for (extra, field) in [
        (json!({"year": "19"}), "year"),
        (json!({"year": "20a9"}), "year"),
        (json!({"year": 2019}), "year"),
        (json!({"make": "  "}), "make"),
        (json!({"model": null}), "model"),
        (json!({"cell_phone": null}), "cell_phone"),
        (json!({"hours": 0}), "hours"),
        (json!({"hours": -1}), "hours"),
        (json!({"hours": 24.5}), "hours"),
        (json!({"hours": "2"}), "hours"),
        (json!({"column": "Nope"}), "column"),
        (json!({"column": "Far Bay"}), "column"),
        (json!({"source": "Fax"}), "source"),
        (json!({"source": "call center"}), "source"),
        (json!({"year": " 2019"}), "year"),
        (json!({"make": "x".repeat(256)}), "make"),
        (json!({"date": "tomorrow"}), "date"),
        (json!({"date": "2026-05-01"}), "date"),
        (json!({"date": "2026-02-30T10:00:00"}), "date"),
        (json!({"date": "9999-12-31T23:00:00Z"}), "date"),
        (json!({"date": "0000-01-01T00:00:00+23:59"}), "date"),
        (json!({"shop_id": 999_999}), "shop_id"),
        (json!({"shop_id": foreign_shop}), "shop_id"),
        (json!({"shop_id": "abc"}), "shop_id"),
        (json!({"customer_id": 999_999}), "customer_id"),
        (json!({"email": "not-an-address"}), "email"),
        (json!({"vehicle_id": 0}), "vehicle_id"),
        (json!({"done": "yes"}), "done"),
    ] {
        let r = app.post(key, "/api/v1/appointments", body_with(shop, d, extra.clone())).await;
        assert_eq!(r.status, 422, "{extra}: {}", r.body);
        r.invalid(field);
    }
    // Boundaries that are allowed.
    assert_eq!(create(&app, key, body_with(shop, d, json!({"hours": 24}))).await["schedule"]["end"], "2026-05-02T10:00:00.000000Z");
    assert_eq!(create(&app, key, body_with(shop, d, json!({"hours": 0.25}))).await["schedule"]["end"], "2026-05-01T10:15:00.000000Z");
    assert_eq!(create(&app, key, body_with(shop, d, json!({"email": "", "column": null}))).await["email"], Value::Null);
    // Malformed JSON and wrong content type are not validation errors.
    let r = app.client.post(format!("{}/api/v1/appointments", app.base)).bearer_auth(key)
        .header("content-type", "application/json").body("{\"shop_id\": ").send().await.unwrap();
    assert_eq!(r.status(), 400);
    // Nothing was stored by the failed attempts.
    assert_eq!(app.get(key, "/api/v1/appointments").await.body["meta"]["total"], 3);
}

async fn updates_validate_like_create_and_keep_omitted_optional_fields(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let chicago = app.create_shop(key, "Chicago", "America/Chicago").await;
    let tokyo = app.create_shop(key, "Tokyo", "Asia/Tokyo").await;
    app.create_bay(key, chicago, "Lift 1", 0).await;
    app.create_bay(key, tokyo, "Pit", 0).await;
    let created = create(&app, key, body_with(chicago, "2026-07-09T08:30:00", json!({
        "reason": "Noise", "column": "Lift 1", "status": "open", "vehicle_id": 5, "first_name": "Ana", "email": "a@b.co"
    }))).await;
    let id = created["appointment_id"].as_i64().unwrap();
    let path = format!("/api/v1/appointments/{id}");

    // PUT validates like create (decisions §5): every field create requires, omitted or null, is
    // a 422 keyed by that field, and nothing changes.
    let r = app.put(key, &path, json!({"reason": "x"})).await;
    for field in ["shop_id", "date", "year", "make", "model", "home_phone", "work_phone", "cell_phone"] {
        r.invalid(field);
    }
    let mut without_make = body(chicago, "2026-07-09T08:30:00");
    without_make.as_object_mut().unwrap().remove("make");
    assert_eq!(app.put(key, &path, without_make).await.invalid("make")["errors"].as_object().unwrap().len(), 1);
    assert_eq!(app.get(key, &path).await.body["reason"], "Noise");

    // Omitted optional fields keep their value; null clears nullable ones.
    let r = app.put(key, &path, body_with(chicago, "2026-07-09T08:30:00", json!({"reason": null, "status": null, "vehicle_id": null, "email": null}))).await;
    let b = r.ok().clone();
    assert_eq!((&b["reason"], &b["status"], &b["vehicle_id"], &b["email"]), (&Value::Null, &Value::Null, &Value::Null, &Value::Null));
    assert_eq!(b["vehicle"], json!({"vehicle_id": null, "year": "2019", "make": "Toyota", "model": "Camry"}));
    assert_eq!((b["column"].as_str(), b["first_name"].as_str()), (Some("Lift 1"), Some("Ana")));
    assert_eq!(b["schedule"], created["schedule"]);
    assert_eq!(b["timestamp"], created["timestamp"]);
    assert!(b["updated_at"].as_str() >= created["updated_at"].as_str());

    // Hours move the end; done flips the flag; a new local date is read in the shop's zone.
    let r = app.put(key, &path, body_with(chicago, "2026-12-01 07:00", json!({"hours": 2, "done": true}))).await;
    assert_eq!(r.ok()["schedule"], json!({"date": "2026-12-01", "time": "07:00:00", "start": "2026-12-01T13:00:00.000000Z",
        "end": "2026-12-01T15:00:00.000000Z", "hours": 2.0, "flag": "complete"}));

    // Required fields cannot be nulled; a failed PUT changes nothing.
    let r = app.put(key, &path, body_with(chicago, "2026-12-01 07:00", json!({"make": null, "date": null, "hours": 99}))).await;
    r.invalid("make");
    r.invalid("date");
    r.invalid("hours");
    let r = app.get(key, &path).await;
    assert_eq!(r.body["vehicle"]["make"], "Toyota");

    // Moving shops: the bay must follow (or be cleared); the same instant shows the new local time.
    let instant = "2026-12-01T13:00:00Z";
    app.put(key, &path, body(tokyo, instant)).await.invalid("column");
    let r = app.put(key, &path, body_with(tokyo, instant, json!({"column": "pit"}))).await;
    let b = r.ok();
    assert_eq!((b["shop_id"].as_i64(), b["column"].as_str()), (Some(tokyo), Some("Pit")));
    assert_eq!(b["schedule"]["start"], "2026-12-01T13:00:00.000000Z");
    assert_eq!((b["schedule"]["date"].as_str(), b["schedule"]["time"].as_str()), (Some("2026-12-01"), Some("22:00:00")));
    let r = app.put(key, &path, body_with(tokyo, instant, json!({"column": null})));
    assert!(r.await.ok()["column"].is_null());

    app.put(key, "/api/v1/appointments/999999", body(tokyo, instant)).await.problem(404);
    app.put(key, "/api/v1/appointments/abc", body(tokyo, instant)).await.problem(404);
    app.get(key, "/api/v1/appointments/0").await.problem(404);
}

async fn roles_shop_scope_and_companies_are_enforced(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = &app.admin_key;
    let a = app.create_shop(admin, "A", "UTC").await;
    let b = app.create_shop(admin, "B", "UTC").await;
    let in_a = create_id(&app, admin, body(a, "2026-05-01T10:00:00Z")).await;
    let in_b = create_id(&app, admin, body(b, "2026-05-01T11:00:00Z")).await;

    let read = app.create_key(admin, "read", None).await;
    app.post(&read, "/api/v1/appointments", body(a, "2026-05-01T10:00:00Z")).await.problem(403);
    // The role is checked before the body: an invalid body from a read key is still a 403.
    app.post(&read, "/api/v1/appointments", json!({})).await.problem(403);
    app.put(&read, &format!("/api/v1/appointments/{in_a}"), json!({"done": true})).await.problem(403);
    assert_eq!(app.get(&read, "/api/v1/appointments").await.ids("appointment_id"), vec![in_a, in_b]);
    let write = app.create_key(admin, "write", None).await;
    create(&app, &write, body(b, "2026-05-02T10:00:00Z")).await;

    // A key limited to shop A sees and writes only shop A.
    let scoped = app.create_key(admin, "write", Some(vec![a])).await;
    assert_eq!(app.get(&scoped, "/api/v1/appointments").await.ids("appointment_id"), vec![in_a]);
    app.get(&scoped, &format!("/api/v1/appointments/{in_b}")).await.problem(404);
    app.put(&scoped, &format!("/api/v1/appointments/{in_b}"), json!({"done": true})).await.problem(404);
    app.post(&scoped, "/api/v1/appointments", body(b, "2026-05-01T10:00:00Z")).await.invalid("shop_id");
    app.put(&scoped, &format!("/api/v1/appointments/{in_a}"), json!({"shop_id": b})).await.invalid("shop_id");
    app.get(&scoped, &format!("/api/v1/appointments?filter[shop_id]={b}")).await.problem(404);
    assert_eq!(app.get(&scoped, &format!("/api/v1/appointments?filter[shop_id]={a}")).await.ids("appointment_id"), vec![in_a]);
    assert_eq!(app.get(admin, &format!("/api/v1/appointments/{in_b}")).await.body["done"], false);

    // Another company sees none of it and cannot touch it.
    let (_, other) = app.new_company("Other").await;
    let theirs = app.create_shop(&other, "Theirs", "UTC").await;
    let their_appt = create_id(&app, &other, body(theirs, "2026-05-01T10:00:00Z")).await;
    assert_eq!(app.get(&other, "/api/v1/appointments").await.ids("appointment_id"), vec![their_appt]);
    app.get(&other, &format!("/api/v1/appointments/{in_a}")).await.problem(404);
    app.put(&other, &format!("/api/v1/appointments/{in_a}"), json!({"done": true})).await.problem(404);
    app.get(&other, &format!("/api/v1/appointments?filter[shop_id]={a}")).await.problem(404);
    app.post(&other, "/api/v1/appointments", body(a, "2026-05-01T10:00:00Z")).await.invalid("shop_id");
    assert!(!app.get(admin, "/api/v1/appointments").await.ids("appointment_id").contains(&their_appt));
    app.get(admin, "/api/v1/appointments").await.ok();
    let r = app.request(reqwest::Method::GET, None, "/api/v1/appointments", None).await;
    r.problem(401);
}

async fn customers_fill_names_and_show_in_details(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = &app.admin_key;
    let a = app.create_shop(admin, "A", "UTC").await;
    let b = app.create_shop(admin, "B", "UTC").await;
    let ana = create_customer(&app, admin, a, "Ana", "Smith", "ana@example.com").await;
    let bo = create_customer(&app, admin, b, "Bo", "Jones", "bo@example.com").await;

    // Omitted names and e-mail come from the customer; given ones win.
    let r = create(&app, admin, body_with(a, "2026-05-01T10:00:00Z", json!({"customer_id": ana}))).await;
    assert_eq!((r["first_name"].as_str(), r["last_name"].as_str(), r["email"].as_str()), (Some("Ana"), Some("Smith"), Some("ana@example.com")));
    let id = r["appointment_id"].as_i64().unwrap();
    let r = create(&app, admin, body_with(a, "2026-05-01T11:00:00Z", json!({"customer_id": ana, "first_name": "Annie"}))).await;
    assert_eq!((r["first_name"].as_str(), r["last_name"].as_str()), (Some("Annie"), Some("Smith")));
    let plain = create_id(&app, admin, body_with(b, "2026-05-01T12:00:00Z", json!({"first_name": "Walk-in"}))).await;

    // A PUT that changes the customer takes the new customer's names unless given.
    let put = |extra: Value| body_with(a, "2026-05-01T10:00:00Z", extra);
    let r = app.put(admin, &format!("/api/v1/appointments/{id}"), put(json!({"customer_id": bo}))).await;
    assert_eq!((r.ok()["first_name"].as_str(), r.body["last_name"].as_str(), r.body["email"].as_str()), (Some("Bo"), Some("Jones"), Some("bo@example.com")));
    // The same customer again does not overwrite edited names.
    app.put(admin, &format!("/api/v1/appointments/{id}"), put(json!({"first_name": "Bobby"}))).await.ok();
    let r = app.put(admin, &format!("/api/v1/appointments/{id}"), put(json!({"customer_id": bo, "reason": "x"}))).await;
    assert_eq!(r.ok()["first_name"], "Bobby");

    // with_details: the customer object, or null; absent without it.
    let r = app.get(admin, "/api/v1/appointments?with_details=true").await;
    let data = r.ok()["data"].as_array().unwrap().clone();
    assert_eq!(data.len(), 3);
    assert_eq!((data[0]["customer"]["customer_id"].as_i64(), data[0]["customer"]["first_name"].as_str()), (Some(bo), Some("Bo")));
    assert_eq!(data[1]["customer"]["customer_id"].as_i64(), Some(ana));
    assert_eq!(data[2]["appointment_id"].as_i64(), Some(plain));
    assert!(data[2]["customer"].is_null() && data[2].as_object().unwrap().contains_key("customer"));
    let r = app.get(admin, "/api/v1/appointments").await;
    assert!(!r.body["data"][0].as_object().unwrap().contains_key("customer"));
    app.get(admin, "/api/v1/appointments?with_details=maybe").await.invalid("with_details");

    // A key limited to shop A cannot link shop B's customer, nor see it in details.
    let scoped = app.create_key(admin, "write", Some(vec![a])).await;
    app.post(&scoped, "/api/v1/appointments", body_with(a, "2026-05-01T10:00:00Z", json!({"customer_id": bo}))).await.invalid("customer_id");
    let r = app.get(&scoped, &format!("/api/v1/appointments?with_details=1&appointment_id={id}")).await;
    assert_eq!(r.ids("appointment_id"), vec![id]);
    assert!(r.body["data"][0]["customer"].is_null(), "{}", r.body);
    // Another company's customer id is unknown here.
    let (_, other) = app.new_company("Other").await;
    let their_shop = app.create_shop(&other, "T", "UTC").await;
    let theirs = create_customer(&app, &other, their_shop, "Zed", "Z", "z@example.com").await;
    app.post(admin, "/api/v1/appointments", body_with(a, "2026-05-01T10:00:00Z", json!({"customer_id": theirs}))).await.invalid("customer_id");
}

async fn customer_details_list_appointments_and_vehicles(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = &app.admin_key;
    let a = app.create_shop(admin, "A", "America/Chicago").await;
    let b = app.create_shop(admin, "B", "UTC").await;
    let ana = create_customer(&app, admin, a, "Ana", "Smith", "ana@example.com").await;
    let idle = create_customer(&app, admin, a, "Ida", "Idle", "ida@example.com").await;
    let appt = |shop: i64, date: &str, extra: Value| {
        let mut b = body_with(shop, date, extra);
        b["customer_id"] = json!(ana);
        b
    };
    let camry = create_id(&app, admin, appt(a, "2026-05-03T10:00:00Z", json!({"vehicle_id": 7}))).await;
    let civic = create_id(&app, admin, appt(a, "2026-05-01T10:00:00Z", json!({"year": "2018", "make": "Honda", "model": "Civic"}))).await;
    let civic_again = create_id(&app, admin, appt(a, "2026-05-02T10:00:00Z", json!({"year": "2018", "make": "HONDA", "model": "civic"}))).await;
    let same_id = create_id(&app, admin, appt(a, "2026-05-04T10:00:00Z", json!({"vehicle_id": 7, "make": "Toyota Motor"}))).await;
    let in_b = create_id(&app, admin, appt(b, "2026-05-05T10:00:00Z", json!({"year": "2020", "make": "Ford", "model": "F-150"}))).await;
    create_id(&app, admin, body_with(a, "2026-05-01T12:00:00Z", json!({"first_name": "Walk-in"}))).await;

    let r = app.get(admin, "/api/v1/customers?with_details=true").await;
    let data = r.ok()["data"].as_array().unwrap().clone();
    let ana_json = data.iter().find(|c| c["customer_id"] == ana).unwrap();
    let schedule: Vec<i64> = ana_json["schedule"].as_array().unwrap().iter().map(|s| s["appointment_id"].as_i64().unwrap()).collect();
    assert_eq!(schedule, vec![civic, civic_again, camry, same_id, in_b]);
    // Schedule items are the appointment objects themselves.
    let first = &ana_json["schedule"][0];
    assert_eq!((first["schedule"]["date"].as_str(), first["schedule"]["time"].as_str()), (Some("2026-05-01"), Some("05:00:00")));
    assert_eq!(first["first_name"], "Ana");
    assert_eq!(ana_json["vehicles"], json!([
        {"vehicle_id": null, "year": "2018", "make": "Honda", "model": "Civic"},
        {"vehicle_id": 7, "year": "2019", "make": "Toyota", "model": "Camry"},
        {"vehicle_id": null, "year": "2020", "make": "Ford", "model": "F-150"},
    ]));
    let idle_json = data.iter().find(|c| c["customer_id"] == idle).unwrap();
    assert_eq!((&idle_json["schedule"], &idle_json["vehicles"]), (&json!([]), &json!([])));

    // A key limited to shop A sees only shop A's appointments of the customer.
    let scoped = app.create_key(admin, "read", Some(vec![a])).await;
    let r = app.get(&scoped, &format!("/api/v1/customers?with_details=true&customer_id={ana}")).await;
    let c = &r.ok()["data"][0];
    assert_eq!(c["schedule"].as_array().unwrap().len(), 4);
    assert_eq!(c["vehicles"].as_array().unwrap().len(), 2);
}

/// One resource, one shape, one field order: a customer inside an appointment's details, and an
/// appointment inside a customer's schedule, are byte for byte what their own GET answers.
async fn embedded_records_are_written_as_their_own_routes_write_them(backend: Backend) {
    use serde_json::value::RawValue;
    #[derive(serde::Deserialize)]
    struct Page<T> {
        data: Vec<T>,
    }
    #[derive(serde::Deserialize)]
    struct WithCustomer<'a> {
        #[serde(borrow)]
        customer: &'a RawValue,
    }
    #[derive(serde::Deserialize)]
    struct WithSchedule<'a> {
        #[serde(borrow)]
        schedule: Vec<&'a RawValue>,
    }

    let app = TestApp::spawn(backend).await;
    let admin = &app.admin_key;
    let shop = app.create_shop(admin, "A", "UTC").await;
    let ana = create_customer(&app, admin, shop, "Ana", "Smith", "ana@example.com").await;
    let id = create_id(&app, admin, body_with(shop, "2026-05-01T10:00:00Z", json!({"customer_id": ana}))).await;

    let customer = app.get_text(admin, &format!("/api/v1/customers/{ana}")).await;
    let appointment = app.get_text(admin, &format!("/api/v1/appointments/{id}")).await;
    let list = app.get_text(admin, "/api/v1/appointments?with_details=true").await;
    let page: Page<WithCustomer> = serde_json::from_str(&list).unwrap();
    assert_eq!(page.data[0].customer.get(), customer);
    let details = app.get_text(admin, &format!("/api/v1/customers?with_details=true&customer_id={ana}")).await;
    let page: Page<WithSchedule> = serde_json::from_str(&details).unwrap();
    let schedule: Vec<&str> = page.data[0].schedule.iter().map(|a| a.get()).collect();
    assert_eq!(schedule, vec![appointment.as_str()]);
}

/// Updates of one appointment sent together through two servers, each with the required fields
/// (unchanged) and one optional field of its own: every optional field ends as the update that
/// set it asked, none put back to what another update read before it.
async fn concurrent_updates_keep_each_others_optional_fields(backend: Backend) {
    let config = autoshop::config::AppConfig { rate_limit: 0.0, ..crate::support::test_config() };
    let app = TestApp::spawn_with(backend, config.clone()).await;
    let key = app.admin_key.clone();
    let shop = app.create_shop(&key, "A", "America/Chicago").await;
    let date = "2026-07-09T08:30:00";
    let id = create(&app, &key, body(shop, date)).await["appointment_id"].as_i64().unwrap();
    let replica = app.spawn_replica_with(config).await;
    let fields = ["reason", "first_name", "last_name", "email", "vehicle_id", "repair_order_id", "employee_id", "done"];
    let value = |field: &str, round: usize| match field {
        "vehicle_id" | "repair_order_id" | "employee_id" => json!(round + 1),
        "done" => json!(round.is_multiple_of(2)),
        "email" => json!(format!("r{round}@example.com")),
        _ => json!(format!("{field} {round}")),
    };
    let mut lost = Vec::new();
    for round in 0..30 {
        let puts = fields.iter().enumerate().map(|(n, field)| {
            let base = if (n + round) % 2 == 0 { &app.base } else { &replica };
            app.client.put(format!("{base}/api/v1/appointments/{id}")).bearer_auth(&key).json(&body_with(shop, date, json!({ *field: value(field, round) })))
        });
        let statuses = crate::support::together(puts.collect()).await;
        assert!(statuses.iter().all(|s| *s == 200), "round {round}: {statuses:?}");
        let now = app.get(&key, &format!("/api/v1/appointments/{id}")).await.ok().clone();
        for field in fields {
            let shown = if field == "vehicle_id" { &now["vehicle"]["vehicle_id"] } else { &now[field] };
            if *shown != value(field, round) {
                lost.push((round, field, shown.clone()));
            }
        }
    }
    assert!(lost.is_empty(), "updates lost: {lost:?}");
}

/// Fourteen updates of one appointment sent together to one server, each linking it to one of
/// two customers (a customer is read to validate the link) and setting one of seven optional
/// fields (two updates each, with one value): all of them land, none waiting out the pool for
/// that read while it holds a connection and the row's lock, which the requests holding the rest
/// of the pool wait for; every field is kept.
async fn concurrent_relinks_to_customers_all_land(backend: Backend) {
    let config = autoshop::config::AppConfig { rate_limit: 0.0, ..crate::support::test_config() };
    let app = TestApp::spawn_with(backend, config).await;
    let key = app.admin_key.clone();
    let shop = app.create_shop(&key, "A", "America/Chicago").await;
    let customers = [
        create_customer(&app, &key, shop, "Ann", "Lee", "ann@example.com").await,
        create_customer(&app, &key, shop, "Bo", "Kim", "bo@example.com").await,
    ];
    let date = "2026-07-09T08:30:00";
    let id = create(&app, &key, body(shop, date)).await["appointment_id"].as_i64().unwrap();
    let fields = ["reason", "status", "vehicle_id", "repair_order_id", "employee_id", "done", "hours"];
    let value = |field: &str, round: usize| match field {
        "vehicle_id" | "repair_order_id" | "employee_id" => json!(round + 1),
        "done" => json!(round.is_multiple_of(2)),
        "hours" => json!(round as f64 / 2.0 + 0.5),
        _ => json!(format!("{field} {round}")),
    };
    for round in 0..20 {
        let puts = (0..2 * fields.len()).map(|n| {
            let field = fields[n % fields.len()];
            let extra = json!({ field: value(field, round), "customer_id": customers[(n / fields.len() + n + round) % 2] });
            app.client.put(format!("{}/api/v1/appointments/{id}", app.base)).bearer_auth(&key).json(&body_with(shop, date, extra))
        });
        let statuses = crate::support::together(puts.collect()).await;
        assert!(statuses.iter().all(|s| *s == 200), "round {round}: {statuses:?}");
        let now = app.get(&key, &format!("/api/v1/appointments/{id}")).await.ok().clone();
        for field in fields {
            let shown = if field == "vehicle_id" { &now["vehicle"]["vehicle_id"] } else { &now[field] };
            assert_eq!(*shown, value(field, round), "round {round}: {field} kept");
        }
    }
}
