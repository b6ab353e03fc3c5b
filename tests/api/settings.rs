use chrono::{DateTime, Datelike, Utc};
use serde_json::{Value, json};

use crate::support::{Backend, HeldWrite, TestApp};

crate::backend_tests!(
    shop_hours_replace_a_week_and_report_next_occurrences,
    shop_hours_reject_bad_weeks_and_keep_the_old_one,
    shop_hours_written_together_keep_one_week,
    shop_hours_are_answered_in_the_zone_the_shop_has_when_they_are_written,
    sources_start_with_defaults_and_filter,
    sources_admin_writes,
    a_source_put_writes_over_the_source_as_it_is_when_it_lands,
    shop_info_embeds_lists_on_request,
);

fn instant(v: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(v.as_str().unwrap()).unwrap().with_timezone(&Utc)
}

async fn shop_hours_replace_a_week_and_report_next_occurrences(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let chicago = app.create_shop(key, "Chicago", "America/Chicago").await;
    let tokyo = app.create_shop(key, "Tokyo", "Asia/Tokyo").await;
    // A new shop has no hours: every day closed.
    let r = app.get(key, &format!("/api/v1/settings/shop_hours?filter[shop_id]={chicago}")).await;
    assert_eq!(r.ok()["data"], json!([]));

    let week = json!({"shop_id": chicago, "hours": [
        {"day": 3, "open": "13:00", "close": "17:00"},
        {"day": 3, "open": "08:00", "close": "12:00"},
        {"day": 1, "open": "08:00", "close": "17:00"}
    ]});
    let r = app.put(key, "/api/v1/settings/shop_hours", week).await;
    assert_eq!(r.ok()["data"].as_array().unwrap().len(), 3);
    app.put(key, "/api/v1/settings/shop_hours", json!({"shop_id": tokyo, "hours": [{"day": 1, "open": "09:00", "close": "18:00"}]})).await.ok();

    let r = app.get(key, &format!("/api/v1/settings/shop_hours?filter[shop_id]={chicago}")).await;
    let data = r.ok()["data"].as_array().unwrap().clone();
    // Ordered by day then opening time; the lunch break splits Wednesday.
    let summary: Vec<(i64, String, String)> = data
        .iter()
        .map(|h| (h["day"].as_i64().unwrap(), h["open"].as_str().unwrap().into(), h["close"].as_str().unwrap().into()))
        .collect();
    assert_eq!(summary, vec![(1, "08:00".into(), "17:00".into()), (3, "08:00".into(), "12:00".into()), (3, "13:00".into(), "17:00".into())]);
    let now = Utc::now();
    for h in &data {
        assert!(h["id"].is_null());
        assert_eq!(h["shop_id"], json!(chicago.to_string()), "shop_id is a string in hours records");
        assert_eq!(h["timezone"], "America/Chicago");
        let (start, end) = (instant(&h["start_time"]), instant(&h["end_time"]));
        assert!(h["start_time"].as_str().unwrap().ends_with("0Z") && h["start_time"].as_str().unwrap().len() == 27);
        // The next occurrence that has not ended, within a week, on the right local weekday.
        assert!(end > now && start < now + chrono::Duration::days(7), "{h}");
        let local = start.with_timezone(&chrono_tz::America::Chicago);
        assert_eq!(local.weekday().num_days_from_sunday() as i64, h["day"].as_i64().unwrap());
        assert_eq!(local.format("%H:%M").to_string(), h["open"].as_str().unwrap());
    }

    // Every shop when the filter is omitted; the Tokyo interval is 9 hours long in UTC.
    let r = app.get(key, "/api/v1/settings/shop_hours").await;
    let all = r.ok()["data"].as_array().unwrap();
    assert_eq!(all.len(), 4);
    let t = all.iter().find(|h| h["shop_id"] == json!(tokyo.to_string())).unwrap();
    assert_eq!(instant(&t["end_time"]) - instant(&t["start_time"]), chrono::Duration::hours(9));
    assert_eq!(instant(&t["start_time"]).with_timezone(&chrono_tz::Asia::Tokyo).format("%H:%M").to_string(), "09:00");

    // An empty week closes the shop.
    app.put(key, "/api/v1/settings/shop_hours", json!({"shop_id": tokyo, "hours": []})).await.ok();
    assert_eq!(app.get(key, &format!("/api/v1/settings/shop_hours?filter[shop_id]={tokyo}")).await.body["data"], json!([]));

    app.get(key, "/api/v1/settings/shop_hours?filter[shop_id]=999999").await.problem(404);
    app.get(key, "/api/v1/settings/shop_hours?filter[day]=1").await.problem(400);
}

