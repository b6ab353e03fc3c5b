use autoshop::db::Query;
use reqwest::Method;
use serde_json::{Value, json};

use crate::support::{Backend, TestApp, together};

crate::backend_tests!(
    creates_customers_with_defaults_and_both_phone_shapes,
    reports_every_invalid_customer_field,
    updates_keep_omitted_fields,
    a_partial_update_applies_only_to_the_row_it_read,
    concurrent_updates_keep_each_others_fields,
    concurrent_moves_between_shops_all_land,
    filters_customers,
    sorts_and_paginates_customers,
    adds_details_for_the_whole_page,
    enforces_roles_shop_scope_and_company,
    documents_customer_routes,
);

/// A valid create body for `shop_id`, with `extra` fields merged over it.
pub fn customer_body(shop_id: i64, first: &str, last: &str, extra: Value) -> Value {
    let mut body = json!({
        "shop_id": shop_id, "business_name": "", "first_name": first, "last_name": last,
        "address": "1 Main St", "city": "Springfield", "state": "IL", "zip": "62701",
    });
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        body[k] = v;
    }
    body
}

/// Creates a customer and returns its id.
pub async fn create_customer(app: &TestApp, key: &str, shop_id: i64, first: &str, last: &str, extra: Value) -> i64 {
    let r = app.post(key, "/api/v1/customers", customer_body(shop_id, first, last, extra)).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["customer_id"].as_i64().unwrap()
}

fn is_instant(v: &Value) -> bool {
    let s = v.as_str().unwrap_or("");
    s.len() == 27 && s.ends_with('Z') && s.as_bytes()[19] == b'.'
}

async fn creates_customers_with_defaults_and_both_phone_shapes(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "A", "UTC").await;

    let r = app.post(key, "/api/v1/customers", customer_body(shop, "Ann", "Lee", json!({}))).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.body["customer_id"].as_i64().unwrap();
    assert_eq!(r.header("location"), Some(format!("/api/v1/customers/{id}").as_str()));
    let b = &r.body;
    assert_eq!((b["active"].clone(), b["tax_exempt"].clone(), b["allow_marketing"].clone()), (json!(true), json!(false), json!(false)));
    assert_eq!(b["email"], Value::Null);
    assert_eq!(b["credit_limit"], Value::Null);
    assert_eq!(b["phone"], json!({"home": "", "work": "", "cell": "", "fax": ""}));
    assert_eq!((b["home_phone"].as_str(), b["extension"].as_str(), b["terms"].as_str()), (Some(""), Some(""), Some("")));
    assert_eq!((b["shop_id"].as_i64(), b["first_name"].as_str(), b["zip"].as_str()), (Some(shop), Some("Ann"), Some("62701")));
    assert!(is_instant(&b["timestamp"]) && b["timestamp"] == b["updated_at"], "{b}");
    assert_eq!(app.get(key, &format!("/api/v1/customers/{id}")).await.ok(), b);

    // Deprecated phone fields alone; the phone object wins number by number; extension as a
    // number comes back as a string; terms and customer_pay_type are one value; money is exact.
    let extra = json!({
        "home_phone": "111", "work_phone": "222", "cell_phone": "333", "fax": "444",
        "phone": {"home": "(555) 010-2030", "fax": "999"},
        "extension": 42, "customer_pay_type": "Net 30", "credit_limit": 1234.5,
        "email": "ann@example.com", "active": false, "tax_exempt": true, "allow_marketing": true,
        "customer_number": "C-1", "comments": "VIP", "cell_provider": "Verizon", "customer_type": "Fleet",
    });
    let r = app.post(key, "/api/v1/customers", customer_body(shop, "Bob", "Ray", extra)).await;
    let b = r.ok();
    assert_eq!(b["phone"], json!({"home": "(555) 010-2030", "work": "222", "cell": "333", "fax": "999"}));
    assert_eq!((b["home_phone"].as_str(), b["work_phone"].as_str(), b["cell_phone"].as_str(), b["fax"].as_str()), (Some("(555) 010-2030"), Some("222"), Some("333"), Some("999")));
    assert_eq!(b["extension"], "42");
    assert_eq!((b["terms"].as_str(), b["customer_pay_type"].as_str()), (Some("Net 30"), Some("Net 30")));
    assert_eq!(b["credit_limit"], json!(1234.5));
    assert_eq!((b["active"].clone(), b["tax_exempt"].clone(), b["allow_marketing"].clone()), (json!(false), json!(true), json!(true)));
    assert_eq!((b["email"].as_str(), b["customer_number"].as_str(), b["comments"].as_str()), (Some("ann@example.com"), Some("C-1"), Some("VIP")));
    assert_eq!((b["cell_provider"].as_str(), b["customer_type"].as_str()), (Some("Verizon"), Some("Fleet")));

    // `terms` alone sets both; a string extension is kept as given; cents survive.
    let r = app.post(key, "/api/v1/customers", customer_body(shop, "Cy", "Doe", json!({"terms": "COD", "extension": "x12", "credit_limit": 0.07}))).await;
    assert_eq!((r.body["customer_pay_type"].as_str(), r.body["extension"].as_str()), (Some("COD"), Some("x12")));
    assert_eq!(r.body["credit_limit"], json!(0.07));
    // Empty customer numbers never collide.
    create_customer(&app, key, shop, "Di", "Eve", json!({"customer_number": ""})).await;
    create_customer(&app, key, shop, "Ed", "Fox", json!({"customer_number": ""})).await;
}

