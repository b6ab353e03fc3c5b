//! Appointment lists: text and exact filters, status, updated date, sorts and pages.

use autoshop::db::Query;
use serde_json::json;

use crate::{
    appointments::{body, body_with, create_id},
    support::{Backend, TestApp},
};

crate::backend_tests!(
    text_filters_are_case_insensitive_substrings_with_escaping,
    status_id_year_and_updated_date_filters,
    sorts_break_ties_by_id_and_pages_walk_everything,
    unfiltered_totals_follow_creates_moves_and_key_shops,
);

async fn text_filters_are_case_insensitive_substrings_with_escaping(backend: Backend) {
    let app = &TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "A", "UTC").await;
    let d = "2026-05-01T10:00:00Z";
    let ana = create_id(app, key, body_with(shop, d, json!({"first_name": "Ana", "last_name": "Smith", "reason": "Oil change", "make": "Honda", "model": "Civic"}))).await;
    let diana = create_id(app, key, body_with(shop, d, json!({"first_name": "Diana", "last_name": "Blacksmith", "reason": "100% brake job", "make": "Ford", "model": "F_150"}))).await;
    let chloe = create_id(app, key, body_with(shop, d, json!({"first_name": "Chloé", "last_name": "O'Neil", "make": "Subaru", "model": "Outback\\XT"}))).await;
    let plain = create_id(app, key, body_with(shop, d, json!({"first_name": "Bob", "reason": "1000 mile check", "model": "F150"}))).await;

    let ids = |q: &'static str| async move { app.get(key, &format!("/api/v1/appointments?{q}")).await.ids("appointment_id") };
    assert_eq!(ids("filter[first_name]=ANA").await, vec![ana, diana]);
    assert_eq!(ids("filter[first_name]=chloÉ").await, vec![chloe]);
    assert_eq!(ids("filter[last_name]=smith").await, vec![ana, diana]);
    assert_eq!(ids("filter[last_name]=o'n").await, vec![chloe]);
    assert_eq!(ids("filter[reason]=CHANGE").await, vec![ana]);
    // `%`, `_` and `\` are literal characters, not wildcards.
    assert_eq!(ids("filter[reason]=100%25").await, vec![diana]);
    assert_eq!(ids("filter[reason]=%25").await, vec![diana]);
    assert_eq!(ids("filter[model]=F_1").await, vec![diana]);
    assert_eq!(ids("filter[model]=_").await, vec![diana]);
    assert_eq!(ids("filter[model]=%5CX").await, vec![chloe]);
    assert_eq!(ids("filter[make]=toyota").await, vec![plain]);
    assert_eq!(ids("filter[make]=o&filter[model]=1").await, vec![diana, plain]);
    // An appointment without a reason never matches a reason filter; an empty filter is no filter.
    assert_eq!(ids("filter[reason]=e").await, vec![ana, diana, plain]);
    assert_eq!(ids("filter[reason]=").await, vec![ana, diana, chloe, plain]);
    assert_eq!(ids("filter[first_name]=zzz").await, Vec::<i64>::new());
    let r = app.get(key, "/api/v1/appointments?filter[color]=red").await;
    assert!(r.problem(400)["detail"].as_str().unwrap().contains("filter[updated_date]"));
}