/// Weeks of one shop written at the same time, on two servers (replicas on PostgreSQL): each
/// write answers its own week, and the shop ends with exactly one of them, never a mix (each
/// replaces the week by deleting the old intervals and inserting its own: without a lock a
/// delete could miss the intervals another write was inserting, and both weeks stayed).
async fn shop_hours_written_together_keep_one_week(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.admin_key.clone();
    let shop = app.create_shop(&key, "Chicago", "America/Chicago").await;
    let bases = [app.base.clone(), app.spawn_replica().await];
    let week = |day: i64| vec![(day, "08:00".to_string(), "12:00".to_string()), (day, "13:00".to_string(), "17:00".to_string())];
    let summary = |data: &Value| -> Vec<(i64, String, String)> {
        data.as_array()
            .unwrap()
            .iter()
            .map(|h| (h["day"].as_i64().unwrap(), h["open"].as_str().unwrap().into(), h["close"].as_str().unwrap().into()))
            .collect()
    };
    for round in 0..12 {
        let mut writers = Vec::new();
        for day in 0..4i64 {
            let (client, base, key) = (app.client.clone(), bases[(day as usize + round) % 2].clone(), key.clone());
            let hours: Vec<Value> = week(day).into_iter().map(|(d, open, close)| json!({"day": d, "open": open, "close": close})).collect();
            writers.push(tokio::spawn(async move {
                let r = client.put(format!("{base}/api/v1/settings/shop_hours")).bearer_auth(&key).json(&json!({"shop_id": shop, "hours": hours})).send().await.unwrap();
                (day, r.status().as_u16(), r.json::<Value>().await.unwrap_or_default())
            }));
        }
        for w in writers {
            let (day, status, body) = w.await.unwrap();
            assert_eq!(status, 200, "round {round}, week {day}: {body}");
            assert_eq!(summary(&body["data"]), week(day), "round {round}: a write answers its own week");
        }
        let stored = summary(&app.get(&key, &format!("/api/v1/settings/shop_hours?filter[shop_id]={shop}")).await.ok()["data"]);
        assert!((0..4).any(|day| stored == week(day)), "round {round}: the shop holds {stored:?}, not one of the weeks written");
    }
}

