//! Substring search on customers: same answers on both backends, whatever index serves it
//! (SQLite's trigram table, PostgreSQL's trigram GIN indexes), and in step with updates.

use serde_json::json;

use crate::{
    customers::create_customer,
    support::{Backend, TestApp},
};

crate::backend_tests!(
    substring_search_follows_updates_and_takes_text_literally,
    unfiltered_customer_totals_follow_creates_moves_and_key_shops,
    short_last_name_terms_count_every_match_and_no_other,
    a_greek_capital_sigma_is_found_inside_a_word,
    a_term_longer_than_any_name_finds_nothing_on_both_backends,
);

async fn substring_search_follows_updates_and_takes_text_literally(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "A", "UTC").await;
    let obrien = create_customer(&app, key, shop, "Siobhán", "O\"Brien", json!({"cell_phone": "(555) 010-2030"})).await;
    let percent = create_customer(&app, key, shop, "Ann", "100%_Motors", json!({"address": "12 Élan Street"})).await;
    let plain = create_customer(&app, key, shop, "Anna", "Johnson", json!({"home_phone": "555 777 1234"})).await;
    let (_, other_admin) = app.new_company("Other").await;
    let other_shop = app.create_shop(&other_admin, "B", "UTC").await;
    create_customer(&app, &other_admin, other_shop, "Anna", "Johnson", json!({})).await;

    let ids = |q: String| {
        let app = &app;
        async move { app.get(key, &format!("/api/v1/customers?{q}")).await.ids("customer_id") }
    };
    let enc = |s: &str| s.replace('%', "%25").replace('"', "%22").replace(' ', "%20");
    assert_eq!(ids(format!("filter[last_name]={}", enc("o\"bri"))).await, vec![obrien]);
    assert_eq!(ids("filter[first_name]=SIOBH%C3%81N".into()).await, vec![obrien], "case-insensitive, beyond ASCII");
    assert_eq!(ids(format!("filter[last_name]={}", enc("0%_m"))).await, vec![percent], "wildcards are literal");
    assert_eq!(ids(format!("filter[last_name]={}", enc("%_"))).await, vec![percent]);
    assert_eq!(ids("filter[last_name]=son".into()).await, vec![plain], "the other company's Johnson is not listed");
    assert_eq!(ids("filter[last_name]=on".into()).await, vec![plain], "two letters work too");
    assert_eq!(ids(format!("filter[address]={}", enc("élan st"))).await, vec![percent]);
    assert_eq!(ids("filter[phone]=010-20".into()).await, vec![obrien]);
    assert_eq!(ids("filter[phone]=7771234".into()).await, vec![plain]);
    assert_eq!(ids("filter[phone]=30555".into()).await, Vec::<i64>::new(), "digits never match across two numbers");
    assert_eq!(ids("filter[first_name]=ann&filter[last_name]=john".into()).await, vec![plain]);

    // Updates move the customer between searches at once.
    app.put(key, &format!("/api/v1/customers/{plain}"), json!({"last_name": "Smithers", "home_phone": "555 888 0000"})).await.ok();
    assert_eq!(ids("filter[last_name]=john".into()).await, Vec::<i64>::new());
    assert_eq!(ids("filter[last_name]=smith".into()).await, vec![plain]);
    assert_eq!(ids("filter[phone]=8880000".into()).await, vec![plain]);
    assert_eq!(ids("filter[phone]=7771234".into()).await, Vec::<i64>::new());
    let r = app.get(key, "/api/v1/customers?filter[last_name]=smith").await;
    assert_eq!(r.body["meta"]["total"], 1);
}