async fn reports_every_invalid_customer_field(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "A", "UTC").await;

    let r = app.post(key, "/api/v1/customers", json!({})).await;
    for field in ["shop_id", "business_name", "first_name", "last_name", "address", "city", "state", "zip"] {
        r.invalid(field);
    }
    // Several kinds of error in one response.
    let bad = customer_body(shop, "", "Lee", json!({
        "email": "not-an-address", "credit_limit": 1.234, "active": "yes", "extension": [1],
        "city": 5, "phone": "555", "customer_pay_type": "Net 30", "terms": "COD",
    }));
    let r = app.post(key, "/api/v1/customers", bad).await;
    for field in ["first_name", "email", "credit_limit", "active", "extension", "city", "phone", "terms"] {
        r.invalid(field);
    }
    assert!(r.body["errors"].get("last_name").is_none(), "{}", r.body);
    app.post(key, "/api/v1/customers", customer_body(shop, "A", "B", json!({"credit_limit": -1}))).await.invalid("credit_limit");
    app.post(key, "/api/v1/customers", customer_body(shop, "A", "B", json!({"phone": {"home": 5}}))).await.invalid("phone.home");
    app.post(key, "/api/v1/customers", customer_body(shop, "A", "B", json!({"business_name": null}))).await.invalid("business_name");
    app.post(key, "/api/v1/customers", customer_body(999_999, "A", "B", json!({}))).await.invalid("shop_id");
    app.post(key, "/api/v1/customers", customer_body(shop, "A", "B", json!({"first_name": "x".repeat(256)}))).await.invalid("first_name");

    // customer_number is unique in the company, and free in another company.
    create_customer(&app, key, shop, "A", "B", json!({"customer_number": "C-7"})).await;
    app.post(key, "/api/v1/customers", customer_body(shop, "C", "D", json!({"customer_number": "C-7"}))).await.invalid("customer_number");
    let (_, other_key) = app.new_company("Other").await;
    let other_shop = app.create_shop(&other_key, "O", "UTC").await;
    create_customer(&app, &other_key, other_shop, "A", "B", json!({"customer_number": "C-7"})).await;
    // Another company's shop is not a valid shop_id.
    app.post(key, "/api/v1/customers", customer_body(other_shop, "A", "B", json!({}))).await.invalid("shop_id");

    let r = app
        .client
        .post(format!("{}/api/v1/customers", app.base))
        .bearer_auth(key)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
}