async fn status_id_year_and_updated_date_filters(backend: Backend) {
    let app = &TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let a = app.create_shop(key, "A", "UTC").await;
    let b = app.create_shop(key, "B", "UTC").await;
    let d = "2026-05-01T10:00:00Z";
    let done = create_id(app, key, body_with(a, d, json!({"done": true, "year": "2019"}))).await;
    let open = create_id(app, key, body_with(a, d, json!({"year": "2020"}))).await;
    let other = create_id(app, key, body_with(b, d, json!({"year": "2019"}))).await;
    let ids = |q: &'static str| async move { app.get(key, &format!("/api/v1/appointments?{q}")).await.ids("appointment_id") };

    assert_eq!(ids("filter[status]=complete").await, vec![done]);
    assert_eq!(ids("filter[status]=incomplete").await, vec![open, other]);
    assert_eq!(ids("filter[status]=both").await, vec![done, open, other]);
    assert_eq!(ids("").await, vec![done, open, other]);
    for bad in ["done", "true", "1", "COMPLETE"] {
        app.get(key, &format!("/api/v1/appointments?filter[status]={bad}")).await.invalid("filter[status]");
    }
    let r = app.get(key, &format!("/api/v1/appointments?filter[shop_id]={a}&filter[status]=incomplete")).await;
    assert_eq!(r.ids("appointment_id"), vec![open]);

    assert_eq!(ids("filter[year]=2019").await, vec![done, other]);
    assert_eq!(ids("filter[year]=201").await, Vec::<i64>::new());
    assert_eq!(app.get(key, &format!("/api/v1/appointments?appointment_id={open}")).await.ids("appointment_id"), vec![open]);
    app.get(key, "/api/v1/appointments?appointment_id=x").await.invalid("appointment_id");

    // filter[updated_date] is a UTC day: put the rows either side of a midnight.
    let set = |id: i64, micros: i64| {
        let q = Query::new("UPDATE appointments SET updated_at = $1 WHERE id = $2").bind(micros).bind(id);
        let db = app.db.clone();
        async move { db.execute(&q).await.unwrap() }
    };
    set(done, 1_720_569_599_999_999).await; // 2024-07-09T23:59:59.999999Z
    set(open, 1_720_569_600_000_000).await; // 2024-07-10T00:00:00Z
    assert_eq!(ids("filter[updated_date]=2024-07-09").await, vec![done]);
    assert_eq!(ids("filter[updated_date]=2024-07-10").await, vec![open]);
    let r = app.get(key, &format!("/api/v1/appointments/{done}")).await;
    assert_eq!(r.body["updated_at"], "2024-07-09T23:59:59.999999Z");
    for bad in ["2024-7-9", "yesterday", "2024-02-30"] {
        app.get(key, &format!("/api/v1/appointments?filter[updated_date]={bad}")).await.invalid("filter[updated_date]");
    }
}