async fn shop_hours_reject_bad_weeks_and_keep_the_old_one(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "A", "UTC").await;
    app.put(key, "/api/v1/settings/shop_hours", json!({"shop_id": shop, "hours": [{"day": 2, "open": "08:00", "close": "17:00"}]})).await.ok();
    let bad = json!({"shop_id": shop, "hours": [
        {"day": 1, "open": "08:00", "close": "12:00"},
        {"day": 1, "open": "11:00", "close": "13:00"},
        {"day": 8, "open": "08:00", "close": "09:00"},
        {"day": 2, "open": "8am", "close": "09:00"},
        {"day": 4, "open": "10:00", "close": "09:00"},
        {"open": "10:00"}
    ]});
    let r = app.put(key, "/api/v1/settings/shop_hours", bad).await;
    for field in ["hours.1", "hours.2.day", "hours.3.open", "hours.4.close", "hours.5.day", "hours.5.close"] {
        r.invalid(field);
    }
    app.put(key, "/api/v1/settings/shop_hours", json!({"hours": []})).await.invalid("shop_id");
    // Type errors are keyed the same dotted way as the other messages.
    app.put(key, "/api/v1/settings/shop_hours", json!({"shop_id": shop, "hours": [{"day": "x"}]})).await.invalid("hours.0.day");
    app.put(key, "/api/v1/settings/shop_hours", json!({"shop_id": shop})).await.invalid("hours");
    app.put(key, "/api/v1/settings/shop_hours", json!({"shop_id": 999999, "hours": []})).await.invalid("shop_id");
    // At most 100 intervals (a hundred one-minute ones fit; a hundred and one do not).
    let minutes = |n: usize| -> Vec<serde_json::Value> {
        (0..n).map(|i| json!({"day": i % 7, "open": format!("{:02}:{:02}", i / 7 / 6, i / 7 % 6 * 10), "close": format!("{:02}:{:02}", i / 7 / 6, i / 7 % 6 * 10 + 1)})).collect()
    };
    app.put(key, "/api/v1/settings/shop_hours", json!({"shop_id": shop, "hours": minutes(101)})).await.invalid("hours");
    let full = app.put(key, "/api/v1/settings/shop_hours", json!({"shop_id": 999999, "hours": minutes(100)})).await;
    full.invalid("shop_id");
    assert!(full.body["errors"].get("hours").is_none(), "{}", full.body);
    // The old week is untouched.
    let r = app.get(key, &format!("/api/v1/settings/shop_hours?filter[shop_id]={shop}")).await;
    let data = r.ok()["data"].as_array().unwrap();
    assert_eq!(data.len(), 1);
    assert_eq!((data[0]["day"].as_i64(), data[0]["open"].as_str()), (Some(2), Some("08:00")));
}

async fn sources_start_with_defaults_and_filter(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "A", "UTC").await;
    let r = app.get(key, &format!("/api/v1/settings/sources?filter[shop_id]={shop}&pageSize=20")).await;
    let names: Vec<&str> = r.ok()["data"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["Website", "Partner Link", "Mobile", "Appointment", "Call Center", "Customer Portal", "Mobile Van", "API"]);
    assert_eq!(r.body["data"][0]["shop_id"], shop);
    assert_eq!(r.body["data"][0]["active"], true);
    // Default page size 10 applies (8 fit in one page).
    let r = app.get(key, &format!("/api/v1/settings/sources?filter[shop_id]={shop}&pageSize=3&sort=name")).await;
    let names: Vec<&str> = r.body["data"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["API", "Appointment", "Call Center"]);
    assert_eq!(r.body["meta"]["last_page"], 3);
    let r = app.get(key, &format!("/api/v1/settings/sources?filter[shop_id]={shop}&sort=-name&pageSize=1")).await;
    assert_eq!(r.body["data"][0]["name"], "Website");

    // Deactivate one: gone from the default list, present with filter[active]=false.
    let website = app.get(key, &format!("/api/v1/settings/sources?filter[shop_id]={shop}&pageSize=1")).await.ids("id")[0];
    app.put(key, &format!("/api/v1/settings/sources/{website}"), json!({"shop_id": shop, "name": "Website", "active": false})).await.ok();
    let r = app.get(key, &format!("/api/v1/settings/sources?filter[shop_id]={shop}")).await;
    assert_eq!(r.body["meta"]["total"], 7);
    let r = app.get(key, &format!("/api/v1/settings/sources?filter[shop_id]={shop}&filter[active]=false")).await;
    assert_eq!(r.ids("id"), vec![website]);
    // An empty value counts as absent (docs/api.md): the default, active sources.
    let r = app.get(key, &format!("/api/v1/settings/sources?filter[shop_id]={shop}&filter[active]=")).await;
    assert_eq!(r.ok()["meta"]["total"], 7);

    app.get(key, "/api/v1/settings/sources").await.invalid("filter[shop_id]");
    app.get(key, "/api/v1/settings/sources?filter[shop_id]=abc").await.invalid("filter[shop_id]");
    app.get(key, &format!("/api/v1/settings/sources?filter[shop_id]={shop}&filter[active]=maybe")).await.invalid("filter[active]");
    app.get(key, "/api/v1/settings/sources?filter[shop_id]=999999").await.problem(404);
    app.get(key, &format!("/api/v1/settings/sources?filter[shop_id]={shop}&sort=id")).await.problem(400);
}