async fn updates_keep_omitted_fields(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "A", "UTC").await;
    let shop2 = app.create_shop(key, "B", "UTC").await;
    let extra = json!({"email": "a@b.co", "phone": {"home": "1", "work": "2", "cell": "3", "fax": "4"}, "credit_limit": 50, "terms": "Net 15", "customer_number": "N1"});
    let id = create_customer(&app, key, shop, "Ann", "Lee", extra).await;
    let before = app.get(key, &format!("/api/v1/customers/{id}")).await.body;
    let path = format!("/api/v1/customers/{id}");

    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let r = app.put(key, &path, json!({"first_name": "Anna", "customer_id": 12345, "timestamp": "2000-01-01T00:00:00.000000Z"})).await;
    let after = r.ok().clone();
    assert_eq!(after["first_name"], "Anna");
    assert_eq!(after["customer_id"].as_i64(), Some(id));
    assert_eq!(after["timestamp"], before["timestamp"]);
    assert_ne!(after["updated_at"], before["updated_at"]);
    for field in ["last_name", "email", "phone", "credit_limit", "terms", "customer_number", "active", "shop_id", "address"] {
        assert_eq!(after[field], before[field], "{field}");
    }

    // Phones: the object changes only the numbers it names; deprecated fields work on PUT too.
    let r = app.put(key, &path, json!({"phone": {"cell": "9"}, "fax": "8"})).await;
    assert_eq!(r.ok()["phone"], json!({"home": "1", "work": "2", "cell": "9", "fax": "8"}));
    // Explicit null clears nullable fields; customer_pay_type follows terms.
    let r = app.put(key, &path, json!({"email": null, "credit_limit": null, "terms": "COD", "shop_id": shop2})).await;
    let b = r.ok();
    assert_eq!((b["email"].clone(), b["credit_limit"].clone()), (Value::Null, Value::Null));
    assert_eq!((b["terms"].as_str(), b["customer_pay_type"].as_str(), b["shop_id"].as_i64()), (Some("COD"), Some("COD"), Some(shop2)));
    // Null under one name and a value under the other disagree; money past f64's exact range is
    // refused, not rounded.
    app.put(key, &path, json!({"customer_pay_type": null, "terms": "Net 60"})).await.invalid("terms");
    app.put(key, &path, json!({"credit_limit": 89999999999999.99})).await.invalid("credit_limit");
    assert_eq!(app.get(key, &path).await.body["terms"], "COD");

    // A PUT is validated like a create, but only for what it sends.
    let other = create_customer(&app, key, shop, "Bo", "Ray", json!({"customer_number": "N2"})).await;
    app.put(key, &format!("/api/v1/customers/{other}"), json!({"customer_number": "N1"})).await.invalid("customer_number");
    // The refused write rolled back whole: no change, and no event for it.
    assert_eq!(app.get(key, &format!("/api/v1/customers/{other}")).await.body["customer_number"], "N2");
    let updates = app.get(key, "/api/v1/events?filter[type]=customer.updated&limit=1000").await.body;
    let other_updates = updates["data"].as_array().unwrap().iter().filter(|e| e["data"]["customer_id"].as_i64() == Some(other)).count();
    assert_eq!(other_updates, 0, "{updates}");
    let r = app.put(key, &path, json!({"last_name": " ", "email": "bad", "shop_id": 999_999})).await;
    for field in ["last_name", "email", "shop_id"] {
        r.invalid(field);
    }
    assert_eq!(app.get(key, &path).await.body["last_name"], "Lee");
    app.put(key, "/api/v1/customers/999999", json!({})).await.problem(404);
    app.put(key, "/api/v1/customers/abc", json!({})).await.problem(404);
    app.get(key, "/api/v1/customers/0").await.problem(404);
    // An id that does not decode to text is no id either, on every route and method; the key
    // is still checked first.
    app.get(key, "/api/v1/customers/%FF").await.problem(404);
    app.put(key, "/api/v1/customers/%C3", json!({})).await.problem(404);
    app.get(key, "/api/v1/customers/1/ship_tos/%FF").await.problem(404);
    app.delete(key, "/api/v1/appointments/%FF").await.problem(404);
    app.get("ask_not_a_key", "/api/v1/customers/%FF").await.problem(401);
}

async fn set_updated_at(app: &TestApp, id: i64, micros: i64) {
    let q = Query::new("UPDATE customers SET updated_at = $1 WHERE id = $2").bind(micros).bind(id);
    assert_eq!(app.db.execute(&q).await.unwrap(), 1);
}

