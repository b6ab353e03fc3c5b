//! Availability and slot holds (decisions §14).

use std::{collections::BTreeSet, sync::Arc};

use serde_json::{Value, json};

use crate::{
    appointments::body_with,
    support::{Backend, TestApp, test_config},
};

crate::backend_tests!(
    fifty_clients_race_for_one_bay_and_one_wins_each_conflict,
    fifty_clients_without_a_column_fill_each_bay_once,
    availability_follows_hours_bays_appointments_and_dst,
    availability_and_holds_validate_and_scope,
    holds_book_once_release_and_expire,
    the_database_itself_refuses_overlapping_live_holds,
    expired_holds_are_retired_by_racing_writers,
    a_bay_with_holds_stays_in_its_shop,
    an_expired_hold_does_not_keep_its_bay,
    a_hold_and_a_move_of_its_bay_never_both_succeed,
    a_keyed_hold_sent_to_three_servers_holds_once,
    a_booking_as_its_hold_expires_and_new_holds_never_both_win,
);

const HOUR: i64 = 3_600_000_000;

/// A shop open around the clock every day, with `bays` bays `Lift 1..`.
async fn open_shop(app: &TestApp, tz: &str, bays: usize) -> i64 {
    let shop = app.create_shop(&app.admin_key, "Booking", tz).await;
    let week: Vec<Value> = (0..7).map(|d| json!({"day": d, "open": "00:00", "close": "24:00"})).collect();
    app.put(&app.admin_key, "/api/v1/settings/shop_hours", json!({"shop_id": shop, "hours": week})).await.ok();
    for i in 0..bays {
        app.create_bay(&app.admin_key, shop, &format!("Lift {}", i + 1), i as i64 + 1).await;
    }
    shop
}

fn micros(ts: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(ts).unwrap().timestamp_micros()
}

/// Every slot of an availability answer as `(start, end, columns)`.
fn slots(r: &Value) -> Vec<(i64, i64, Vec<String>)> {
    r["data"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|d| d["slots"].as_array().unwrap().clone())
        .map(|s| {
            let cols = s["columns"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().to_owned()).collect();
            (micros(s["start"].as_str().unwrap()), micros(s["end"].as_str().unwrap()), cols)
        })
        .collect()
}

async fn race(app: &Arc<TestApp>, replica: &str, bodies: Vec<Value>) -> Vec<(u16, Value)> {
    let mut clients = Vec::new();
    for (n, b) in bodies.into_iter().enumerate() {
        let (app, base) = (app.clone(), if n % 2 == 0 { app.base.clone() } else { replica.to_owned() });
        clients.push(tokio::spawn(async move {
            let r = app.client.post(format!("{base}/api/v1/holds")).bearer_auth(&app.admin_key).json(&b).send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }));
    }
    let mut out = Vec::new();
    for c in clients {
        out.push(c.await.unwrap());
    }
    out
}