/// The unfiltered customer list reads its total from per-shop counters (migration 0006): they
/// follow creates, moves between shops, the key's shop list and the company.
async fn unfiltered_customer_totals_follow_creates_moves_and_key_shops(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let a = app.create_shop(key, "A", "UTC").await;
    let b = app.create_shop(key, "B", "UTC").await;
    let mut in_a = Vec::new();
    for i in 0..3 {
        in_a.push(create_customer(&app, key, a, &format!("A{i}"), "Doe", json!({})).await);
    }
    create_customer(&app, key, b, "B0", "Doe", json!({})).await;
    let total = |key: String, q: &'static str| {
        let app = &app;
        async move { app.get(&key, &format!("/api/v1/customers?pageSize=1{q}")).await.ok()["meta"]["total"].as_i64() }
    };
    assert_eq!(total(key.clone(), "").await, Some(4));
    app.put(key, &format!("/api/v1/customers/{}", in_a[0]), json!({"shop_id": b})).await.ok();
    app.put(key, &format!("/api/v1/customers/{}", in_a[1]), json!({"first_name": "Renamed"})).await.ok();
    assert_eq!(total(key.clone(), "").await, Some(4));
    let scoped_b = app.create_key(key, "read", Some(vec![b])).await;
    assert_eq!(total(scoped_b, "").await, Some(2));
    assert_eq!(total(key.clone(), "&filter[first_name]=renamed").await, Some(1));
    let (_, other) = app.new_company("Other").await;
    let c = app.create_shop(&other, "C", "UTC").await;
    create_customer(&app, &other, c, "C0", "Roe", json!({})).await;
    assert_eq!(total(other, "").await, Some(1));
    assert_eq!(total(key.clone(), "").await, Some(4));
}

/// A term of one or two characters has no trigram: PostgreSQL counts its total through an index
/// of each name's characters and character pairs (migration 0018) while the page walks the list.
/// Pages of one row make every total a count; each must equal the matches the test counts itself.
async fn short_last_name_terms_count_every_match_and_no_other(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "A", "UTC").await;
    let mut names = vec!["Martinez", "Lopez", "Pérez", "EZ", "Johnson", "Nguyen", "O'Neil", "100%_Motors", "Gomez", "Zeta", "E", "Ña"];
    let mut ids = Vec::new();
    for (i, last) in names.iter().enumerate() {
        ids.push(create_customer(&app, key, shop, &format!("F{i}"), last, json!({})).await);
    }
    let (_, other_admin) = app.new_company("Other").await;
    let other_shop = app.create_shop(&other_admin, "B", "UTC").await;
    for last in ["Martinez", "Perez", "Ezekiel"] {
        create_customer(&app, &other_admin, other_shop, "Other", last, json!({})).await;
    }

    let terms = ["ez", "EZ", "e", "é", "z", "%", "_", "on", "'n", "qq", "ze", "ñ"];
    let check = |names: Vec<&'static str>| {
        let app = &app;
        let ids = ids.clone();
        async move {
            for term in terms {
                let expected: Vec<i64> = names
                    .iter()
                    .zip(&ids)
                    .filter(|(name, _)| name.to_lowercase().contains(&term.to_lowercase()))
                    .map(|(_, id)| *id)
                    .collect();
                let q = term.replace('%', "%25").replace('\'', "%27");
                let r = app.get(key, &format!("/api/v1/customers?pageSize=1&filter[last_name]={q}")).await;
                assert_eq!(r.ok()["meta"]["total"].as_i64(), Some(expected.len() as i64), "total for {term:?}");
                let all = app.get(key, &format!("/api/v1/customers?pageSize=100&filter[last_name]={q}")).await.ids("customer_id");
                assert_eq!(all, expected, "rows for {term:?}");
            }
        }
    };
    check(names.clone()).await;

    // A renamed customer leaves and joins the short terms' totals at once.
    app.put(key, &format!("/api/v1/customers/{}", ids[0]), json!({"last_name": "Smith"})).await.ok();
    app.put(key, &format!("/api/v1/customers/{}", ids[4]), json!({"last_name": "Sánchez"})).await.ok();
    names[0] = "Smith";
    names[4] = "Sánchez";
    check(names).await;
}