async fn filters_customers(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let a = app.create_shop(key, "A", "UTC").await;
    let b = app.create_shop(key, "B", "UTC").await;
    let c1 = create_customer(&app, key, a, "Johnathan", "Smith", json!({"address": "12 Oak Street", "home_phone": "(555) 010-2030", "work_phone": "777-1234", "customer_number": "C-10"})).await;
    let c2 = create_customer(&app, key, a, "JOHN", "Smithers", json!({"address": "99 Elm Road", "phone": {"cell": "555.010.9999"}, "customer_number": "C-1"})).await;
    let c3 = create_customer(&app, key, b, "Mary", "Jones", json!({"address": "100% Oak_Lane", "fax": "1-800-FLOWERS 3569377", "customer_number": "c-10"})).await;
    let list = |q: &str| {
        let q = q.to_owned();
        let app = &app;
        async move { app.get(key, &format!("/api/v1/customers?{q}")).await.ids("customer_id") }
    };

    assert_eq!(list("").await, vec![c1, c2, c3]);
    // Case-insensitive substrings.
    assert_eq!(list("filter[first_name]=jOhN").await, vec![c1, c2]);
    assert_eq!(list("filter[first_name]=athan").await, vec![c1]);
    assert_eq!(list("filter[last_name]=SMITH").await, vec![c1, c2]);
    assert_eq!(list("filter[last_name]=mithe").await, vec![c2]);
    assert_eq!(list("filter[address]=oak").await, vec![c1, c3]);
    // `%`, `_` and `\` are literal characters, not wildcards.
    assert_eq!(list("filter[address]=100%25").await, vec![c3]);
    assert_eq!(list("filter[address]=%25").await, vec![c3]);
    assert_eq!(list("filter[address]=k_l").await, vec![c3]);
    assert_eq!(list("filter[address]=k_s").await, Vec::<i64>::new());
    assert_eq!(list("filter[first_name]=%5C").await, Vec::<i64>::new());
    // Phones: digits only, a substring of any one of the four numbers.
    assert_eq!(list("filter[phone]=(555) 010-2030").await, vec![c1]);
    assert_eq!(list("filter[phone]=5550102030").await, vec![c1]);
    assert_eq!(list("filter[phone]=010").await, vec![c1, c2]);
    assert_eq!(list("filter[phone]=7771234").await, vec![c1]);
    assert_eq!(list("filter[phone]=9999").await, vec![c2]);
    assert_eq!(list("filter[phone]=3569377").await, vec![c3]);
    // Digits spanning the end of one number and the start of the next do not match.
    assert_eq!(list("filter[phone]=2030777").await, Vec::<i64>::new());
    app.get(key, "/api/v1/customers?filter[phone]=abc").await.invalid("filter[phone]");
    // customer_number is exact (and case-sensitive).
    assert_eq!(list("filter[customer_number]=C-1").await, vec![c2]);
    assert_eq!(list("filter[customer_number]=C-10").await, vec![c1]);
    assert_eq!(list("customer_id={c2}".replace("{c2}", &c2.to_string()).as_str()).await, vec![c2]);
    app.get(key, "/api/v1/customers?customer_id=x").await.invalid("customer_id");
    assert_eq!(list(&format!("filter[shop_id]={b}")).await, vec![c3]);
    assert_eq!(list(&format!("filter[shop_id]={a}&filter[first_name]=john&filter[last_name]=smithers")).await, vec![c2]);
    app.get(key, "/api/v1/customers?filter[shop_id]=999999").await.problem(404);
    // Empty filter values are ignored.
    assert_eq!(list("filter[first_name]=&filter[phone]=").await, vec![c1, c2, c3]);

    // updated_date: the UTC day of the last update, bounds included/excluded exactly.
    set_updated_at(&app, c1, 1_720_569_599_999_999).await; // 2024-07-09T23:59:59.999999Z
    set_updated_at(&app, c2, 1_720_569_600_000_000).await; // 2024-07-10T00:00:00Z
    set_updated_at(&app, c3, 1_720_483_200_000_000).await; // 2024-07-09T00:00:00Z
    assert_eq!(list("filter[updated_date]=2024-07-09").await, vec![c1, c3]);
    assert_eq!(list("filter[updated_date]=2024-07-10").await, vec![c2]);
    assert_eq!(list("filter[updated_date]=2024-07-11").await, Vec::<i64>::new());
    for bad in ["2024-7-9", "yesterday", "2024-02-30"] {
        app.get(key, &format!("/api/v1/customers?filter[updated_date]={bad}")).await.invalid("filter[updated_date]");
    }
    let r = app.get(key, "/api/v1/customers?filter[email]=x").await;
    assert!(r.problem(400)["detail"].as_str().unwrap().contains("filter[phone]"));
}