async fn sorts_break_ties_by_id_and_pages_walk_everything(backend: Backend) {
    let app = &TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "A", "UTC").await;
    let mk = |first: &str, last: &str, reason: Option<&str>, year: &str, date: &str| {
        body_with(shop, date, json!({"first_name": first, "last_name": last, "reason": reason, "year": year}))
    };
    let a = create_id(app, key, mk("bob", "Zed", Some("b"), "2020", "2026-05-03T10:00:00Z")).await;
    let b = create_id(app, key, mk("Amy", "young", None, "2018", "2026-05-01T10:00:00Z")).await;
    let c = create_id(app, key, mk("Bob", "Adams", Some("A"), "2020", "2026-05-02T10:00:00Z")).await;
    let d = create_id(app, key, mk("carl", "adams", Some("c"), "2019", "2026-05-02T10:00:00Z")).await;
    let ids = |q: &'static str| async move { app.get(key, &format!("/api/v1/appointments?{q}")).await.ids("appointment_id") };

    assert_eq!(ids("").await, vec![a, b, c, d]);
    assert_eq!(ids("sort=first_name").await, vec![b, a, c, d]);
    assert_eq!(ids("sort=-first_name").await, vec![d, a, c, b]);
    assert_eq!(ids("sort=last_name,-first_name").await, vec![d, c, b, a]);
    assert_eq!(ids("sort=-last_name").await, vec![a, b, c, d]);
    // A missing reason sorts first ascending, on both backends.
    assert_eq!(ids("sort=reason").await, vec![b, c, a, d]);
    assert_eq!(ids("sort=-reason").await, vec![d, a, c, b]);
    assert_eq!(ids("sort=year").await, vec![b, d, a, c]);
    assert_eq!(ids("sort=date").await, vec![b, c, d, a]);
    assert_eq!(ids("sort=-date").await, vec![a, c, d, b]);
    assert_eq!(ids("sort=-timestamp").await, vec![d, c, b, a]);
    assert_eq!(ids("sort=timestamp").await, vec![a, b, c, d]);
    let r = app.get(key, "/api/v1/appointments?sort=make").await;
    let detail = r.problem(400)["detail"].as_str().unwrap().to_owned();
    assert!(detail.contains("first_name") && detail.contains("date"), "{detail}");

    // Pages: sorted by date, two per page, every id once.
    let r = app.get(key, "/api/v1/appointments?sort=date&pageSize=2&page=2").await;
    assert_eq!(r.ids("appointment_id"), vec![d, a]);
    assert_eq!((r.body["meta"]["total"].as_i64(), r.body["meta"]["last_page"].as_i64(), r.body["meta"]["from"].as_i64()), (Some(4), Some(2), Some(3)));
    assert_eq!(r.body["links"]["prev"], format!("{}/api/v1/appointments?sort=date&pageSize=2&page=1", app.base));
    assert!(r.body["links"]["next"].is_null());
    let r = app.get(key, "/api/v1/appointments?pageSize=3&page=5").await;
    assert_eq!((r.ids("appointment_id").len(), r.body["meta"]["total"].as_i64()), (0, Some(4)));
    app.get(key, "/api/v1/appointments?pageSize=101").await.invalid("pageSize");
    // Blank values count as absent, like empty ones (Laravel trims, then nulls empty strings).
    let r = app.get(key, "/api/v1/appointments?page=%20&pageSize=%20&sort=%20&with_details=%20&filter[shop_id]=%20").await;
    assert_eq!((r.ok()["meta"]["current_page"].as_i64(), r.body["meta"]["per_page"].as_i64()), (Some(1), Some(10)));

    // Narrowed by a range or a date, a page picks its ids from the index and reads those rows
    // (a deferred join): the same order, the same ties, the same windows.
    let range = "filter_by=appointment_start&start_date=2026-05-01&end_date=2026-05-03";
    let paged = |q: String| async move { app.get(key, &format!("/api/v1/appointments?{q}")).await };
    assert_eq!(paged(format!("{range}&sort=-date")).await.ids("appointment_id"), vec![a, c, d, b]);
    assert_eq!(paged(format!("{range}&sort=date")).await.ids("appointment_id"), vec![b, c, d, a]);
    let r = paged(format!("{range}&sort=-date&pageSize=2&page=2")).await;
    assert_eq!((r.ids("appointment_id"), r.body["meta"]["total"].as_i64()), (vec![d, b], Some(4)));
    let r = paged("filter[date]=2026-05-02&sort=-date&pageSize=1&page=2".into()).await;
    assert_eq!((r.ids("appointment_id"), r.body["meta"]["total"].as_i64()), (vec![d], Some(2)));
    assert_eq!(paged("filter[date]=2026-05-02&sort=-first_name".into()).await.ids("appointment_id"), vec![d, c]);
}

