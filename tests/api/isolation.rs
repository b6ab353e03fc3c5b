//! Tenant isolation, randomized: several companies and keys with shop lists; many random
//! requests on every route with random ids and shop filters. No response may carry another
//! company's (or an out-of-scope shop's) data, and writes to foreign records answer 404.

use std::collections::{BTreeSet, HashMap};

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::{Backend, TestApp};

crate::backend_tests!(random_requests_never_cross_tenants_or_shop_scopes);

/// A tiny deterministic generator (no dependency; reproducible failures).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[(self.next() as usize) % items.len()]
    }
}

#[derive(Default, Clone)]
struct Owned {
    shops: Vec<i64>,
    bays: Vec<i64>,
    sources: Vec<i64>,
    customers: Vec<i64>,
    ship_tos: Vec<(i64, i64)>,
    receivables: Vec<(i64, i64)>,
    appointments: Vec<i64>,
}

/// Per shop: a bay, a customer with a ship-to and a receivable, and an appointment for them.
async fn populate(app: &TestApp, key: &str, shop: i64, tag: &str, owned: &mut Owned) {
    owned.shops.push(shop);
    owned.bays.push(app.create_bay(key, shop, &format!("Bay {tag}"), 0).await);
    owned.sources.extend(app.get(key, &format!("/api/v1/settings/sources?filter[shop_id]={shop}&pageSize=2")).await.ids("id"));
    app.put(key, "/api/v1/settings/shop_hours", json!({"shop_id": shop, "hours": [{"day": 1, "open": "08:00", "close": "17:00"}]})).await.ok();
    let r = app
        .post(key, "/api/v1/customers", json!({"shop_id": shop, "business_name": "", "first_name": format!("F{tag}"), "last_name": format!("L{tag}"),
            "address": "1 Main", "city": "C", "state": "S", "zip": "1", "email": format!("{tag}@example.com"), "cell_phone": "555 010 2030"}))
        .await;
    let customer = r.ok()["customer_id"].as_i64().unwrap();
    owned.customers.push(customer);
    let r = app
        .post(key, &format!("/api/v1/customers/{customer}/ship_tos"), json!({"number": format!("S{tag}"), "name": "Dock", "address": "2 Side",
            "city": "C", "state": "S", "zip": "1", "email": null, "work_phone": "", "fax": "", "home_phone": "", "cell_phone": ""}))
        .await;
    owned.ship_tos.push((customer, r.ok()["id"].as_i64().unwrap()));
    let r = app
        .post(key, &format!("/api/v1/customers/{customer}/accounts_receivable"), json!({"shop_id": shop, "reference": format!("INV-{tag}"),
            "date": "2026-01-05", "due_date": "2026-02-05", "amount": 120.5}))
        .await;
    let ar = r.ok()["id"].as_i64().unwrap();
    owned.receivables.push((customer, ar));
    app.post(key, &format!("/api/v1/customers/{customer}/accounts_receivable/{ar}/payments"), json!({"amount": 20, "date": "2026-01-10"})).await.ok();
    let r = app
        .post(key, "/api/v1/appointments", json!({"shop_id": shop, "date": "2026-12-01T09:00:00", "year": "2020", "make": "Ford", "model": "F-150",
            "home_phone": "", "work_phone": "", "cell_phone": "", "customer_id": customer, "column": format!("Bay {tag}")}))
        .await;
    owned.appointments.push(r.ok()["appointment_id"].as_i64().unwrap());
}

/// Every value under `field` anywhere in the document (numbers, or strings holding numbers).
fn collect(value: &Value, field: &str, out: &mut BTreeSet<i64>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if k == field {
                    if let Some(id) = v.as_i64().or_else(|| v.as_str().and_then(|s| s.parse().ok())) {
                        out.insert(id);
                    }
                }
                collect(v, field, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect(v, field, out)),
        _ => {}
    }
}

struct Key {
    name: &'static str,
    key: String,
    company: i64,
    /// What this key may see.
    visible: Owned,
}