async fn sorts_and_paginates_customers(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "A", "UTC").await;
    let c1 = create_customer(&app, key, shop, "bob", "Young", json!({"business_name": "Zed Co", "address": "9 B St"})).await;
    let c2 = create_customer(&app, key, shop, "Alice", "young", json!({"business_name": "acme", "address": "1 a St"})).await;
    let c3 = create_customer(&app, key, shop, "Carl", "Adams", json!({"business_name": "", "address": "5 c St"})).await;
    let c4 = create_customer(&app, key, shop, "alice", "Brown", json!({"business_name": "Acme", "address": "1 A st"})).await;
    let sorted = |s: &str| {
        let s = s.to_owned();
        let app = &app;
        async move { app.get(key, &format!("/api/v1/customers?sort={s}")).await.ids("customer_id") }
    };
    assert_eq!(sorted("first_name").await, vec![c2, c4, c1, c3]);
    assert_eq!(sorted("-first_name").await, vec![c3, c1, c2, c4]);
    assert_eq!(sorted("last_name").await, vec![c3, c4, c1, c2]);
    assert_eq!(sorted("-last_name,first_name").await, vec![c2, c1, c4, c3]);
    assert_eq!(sorted("business_name").await, vec![c3, c2, c4, c1]);
    assert_eq!(sorted("address").await, vec![c2, c4, c3, c1]);
    assert_eq!(sorted("-address").await, vec![c1, c3, c2, c4]);
    let r = app.get(key, "/api/v1/customers?sort=email").await;
    let detail = r.problem(400)["detail"].as_str().unwrap().to_owned();
    assert!(detail.contains("business_name") && detail.contains("address"), "{detail}");

    let r = app.get(key, "/api/v1/customers?sort=first_name&pageSize=3&page=2").await;
    assert_eq!(r.ids("customer_id"), vec![c3]);
    assert_eq!((r.body["meta"]["total"].as_i64(), r.body["meta"]["last_page"].as_i64(), r.body["meta"]["from"].as_i64()), (Some(4), Some(2), Some(4)));
    assert_eq!(r.body["links"]["prev"], format!("{}/api/v1/customers?sort=first_name&pageSize=3&page=1", app.base));
    assert_eq!(app.get(key, "/api/v1/customers").await.body["meta"]["per_page"], 10);
    app.get(key, "/api/v1/customers?pageSize=101").await.invalid("pageSize");
}

async fn adds_details_for_the_whole_page(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "A", "UTC").await;
    let c1 = create_customer(&app, key, shop, "Ann", "Lee", json!({})).await;
    let c2 = create_customer(&app, key, shop, "Bob", "Ray", json!({})).await;
    let ship_to = json!({"number": "1", "name": "Depot", "address": "2 Dock Rd", "city": "Port", "state": "IL", "zip": "60000",
        "email": null, "work_phone": "", "fax": "", "home_phone": "", "cell_phone": ""});
    let s1 = app.post(key, &format!("/api/v1/customers/{c1}/ship_tos"), ship_to).await.ok()["id"].as_i64().unwrap();
    let entry = json!({"shop_id": shop, "reference": "INV-1", "date": "2024-07-01", "due_date": "2024-07-31", "amount": 100.25});
    let ar = app.post(key, &format!("/api/v1/customers/{c1}/accounts_receivable"), entry).await.ok()["id"].as_i64().unwrap();
    app.post(key, &format!("/api/v1/customers/{c1}/accounts_receivable/{ar}/payments"), json!({"amount": 40, "date": "2024-07-05"})).await.ok();

    let r = app.get(key, "/api/v1/customers?with_details=true").await;
    let data = r.ok()["data"].as_array().unwrap().clone();
    assert_eq!(r.ids("customer_id"), vec![c1, c2]);
    let d1 = &data[0];
    assert_eq!(d1["vehicles"], json!([]));
    assert_eq!(d1["schedule"], json!([]));
    assert_eq!(d1["ship_tos"].as_array().unwrap().iter().map(|s| s["id"].as_i64().unwrap()).collect::<Vec<_>>(), vec![s1]);
    assert_eq!(d1["accounts_receivable"][0]["id"].as_i64(), Some(ar));
    assert_eq!(d1["accounts_receivable"][0]["balance"], json!(60.25));
    let payment = &d1["account_payments"][0];
    assert_eq!((payment["accounts_receivable_id"].as_i64(), payment["amount"].clone(), payment["date"].as_str()), (Some(ar), json!(40.0), Some("2024-07-05")));
    assert!(payment["id"].is_i64());
    assert_eq!(payment.as_object().unwrap().len(), 4);
    // Details never leak between customers.
    let d2 = &data[1];
    for field in ["vehicles", "schedule", "ship_tos", "accounts_receivable", "account_payments"] {
        assert_eq!(d2[field], json!([]), "{field}");
    }
    // Without with_details the keys are absent.
    let plain = app.get(key, "/api/v1/customers").await;
    assert!(plain.body["data"][0].get("ship_tos").is_none() && plain.body["data"][0].get("vehicles").is_none());
    let plain = app.get(key, "/api/v1/customers?with_details=0").await;
    assert!(plain.body["data"][0].get("account_payments").is_none());
    app.get(key, "/api/v1/customers?with_details=maybe").await.invalid("with_details");
}

