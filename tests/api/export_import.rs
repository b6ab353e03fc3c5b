//! CSV export and import (decisions §16): the lists' filters, sorts and scopes as files, a round
//! trip into another company, all-or-nothing imports with row-keyed errors, matching by number.

use autoshop::config::AppConfig;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{
    customers::create_customer,
    support::{Backend, TestApp, test_config},
};

crate::backend_tests!(
    customer_exports_are_the_list_as_csv,
    appointment_exports_are_the_list_as_csv,
    an_export_imports_into_another_company_unchanged,
    imports_are_all_or_nothing_with_row_keyed_errors,
    imports_match_customers_by_number,
    matching_imports_and_updates_keep_each_others_fields,
    a_number_taken_during_an_import_is_an_error_on_its_row,
    exports_beyond_the_cap_are_told_to_retry,
    imports_check_roles_shops_sizes_and_content_types,
    keyed_imports_write_once,
);

/// The file's header and records, parsed by the server's own CSV reader (its round trip with
/// the writer is property-tested in the unit tests).
fn parse_csv(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut records = autoshop::csv::parse(text.as_bytes()).expect("valid CSV").into_iter().map(|(_, r)| r);
    let header = records.next().expect("a header row");
    (header, records.collect())
}

async fn export(app: &TestApp, key: &str, path: &str) -> (StatusCode, Option<String>, String) {
    let resp = app.client.get(format!("{}{path}", app.base)).bearer_auth(key).send().await.unwrap();
    let status = resp.status();
    let content_type = resp.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned());
    (status, content_type, resp.text().await.unwrap())
}

async fn import(app: &TestApp, key: &str, query: &str, file: &str) -> crate::support::Resp {
    import_as(app, key, query, file, "text/csv", None).await
}

async fn import_as(app: &TestApp, key: &str, query: &str, file: &str, content_type: &str, idempotency_key: Option<&str>) -> crate::support::Resp {
    let mut req = app
        .client
        .request(Method::POST, format!("{}/api/v1/customers/import{query}", app.base))
        .bearer_auth(key)
        .header("content-type", content_type)
        .body(file.to_owned());
    if let Some(k) = idempotency_key {
        req = req.header("idempotency-key", k);
    }
    let resp = req.send().await.unwrap();
    let (status, headers) = (resp.status(), resp.headers().clone());
    let bytes = resp.bytes().await.unwrap();
    let body = serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    crate::support::Resp { status, headers, body }
}

/// A JSON value as its CSV cell: `null` empty, text as is, scalars as JSON writes them.
fn cell(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The resource's value for a dotted column name.
fn at<'a>(item: &'a Value, column: &str) -> &'a Value {
    column.split('.').fold(item, |v, key| &v[key])
}

/// Asserts that each record holds exactly what the list's JSON shows, item by item.
#[track_caller]
fn assert_records_match(header: &[String], records: &[Vec<String>], items: &[Value]) {
    assert_eq!(records.len(), items.len(), "one record per item");
    for (record, item) in records.iter().zip(items) {
        for (column, value) in header.iter().zip(record) {
            assert_eq!(value, &cell(at(item, column)), "column {column} of {item}");
        }
    }
}

async fn list_all(app: &TestApp, key: &str, path: &str) -> Vec<Value> {
    let sep = if path.contains('?') { '&' } else { '?' };
    app.get(key, &format!("{path}{sep}pageSize=100")).await.ok()["data"].as_array().unwrap().clone()
}

/// Customers whose values test the quoting: commas, quotes, line breaks, accents, nulls.
async fn tricky_customers(app: &TestApp, key: &str, shop: i64) -> Vec<i64> {
    let mut ids = Vec::new();
    for (first, last, extra) in [
        ("Ann", "O'Hara, \"Jr\"", json!({"email": "ann@example.com", "credit_limit": 2500.5, "comments": "line one\r\nline two", "customer_number": "C-1"})),
        ("Émile", "Zola", json!({"phone": {"home": "(555) 010-2030", "cell": "555,1"}, "active": false, "tax_exempt": true})),
        ("bob", "adams", json!({"business_name": "Adams, Inc.", "extension": 12, "terms": "Net 30", "allow_marketing": true})),
    ] {
        ids.push(create_customer(app, key, shop, first, last, extra).await);
    }
    ids
}