async fn sources_admin_writes(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "A", "UTC").await;
    let r = app.post(key, "/api/v1/settings/sources", json!({"shop_id": shop, "name": "Walk-in"})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.body["id"].as_i64().unwrap();
    assert_eq!(r.body, json!({"id": id, "shop_id": shop, "name": "Walk-in", "active": true}));
    assert_eq!(r.header("location"), Some(format!("/api/v1/settings/sources/{id}").as_str()));
    app.post(key, "/api/v1/settings/sources", json!({"shop_id": shop, "name": "walk-IN"})).await.invalid("name");
    app.post(key, "/api/v1/settings/sources", json!({"shop_id": shop})).await.invalid("name");
    // PUT validates like create: `shop_id` and `name` are required; an omitted `active` keeps
    // its value.
    app.put(key, &format!("/api/v1/settings/sources/{id}"), json!({"name": "Walk in"})).await.invalid("shop_id");
    app.put(key, &format!("/api/v1/settings/sources/{id}"), json!({"shop_id": shop, "active": false})).await.invalid("name");
    app.put(key, &format!("/api/v1/settings/sources/{id}"), json!({"shop_id": shop, "name": "Walk-in", "active": false})).await.ok();
    let r = app.put(key, &format!("/api/v1/settings/sources/{id}"), json!({"shop_id": shop, "name": "Walk in"})).await;
    assert_eq!((r.ok()["name"].as_str(), r.body["active"].as_bool()), (Some("Walk in"), Some(false)));
    assert_eq!(app.get(key, &format!("/api/v1/settings/sources/{id}")).await.body["name"], "Walk in");
}

/// A source PUT that read the source before another write changed it, and lands after that
/// write committed, writes over the source as it is then: an omitted `active` keeps the value the
/// other write gave it, and a key limited to shop A no longer reaches a source moved meanwhile to
/// shop B (404; the source stays in B).
async fn a_source_put_writes_over_the_source_as_it_is_when_it_lands(backend: Backend) {
    let app = std::sync::Arc::new(TestApp::spawn(backend).await);
    let key = app.admin_key.clone();
    let (a, b) = (app.create_shop(&key, "A", "UTC").await, app.create_shop(&key, "B", "UTC").await);
    let a_admin = app.create_key(&key, "admin", Some(vec![a])).await;
    let id = app.post(&key, "/api/v1/settings/sources", json!({"shop_id": a, "name": "Walk-in"})).await.body["id"].as_i64().unwrap();
    let path = format!("/api/v1/settings/sources/{id}");

    let held = HeldWrite::begin(&app).await;
    held.lock_row_on_postgres("sources", app.company_id, id).await;
    held.run("UPDATE sources SET active = false WHERE company_id = $1 AND id = $2", &[app.company_id, id]).await;
    let put = crate::support::put_across(&app, held, &key, &path, json!({"shop_id": a, "name": "Walk in"})).await;
    assert_eq!(put.ok()["active"], json!(false), "the omitted active keeps the value it has when the PUT lands");

    let held = HeldWrite::begin(&app).await;
    held.lock_row_on_postgres("sources", app.company_id, id).await;
    held.run("UPDATE sources SET shop_id = $1 WHERE company_id = $2 AND id = $3", &[b, app.company_id, id]).await;
    crate::support::put_across(&app, held, &a_admin, &path, json!({"shop_id": a, "name": "Front desk"})).await.problem(404);
    let stored = app.get(&key, &path).await.ok().clone();
    assert_eq!((stored["shop_id"].clone(), stored["name"].clone()), (json!(b), json!("Walk in")));
}