async fn enforces_roles_shop_scope_and_company(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = &app.admin_key;
    let a = app.create_shop(admin, "A", "UTC").await;
    let b = app.create_shop(admin, "B", "UTC").await;
    let in_a = create_customer(&app, admin, a, "Ann", "Lee", json!({})).await;
    let in_b = create_customer(&app, admin, b, "Bob", "Ray", json!({})).await;

    // Roles: read keys read; write keys write.
    let read = app.create_key(admin, "read", None).await;
    assert_eq!(app.get(&read, "/api/v1/customers").await.ids("customer_id"), vec![in_a, in_b]);
    app.post(&read, "/api/v1/customers", customer_body(a, "X", "Y", json!({}))).await.problem(403);
    app.put(&read, &format!("/api/v1/customers/{in_a}"), json!({"first_name": "Z"})).await.problem(403);
    let write = app.create_key(admin, "write", None).await;
    let made = create_customer(&app, &write, a, "Wes", "Tee", json!({})).await;
    assert_eq!(app.put(&write, &format!("/api/v1/customers/{made}"), json!({"first_name": "Will"})).await.ok()["first_name"], "Will");

    // A key limited to shop A sees only shop A's customers.
    let only_a = app.create_key(admin, "write", Some(vec![a])).await;
    assert_eq!(app.get(&only_a, "/api/v1/customers").await.ids("customer_id"), vec![in_a, made]);
    app.get(&only_a, &format!("/api/v1/customers/{in_b}")).await.problem(404);
    app.put(&only_a, &format!("/api/v1/customers/{in_b}"), json!({"first_name": "Z"})).await.problem(404);
    app.get(&only_a, &format!("/api/v1/customers?filter[shop_id]={b}")).await.problem(404);
    app.post(&only_a, "/api/v1/customers", customer_body(b, "X", "Y", json!({}))).await.invalid("shop_id");
    app.put(&only_a, &format!("/api/v1/customers/{in_a}"), json!({"shop_id": b})).await.invalid("shop_id");
    assert_eq!(app.get(&only_a, &format!("/api/v1/customers?customer_id={in_b}")).await.ids("customer_id"), Vec::<i64>::new());

    // Another company never sees these customers, and its own are invisible to us.
    let (_, other) = app.new_company("Other").await;
    let other_shop = app.create_shop(&other, "O", "UTC").await;
    let theirs = create_customer(&app, &other, other_shop, "Oz", "Orr", json!({})).await;
    assert_eq!(app.get(&other, "/api/v1/customers").await.ids("customer_id"), vec![theirs]);
    assert_eq!(app.get(&other, &format!("/api/v1/customers?customer_id={in_a}")).await.ids("customer_id"), Vec::<i64>::new());
    app.get(&other, &format!("/api/v1/customers/{in_a}")).await.problem(404);
    app.put(&other, &format!("/api/v1/customers/{in_a}"), json!({"first_name": "Hacked"})).await.problem(404);
    app.get(admin, &format!("/api/v1/customers?filter[shop_id]={other_shop}")).await.problem(404);
    assert!(!app.get(admin, "/api/v1/customers?pageSize=100").await.ids("customer_id").contains(&theirs));
    assert_eq!(app.get(admin, &format!("/api/v1/customers/{in_a}")).await.body["first_name"], "Ann");
}