async fn customer_exports_are_the_list_as_csv(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let (a, b) = (app.create_shop(key, "A", "UTC").await, app.create_shop(key, "B", "UTC").await);
    tricky_customers(&app, key, a).await;
    create_customer(&app, key, b, "Cy", "Beta", json!({})).await;
    let (_, other_key) = app.new_company("Other").await;
    let other_shop = app.create_shop(&other_key, "X", "UTC").await;
    create_customer(&app, &other_key, other_shop, "Never", "Leaked", json!({})).await;

    let (status, content_type, text) = export(&app, key, "/api/v1/customers/export?sort=-last_name").await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(content_type.as_deref(), Some("text/csv; charset=utf-8; header=present"));
    assert!(text.ends_with("\r\n") && text.contains("\"line one\r\nline two\""), "{text}");
    let (header, records) = parse_csv(&text);
    assert_eq!(&header[..4], ["customer_id", "shop_id", "business_name", "first_name"]);
    assert!(header.iter().any(|h| h == "phone.home") && header.iter().any(|h| h == "updated_at"), "{header:?}");
    assert!(!header.iter().any(|h| h == "phone" || h == "schedule"), "nested objects are flattened, details left out: {header:?}");
    let items = list_all(&app, key, "/api/v1/customers?sort=-last_name").await;
    assert_eq!(items.len(), 4);
    assert_records_match(&header, &records, &items);
    assert!(!text.contains("Leaked"));
    // Compressed on request, and complete (the gzip layer polls the body past its end).
    let gz = app.client.get(format!("{}/api/v1/customers/export", app.base)).bearer_auth(key).header("accept-encoding", "gzip").send().await.unwrap();
    assert_eq!(gz.headers().get("content-encoding").map(|v| v.to_str().unwrap()), Some("gzip"));
    assert!(gz.bytes().await.is_ok(), "the compressed export arrives whole");

    // Filters and scopes are the list's.
    let (_, _, text) = export(&app, key, &format!("/api/v1/customers/export?filter[shop_id]={b}")).await;
    assert_eq!(parse_csv(&text).1.len(), 1);
    let (_, _, text) = export(&app, key, "/api/v1/customers/export?filter[phone]=5550102").await;
    let (_, records) = parse_csv(&text);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0][3], "Émile");
    let scoped = app.create_key(key, "read", Some(vec![b])).await;
    let (status, _, text) = export(&app, &scoped, "/api/v1/customers/export").await;
    assert_eq!(status, 200);
    let (header, records) = parse_csv(&text);
    assert_records_match(&header, &records, &list_all(&app, &scoped, "/api/v1/customers").await);
    assert_eq!(records.len(), 1);

    // An empty result is a header alone; paging and details are refused; bad filters are the list's 422.
    let (status, _, text) = export(&app, key, "/api/v1/customers/export?filter[last_name]=nobody").await;
    assert_eq!((status.as_u16(), parse_csv(&text)), (200, (header.clone(), vec![])));
    app.get(key, "/api/v1/customers/export?page=2").await.invalid("page");
    app.get(key, "/api/v1/customers/export?with_details=true").await.invalid("with_details");
    app.get(key, "/api/v1/customers/export?filter[updated_date]=soon").await.invalid("filter[updated_date]");
    app.get(key, "/api/v1/customers/export?sort=shoe_size").await.problem(400);
    app.request(Method::GET, None, "/api/v1/customers/export", None).await.problem(401);
}