/// The unfiltered list reads its total from per-shop counters (migration 0004): they must follow
/// creates, moves between shops and the key's shop list, and agree with a filtered COUNT.
async fn unfiltered_totals_follow_creates_moves_and_key_shops(backend: Backend) {
    async fn total(app: &TestApp, key: &str, q: &str) -> Option<i64> {
        app.get(key, &format!("/api/v1/appointments?pageSize=1{q}")).await.ok()["meta"]["total"].as_i64()
    }
    let app = &TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let a = app.create_shop(key, "A", "UTC").await;
    let b = app.create_shop(key, "B", "America/Chicago").await;
    let mut in_a = Vec::new();
    for day in 1..=3 {
        in_a.push(create_id(app, key, body_with(a, &format!("2026-05-0{day}T10:00:00Z"), json!({}))).await);
    }
    for day in 1..=2 {
        create_id(app, key, body_with(b, &format!("2026-05-0{day}T10:00:00Z"), json!({}))).await;
    }
    assert_eq!(total(app, key, "").await, Some(5));
    assert_eq!(total(app, key, &format!("&filter[shop_id]={a}")).await, Some(3));
    // Moving an appointment to another shop moves its count; other updates leave counts alone.
    app.put(key, &format!("/api/v1/appointments/{}", in_a[0]), body(b, "2026-05-01T10:00:00Z")).await.ok();
    app.put(key, &format!("/api/v1/appointments/{}", in_a[1]), body_with(a, "2026-05-02T10:00:00Z", json!({"reason": "Brakes"}))).await.ok();
    app.put(key, &format!("/api/v1/shops/{b}"), json!({"name": "B", "timezone": "Asia/Tokyo"})).await.ok();
    assert_eq!(total(app, key, "").await, Some(5));
    assert_eq!(total(app, key, &format!("&filter[shop_id]={a}")).await, Some(2));
    assert_eq!(total(app, key, &format!("&filter[shop_id]={b}")).await, Some(3));
    // A filtered list still counts its matches; a key limited to shop B sees B's total.
    assert_eq!(total(app, key, "&filter[status]=incomplete").await, Some(5));
    let scoped = app.create_key(key, "read", Some(vec![b])).await;
    assert_eq!(total(app, &scoped, "").await, Some(3));
    // Another company's appointments are not in this company's total.
    let (_, other) = app.new_company("Other").await;
    let c = app.create_shop(&other, "C", "UTC").await;
    create_id(app, &other, body_with(c, "2026-05-01T10:00:00Z", json!({}))).await;
    assert_eq!(total(app, &other, "").await, Some(1));
    assert_eq!(total(app, key, "").await, Some(5));
}

/// A shop's week is read through its ids on a database without planner statistics (every new
/// one): the rows are fetched by id, never found by walking the company's start index (which
/// grew with every appointment of the company, and took the range page from 0.9 to 4 ms within
/// minutes of a load hold).
#[tokio::test]
async fn a_range_page_reads_its_rows_by_id_without_statistics() {
    use autoshop::{
        appointments::{filters::{FILTERS, ListFilters}, store},
        db::ShopFilter,
        extract::QueryParams,
        listing::{ListQuery, ListSpec},
    };
    let app = TestApp::spawn(Backend::Sqlite).await;
    let shop = app.create_shop(&app.admin_key, "A", "UTC").await;
    let params = QueryParams::parse(&format!(
        "filter[shop_id]={shop}&start_date=2026-01-01&end_date=2026-01-07&filter_by=appointment_start&sort=-date"
    ));
    let list = ListQuery::parse(&params, &ListSpec { sorts: store::SORTS, filters: &FILTERS }).unwrap();
    let (mut filters, range) = ListFilters::parse(&params, &list).unwrap();
    let shops = ShopFilter::Only(vec![shop]);
    filters.resolve_range(&app.db, app.company_id, &shops, None, range.unwrap()).await.unwrap();
    let (rows, _) = store::list_statements(app.company_id, &shops, &filters, &list.request);
    let plan: Vec<(i64, i64, i64, String)> = app.db.fetch_all(&rows.prefixed("EXPLAIN QUERY PLAN ")).await.unwrap();
    let steps: Vec<&str> = plan.iter().map(|(_, _, _, step)| step.as_str()).collect();
    assert!(steps.contains(&"SEARCH a USING INTEGER PRIMARY KEY (rowid=?)"), "{steps:?}");
    assert!(!steps.iter().any(|s| s.starts_with("SCAN a") || s.starts_with("SEARCH a USING INDEX appointments_company_start")), "{steps:?}");
}