async fn documents_customer_routes(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let doc = app.request(Method::GET, None, "/api/v1/openapi.json", None).await.body;
    let paths = &doc["paths"];
    for (path, method, errors) in [
        ("/api/v1/customers", "get", vec!["400", "404", "422"]),
        ("/api/v1/customers", "post", vec!["400", "422"]),
        ("/api/v1/customers/{CustomerID}", "put", vec!["400", "404", "422"]),
        ("/api/v1/customers/{customer_id}/ship_tos", "get", vec!["400", "404", "422"]),
        ("/api/v1/customers/{customer_id}/ship_tos", "post", vec!["400", "404", "422"]),
        ("/api/v1/customers/{customer_id}/ship_tos/{ship_to_id}", "put", vec!["400", "404", "422"]),
        ("/api/v1/customers/{customer_id}/accounts_receivable", "get", vec!["400", "404", "422"]),
        ("/api/v1/customers/{customer_id}/accounts_receivable", "post", vec!["400", "404", "422"]),
        ("/api/v1/customers/{customer_id}/accounts_receivable/{id}/payments", "post", vec!["400", "404", "422"]),
    ] {
        let op = &paths[path][method];
        assert!(op.is_object(), "{method} {path} is documented");
        for status in errors.into_iter().chain(["401", "403", "500", "503"]) {
            assert!(op["responses"][status]["content"]["application/problem+json"].is_object(), "{method} {path} {status}");
        }
    }
    let names = |path: &str| -> Vec<String> {
        paths[path]["get"]["parameters"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap().to_owned()).collect()
    };
    let customers = names("/api/v1/customers");
    for p in ["with_details", "customer_id", "filter[first_name]", "filter[last_name]", "filter[address]", "filter[phone]", "filter[customer_number]", "filter[updated_date]", "filter[shop_id]"] {
        assert!(customers.iter().any(|n| n == p), "{p} in {customers:?}");
    }
    let receivables = names("/api/v1/customers/{customer_id}/accounts_receivable");
    assert_eq!(receivables.iter().filter(|n| n.starts_with("filter[")).count(), 12, "{receivables:?}");
    let schemas = &doc["components"]["schemas"];
    assert_eq!(schemas["Customer"]["properties"]["home_phone"]["deprecated"], true);
    let mut required: Vec<&str> = schemas["ShipToInput"]["required"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    required.sort();
    assert_eq!(required, vec!["address", "cell_phone", "city", "email", "fax", "home_phone", "name", "number", "state", "work_phone", "zip"]);
}

/// A PUT sets only the columns it changes, and only while the row still holds what the handler
/// read; when it does not, the handler merges the body again onto the row as it is then.
async fn a_partial_update_applies_only_to_the_row_it_read(backend: Backend) {
    use autoshop::customers::store::{self, CustomerRow};
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "A", "UTC").await;
    let id = create_customer(&app, key, shop, "Ann", "Lee", json!({"phone": {"cell": "555-0101"}})).await;
    let read = store::find(&app.db, app.company_id, id).await.unwrap().unwrap().fields;
    let mut wanted = read.clone();
    wanted.cell_phone = "555-0909".into();

    // The row changed after the read: the statement leaves it alone.
    app.put(key, &format!("/api/v1/customers/{id}"), json!({"first_name": "Bea"})).await.ok();
    let mut tx = app.db.begin().await.unwrap();
    let stale = store::update_unless_changed(app.company_id, id, &read, &wanted);
    assert!(tx.fetch_optional::<CustomerRow>(&stale).await.unwrap().is_none(), "applied to a row it did not read");
    drop(tx);

    // On the row as read, it applies and keeps every other column.
    let read = store::find(&app.db, app.company_id, id).await.unwrap().unwrap().fields;
    let mut wanted = read.clone();
    wanted.cell_phone = "555-0707".into();
    let mut tx = app.db.begin().await.unwrap();
    let row = tx.fetch_optional::<CustomerRow>(&store::update_unless_changed(app.company_id, id, &read, &wanted)).await.unwrap().unwrap();
    assert_eq!(row.fields.first_name, "Bea");
    assert_eq!(row.fields.cell_phone, "555-0707");
    drop(tx);

    // Through the API: the search index follows a changed phone, and not an unchanged one.
    app.put(key, &format!("/api/v1/customers/{id}"), json!({"phone": {"cell": "555-0303"}})).await.ok();
    let found = |term: &'static str| {
        let app = &app;
        async move { app.get(key, &format!("/api/v1/customers?filter[phone]={term}")).await.body["meta"]["total"].as_i64() }
    };
    assert_eq!(found("5550303").await, Some(1));
    assert_eq!(found("5550101").await, Some(0));
    app.put(key, &format!("/api/v1/customers/{id}"), json!({"comments": "called"})).await.ok();
    assert_eq!(found("5550303").await, Some(1));
}