async fn appointment_exports_are_the_list_as_csv(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "A", "America/Chicago").await;
    app.create_bay(key, shop, "Bay, \"one\"", 1).await;
    let mut ids = Vec::new();
    for (i, (date, reason)) in [("2031-03-04", Some("Brakes, front")), ("2031-03-04", None), ("2031-03-05", Some("Oil"))].into_iter().enumerate() {
        let extra = json!({"first_name": format!("F{i}"), "last_name": "Last", "hours": 1.5, "reason": reason, "column": "Bay, \"one\"", "cell_phone": "555,0"});
        let created = crate::appointments::create(&app, key, crate::appointments::body_with(shop, &format!("{date}T{:02}:30", 8 + i), extra)).await;
        ids.push(created["appointment_id"].as_i64().unwrap());
    }
    app.delete(key, &format!("/api/v1/appointments/{}", ids[2])).await;

    for query in ["sort=-date", "filter[date]=2031-03-04&sort=reason", "filter[trashed]=with&sort=-date"] {
        let (status, content_type, text) = export(&app, key, &format!("/api/v1/appointments/export?{query}")).await;
        assert_eq!(status, 200, "{text}");
        assert_eq!(content_type.as_deref(), Some("text/csv; charset=utf-8; header=present"));
        let (header, records) = parse_csv(&text);
        for column in ["appointment_id", "vehicle.make", "phone.cell", "schedule.start", "schedule.date", "column", "deleted"] {
            assert!(header.iter().any(|h| h == column), "{column} in {header:?}");
        }
        assert_records_match(&header, &records, &list_all(&app, key, &format!("/api/v1/appointments?{query}")).await);
    }
    let (_, _, text) = export(&app, key, "/api/v1/appointments/export?filter[trashed]=with").await;
    assert_eq!(parse_csv(&text).1.len(), 3);
    app.get(key, "/api/v1/appointments/export?filter[date]=March").await.invalid("filter[date]");
    app.get(key, "/api/v1/appointments/export?pageSize=5").await.invalid("pageSize");
}

/// The columns that differ between two companies holding the same customers.
const ASSIGNED: [&str; 4] = ["customer_id", "shop_id", "timestamp", "updated_at"];

fn without_assigned(text: &str) -> Vec<Vec<String>> {
    let (header, records) = parse_csv(text);
    let keep: Vec<usize> = (0..header.len()).filter(|i| !ASSIGNED.contains(&header[*i].as_str())).collect();
    std::iter::once(&header).chain(&records).map(|r| keep.iter().map(|i| r[*i].clone()).collect()).collect()
}

async fn an_export_imports_into_another_company_unchanged(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "A", "UTC").await;
    tricky_customers(&app, key, shop).await;
    for i in 0..40 {
        create_customer(&app, key, shop, &format!("First{i}"), &format!("Last{i:02}"), json!({"customer_number": format!("N{i}")})).await;
    }
    let (_, _, first) = export(&app, key, "/api/v1/customers/export?sort=last_name").await;

    let (_, other_key) = app.new_company("New owner").await;
    let other_shop = app.create_shop(&other_key, "Moved", "UTC").await;
    let r = import(&app, &other_key, &format!("?shop_id={other_shop}"), &first).await;
    assert_eq!((r.status.as_u16(), &r.body), (201, &json!({"created": 43, "updated": 0})));
    let (_, _, second) = export(&app, &other_key, "/api/v1/customers/export?sort=last_name").await;
    assert_eq!(without_assigned(&first), without_assigned(&second));
    let (header, records) = parse_csv(&second);
    let shop_column = header.iter().position(|h| h == "shop_id").unwrap();
    assert!(records.iter().all(|r| r[shop_column] == other_shop.to_string()));

    // Every written customer has its event, with the customer as a GET shows it.
    let path = "/api/v1/events?filter[type]=customer.created&limit=100";
    let events = app.eventually(&other_key, path, |b| b["data"].as_array().is_some_and(|d| d.len() >= 43)).await;
    let data = events["data"].as_array().unwrap().clone();
    assert_eq!(data.len(), 43);
    let some = &data[7]["data"];
    assert_eq!(&app.get(&other_key, &format!("/api/v1/customers/{}", some["customer_id"])).await.body, some);

    // The first company is untouched.
    let (_, _, again) = export(&app, key, "/api/v1/customers/export?sort=last_name").await;
    assert_eq!(again, first);
}