/// Rust lower-cases a capital sigma by its place: `ΚΑΣΤΡΟ` to "καστρο" but the term `ΚΑΣ` to "κας"
/// (final form). Keys and terms fold `ς` to `σ`, so a term is found wherever it is in a word.
async fn a_greek_capital_sigma_is_found_inside_a_word(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "A", "UTC").await;
    let kastro = create_customer(&app, key, shop, "Νίκος", "ΚΑΣΤΡΟ", json!({"address": "ΟΔΟΣ ΕΡΜΟΥ 5"})).await;
    let papas = create_customer(&app, key, shop, "Ελένη", "Παπάς", json!({})).await;
    let ids = |q: &'static str| {
        let app = &app;
        async move { app.get(key, &format!("/api/v1/customers?{q}")).await.ids("customer_id") }
    };
    assert_eq!(ids("filter[last_name]=ΚΑΣ").await, vec![kastro]);
    assert_eq!(ids("filter[last_name]=ΑΣ").await, vec![kastro], "a two-letter term too");
    assert_eq!(ids("filter[address]=ΟΔΟΣ").await, vec![kastro]);
    assert_eq!(ids("filter[address]=οδος ερ").await, vec![kastro]);
    assert_eq!(ids("filter[last_name]=ΠΑΠΆΣ").await, vec![papas]);
    assert_eq!(ids("filter[last_name]=παπάσ").await, vec![papas]);
    assert_eq!(ids("filter[first_name]=ΝΊΚΟΣ").await, vec![kastro]);
    let mut body = crate::appointments::body(shop, "2030-01-07T09:00:00Z");
    body["last_name"] = json!("ΚΑΣΤΡΟ");
    let r = app.post(key, "/api/v1/appointments", body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let r = app.get(key, "/api/v1/appointments?filter[last_name]=ΚΑΣ").await;
    assert_eq!(r.ids("appointment_id"), vec![r.body["data"][0]["appointment_id"].as_i64().unwrap()]);
    assert_eq!(r.body["meta"]["total"], 1);
}

/// SQLite refuses a LIKE pattern over 50,000 bytes (an escaped `_` takes two): such a term, which
/// no name can hold, finds nothing there as on PostgreSQL, instead of failing the request. A
/// term as long as a name still finds it.
async fn a_term_longer_than_any_name_finds_nothing_on_both_backends(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "A", "UTC").await;
    let long_name = "_".repeat(255);
    let underscores = create_customer(&app, key, shop, &long_name, &long_name, json!({"address": long_name})).await;
    let mut body = crate::appointments::body(shop, "2030-01-07T09:00:00Z");
    body["first_name"] = json!(long_name);
    body["reason"] = json!(long_name);
    let appointment = app.post(key, "/api/v1/appointments", body).await.ok()["appointment_id"].as_i64().unwrap();
    let huge = "_".repeat(26_000);
    let digits = "5".repeat(60_000);
    for (path, filter, found) in [
        ("customers", "first_name", underscores),
        ("customers", "last_name", underscores),
        ("customers", "address", underscores),
        ("appointments", "first_name", appointment),
        ("appointments", "reason", appointment),
    ] {
        let id = if path == "customers" { "customer_id" } else { "appointment_id" };
        let r = app.get(key, &format!("/api/v1/{path}?filter[{filter}]={huge}")).await;
        assert_eq!(r.status, 200, "{path} {filter}: {}", r.body);
        assert_eq!(r.ids(id), Vec::<i64>::new(), "{path} {filter}");
        assert_eq!(r.body["meta"]["total"], 0);
        let r = app.get(key, &format!("/api/v1/{path}?filter[{filter}]={long_name}")).await;
        assert_eq!(r.ids(id), vec![found], "{path} {filter}: a term as long as the name");
    }
    let r = app.get(key, &format!("/api/v1/customers?filter[phone]={digits}")).await;
    assert_eq!((r.status.as_u16(), r.body["meta"]["total"].clone()), (200, json!(0)), "{}", r.body);
}