/// Updates of different fields of one customer, sent together through two servers: each one's
/// omitted fields keep the value they have when it is written, so every field ends as the one
/// update that set it asked (none is put back to what another update read before it).
async fn concurrent_updates_keep_each_others_fields(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.admin_key.clone();
    let shop = app.create_shop(&key, "A", "UTC").await;
    let id = create_customer(&app, &key, shop, "Ann", "Lee", json!({})).await;
    let replica = app.spawn_replica().await;
    let fields = ["first_name", "last_name", "address", "city", "comments", "customer_type"];
    let mut lost = Vec::new();
    for round in 0..30 {
        let puts = fields.iter().enumerate().map(|(n, field)| {
            let base = if (n + round) % 2 == 0 { &app.base } else { &replica };
            app.client.put(format!("{base}/api/v1/customers/{id}")).bearer_auth(&key).json(&json!({ *field: format!("{field} {round}") }))
        });
        assert!(together(puts.collect()).await.iter().all(|s| *s == 200));
        let customer = app.get(&key, &format!("/api/v1/customers/{id}")).await.ok().clone();
        for field in fields {
            if customer[field] != json!(format!("{field} {round}")) {
                lost.push((round, field, customer[field].clone()));
            }
        }
    }
    assert!(lost.is_empty(), "updates lost: {lost:?}");
}

/// Ten updates of one customer sent together to one server, each moving it to one of two shops
/// and setting a field: all of them land (none waits out the pool for a read while it holds a
/// connection and the row's lock, which the requests holding the rest of the pool wait for),
/// and each one's field is kept.
async fn concurrent_moves_between_shops_all_land(backend: Backend) {
    let config = autoshop::config::AppConfig { rate_limit: 0.0, ..crate::support::test_config() };
    let app = TestApp::spawn_with(backend, config).await;
    let key = app.admin_key.clone();
    let shops = [app.create_shop(&key, "A", "UTC").await, app.create_shop(&key, "B", "UTC").await];
    let id = create_customer(&app, &key, shops[0], "Ann", "Lee", json!({})).await;
    // Each update sets a field of its own: every guarded write after the first finds the row
    // changed, and most go on to the locked write.
    let fields = ["first_name", "last_name", "business_name", "address", "city", "state", "zip", "comments", "customer_type", "cell_provider"];
    for round in 0..20 {
        let puts = fields.iter().enumerate().map(|(n, field)| {
            let body = json!({"shop_id": shops[n % 2], *field: format!("{round}-{n}")});
            app.client.put(format!("{}/api/v1/customers/{id}", app.base)).bearer_auth(&key).json(&body)
        });
        let statuses = together(puts.collect()).await;
        assert!(statuses.iter().all(|s| *s == 200), "round {round}: {statuses:?}");
        let customer = app.get(&key, &format!("/api/v1/customers/{id}")).await.ok().clone();
        for (n, field) in fields.iter().enumerate() {
            assert_eq!(customer[field], json!(format!("{round}-{n}")), "round {round}: every update's field kept");
        }
    }
}