async fn imports_are_all_or_nothing_with_row_keyed_errors(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "A", "UTC").await;
    let header = "shop_id,business_name,first_name,last_name,address,city,state,zip,email,active,phone.home";
    let file = format!(
        "{header}\r\n{shop},,Ann,Lee,1 Main,Town,IL,1,ann@example.com,true,\r\n{shop},,,Nofirst,1 Main,Town,IL,1,,,\r\n\
         {shop},,Bad,Row,1 Main,Town,IL,1,not-an-email,maybe,5\r\n{shop},,Short,Row\r\n"
    );
    let r = import(&app, key, "", &file).await;
    let body = r.invalid("row 2.first_name");
    let errors = body["errors"].as_object().unwrap();
    let mut keys: Vec<&str> = errors.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["row 2.first_name", "row 3.active", "row 3.email", "row 4.file"], "{body}");
    assert!(errors["row 4.file"][0].as_str().unwrap().contains("Line 5 has 4 cells; the header has 11."), "{body}");
    assert_eq!(app.get(key, "/api/v1/customers").await.body["meta"]["total"], 0, "nothing written");
    assert_eq!(app.get(key, "/api/v1/events?filter[type]=customer.created").await.body["data"], json!([]));

    // The header is checked first, naming what is unknown and what is missing.
    let r = import(&app, key, "", "shop_id,first_name,nickname\r\n1,Ann,Annie\r\n").await;
    let detail = r.invalid("header")["errors"]["header"].to_string();
    assert!(detail.contains("Unknown columns: nickname.") && detail.contains("Missing columns: business_name, last_name"), "{detail}");
    import(&app, key, "", "").await.invalid("header");
    import(&app, key, "", "first_name\r\n\"open").await.invalid("file");

    // A valid file writes every row; a header alone writes nothing and says so.
    let good = format!("{header}\r\n{shop},,Ann,Lee,1 Main,Town,IL,1,ann@example.com,true,\r\n{shop},\"Lee, Ltd\",Bo,Lee,2 Main,Town,IL,2,,FALSE,555\r\n");
    let r = import(&app, key, "", &good).await;
    assert_eq!((r.status.as_u16(), &r.body), (201, &json!({"created": 2, "updated": 0})));
    let items = list_all(&app, key, "/api/v1/customers?sort=first_name").await;
    assert_eq!(items[1]["business_name"], "Lee, Ltd");
    assert_eq!((items[1]["active"].clone(), items[1]["email"].clone(), items[1]["phone"]["home"].clone()), (json!(false), Value::Null, json!("555")));
    let r = import(&app, key, "", &format!("{header}\r\n")).await;
    assert_eq!((r.status.as_u16(), &r.body), (201, &json!({"created": 0, "updated": 0})));
}

async fn imports_match_customers_by_number(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "A", "UTC").await;
    let id = create_customer(&app, key, shop, "Old", "Name", json!({"customer_number": "C-1", "email": "old@example.com", "comments": "keep"})).await;
    let file = format!(
        "shop_id,customer_number,business_name,first_name,last_name,address,city,state,zip,email\r\n\
         {shop},C-1,,New,Name,1 Main,Town,IL,1,\r\n{shop},C-2,,Fresh,Customer,1 Main,Town,IL,1,fresh@example.com\r\n"
    );
    // Without matching, a known number is a duplicate.
    import(&app, key, "", &file).await.invalid("row 1.customer_number");
    let r = import(&app, key, "?match=customer_number", &file).await;
    assert_eq!((r.status.as_u16(), &r.body), (201, &json!({"created": 1, "updated": 1})));
    let updated = app.get(key, &format!("/api/v1/customers/{id}")).await.body;
    assert_eq!((updated["first_name"].as_str(), updated["email"].clone(), updated["comments"].as_str()), (Some("New"), Value::Null, Some("keep")));
    let events = app.eventually(key, "/api/v1/events?filter[type]=customer.updated", |b| b["data"].as_array().is_some_and(|d| !d.is_empty())).await;
    assert_eq!(events["data"].as_array().unwrap().len(), 1);
    assert_eq!(events["data"][0]["data"], updated);

    // Matching may update a few columns only; a number twice in a file is refused.
    let r = import(&app, key, "?match=customer_number", "customer_number,credit_limit\r\nC-1,300\r\nC-2,12.25\r\n").await;
    assert_eq!((r.status.as_u16(), &r.body), (201, &json!({"created": 0, "updated": 2})));
    assert_eq!(app.get(key, &format!("/api/v1/customers/{id}")).await.body["credit_limit"], json!(300.0));
    import(&app, key, "?match=customer_number", "customer_number,zip\r\nC-1,1\r\nC-1,2\r\n").await.invalid("row 2.customer_number");
    // A row that matches nothing creates, and must then say everything a create needs.
    import(&app, key, "?match=customer_number", "customer_number,zip\r\nC-9,1\r\n").await.invalid("row 1.first_name");
    import(&app, key, "?match=name", "customer_number\r\n").await.invalid("match");
}