/// An export's records as JSON objects keyed by column, integers as numbers: what [`collect`]
/// reads.
fn csv_as_json(text: &str) -> Value {
    let mut records = autoshop::csv::parse(text.as_bytes()).expect("an export is valid CSV").into_iter().map(|(_, r)| r);
    let header = records.next().expect("an export has a header row");
    let rows = records.map(|r| {
        let object = header.iter().zip(r).map(|(h, v)| (h.clone(), v.parse::<i64>().map(Value::from).unwrap_or(Value::String(v)))).collect();
        Value::Object(object)
    });
    Value::Array(rows.collect())
}

async fn random_requests_never_cross_tenants_or_shop_scopes(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let a_admin = app.admin_key.clone();
    let (b_company, b_admin) = app.new_company("B").await;

    let mut per_shop: HashMap<i64, Owned> = HashMap::new();
    for (key, name) in [(&a_admin, "a1"), (&a_admin, "a2"), (&b_admin, "b1"), (&b_admin, "b2")] {
        let shop = app.create_shop(key, name, "America/Chicago").await;
        let mut owned = Owned::default();
        populate(&app, key, shop, name, &mut owned).await;
        per_shop.insert(shop, owned);
    }
    let union = |shops: &[i64]| {
        let mut all = Owned::default();
        for s in shops {
            let o = &per_shop[s];
            all.shops.extend(&o.shops);
            all.bays.extend(&o.bays);
            all.sources.extend(&o.sources);
            all.customers.extend(&o.customers);
            all.ship_tos.extend(&o.ship_tos);
            all.receivables.extend(&o.receivables);
            all.appointments.extend(&o.appointments);
        }
        all
    };
    let mut shops: Vec<i64> = per_shop.keys().copied().collect();
    shops.sort();
    let (a1, a2, b1) = (shops[0], shops[1], shops[2]);
    let keys = vec![
        Key { name: "A admin", key: a_admin.clone(), company: app.company_id, visible: union(&[a1, a2]) },
        Key { name: "A read, shop a1", key: app.create_key(&a_admin, "read", Some(vec![a1])).await, company: app.company_id, visible: union(&[a1]) },
        Key { name: "A write, shop a2", key: app.create_key(&a_admin, "write", Some(vec![a2])).await, company: app.company_id, visible: union(&[a2]) },
        Key { name: "B admin", key: b_admin.clone(), company: b_company, visible: union(&[b1, shops[3]]) },
    ];
    let everything = union(&shops);

    let mut rng = Lcg(20261122);
    let mut checked = 0;
    for round in 0..400 {
        let k = &keys[round % keys.len()];
        let shop = if rng.next() % 4 == 0 { 999_999 } else { *rng.pick(&everything.shops) };
        let (cust, ship_to) = *rng.pick(&everything.ship_tos);
        let (ar_cust, ar) = *rng.pick(&everything.receivables);
        let cust = if rng.next() % 3 == 0 { ar_cust } else { cust };
        let filter = if rng.next() % 2 == 0 { format!("filter[shop_id]={shop}") } else { String::new() };
        let path = match rng.next() % 18 {
            0 => format!("/api/v1/appointments?{filter}&with_details=true&pageSize=100"),
            1 => format!("/api/v1/appointments/{}", rng.pick(&everything.appointments)),
            2 => format!("/api/v1/customers?{filter}&with_details=true&pageSize=100"),
            3 => format!("/api/v1/customers/{cust}"),
            4 => format!("/api/v1/customers/{cust}/ship_tos?{filter}"),
            5 => format!("/api/v1/customers/{cust}/ship_tos/{ship_to}"),
            6 => format!("/api/v1/customers/{cust}/accounts_receivable?{filter}"),
            7 => format!("/api/v1/customers/{ar_cust}/accounts_receivable/{ar}"),
            8 => format!("/api/v1/bays?{filter}&filter[active]=all&pageSize=100"),
            9 => format!("/api/v1/bays/{}", rng.pick(&everything.bays)),
            10 => format!("/api/v1/settings/sources?filter[shop_id]={shop}"),
            11 => format!("/api/v1/settings/sources/{}", rng.pick(&everything.sources)),
            12 => format!("/api/v1/settings/shop_hours?{filter}"),
            13 => format!("/api/v1/settings/shop_info?{filter}&with[]=bays&with[]=sources&with[]=hours"),
            14 => format!("/api/v1/shops/{shop}"),
            15 => format!("/api/v1/customers/export?{filter}"),
            16 => format!("/api/v1/appointments/export?{filter}&filter[trashed]=with"),
            _ => format!("/api/v1/api_keys?pageSize=100"),
        };
        let r = app.get(&k.key, &path).await;
        match r.status.as_u16() {
            200 => {
                let body = &if path.contains("/export") { csv_as_json(r.body.as_str().unwrap_or("")) } else { r.body.clone() };
                for (field, allowed) in [
                    ("shop_id", &k.visible.shops),
                    ("customer_id", &k.visible.customers),
                    ("appointment_id", &k.visible.appointments),
                ] {
                    let mut seen = BTreeSet::new();
                    collect(body, field, &mut seen);
                    let leaked: Vec<&i64> = seen.iter().filter(|id| !allowed.contains(id)).collect();
                    assert!(leaked.is_empty(), "{}: GET {path} leaked {field} {leaked:?}: {body}", k.name);
                }
                let mut companies = BTreeSet::new();
                collect(body, "company_id", &mut companies);
                assert!(companies.iter().all(|c| *c == k.company), "{}: GET {path} leaked a company: {body}", k.name);
                checked += 1;
            }
            403 | 404 | 422 => {}
            other => panic!("{}: GET {path} answered {other}: {}", k.name, r.body),
        }
    }
    assert!(checked > 100, "only {checked} successful responses were checked");

    // Writes to records outside the key's reach answer 404 (or 403 for a read key) and change
    // nothing.
    for k in &keys {
        let foreign = |ids: &[i64], visible: &[i64]| ids.iter().copied().filter(|id| !visible.contains(id)).collect::<Vec<_>>();
        let mut attempts = Vec::new();
        for bay in foreign(&everything.bays, &k.visible.bays) {
            attempts.push((format!("/api/v1/bays/{bay}"), json!({"title": "Taken"})));
        }
        for c in foreign(&everything.customers, &k.visible.customers) {
            attempts.push((format!("/api/v1/customers/{c}"), json!({"first_name": "Taken"})));
        }
        for a in foreign(&everything.appointments, &k.visible.appointments) {
            attempts.push((format!("/api/v1/appointments/{a}"), json!({"reason": "Taken"})));
        }
        for (c, s) in everything.ship_tos.iter().filter(|(c, _)| !k.visible.customers.contains(c)) {
            attempts.push((format!("/api/v1/customers/{c}/ship_tos/{s}"), json!({"number": "X", "name": "Taken", "address": "a", "city": "c",
                "state": "s", "zip": "z", "email": null, "work_phone": "", "fax": "", "home_phone": "", "cell_phone": ""})));
        }
        for (c, ar) in everything.receivables.iter().filter(|(c, _)| !k.visible.customers.contains(c)) {
            let r = app.request(Method::POST, Some(&k.key), &format!("/api/v1/customers/{c}/accounts_receivable/{ar}/payments"),
                Some(json!({"amount": 1, "date": "2026-01-11"}))).await;
            assert!(matches!(r.status.as_u16(), 403 | 404), "{}: payment on foreign receivable answered {}", k.name, r.status);
        }
        assert!(!attempts.is_empty());
        for (path, body) in attempts {
            let r = app.put(&k.key, &path, body).await;
            assert!(matches!(r.status.as_u16(), 403 | 404), "{}: PUT {path} answered {}: {}", k.name, r.status, r.body);
        }
    }
    // Nothing was renamed by any refused write.
    for k in [&keys[0], &keys[3]] {
        let r = app.get(&k.key, "/api/v1/customers?pageSize=100").await;
        assert!(!r.body.to_string().contains("Taken"), "{}", r.body);
        let r = app.get(&k.key, "/api/v1/bays?pageSize=100").await;
        assert!(!r.body.to_string().contains("Taken"), "{}", r.body);
    }
}
