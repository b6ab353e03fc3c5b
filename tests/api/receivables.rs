use serde_json::{Value, json};

use crate::{
    customers::create_customer,
    support::{Backend, TestApp},
};

crate::backend_tests!(
    creates_entries_and_records_payments,
    filters_and_sorts_entries,
    entries_follow_roles_scope_and_company,
    references_sort_ignoring_case
);

fn entry(shop: i64, reference: &str, date: &str, due: &str, amount: f64) -> Value {
    json!({"shop_id": shop, "reference": reference, "date": date, "due_date": due, "amount": amount})
}

async fn create(app: &TestApp, customer: i64, body: Value) -> i64 {
    let r = app.post(&app.admin_key, &format!("/api/v1/customers/{customer}/accounts_receivable"), body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["id"].as_i64().unwrap()
}

async fn pay(app: &TestApp, customer: i64, id: i64, amount: Value, date: &str) -> crate::support::Resp {
    app.post(&app.admin_key, &format!("/api/v1/customers/{customer}/accounts_receivable/{id}/payments"), json!({"amount": amount, "date": date}))
        .await
}

async fn creates_entries_and_records_payments(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "A", "UTC").await;
    let c = create_customer(&app, key, shop, "Ann", "Lee", json!({})).await;
    let base = format!("/api/v1/customers/{c}/accounts_receivable");

    let r = app.post(key, &base, json!({"shop_id": shop, "reference": "INV-1", "repair_order_id": 77, "date": "2024-07-01", "due_date": "2024-07-31", "amount": 100.1})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.body["id"].as_i64().unwrap();
    assert_eq!(r.header("location"), Some(format!("{base}/{id}").as_str()));
    assert_eq!(r.body, json!({"id": id, "customer_id": c, "shop_id": shop, "reference": "INV-1", "repair_order_id": 77,
        "date": "2024-07-01", "due_date": "2024-07-31", "actual_date": "2024-07-01", "amount": 100.1, "balance": 100.1,
        "paid": false, "payment_date": null}));
    assert_eq!(app.get(key, &format!("{base}/{id}")).await.ok(), &r.body);

    // Exact cents: 100.10 - 33.33 - 33.33 = 33.44; the latest payment date wins.
    let r = pay(&app, c, id, json!(33.33), "2024-07-10").await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!((r.body["balance"].clone(), r.body["paid"].clone(), r.body["payment_date"].as_str()), (json!(66.77), json!(false), Some("2024-07-10")));
    let r = pay(&app, c, id, json!(33.33), "2024-07-05").await;
    assert_eq!((r.body["balance"].clone(), r.body["payment_date"].as_str()), (json!(33.44), Some("2024-07-10")));
    // Above the balance: 422, nothing recorded.
    pay(&app, c, id, json!(33.45), "2024-07-20").await.invalid("amount");
    let now = app.get(key, &format!("{base}/{id}")).await;
    assert_eq!((now.body["balance"].clone(), now.body["payment_date"].as_str()), (json!(33.44), Some("2024-07-10")));
    let r = pay(&app, c, id, json!(33.44), "2024-07-20").await;
    assert_eq!((r.body["balance"].clone(), r.body["paid"].clone(), r.body["payment_date"].as_str()), (json!(0.0), json!(true), Some("2024-07-20")));
    pay(&app, c, id, json!(0.01), "2024-07-21").await.invalid("amount");
    let details = app.get(key, &format!("/api/v1/customers?customer_id={c}&with_details=true")).await;
    assert_eq!(details.body["data"][0]["account_payments"].as_array().unwrap().len(), 3);

    // Validation.
    let r = app.post(key, &base, json!({})).await;
    for field in ["shop_id", "reference", "date", "due_date", "amount"] {
        r.invalid(field);
    }
    let r = app.post(key, &base, json!({"shop_id": 999_999, "reference": " ", "date": "2024-13-01", "due_date": "2024-07-01", "actual_date": "x", "amount": 1.001, "repair_order_id": "RO"})).await;
    for field in ["shop_id", "reference", "date", "actual_date", "amount", "repair_order_id"] {
        r.invalid(field);
    }
    app.post(key, &base, entry(shop, "X", "2024-07-10", "2024-07-09", 5.0)).await.invalid("due_date");
    app.post(key, &base, entry(shop, "X", "2024-07-10", "2024-07-10", 0.0)).await.invalid("amount");
    let r = app.post(key, &base, json!({"shop_id": shop, "reference": "X", "date": "2024-07-10", "due_date": "2024-08-10", "actual_date": "2024-07-12", "amount": 5})).await;
    assert_eq!((r.ok()["actual_date"].as_str(), r.body["repair_order_id"].clone()), (Some("2024-07-12"), Value::Null));
    let open = r.body["id"].as_i64().unwrap();
    let r = pay(&app, c, open, json!(-1), "2024-07-10").await;
    r.invalid("amount");
    let r = app.post(key, &format!("{base}/{open}/payments"), json!({"amount": "5"})).await;
    r.invalid("amount");
    r.invalid("date");
    app.post(key, &format!("{base}/999999/payments"), json!({"amount": 1, "date": "2024-07-10"})).await.problem(404);
}

async fn filters_and_sorts_entries(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let a = app.create_shop(key, "A", "UTC").await;
    let b = app.create_shop(key, "B", "UTC").await;
    let c = create_customer(&app, key, a, "Ann", "Lee", json!({})).await;
    let mut e1 = entry(a, "INV-2", "2024-01-10", "2024-02-10", 50.0);
    e1["actual_date"] = json!("2024-01-12");
    e1["repair_order_id"] = json!(500);
    let e1 = create(&app, c, e1).await;
    let e2 = create(&app, c, entry(a, "INV-10", "2024-03-01", "2024-03-15", 80.0)).await;
    let e3 = create(&app, c, entry(b, "inv-1", "2024-02-01", "2024-04-01", 20.0)).await;
    assert_eq!(pay(&app, c, e1, json!(50), "2024-02-01").await.status, 201);
    assert_eq!(pay(&app, c, e2, json!(10), "2024-03-05").await.status, 201);
    // Another customer's entries never show here.
    let other = create_customer(&app, key, a, "Bob", "Ray", json!({})).await;
    create(&app, other, entry(a, "INV-2", "2024-01-10", "2024-02-10", 1.0)).await;

    let base = format!("/api/v1/customers/{c}/accounts_receivable");
    let ids = |q: &str| {
        let path = format!("{base}?{q}");
        let app = &app;
        async move { app.get(key, &path).await.ids("id") }
    };
    assert_eq!(ids("").await, vec![e1, e2, e3]);
    assert_eq!(ids("filter[paid]=true").await, vec![e1]);
    assert_eq!(ids("filter[paid]=0").await, vec![e2, e3]);
    app.get(key, &format!("{base}?filter[paid]=maybe")).await.invalid("filter[paid]");
    // Inclusive date ranges on each of the four dates.
    assert_eq!(ids("filter[ar_date_start]=2024-02-01").await, vec![e2, e3]);
    assert_eq!(ids("filter[ar_date_end]=2024-02-01").await, vec![e1, e3]);
    assert_eq!(ids("filter[ar_date_start]=2024-01-11&filter[ar_date_end]=2024-02-29").await, vec![e3]);
    assert_eq!(ids("filter[ar_due_date_start]=2024-03-15").await, vec![e2, e3]);
    assert_eq!(ids("filter[ar_due_date_end]=2024-03-15").await, vec![e1, e2]);
    assert_eq!(ids("filter[payment_date_start]=2024-02-01").await, vec![e1, e2]);
    assert_eq!(ids("filter[payment_date_end]=2024-02-01").await, vec![e1]);
    assert_eq!(ids("filter[payment_date_start]=2024-02-02&filter[payment_date_end]=2024-03-05").await, vec![e2]);
    assert_eq!(ids("filter[ar_actual_date_start]=2024-01-12").await, vec![e1, e2, e3]);
    assert_eq!(ids("filter[ar_actual_date_start]=2024-01-13").await, vec![e2, e3]);
    assert_eq!(ids("filter[ar_actual_date_end]=2024-01-11").await, Vec::<i64>::new());
    for name in ["ar_date_start", "ar_due_date_end", "payment_date_start", "ar_actual_date_end"] {
        app.get(key, &format!("{base}?filter[{name}]=01/02/2024")).await.invalid(&format!("filter[{name}]"));
    }
    // Exact matches.
    assert_eq!(ids("filter[reference]=INV-2").await, vec![e1]);
    assert_eq!(ids("filter[reference]=INV").await, Vec::<i64>::new());
    assert_eq!(ids("filter[repair_order_id]=500").await, vec![e1]);
    app.get(key, &format!("{base}?filter[repair_order_id]=x")).await.invalid("filter[repair_order_id]");
    assert_eq!(ids(&format!("filter[shop_id]={b}")).await, vec![e3]);
    app.get(key, &format!("{base}?filter[shop_id]=999999")).await.problem(404);
    app.get(key, &format!("{base}?filter[amount]=1")).await.problem(400);
    // Sorts, with the id tie-break.
    // Ignoring case, as every text sort: inv-1, INV-10, INV-2.
    assert_eq!(ids("sort=reference").await, vec![e3, e2, e1]);
    assert_eq!(ids("sort=date").await, vec![e1, e3, e2]);
    assert_eq!(ids("sort=-due_date").await, vec![e3, e2, e1]);
    assert_eq!(ids("sort=actual_date").await, vec![e1, e3, e2]);
    assert_eq!(ids("sort=-actual_date&pageSize=1&page=2").await, vec![e3]);
    app.get(key, &format!("{base}?sort=amount")).await.problem(400);
    let r = app.get(key, &format!("{base}?pageSize=2")).await;
    assert_eq!((r.body["meta"]["total"].as_i64(), r.body["meta"]["last_page"].as_i64()), (Some(3), Some(2)));
}

async fn entries_follow_roles_scope_and_company(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = &app.admin_key;
    let a = app.create_shop(admin, "A", "UTC").await;
    let b = app.create_shop(admin, "B", "UTC").await;
    let c = create_customer(&app, admin, a, "Ann", "Lee", json!({})).await;
    let in_a = create(&app, c, entry(a, "A-1", "2024-01-01", "2024-01-31", 10.0)).await;
    let in_b = create(&app, c, entry(b, "B-1", "2024-01-01", "2024-01-31", 10.0)).await;
    let base = format!("/api/v1/customers/{c}/accounts_receivable");

    // Only admin keys write entries and payments; any key reads.
    let write = app.create_key(admin, "write", None).await;
    let read = app.create_key(admin, "read", None).await;
    assert_eq!(app.get(&read, &base).await.ids("id"), vec![in_a, in_b]);
    for k in [&write, &read] {
        app.post(k, &base, entry(a, "W", "2024-01-01", "2024-01-31", 1.0)).await.problem(403);
        app.post(k, &format!("{base}/{in_a}/payments"), json!({"amount": 1, "date": "2024-01-02"})).await.problem(403);
    }

    // A key limited to shop A sees shop A's entries only.
    let only_a = app.create_key(admin, "admin", Some(vec![a])).await;
    assert_eq!(app.get(&only_a, &base).await.ids("id"), vec![in_a]);
    app.get(&only_a, &format!("{base}/{in_b}")).await.problem(404);
    app.get(&only_a, &format!("{base}?filter[shop_id]={b}")).await.problem(404);
    app.post(&only_a, &format!("{base}/{in_b}/payments"), json!({"amount": 1, "date": "2024-01-02"})).await.problem(404);
    app.post(&only_a, &base, entry(b, "X", "2024-01-01", "2024-01-31", 1.0)).await.invalid("shop_id");
    let details = app.get(&only_a, &format!("/api/v1/customers?customer_id={c}&with_details=1")).await;
    assert_eq!(details.body["data"][0]["accounts_receivable"].as_array().unwrap().len(), 1);

    // Through another customer's path: 404.
    let c2 = create_customer(&app, admin, a, "Bob", "Ray", json!({})).await;
    app.get(admin, &format!("/api/v1/customers/{c2}/accounts_receivable/{in_a}")).await.problem(404);
    pay(&app, c2, in_a, json!(1), "2024-01-02").await.problem(404);
    assert_eq!(app.get(admin, &format!("/api/v1/customers/{c2}/accounts_receivable")).await.ids("id"), Vec::<i64>::new());

    // Another company: 404 everywhere, and its admin cannot pay our entry.
    let (_, other) = app.new_company("Other").await;
    let other_shop = app.create_shop(&other, "O", "UTC").await;
    app.get(&other, &base).await.problem(404);
    app.get(&other, &format!("{base}/{in_a}")).await.problem(404);
    app.post(&other, &base, entry(other_shop, "O", "2024-01-01", "2024-01-31", 1.0)).await.problem(404);
    app.post(&other, &format!("{base}/{in_a}/payments"), json!({"amount": 1, "date": "2024-01-02"})).await.problem(404);
    app.post(admin, &base, entry(other_shop, "X", "2024-01-01", "2024-01-31", 1.0)).await.invalid("shop_id");
    assert_eq!(app.get(admin, &format!("{base}/{in_a}")).await.body["balance"], json!(10.0));
}

/// `sort=reference` ignores case, as every text sort does (docs/api.md, "Lists").
async fn references_sort_ignoring_case(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let shop = app.create_shop(&app.admin_key, "A", "UTC").await;
    let c = create_customer(&app, &app.admin_key, shop, "Ann", "Lee", json!({})).await;
    let upper = create(&app, c, entry(shop, "Z-1", "2024-01-10", "2024-02-10", 10.0)).await;
    let lower = create(&app, c, entry(shop, "a-2", "2024-01-10", "2024-02-10", 10.0)).await;
    let path = format!("/api/v1/customers/{c}/accounts_receivable");
    assert_eq!(app.get(&app.admin_key, &format!("{path}?sort=reference")).await.ids("id"), vec![lower, upper]);
    assert_eq!(app.get(&app.admin_key, &format!("{path}?sort=-reference")).await.ids("id"), vec![upper, lower]);
}