async fn imports_check_roles_shops_sizes_and_content_types(backend: Backend) {
    let config = AppConfig { import_max_bytes: 64 * 1024, ..test_config() };
    let app = TestApp::spawn_with(backend, config).await;
    let key = &app.admin_key;
    let (a, b) = (app.create_shop(key, "A", "UTC").await, app.create_shop(key, "B", "UTC").await);
    let header = "shop_id,business_name,first_name,last_name,address,city,state,zip";
    let row = |shop: i64| format!("{shop},,Ann,Lee,1 Main,Town,IL,1\r\n");
    let writer_of_a = app.create_key(key, "write", Some(vec![a])).await;
    let r = import(&app, &writer_of_a, "", &format!("{header}\r\n{}{}", row(a), row(b))).await;
    let errors = r.invalid("row 2.shop_id")["errors"].as_object().unwrap().clone();
    assert_eq!(errors.len(), 1, "{errors:?}");
    import(&app, &writer_of_a, &format!("?shop_id={b}"), &format!("{header}\r\n{}", row(a))).await.invalid("shop_id");
    let (_, other_key) = app.new_company("Other").await;
    import(&app, &other_key, "", &format!("{header}\r\n{}", row(a))).await.invalid("row 1.shop_id");
    // Shop 0 is checked like any shop (it used to reach the insert: a 500), and a NUL in a cell
    // is a 422 on its column (PostgreSQL refused the text: a 500), as in a JSON body.
    import(&app, key, "", &format!("{header}\r\n{}", row(0))).await.invalid("row 1.shop_id");
    import(&app, key, "", &format!("{header}\r\n{a},,A\0nn,Lee,1 Main,Town,IL,1\r\n")).await.invalid("row 1.first_name");
    // A row with errors in its cells and in its shop counts once and lists both.
    let rows = format!("{header}\r\n{}", format!("{b},,Ann,Lee,1 Main,Town,IL,\r\n").repeat(101));
    let r = import(&app, &writer_of_a, "", &rows).await;
    let body = r.invalid("rows");
    assert!(body["errors"]["rows"][0].as_str().unwrap().starts_with("101 rows have errors"), "{}", body["errors"]["rows"]);
    assert!(body["errors"]["row 100.zip"].is_array() && body["errors"]["row 100.shop_id"].is_array(), "{body}");
    assert!(body["errors"].get("row 101.zip").is_none(), "past 100 rows, only counted");
    let reader = app.create_key(key, "read", None).await;
    import(&app, &reader, "", &format!("{header}\r\n{}", row(a))).await.problem(403);
    import_as(&app, key, "", &format!("{header}\r\n{}", row(a)), "application/json", None).await.problem(415);

    // Past the byte limit: 413, and the connection is not reused after it.
    let big = format!("{header}\r\n{}", row(a).repeat(3000));
    let r = import(&app, key, "", &big).await;
    r.problem(413);
    // Past the row limit, whatever the bytes: 413 before anything is validated.
    let config = AppConfig { import_max_bytes: 8 * 1024 * 1024, ..test_config() };
    let roomy = TestApp::spawn_with(backend, config).await;
    let rows = format!("first_name\r\n{}", "a\r\n".repeat(100_001));
    let r = import(&roomy, &roomy.admin_key, "", &rows).await;
    assert!(r.problem(413)["detail"].as_str().unwrap().contains("100001 data rows"), "{}", r.body);
    assert_eq!(app.get(key, "/api/v1/customers").await.body["meta"]["total"], 0);
}

async fn keyed_imports_write_once(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "A", "UTC").await;
    let file = format!("{}\r\n", customer_csv_row(shop));
    let first = import_as(&app, key, "", &file, "text/csv", Some("import-1")).await;
    assert_eq!((first.status.as_u16(), &first.body), (201, &json!({"created": 1, "updated": 0})));
    let again = import_as(&app, key, "", &file, "text/csv", Some("import-1")).await;
    assert_eq!((again.status.as_u16(), &again.body), (201, &first.body));
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(app.get(key, "/api/v1/customers").await.body["meta"]["total"], 1);
}

/// A header and one valid row for `shop`.
fn customer_csv_row(shop: i64) -> String {
    format!("shop_id,business_name,first_name,last_name,address,city,state,zip\r\n{shop},,Ann,Lee,1 Main,Town,IL,1")
}