async fn fifty_clients_race_for_one_bay_and_one_wins_each_conflict(backend: Backend) {
    let app = Arc::new(TestApp::spawn(backend).await);
    let shop = open_shop(&app, "UTC", 2).await;
    // Half the clients go through a second server (another replica with its own pool on
    // PostgreSQL). Starts every 20 minutes over 3 hours, one hour each: heavy overlap.
    let replica = app.spawn_replica().await;
    let won = race_for_lift_1(&app, &replica, shop).await;
    // Availability agrees: Lift 1 is free exactly where no winning hold is.
    let r = app.get(&app.admin_key, &format!("/api/v1/availability?filter[shop_id]={shop}&start_date=2030-01-07&hours=1&step=10")).await;
    for (start, end, cols) in slots(r.ok()) {
        let held = won.iter().any(|w| w.1 < end && w.2 > start);
        assert_eq!(cols.contains(&"Lift 1".to_owned()), !held, "slot at {start}: {cols:?}");
        assert!(cols.contains(&"Lift 2".to_owned()));
    }

    // Each winning hold is booked by two racing clients: exactly one books it.
    let mut bookings = Vec::new();
    for (n, w) in won.iter().enumerate() {
        for m in 0..2 {
            let (app, base) = (app.clone(), if m == 0 { app.base.clone() } else { replica.clone() });
            let b = json!({"hold_id": w.0, "year": "2019", "make": "Mazda", "model": "3", "home_phone": "", "work_phone": "",
                "cell_phone": "", "last_name": format!("Racer{n}")});
            bookings.push(tokio::spawn(async move {
                let r = app.client.post(format!("{base}/api/v1/appointments")).bearer_auth(&app.admin_key).json(&b).send().await.unwrap();
                r.status().as_u16()
            }));
        }
    }
    let mut statuses = Vec::new();
    for b in bookings {
        statuses.push(b.await.unwrap());
    }
    assert_eq!(statuses.iter().filter(|s| **s == 201).count(), won.len(), "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 409).count(), won.len(), "{statuses:?}");
    // The booked times stay taken for new holds.
    let again = race(&app, &replica, won.iter().map(|w| json!({"shop_id": shop, "date": chrono::DateTime::from_timestamp_micros(w.1).unwrap().to_rfc3339(), "hours": 1, "column": "Lift 1"})).collect()).await;
    assert!(again.iter().all(|(s, _)| *s == 409), "{again:?}");
}

/// 50 clients (half through `replica`) hold Lift 1 for an hour at starts every 20 minutes from
/// 09:00 to 11:40 on 2030-01-07: heavy overlap. Checks that the winners never overlap and that
/// every time was refused only because a winner overlaps it; returns the winners
/// `(hold_id, start, end)`.
async fn race_for_lift_1(app: &Arc<TestApp>, replica: &str, shop: i64) -> Vec<(i64, i64, i64)> {
    let bodies = (0..50)
        .map(|n| json!({"shop_id": shop, "date": format!("2030-01-07T{:02}:{:02}:00Z", 9 + (n % 9) / 3, (n % 3) * 20), "hours": 1, "column": "Lift 1"}))
        .collect();
    let answers = race(app, replica, bodies).await;
    let mut won: Vec<(i64, i64, i64)> = Vec::new();
    for (status, b) in &answers {
        match status {
            201 => won.push((b["hold_id"].as_i64().unwrap(), micros(b["start"].as_str().unwrap()), micros(b["end"].as_str().unwrap()))),
            409 => {}
            other => panic!("unexpected {other}: {b}"),
        }
    }
    for (i, a) in won.iter().enumerate() {
        for b in &won[i + 1..] {
            assert!(a.2 <= b.1 || b.2 <= a.1, "two holds overlap on one bay: {a:?} {b:?}");
        }
    }
    let base = micros("2030-01-07T09:00:00Z");
    for n in 0..9 {
        let start = base + n * HOUR / 3;
        assert!(won.iter().any(|w| w.1 < start + HOUR && w.2 > start), "the time at {n} was refused although no hold took it: {won:?}");
    }
    won
}

async fn expired_holds_are_retired_by_racing_writers(backend: Backend) {
    let config = autoshop::config::AppConfig { hold_ttl_secs: 1, ..test_config() };
    let app = Arc::new(TestApp::spawn_with(backend, config.clone()).await);
    let shop = open_shop(&app, "UTC", 1).await;
    let replica = app.spawn_replica_with(config).await;
    // A first race leaves live holds; once they expire, a second race must retire them (several
    // writers at once over the same expired rows) and fill the bay again, without a 500.
    let first = race_for_lift_1(&app, &replica, shop).await;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let second = race_for_lift_1(&app, &replica, shop).await;
    assert!(second.iter().all(|w| !first.iter().any(|f| f.0 == w.0)));
}

async fn fifty_clients_without_a_column_fill_each_bay_once(backend: Backend) {
    let app = Arc::new(TestApp::spawn(backend).await);
    let shop = open_shop(&app, "America/Chicago", 3).await;
    let replica = app.spawn_replica().await;
    let bodies = (0..50).map(|_| json!({"shop_id": shop, "date": "2030-01-08T10:00:00", "hours": 2})).collect();
    let answers = race(&app, &replica, bodies).await;
    let mut columns: Vec<String> = answers.iter().filter(|a| a.0 == 201).map(|a| a.1["column"].as_str().unwrap().to_owned()).collect();
    columns.sort();
    assert_eq!(columns, ["Lift 1", "Lift 2", "Lift 3"], "{answers:?}");
    assert_eq!(answers.iter().filter(|a| a.0 == 409).count(), 47);
    let r = app.get(&app.admin_key, &format!("/api/v1/availability?filter[shop_id]={shop}&start_date=2030-01-08&hours=2")).await;
    let day = &r.ok()["data"][0]["slots"];
    let times: Vec<&str> = day.as_array().unwrap().iter().map(|s| s["time"].as_str().unwrap()).collect();
    for busy in ["08:30", "09:00", "10:00", "11:30"] {
        assert!(!times.contains(&busy), "{busy} should be full: {times:?}");
    }
    assert!(times.contains(&"08:00") && times.contains(&"12:00"));
}

async fn availability_follows_hours_bays_appointments_and_dst(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "Chicago", "America/Chicago").await;
    // Monday 08:00-12:00 and 13:00-17:00; Sunday around the clock; the rest closed.
    let week = json!([{"day": 1, "open": "08:00", "close": "12:00"}, {"day": 1, "open": "13:00", "close": "17:00"},
        {"day": 0, "open": "00:00", "close": "24:00"}]);
    app.put(key, "/api/v1/settings/shop_hours", json!({"shop_id": shop, "hours": week})).await.ok();
    app.create_bay(key, shop, "B", 2).await;
    app.create_bay(key, shop, "A", 1).await;
    let off = app.create_bay(key, shop, "Off", 3).await;
    app.put(key, &format!("/api/v1/bays/{off}"), json!({"shop_id": shop, "title": "Off", "order": 3, "active": false})).await.ok();
    // Monday 2030-01-07: A busy 08:00-10:00; B busy 09:00-10:00 by an appointment that is then
    // deleted; an appointment without a bay.
    crate::appointments::create_id(&app, key, body_with(shop, "2030-01-07T08:00:00", json!({"column": "A", "hours": 2}))).await;
    let gone = crate::appointments::create_id(&app, key, body_with(shop, "2030-01-07T09:00:00", json!({"column": "B"}))).await;
    app.delete(key, &format!("/api/v1/appointments/{gone}")).await;
    crate::appointments::create_id(&app, key, body_with(shop, "2030-01-07T13:00:00", json!({"hours": 4}))).await;
    let q = |extra: &str| format!("/api/v1/availability?filter[shop_id]={shop}&start_date=2030-01-06&end_date=2030-01-08&hours=1.5{extra}");
    let r = app.get(key, &q("&step=60")).await;
    let data = r.ok()["data"].as_array().unwrap();
    assert_eq!(data.iter().map(|d| d["date"].as_str().unwrap()).collect::<Vec<_>>(), ["2030-01-06", "2030-01-07", "2030-01-08"]);
    assert_eq!(data[0]["slots"].as_array().unwrap().len(), 23, "Sunday: 00:00 to 22:00");
    assert_eq!(data[2]["slots"], json!([]), "Tuesday is closed");
    let monday: Vec<(String, Vec<Value>)> = data[1]["slots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["time"].as_str().unwrap().to_owned(), s["columns"].as_array().unwrap().clone()))
        .collect();
    let want = [
        ("08:00", json!(["B"])),
        ("09:00", json!(["B"])),
        ("10:00", json!(["A", "B"])),
        ("13:00", json!(["A", "B"])),
        ("14:00", json!(["A", "B"])),
        ("15:00", json!(["A", "B"])),
    ];
    assert_eq!(monday, want.iter().map(|(t, c)| (t.to_string(), c.as_array().unwrap().clone())).collect::<Vec<_>>());
    assert_eq!(data[1]["slots"][0]["start"], "2030-01-07T14:00:00.000000Z");
    assert_eq!(data[1]["slots"][0]["end"], "2030-01-07T15:30:00.000000Z");
    // One bay asked for (any case).
    let r = app.get(key, &format!("/api/v1/availability?filter[shop_id]={shop}&start_date=2030-01-07&hours=1.5&step=60&column=a")).await;
    let times: Vec<&str> = r.ok()["data"][0]["slots"].as_array().unwrap().iter().map(|s| s["time"].as_str().unwrap()).collect();
    assert_eq!(times, ["10:00", "13:00", "14:00", "15:00"]);
    // Daylight saving (US 2030: March 10 and November 3 are Sundays).
    let day = |date: &str| format!("/api/v1/availability?filter[shop_id]={shop}&start_date={date}&hours=1&step=60");
    let r = app.get(key, &day("2030-03-10")).await;
    let spring: Vec<&str> = r.ok()["data"][0]["slots"].as_array().unwrap().iter().map(|s| s["time"].as_str().unwrap()).collect();
    assert_eq!(spring.len(), 23);
    assert!(!spring.iter().any(|t| t.starts_with("02:")), "{spring:?}");
    let r = app.get(key, &day("2030-11-03")).await;
    let fall = r.ok()["data"][0]["slots"].as_array().unwrap().clone();
    assert_eq!(fall.len(), 25);
    let ones: Vec<&Value> = fall.iter().filter(|s| s["time"] == "01:00").collect();
    assert_eq!(ones.len(), 2);
    assert_eq!(ones[0]["start"], "2030-11-03T06:00:00.000000Z");
    assert_eq!(ones[1]["start"], "2030-11-03T07:00:00.000000Z");
    // Past days have no slots.
    let r = app.get(key, &day("2020-01-05")).await;
    assert_eq!(r.ok()["data"][0]["slots"], json!([]));
}

async fn availability_and_holds_validate_and_scope(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = open_shop(&app, "UTC", 1).await;
    let base = format!("/api/v1/availability?filter[shop_id]={shop}");
    for (query, field) in [
        ("/api/v1/availability?start_date=2030-01-07&hours=1".to_owned(), "filter[shop_id]"),
        (format!("{base}&hours=1"), "start_date"),
        (format!("{base}&start_date=2030-1-7&hours=1"), "start_date"),
        // The years an appointment takes: later slots could never be booked.
        (format!("{base}&start_date=2201-01-01&hours=1"), "start_date"),
        (format!("{base}&start_date=9999-12-31&hours=1"), "start_date"),
        (format!("{base}&start_date=2200-12-31&end_date=2201-01-01&hours=1"), "end_date"),
        (format!("{base}&start_date=2030-01-07"), "hours"),
        (format!("{base}&start_date=2030-01-07&hours=0"), "hours"),
        (format!("{base}&start_date=2030-01-07&hours=24.5"), "hours"),
        (format!("{base}&start_date=2030-01-07&hours=x"), "hours"),
        (format!("{base}&start_date=2030-01-07&end_date=2030-01-06&hours=1"), "end_date"),
        (format!("{base}&start_date=2030-01-01&end_date=2030-02-01&hours=1"), "end_date"),
        (format!("{base}&start_date=2030-01-07&hours=1&step=4"), "step"),
        (format!("{base}&start_date=2030-01-07&hours=1&step=241"), "step"),
        (format!("{base}&start_date=2030-01-07&hours=1&column=Nope"), "column"),
    ] {
        app.get(key, &query).await.invalid(field);
    }
    app.get(key, &format!("{base}&start_date=2030-01-01&end_date=2030-01-31&hours=1&step=240")).await.ok();
    let last = app.get(key, &format!("{base}&start_date=2200-12-31&hours=24&step=240")).await;
    assert_eq!(last.ok()["data"][0]["date"], "2200-12-31");
    app.get(key, &format!("{base}&start_date=2030-01-07&hours=1&filter[bogus]=1")).await.problem(400);
    let (_, other_key) = app.new_company("Other").await;
    app.get(&other_key, &format!("{base}&start_date=2030-01-07&hours=1")).await.problem(404);
    app.post(&other_key, "/api/v1/holds", json!({"shop_id": shop, "date": "2030-01-07T09:00:00Z", "hours": 1})).await.invalid("shop_id");
    let reader = app.create_key(key, "read", None).await;
    app.get(&reader, &format!("{base}&start_date=2030-01-07&hours=1")).await.ok();
    app.post(&reader, "/api/v1/holds", json!({"shop_id": shop, "date": "2030-01-07T09:00:00Z", "hours": 1})).await.problem(403);
    for (body, field) in [
        (json!({"date": "2030-01-07T09:00:00Z", "hours": 1}), "shop_id"),
        (json!({"shop_id": shop, "hours": 1}), "date"),
        (json!({"shop_id": shop, "date": "2020-01-07T09:00:00Z", "hours": 1}), "date"),
        (json!({"shop_id": shop, "date": "2030-01-07T09:00:00Z"}), "hours"),
        (json!({"shop_id": shop, "date": "2030-01-07T09:00:00Z", "hours": 25}), "hours"),
        (json!({"shop_id": shop, "date": "2030-01-07T09:00:00Z", "hours": 1, "column": "Nope"}), "column"),
    ] {
        app.post(key, "/api/v1/holds", body).await.invalid(field);
    }
    // Outside the hours: a closed shop.
    app.put(key, "/api/v1/settings/shop_hours", json!({"shop_id": shop, "hours": [{"day": 1, "open": "08:00", "close": "12:00"}]})).await.ok();
    app.post(key, "/api/v1/holds", json!({"shop_id": shop, "date": "2030-01-07T11:30:00Z", "hours": 1})).await.problem(409);
    app.post(key, "/api/v1/holds", json!({"shop_id": shop, "date": "2030-01-08T09:00:00Z", "hours": 1})).await.problem(409);
    let r = app.post(key, "/api/v1/holds", json!({"shop_id": shop, "date": "2030-01-07T11:00:00Z", "hours": 1})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    app.delete(&other_key, &format!("/api/v1/holds/{}", r.body["hold_id"])).await.problem(404);
    app.delete(key, "/api/v1/holds/abc").await.problem(404);
    // The smallest positive `hours` the document allows holds the bay for a microsecond; it
    // was a 500 when the duration rounded to nothing and the database refused an empty hold.
    let r = app.post(key, "/api/v1/holds", json!({"shop_id": shop, "date": "2030-01-07T08:00:00Z", "hours": 5e-324})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(micros(r.body["end"].as_str().unwrap()) - micros(r.body["start"].as_str().unwrap()), 1);
}

async fn holds_book_once_release_and_expire(backend: Backend) {
    let app = TestApp::spawn_with(backend, autoshop::config::AppConfig { hold_ttl_secs: 2, ..test_config() }).await;
    let key = &app.admin_key;
    let shop = open_shop(&app, "America/Chicago", 2).await;
    let hold = |date: &str, column: Option<&str>| {
        let mut b = json!({"shop_id": shop, "date": date, "hours": 1.5});
        if let Some(c) = column {
            b["column"] = json!(c);
        }
        app.post(key, "/api/v1/holds", b)
    };
    let r = hold("2030-01-07T09:00:00", None).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.header("location"), Some(format!("/api/v1/holds/{}", r.body["hold_id"]).as_str()));
    assert_eq!(
        (r.body["column"].as_str(), r.body["start"].as_str(), r.body["end"].as_str()),
        (Some("Lift 1"), Some("2030-01-07T15:00:00.000000Z"), Some("2030-01-07T16:30:00.000000Z"))
    );
    let first = r.body["hold_id"].as_i64().unwrap();
    assert_eq!(app.get(key, &format!("/api/v1/holds/{first}")).await.ok(), &r.body);
    // The next hold at an overlapping time takes the next bay; then none is left.
    assert_eq!(hold("2030-01-07T10:00:00", None).await.body["column"], "Lift 2");
    hold("2030-01-07T09:30:00", None).await.problem(409);
    hold("2030-01-07T10:00:00", Some("lift 1")).await.problem(409);
    // A booking with the hold: mismatches are 422, an unknown hold 422.
    let booking = |extra: Value| body_with(shop, "2030-01-07T09:00:00", extra);
    let mut bare = booking(json!({"hold_id": first}));
    for f in ["shop_id", "date"] {
        bare.as_object_mut().unwrap().remove(f);
    }
    app.post(key, "/api/v1/appointments", booking(json!({"hold_id": first, "column": "Lift 2"}))).await.invalid("column");
    app.post(key, "/api/v1/appointments", booking(json!({"hold_id": first, "hours": 1}))).await.invalid("hours");
    app.post(key, "/api/v1/appointments", body_with(shop, "2030-01-07T09:15:00", json!({"hold_id": first}))).await.invalid("date");
    app.post(key, "/api/v1/appointments", booking(json!({"hold_id": 999_999}))).await.invalid("hold_id");
    // A mismatch is reported beside the body's other errors, all at once.
    let r = app.post(key, "/api/v1/appointments", booking(json!({"hold_id": first, "column": "Lift 2", "make": "", "year": "19"}))).await;
    for field in ["column", "make", "year"] {
        r.invalid(field);
    }
    let r = app.post(key, "/api/v1/appointments", bare.clone()).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!((r.body["column"].as_str(), r.body["hours"].as_f64()), (Some("Lift 1"), Some(1.5)));
    assert_eq!(r.body["schedule"]["start"], "2030-01-07T15:00:00.000000Z");
    app.post(key, "/api/v1/appointments", bare).await.problem(409);
    let id = r.body["appointment_id"].as_i64().unwrap();
    app.put(key, &format!("/api/v1/appointments/{id}"), json!({"hold_id": first})).await.invalid("hold_id");
    // Released: free at once; releasing again is a 204 too.
    let r = hold("2030-01-08T09:00:00", Some("Lift 2")).await;
    let second = r.body["hold_id"].as_i64().unwrap();
    hold("2030-01-08T09:00:00", Some("Lift 2")).await.problem(409);
    // If-Match: checked against the hold as GET shows it.
    let release = |tag: &'static str| app.client.delete(format!("{}/api/v1/holds/{second}", app.base)).bearer_auth(key).header("if-match", tag).send();
    assert_eq!(release("\"nope\"").await.unwrap().status(), 412);
    assert_eq!(release("nope").await.unwrap().status(), 400);
    hold("2030-01-08T09:00:00", Some("Lift 2")).await.problem(409);
    let tag = app.get(key, &format!("/api/v1/holds/{second}")).await.header("etag").unwrap().to_owned();
    let r = app.client.delete(format!("{}/api/v1/holds/{second}", app.base)).bearer_auth(key).header("if-match", tag).send().await.unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(app.delete(key, &format!("/api/v1/holds/{second}")).await.status, 204);
    let r = hold("2030-01-08T09:00:00", Some("Lift 2")).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let third = r.body["hold_id"].as_i64().unwrap();
    // Expired (2 s here): no longer blocks availability or a new hold, and cannot be booked.
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let r = app.get(key, &format!("/api/v1/availability?filter[shop_id]={shop}&start_date=2030-01-08&hours=1.5&step=60")).await;
    let nine = r.ok()["data"][0]["slots"].as_array().unwrap().iter().find(|s| s["time"] == "09:00").unwrap().clone();
    assert_eq!(nine["columns"], json!(["Lift 1", "Lift 2"]));
    let mut late = body_with(shop, "2030-01-08T09:00:00", json!({"hold_id": third}));
    late.as_object_mut().unwrap().remove("date");
    app.post(key, "/api/v1/appointments", late).await.problem(409);
    assert_eq!(hold("2030-01-08T09:30:00", Some("Lift 2")).await.status, 201);
    // Purged holds' ids are never given again (SQLite gave the largest one once more).
    let newest = app.post(key, "/api/v1/holds", json!({"shop_id": shop, "date": "2030-01-09T09:00:00", "hours": 1})).await.ok()["hold_id"].as_i64().unwrap();
    // As the purge deletes them (it spares no company: this test's own holds go, not the others').
    app.db.execute(&autoshop::db::Query::new("DELETE FROM holds WHERE company_id = $1").bind(app.company_id)).await.unwrap();
    app.get(key, &format!("/api/v1/holds/{newest}")).await.problem(404);
    let next = app.post(key, "/api/v1/holds", json!({"shop_id": shop, "date": "2030-01-09T09:00:00", "hours": 1})).await.ok()["hold_id"].as_i64().unwrap();
    assert!(next > newest, "hold {next} after the purged {newest}");
    app.get(key, &format!("/api/v1/holds/{newest}")).await.problem(404);
}

/// The rule holds below the server's own checks: two transactions inserting overlapping live
/// holds on one bay straight through the store (no busy-bay read first) cannot both commit.
async fn the_database_itself_refuses_overlapping_live_holds(backend: Backend) {
    use autoshop::{
        db::DbError,
        holds::store::{self, HoldRow},
    };
    let app = TestApp::spawn(backend).await;
    let shop = open_shop(&app, "UTC", 2).await;
    let bays = app.get(&app.admin_key, &format!("/api/v1/bays?filter[shop_id]={shop}&sort=order")).await.ids("id");
    let base = micros("2030-01-07T09:00:00Z");
    let hold = |bay_id: i64, start: i64, expires_at: i64| HoldRow {
        id: 0,
        shop_id: shop,
        bay_id,
        start_at: start,
        end_at: start + HOUR,
        hours: 1.0,
        expires_at,
        state: "held".into(),
    };
    let far = base + 24 * HOUR;
    let insert = |h: HoldRow| {
        let (db, company) = (app.db.clone(), app.company_id);
        async move {
            let mut tx = db.begin().await?;
            store::insert(&mut tx, company, &h, base - HOUR).await?;
            tx.commit().await
        }
    };
    insert(hold(bays[0], base, far)).await.unwrap();
    assert!(matches!(insert(hold(bays[0], base + HOUR / 2, far)).await, Err(DbError::Overlap)));
    // Touching ends do not overlap; another bay is another bay.
    insert(hold(bays[0], base + HOUR, far)).await.unwrap();
    insert(hold(bays[1], base, far)).await.unwrap();
}

/// Holds and availability are worked out per shop, the overlap rule per bay: a bay that moved
/// with a hold on it was free in its new shop's availability during the hold, and a hold there
/// picked it, met the old hold in the database and answered 409 with another bay free.
async fn a_bay_with_holds_stays_in_its_shop(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let (old_shop, new_shop) = (open_shop(&app, "UTC", 1).await, open_shop(&app, "UTC", 0).await);
    app.create_bay(key, new_shop, "Lift 9", 5).await;
    let bay = app.get(key, &format!("/api/v1/bays?filter[shop_id]={old_shop}")).await.ids("id")[0];
    let held = app.post(key, "/api/v1/holds", json!({"shop_id": old_shop, "date": "2030-01-07T09:00:00", "hours": 1})).await;
    assert_eq!((held.status.as_u16(), held.body["column"].as_str()), (201, Some("Lift 1")), "{}", held.body);

    let move_it = json!({"shop_id": new_shop, "title": "Lift 1", "order": 0});
    app.put(key, &format!("/api/v1/bays/{bay}"), move_it.clone()).await.invalid("shop_id");
    let stayed = app.get(key, &format!("/api/v1/bays/{bay}")).await;
    assert_eq!(stayed.ok()["shop_id"], old_shop);

    // Released, the hold no longer keeps the bay: it moves, and serves its new shop at that time.
    let released = app.delete(key, &format!("/api/v1/holds/{}", held.body["hold_id"])).await;
    assert_eq!(released.status, 204);
    assert_eq!(app.put(key, &format!("/api/v1/bays/{bay}"), move_it).await.ok()["shop_id"], new_shop);
    let r = app.post(key, "/api/v1/holds", json!({"shop_id": new_shop, "date": "2030-01-07T09:00:00", "hours": 1})).await;
    assert_eq!((r.status.as_u16(), r.body["column"].as_str()), (201, Some("Lift 1")), "{}", r.body);
}

/// A hold that expired unbooked does not keep its bay: the move retires it, it can no longer be
/// booked, and the bay takes a hold at that same time in its new shop.
async fn an_expired_hold_does_not_keep_its_bay(backend: Backend) {
    let app = TestApp::spawn_with(backend, autoshop::config::AppConfig { hold_ttl_secs: 1, ..test_config() }).await;
    let key = &app.admin_key;
    let (old_shop, new_shop) = (open_shop(&app, "UTC", 1).await, open_shop(&app, "UTC", 0).await);
    let bay = app.get(key, &format!("/api/v1/bays?filter[shop_id]={old_shop}")).await.ids("id")[0];
    let held = app.post(key, "/api/v1/holds", json!({"shop_id": old_shop, "date": "2030-01-07T09:00:00", "hours": 1})).await;
    assert_eq!(held.status, 201, "{}", held.body);
    let move_it = json!({"shop_id": new_shop, "title": "Lift 1", "order": 0});
    app.put(key, &format!("/api/v1/bays/{bay}"), move_it.clone()).await.invalid("shop_id");

    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert_eq!(app.put(key, &format!("/api/v1/bays/{bay}"), move_it).await.ok()["shop_id"], new_shop);
    let mut late = body_with(old_shop, "2030-01-07T09:00:00", json!({"hold_id": held.body["hold_id"]}));
    late.as_object_mut().unwrap().remove("date");
    app.post(key, "/api/v1/appointments", late).await.problem(409);
    let r = app.post(key, "/api/v1/holds", json!({"shop_id": new_shop, "date": "2030-01-07T09:00:00", "hours": 1, "column": "Lift 1"})).await;
    assert_eq!(r.status, 201, "{}", r.body);
}

/// A hold on a bay and a move of that bay to another shop, raced through two servers (two
/// pools on PostgreSQL): one of them wins, never both, and no live hold is left on a bay of
/// another shop.
async fn a_hold_and_a_move_of_its_bay_never_both_succeed(backend: Backend) {
    let app = Arc::new(TestApp::spawn(backend).await);
    let key = app.admin_key.clone();
    let (from, to) = (open_shop(&app, "UTC", 0).await, open_shop(&app, "UTC", 0).await);
    let replica = app.spawn_replica().await;
    let (mut both, mut holds_won) = (Vec::new(), 0);
    for round in 0..24 {
        let title = format!("Race {round}");
        let bay = app.create_bay(&key, from, &title, round).await;
        let hold = json!({"shop_id": from, "column": title, "date": "2030-01-07T09:00:00", "hours": 1});
        let moved = json!({"shop_id": to, "title": title, "order": round});
        let (a, b, replica) = (app.clone(), app.clone(), replica.clone());
        // Alternate which server each request goes through.
        let (hold_base, move_base) = if round % 2 == 0 { (a.base.clone(), replica) } else { (replica, a.base.clone()) };
        // The move does more before its transaction: on odd rounds the hold leaves a little later.
        let lag = std::time::Duration::from_millis(if round % 2 == 1 { (round % 7) as u64 } else { 0 });
        let held = tokio::spawn(async move {
            if !lag.is_zero() {
                tokio::time::sleep(lag).await;
            }
            let r = a.client.post(format!("{hold_base}/api/v1/holds")).bearer_auth(&a.admin_key).json(&hold).send().await.unwrap();
            r.status().as_u16()
        });
        let put = tokio::spawn(async move {
            let r = b.client.put(format!("{move_base}/api/v1/bays/{bay}")).bearer_auth(&b.admin_key).json(&moved).send().await.unwrap();
            r.status().as_u16()
        });
        let (held, put) = (held.await.unwrap(), put.await.unwrap());
        assert!(matches!(held, 201 | 409 | 422) && matches!(put, 200 | 422), "round {round}: hold {held}, move {put}");
        if held == 201 && put == 200 {
            both.push(round);
        }
        holds_won += usize::from(held == 201);
        let shop_now = app.get(&key, &format!("/api/v1/bays/{bay}")).await.body["shop_id"].as_i64();
        assert_eq!(shop_now, Some(if put == 200 { to } else { from }), "round {round}");
    }
    assert!(both.is_empty(), "a hold and the move of its bay both succeeded in rounds {both:?}");
    // The new shop never shows a bay as held: its availability lists every moved bay.
    let moved_bays = app.get(&key, &format!("/api/v1/bays?filter[shop_id]={to}&pageSize=100")).await.ok()["meta"]["total"].as_u64().unwrap();
    assert_eq!(moved_bays as usize, 24 - holds_won, "the bays that moved are the rounds the hold lost");
    let r = app.get(&key, &format!("/api/v1/availability?filter[shop_id]={to}&start_date=2030-01-07&hours=1&step=60")).await;
    let nine = micros("2030-01-07T09:00:00Z");
    let free_at_nine = slots(r.ok()).into_iter().find(|(start, _, _)| *start == nine).map_or(Vec::new(), |slot| slot.2);
    assert_eq!(free_at_nine.len() as u64, moved_bays, "every moved bay is free at 09:00 in its new shop: {free_at_nine:?}");
    eprintln!("{backend:?}: the hold won {holds_won} of 24 rounds");
}

/// A booking site retries a hold with its Idempotency-Key three times at once: every answer is
/// the one hold (or "still running"), on a shop of one bay, so a second hold would have needed the
/// bay the first took. On PostgreSQL through three replicas, which do not see each other's
/// running requests: the repeats run, and answer the first's hold. On SQLite through the one
/// server a database file has (docs/scaling.md), whose claims see every running request;
/// two test servers on one file would share its writer but not their claims, which no
/// deployment does.
async fn a_keyed_hold_sent_to_three_servers_holds_once(backend: Backend) {
    let config = autoshop::config::AppConfig { rate_limit: 0.0, ..crate::support::test_config() };
    let app = TestApp::spawn_with(backend, config.clone()).await;
    let servers = match backend {
        Backend::Postgres => [app.base.clone(), app.spawn_replica_with(config.clone()).await, app.spawn_replica_with(config).await],
        Backend::Sqlite => [app.base.clone(), app.base.clone(), app.base.clone()],
    };
    let shop = open_shop(&app, "UTC", 1).await;
    for round in 0..10 {
        let body = json!({"shop_id": shop, "date": format!("2030-02-{:02}T09:00:00Z", round + 1), "hours": 1});
        let sends: Vec<_> = servers
            .iter()
            .map(|base| {
                let request = app.client.post(format!("{base}/api/v1/holds")).bearer_auth(&app.admin_key).header("idempotency-key", format!("hold-{round}")).json(&body);
                tokio::spawn(async move {
                    let r = request.send().await.unwrap();
                    (r.status().as_u16(), r.json::<Value>().await.unwrap())
                })
            })
            .collect();
        let mut holds = BTreeSet::new();
        for send in sends {
            let (status, answer) = send.await.unwrap();
            match status {
                201 => {
                    holds.insert(answer["hold_id"].as_i64().unwrap());
                }
                // A repeat that came while the first ran on the same server.
                409 if answer["detail"].as_str().unwrap_or_default().contains("still running") => {}
                other => panic!("round {round}: {other} {answer}"),
            }
        }
        assert_eq!(holds.len(), 1, "round {round}: one hold for one key: {holds:?}");
        app.post(&app.admin_key, "/api/v1/holds", body.clone()).await.problem(409);
        let replay = app.client.post(format!("{}/api/v1/holds", servers[round % 3])).bearer_auth(&app.admin_key).header("idempotency-key", format!("hold-{round}")).json(&body).send().await.unwrap();
        assert_eq!(replay.status(), 201);
        assert_eq!(replay.json::<Value>().await.unwrap()["hold_id"].as_i64(), holds.first().copied(), "round {round}: the replay is the hold");
    }
}

/// The moment a hold expires, its booking and new holds for the same bay and time race: the
/// booking must win only if it consumed the hold before it expired, and a new hold only if the
/// old one expired unbooked. Three servers (replicas on PostgreSQL); per round, the booking is
/// sent a few milliseconds either side of the hold's expiry while new holds are sent every 5 ms
/// from 20 ms before it to 30 ms after, then 100, 200 and 300 ms after: exactly one of them all
/// wins the bay (the booking before the expiry; otherwise the first new hold after it), and a
/// booking sent after the expiry never does.
async fn a_booking_as_its_hold_expires_and_new_holds_never_both_win(backend: Backend) {
    use std::time::Duration;
    // Two seconds: a new hold won just after the expiry outlives the waves by far.
    let config = autoshop::config::AppConfig { hold_ttl_secs: 2, rate_limit: 0.0, ..test_config() };
    let app = Arc::new(TestApp::spawn_with(backend, config.clone()).await);
    let servers = [app.base.clone(), app.spawn_replica_with(config.clone()).await, app.spawn_replica_with(config).await];
    let shop = open_shop(&app, "UTC", 1).await;
    for (round, offset_ms) in [-15i64, -5, 0, 5, 15].into_iter().enumerate() {
        let date = format!("2030-01-{:02}T09:00:00", 7 + round);
        let wanted = json!({"shop_id": shop, "column": "Lift 1", "date": date, "hours": 1});
        let held = app.post(&app.admin_key, "/api/v1/holds", wanted.clone()).await;
        assert_eq!(held.status, 201, "{}", held.body);
        let expires_at = chrono::DateTime::parse_from_rfc3339(held.body["expires_at"].as_str().unwrap()).unwrap();
        // The time until `at_ms` from the hold's expiry, by the clock the servers read.
        let until = move |at_ms: i64| {
            let at = expires_at.with_timezone(&chrono::Utc) + chrono::Duration::milliseconds(at_ms);
            (at - chrono::Utc::now()).to_std().unwrap_or(Duration::ZERO)
        };
        let mut booking = body_with(shop, &date, json!({"hold_id": held.body["hold_id"]}));
        booking.as_object_mut().unwrap().remove("date");
        let book = {
            let (app, base) = (app.clone(), servers[round % 3].clone());
            let wait = until(offset_ms);
            tokio::spawn(async move {
                tokio::time::sleep(wait).await;
                app.client.post(format!("{base}/api/v1/appointments")).bearer_auth(&app.admin_key).json(&booking).send().await.unwrap().status().as_u16()
            })
        };
        let mut holds = Vec::new();
        let waves = (-20..=30).step_by(5).chain([100, 200, 300]);
        for (wave, at_ms) in waves.enumerate() {
            let (app, base, wanted) = (app.clone(), servers[(round + wave + 1) % 3].clone(), wanted.clone());
            let wait = until(at_ms);
            holds.push(tokio::spawn(async move {
                tokio::time::sleep(wait).await;
                app.client.post(format!("{base}/api/v1/holds")).bearer_auth(&app.admin_key).json(&wanted).send().await.unwrap().status().as_u16()
            }));
        }
        let booked = book.await.unwrap();
        let mut statuses = Vec::new();
        for h in holds {
            statuses.push(h.await.unwrap());
        }
        assert!(matches!(booked, 201 | 409), "round {round}: booking {booked}");
        assert!(statuses.iter().all(|s| matches!(s, 201 | 409)), "round {round}: holds {statuses:?}");
        let winners = usize::from(booked == 201) + statuses.iter().filter(|s| **s == 201).count();
        assert_eq!(winners, 1, "round {round} (booking at {offset_ms} ms): booking {booked}, holds {statuses:?}");
        if offset_ms > 0 {
            assert_eq!(booked, 409, "round {round}: a booking sent after its hold expired books nothing");
        }
    }
}