async fn shop_info_embeds_lists_on_request(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let a = app.create_shop(key, "Alpha", "America/Chicago").await;
    let b = app.create_shop(key, "Beta", "Europe/Berlin").await;
    let bay = app.create_bay(key, a, "Lift", 0).await;
    app.put(key, &format!("/api/v1/bays/{bay}"), json!({"shop_id": a, "title": "Lift", "active": false})).await.ok();
    app.put(key, "/api/v1/settings/shop_hours", json!({"shop_id": a, "hours": [{"day": 5, "open": "07:30", "close": "16:00"}]})).await.ok();

    let r = app.get(key, "/api/v1/settings/shop_info").await;
    let data = r.ok()["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    assert_eq!(data[0]["shop_id"], a);
    assert_eq!(data[0]["company_id"], app.company_id);
    assert_eq!(data[0]["name"], "Alpha");
    assert_eq!(data[0]["timezone"], "America/Chicago");
    assert!(data[0].get("bays").is_none() && data[0].get("hours").is_none());
    for field in ["address", "city", "state", "zip", "phone", "email", "website"] {
        assert!(data[0][field].is_string(), "{field}");
    }

    let r = app.get(key, &format!("/api/v1/settings/shop_info?filter[shop_id]={a}&with[]=bays&with[]=hours&with[]=sources")).await;
    let shop = &r.ok()["data"][0];
    assert_eq!(r.body["data"].as_array().unwrap().len(), 1);
    assert_eq!(shop["bays"][0]["id"], bay, "inactive bays are embedded too");
    assert_eq!(shop["hours"][0]["open"], "07:30");
    assert_eq!(shop["sources"].as_array().unwrap().len(), 8);
    let r = app.get(key, &format!("/api/v1/settings/shop_info?filter[shop_id]={b}&with[]=bays")).await;
    assert_eq!(r.body["data"][0]["bays"], json!([]));

    app.get(key, "/api/v1/settings/shop_info?with[]=bays&with[]=bays").await.invalid("with[]");
    app.get(key, "/api/v1/settings/shop_info?with[]=").await.problem(400);
    let r = app.get(key, "/api/v1/settings/shop_info?with[]=owners").await;
    assert!(r.problem(400)["detail"].as_str().unwrap().contains("hours, bays, sources"));
    app.get(key, "/api/v1/settings/shop_info?filter[shop_id]=999999").await.problem(404);
}

/// The week's answer and its event give each interval's next occurrence in the shop's zone:
/// the zone as the write finds it, not as read before its transaction (here a zone change the
/// test commits while the write waits).
async fn shop_hours_are_answered_in_the_zone_the_shop_has_when_they_are_written(backend: Backend) {
    let app = std::sync::Arc::new(TestApp::spawn(backend).await);
    let shop = app.create_shop(&app.admin_key, "Drifting", "UTC").await;
    let held = HeldWrite::begin(&app).await;
    held.run("UPDATE shops SET timezone = 'Asia/Tokyo' WHERE company_id = $1 AND id = $2", &[app.company_id, shop]).await;
    let write = {
        let app = app.clone();
        let week = json!({"shop_id": shop, "hours": [{"day": 1, "open": "09:00", "close": "18:00"}]});
        tokio::spawn(async move { app.put(&app.admin_key, "/api/v1/settings/shop_hours", week).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert!(!write.is_finished(), "the write waits for the shop");
    held.commit().await;
    let answer = write.await.unwrap();
    let record = &answer.ok()["data"][0];
    assert_eq!(record["timezone"], "Asia/Tokyo", "{record}");
    let start = instant(&record["start_time"]).with_timezone(&chrono_tz::Asia::Tokyo);
    assert_eq!(start.format("%H:%M").to_string(), "09:00", "{record}");
    let read = app.get(&app.admin_key, &format!("/api/v1/settings/shop_hours?filter[shop_id]={shop}")).await;
    assert_eq!(read.ok()["data"][0], *record, "the answer is what a read shows");
}