/// A matching import and customer updates sent together through two servers: the import's rows
/// are merged onto each customer as it is when written, so neither the file's column nor the
/// updates' is lost (each round: the file sets every customer's `city`, the updates `comments`).
async fn matching_imports_and_updates_keep_each_others_fields(backend: Backend) {
    // Some 400 requests in a few seconds would trip the per-key rate limit.
    let config = AppConfig { rate_limit: 0.0, ..test_config() };
    let app = std::sync::Arc::new(TestApp::spawn_with(backend, config.clone()).await);
    let key = app.admin_key.clone();
    let shop = app.create_shop(&key, "A", "UTC").await;
    // Enough customers that checking the file takes a while, for the updates to land in.
    let file: String = std::iter::once("shop_id,customer_number,business_name,first_name,last_name,address,city,state,zip\r\n".to_owned())
        .chain((0..400).map(|n| format!("{shop},C-{n},,Ann,Lee,1 Main,Town,IL,1\r\n")))
        .collect();
    assert_eq!(import(&app, &key, "", &file).await.status, 201);
    let numbers: Vec<String> = (0..400).map(|n| format!("C-{n}")).collect();
    let customers = autoshop::customers::store::by_numbers(&app.db, app.company_id, &numbers).await.unwrap();
    let number = |c: &autoshop::customers::store::CustomerRow| c.fields.customer_number[2..].parse::<usize>().unwrap();
    let mut ids = vec![0; 400];
    for c in &customers {
        ids[number(c)] = c.id;
    }
    let updated: Vec<usize> = (0..400).step_by(37).collect();
    let replica = app.spawn_replica_with(config).await;
    let mut lost = Vec::new();
    for round in 0..20 {
        let file: String = std::iter::once("customer_number,city\r\n".to_owned())
            .chain((0..ids.len()).map(|n| format!("C-{n},City {round}\r\n")))
            .collect();
        let mut requests = Vec::new();
        let (app_1, key_1, base) = (app.clone(), key.clone(), if round % 2 == 0 { app.base.clone() } else { replica.clone() });
        requests.push(tokio::spawn(async move {
            let r = app_1.client.post(format!("{base}/api/v1/customers/import?match=customer_number")).bearer_auth(&key_1)
                .header("content-type", "text/csv").body(file).send().await.unwrap();
            r.status().as_u16()
        }));
        for (i, &n) in updated.iter().enumerate() {
            let (app, key, id) = (app.clone(), key.clone(), ids[n]);
            let base = if (i + round) % 2 == 0 { app.base.clone() } else { replica.clone() };
            // Spread over the import's read, check and write.
            let lag = std::time::Duration::from_micros(((i * 7 + round * 3) % 10) as u64 * 400);
            requests.push(tokio::spawn(async move {
                tokio::time::sleep(lag).await;
                let body = json!({"comments": format!("Note {round}")});
                let r = app.client.put(format!("{base}/api/v1/customers/{id}")).bearer_auth(&key).json(&body).send().await.unwrap();
                r.status().as_u16()
            }));
        }
        let statuses: Vec<u16> = futures_join(requests).await;
        assert_eq!(statuses[0], 201, "the import");
        assert!(statuses[1..].iter().all(|s| *s == 200), "the updates: {statuses:?}");
        let now = autoshop::customers::store::by_numbers(&app.db, app.company_id, &numbers).await.unwrap();
        for customer in &now {
            let n = number(customer);
            if customer.fields.city != format!("City {round}") {
                lost.push((round, n, "city", customer.fields.city.clone()));
            }
            if updated.contains(&n) && customer.fields.comments != format!("Note {round}") {
                lost.push((round, n, "comments", customer.fields.comments.clone()));
            }
        }
    }
    assert!(lost.is_empty(), "updates lost: {lost:?}");
}

/// Creates racing an import for the number of its last row: one of them gets the number, and
/// when the import loses, its 422 names the row (`row 400.customer_number`), however late the
/// number was taken (between the file's check and its insert too).
async fn a_number_taken_during_an_import_is_an_error_on_its_row(backend: Backend) {
    let config = AppConfig { rate_limit: 0.0, ..test_config() };
    let app = std::sync::Arc::new(TestApp::spawn_with(backend, config.clone()).await);
    let replica = app.spawn_replica_with(config).await;
    let key = app.admin_key.clone();
    let shop = app.create_shop(&key, "A", "UTC").await;
    let (mut import_lost, mut import_won) = (0, 0);
    for round in 0..20 {
        let contested = format!("X-{round}");
        let file: String = std::iter::once("shop_id,customer_number,business_name,first_name,last_name,address,city,state,zip\r\n".to_owned())
            .chain((0..399).map(|n| format!("{shop},R{round}-{n},,Ann,Lee,1 Main,Town,IL,1\r\n")))
            .chain(std::iter::once(format!("{shop},{contested},,Ann,Lee,1 Main,Town,IL,1\r\n")))
            .collect();
        let (app_1, key_1) = (app.clone(), key.clone());
        let importing = tokio::spawn(async move { import(&app_1, &key_1, "", &file).await });
        let mut creates = Vec::new();
        for i in 0..4 {
            let (app, key, contested) = (app.clone(), key.clone(), contested.clone());
            let base = if (i + round) % 2 == 0 { app.base.clone() } else { replica.clone() };
            // Spread over the import's check and write.
            let lag = std::time::Duration::from_micros(((i * 7 + round * 3) % 16) as u64 * 1000);
            creates.push(tokio::spawn(async move {
                tokio::time::sleep(lag).await;
                let body = json!({"shop_id": shop, "business_name": "", "first_name": "Bo", "last_name": "Ray", "address": "2 Main",
                    "city": "Town", "state": "IL", "zip": "1", "customer_number": contested});
                let r = app.client.post(format!("{base}/api/v1/customers")).bearer_auth(&key).json(&body).send().await.unwrap();
                (r.status().as_u16(), r.json::<Value>().await.unwrap())
            }));
        }
        let imported = importing.await.unwrap();
        let mut created = 0;
        for c in creates {
            let (status, body) = c.await.unwrap();
            match status {
                201 => created += 1,
                422 => assert!(body["errors"]["customer_number"].is_array(), "round {round}: {body}"),
                other => panic!("round {round}: a create answered {other}: {body}"),
            }
        }
        match imported.status.as_u16() {
            201 => {
                import_won += 1;
                assert_eq!(created, 0, "round {round}: the number went to the import and a create");
            }
            422 => {
                import_lost += 1;
                assert_eq!(created, 1, "round {round}");
                let errors = imported.body["errors"].as_object().unwrap();
                assert_eq!(errors.keys().collect::<Vec<_>>(), vec!["row 400.customer_number"], "round {round}: {}", imported.body);
            }
            other => panic!("round {round}: the import answered {other}: {}", imported.body),
        }
    }
    eprintln!("imports won {import_won}, lost {import_lost}");
}

/// Each export reads on a database connection of its own until its last byte is sent, so a
/// server runs at most `--max-exports` at once: one more is a 503 with `Retry-After`, and the
/// permit comes back when a download ends, even one the client gave up.
async fn exports_beyond_the_cap_are_told_to_retry(backend: Backend) {
    let config = AppConfig { rate_limit: 0.0, max_exports: 1, ..test_config() };
    let app = TestApp::spawn_with(backend, config).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "A", "UTC").await;
    // Some 40 MB: far more than the read-ahead batches and the socket buffers hold, so the read
    // of an export nobody reads stays open, and holds its permit.
    let file: String = std::iter::once("shop_id,business_name,first_name,last_name,address,city,state,zip,comments\r\n".to_owned())
        .chain((0..5_000).map(|n| format!("{shop},,Ann,Lee {n},{n} Main Street,Springfield,IL,62701,{}\r\n", "x".repeat(8_000))))
        .collect();
    assert_eq!(import(&app, key, "", &file).await.status, 201);
    let url = format!("{}/api/v1/customers/export", app.base);
    let stalled = app.client.get(&url).bearer_auth(key).send().await.unwrap();
    assert_eq!(stalled.status(), 200);
    let r = app.get(key, "/api/v1/appointments/export").await;
    r.problem(503);
    assert_eq!(r.header("retry-after"), Some("5"));
    // Lists are not exports: they go on.
    assert_eq!(app.get(key, "/api/v1/customers?pageSize=1").await.status, 200);
    drop(stalled);
    let mut answered = 0;
    for _ in 0..250 {
        let r = app.client.get(&url).bearer_auth(key).send().await.unwrap();
        answered = r.status().as_u16();
        if answered == 200 {
            assert_eq!(r.text().await.unwrap().lines().count(), 5_001, "the whole file, header included");
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(answered, 200, "the given-up download's permit came back");
}

async fn futures_join(handles: Vec<tokio::task::JoinHandle<u16>>) -> Vec<u16> {
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}
