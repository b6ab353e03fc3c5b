//! Appointments and shop time zones: local dates in bodies and filters, across daylight-saving
//! changes (America/Chicago in March and November) and east of UTC (Asia/Tokyo,
//! Australia/Sydney), and date ranges per shop zone.

use autoshop::db::Query;
use serde_json::json;

use crate::{
    appointments::{body, create, create_id},
    support::{Backend, HeldWrite, TestApp},
};

crate::backend_tests!(
    spring_forward_local_dates_times_and_ranges,
    fall_back_repeated_hour_and_southern_zone,
    creation_time_ranges_use_utc_days_and_bad_values_are_422,
    relocalizing_a_shop_after_a_zone_change,
    a_rename_racing_a_zone_change_keeps_appointments_in_the_shops_zone,
    writes_racing_a_zone_change_land_in_the_new_zone,
    writes_on_two_servers_racing_zone_changes_keep_the_shops_zone,
);

async fn spring_forward_local_dates_times_and_ranges(backend: Backend) {
    let app = &TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let chicago = app.create_shop(key, "Chicago", "America/Chicago").await;
    let tokyo = app.create_shop(key, "Tokyo", "Asia/Tokyo").await;
    let c1 = create_id(app, key, body(chicago, "2026-03-07T23:30:00")).await; // 05:30Z on the 8th
    let c2 = create_id(app, key, body(chicago, "2026-03-08T01:30:00")).await; // 07:30Z, CST
    let gap = create(app, key, body(chicago, "2026-03-08T02:30:00")).await; // does not exist locally
    let c3 = gap["appointment_id"].as_i64().unwrap();
    let c4 = create_id(app, key, body(chicago, "2026-03-08T23:30:00")).await; // 04:30Z on the 9th, CDT
    let t1 = create_id(app, key, body(tokyo, "2026-03-08T00:30:00")).await; // 15:30Z on the 7th
    let t2 = create_id(app, key, body(tokyo, "2026-03-08T23:30:00Z")).await; // 08:30 on the 9th in Tokyo

    // The skipped 02:30 moves forward by the one-hour jump, to 03:30 CDT.
    assert_eq!(gap["schedule"], json!({"date": "2026-03-08", "time": "03:30:00", "start": "2026-03-08T08:30:00.000000Z",
        "end": "2026-03-08T09:30:00.000000Z", "hours": 1.0, "flag": "incomplete"}));
    let r = app.get(key, &format!("/api/v1/appointments/{c4}")).await;
    assert_eq!((r.body["schedule"]["start"].as_str(), r.body["schedule"]["time"].as_str()), (Some("2026-03-09T04:30:00.000000Z"), Some("23:30:00")));
    let r = app.get(key, &format!("/api/v1/appointments/{t2}")).await;
    assert_eq!((r.body["schedule"]["date"].as_str(), r.body["schedule"]["time"].as_str()), (Some("2026-03-09"), Some("08:30:00")));

    let ids = |q: &'static str| async move { app.get(key, &format!("/api/v1/appointments?{q}")).await.ids("appointment_id") };
    // filter[date] / filter[time]: each shop's own calendar and clock.
    assert_eq!(ids("filter[date]=2026-03-08").await, vec![c2, c3, c4, t1]);
    assert_eq!(ids("filter[date]=2026-03-09").await, vec![t2]);
    assert_eq!(ids("filter[date]=2026-03-08&filter[time]=03:30").await, vec![c3]);
    assert_eq!(ids("filter[time]=23:30").await, vec![c1, c4]);
    assert_eq!(ids("filter[time]=23:30:00&filter[date]=2026-03-08").await, vec![c4]);
    assert_eq!(ids("filter[time]=23:30:01").await, Vec::<i64>::new());
    assert_eq!(ids("filter[time]=08:30").await, vec![t2]);

    // Date-only ranges on the scheduled start or end are shop-local days, per shop.
    assert_eq!(ids("filter_by=appointment_start&start_date=2026-03-08&end_date=2026-03-08").await, vec![c2, c3, c4, t1]);
    let r = app.get(key, &format!("/api/v1/appointments?filter_by=appointment_start&start_date=2026-03-08&end_date=2026-03-08&filter[shop_id]={chicago}")).await;
    assert_eq!(r.ids("appointment_id"), vec![c2, c3, c4]);
    assert_eq!(ids("filter_by=appointment_start&end_date=2026-03-07").await, vec![c1]);
    assert_eq!(ids("filter_by=appointment_end&end_date=2026-03-08").await, vec![c1, c2, c3, t1]);
    assert_eq!(ids("filter_by=appointment_end&start_date=2026-03-09").await, vec![c4, t2]);
    // RFC 3339 bounds are exact instants, inclusive.
    assert_eq!(ids("filter_by=appointment_start&start_date=2026-03-08T08:30:00Z&end_date=2026-03-08T08:30:00Z").await, vec![c3]);
    assert_eq!(ids("filter_by=appointment_start&start_date=2026-03-08T07:30:00Z").await, vec![c2, c3, c4, t2]);
    assert_eq!(ids("filter_by=appointment_end&end_date=2026-03-08T09:30:00.000000Z").await, vec![c1, c2, c3, t1]);
    assert_eq!(ids("filter_by=appointment_start&start_date=2026-03-08T03:00:00-05:00&end_date=2026-03-08").await, vec![c3, c4]);
    // Times are kept to the microsecond: a bound 100 ns after c3's start is past it as a lower
    // bound (not rounded down onto it), and takes it in as an upper bound.
    assert_eq!(ids("filter_by=appointment_start&start_date=2026-03-08T08:30:00.0000001Z").await, vec![c4, t2]);
    assert_eq!(ids("filter_by=appointment_start&start_date=2026-03-08T08:00:00Z&end_date=2026-03-08T08:30:00.0000001Z").await, vec![c3]);
    // A key limited to Tokyo ranges Tokyo's days only.
    let tokyo_key = app.create_key(key, "read", Some(vec![tokyo])).await;
    let r = app.get(&tokyo_key, "/api/v1/appointments?filter_by=appointment_start&start_date=2026-03-08&end_date=2026-03-09").await;
    assert_eq!(r.ids("appointment_id"), vec![t1, t2]);
}

async fn fall_back_repeated_hour_and_southern_zone(backend: Backend) {
    let app = &TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let chicago = app.create_shop(key, "Chicago", "America/Chicago").await;
    let sydney = app.create_shop(key, "Sydney", "Australia/Sydney").await;
    let first = create(app, key, body(chicago, "2026-11-01T01:30:00")).await; // the CDT 01:30
    let second = create(app, key, body(chicago, "2026-11-01T07:30:00Z")).await; // the CST 01:30
    let late = create_id(app, key, body(chicago, "2026-11-01T23:30:00")).await;
    let before = create_id(app, key, body(chicago, "2026-10-31T23:59:59")).await;
    assert_eq!((first["schedule"]["start"].as_str(), first["schedule"]["time"].as_str()), (Some("2026-11-01T06:30:00.000000Z"), Some("01:30:00")));
    assert_eq!((second["schedule"]["start"].as_str(), second["schedule"]["time"].as_str()), (Some("2026-11-01T07:30:00.000000Z"), Some("01:30:00")));
    let (f, s) = (first["appointment_id"].as_i64().unwrap(), second["appointment_id"].as_i64().unwrap());

    // Sydney leaves daylight saving on 5 April 2026: 02:30 happens twice; the first is AEDT.
    let syd = create(app, key, body(sydney, "2026-04-05T02:30:00")).await;
    assert_eq!(syd["schedule"]["start"], "2026-04-04T15:30:00.000000Z");
    assert_eq!(syd["schedule"]["date"], "2026-04-05");
    let syd = syd["appointment_id"].as_i64().unwrap();
    let syd_utc_day = create_id(app, key, body(sydney, "2026-04-05T10:00:00Z")).await; // 20:00 AEST on the 5th

    let ids = |q: &'static str| async move { app.get(key, &format!("/api/v1/appointments?{q}")).await.ids("appointment_id") };
    assert_eq!(ids("filter[date]=2026-11-01&filter[time]=01:30").await, vec![f, s]);
    // The 25-hour local day holds all three; the day before keeps its last second.
    assert_eq!(ids("filter_by=appointment_start&start_date=2026-11-01&end_date=2026-11-01").await, vec![f, s, late]);
    assert_eq!(ids("filter_by=appointment_start&start_date=2026-10-31&end_date=2026-10-31").await, vec![before]);
    assert_eq!(ids("filter[date]=2026-04-05").await, vec![syd, syd_utc_day]);
    assert_eq!(ids("filter[date]=2026-04-04").await, Vec::<i64>::new());
    assert_eq!(ids("filter_by=appointment_start&start_date=2026-04-05&end_date=2026-04-05").await, vec![syd, syd_utc_day]);
    // Sort by scheduled start interleaves zones by instant.
    assert_eq!(ids("sort=-date&pageSize=3").await, vec![late, s, f]);

    // Moving the appointment to Sydney at the same instant re-reads its local date and time.
    let r = app.put(key, &format!("/api/v1/appointments/{f}"), body(sydney, "2026-11-01T06:30:00Z")).await;
    assert_eq!((r.ok()["schedule"]["date"].as_str(), r.body["schedule"]["time"].as_str()), (Some("2026-11-01"), Some("17:30:00")));
    assert_eq!(ids("filter[date]=2026-11-01&filter[time]=01:30").await, vec![s]);
}

async fn creation_time_ranges_use_utc_days_and_bad_values_are_422(backend: Backend) {
    let app = &TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let tokyo = app.create_shop(key, "Tokyo", "Asia/Tokyo").await;
    let old = create_id(app, key, body(tokyo, "2026-03-08T10:00")).await;
    let edge = create_id(app, key, body(tokyo, "2026-03-08T11:00")).await;
    let now = create_id(app, key, body(tokyo, "2026-03-08T12:00")).await;
    for (id, micros) in [(old, 1_720_569_599_999_999i64), (edge, 1_720_569_600_000_000)] {
        let q = Query::new("UPDATE appointments SET created_at = $1 WHERE id = $2").bind(micros).bind(id);
        app.db.execute(&q).await.unwrap();
    }
    let r = app.get(key, &format!("/api/v1/appointments/{old}")).await;
    assert_eq!(r.body["timestamp"], "2024-07-09T23:59:59.999999Z");

    let ids = |q: &'static str| async move { app.get(key, &format!("/api/v1/appointments?{q}")).await.ids("appointment_id") };
    // Without filter_by: creation time, date-only bounds are UTC days (not Tokyo's).
    assert_eq!(ids("end_date=2024-07-09").await, vec![old]);
    assert_eq!(ids("start_date=2024-07-09&end_date=2024-07-09").await, vec![old]);
    assert_eq!(ids("start_date=2024-07-10").await, vec![edge, now]);
    assert_eq!(ids("start_date=2024-07-10&end_date=2024-07-10").await, vec![edge]);
    assert_eq!(ids("start_date=2024-07-10T00:00:00Z&end_date=2024-07-10T00:00:00Z").await, vec![edge]);
    assert_eq!(ids("start_date=&end_date=").await, vec![old, edge, now]);
    // filter_by without dates changes nothing.
    assert_eq!(ids("filter_by=appointment_end").await, vec![old, edge, now]);
    // A start after the end is an empty list, not an error.
    assert_eq!(ids("start_date=2024-07-11&end_date=2024-07-10").await, Vec::<i64>::new());

    for (q, field) in [
        ("start_date=yesterday", "start_date"),
        ("end_date=2024-13-01", "end_date"),
        ("end_date=2024-07-10T25:00:00Z", "end_date"),
        ("start_date=2024-07-10&filter_by=created", "filter_by"),
        ("filter[date]=03/08/2026", "filter[date]"),
        ("filter[time]=3pm", "filter[time]"),
        ("filter[time]=24:00", "filter[time]"),
    ] {
        app.get(key, &format!("/api/v1/appointments?{q}")).await.invalid(field);
    }
}

async fn relocalizing_a_shop_after_a_zone_change(backend: Backend) {
    // A thousand creates would trip the per-key rate limit.
    let config = autoshop::config::AppConfig { rate_limit: 0.0, ..crate::support::test_config() };
    let app = &TestApp::spawn_with(backend, config).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "Moving", "America/Chicago").await;
    let other = app.create_shop(key, "Stays", "America/Chicago").await;
    let mut ids = Vec::new();
    for i in 0..1005 {
        ids.push(create_id(app, key, body(shop, &format!("2026-03-08T{:02}:{:02}:00Z", i / 60 % 24, i % 60))).await);
    }
    let stays = create_id(app, key, body(other, "2026-03-08T20:00:00Z")).await;
    app.put(key, &format!("/api/v1/shops/{shop}"), json!({"name": "Moving", "timezone": "Asia/Tokyo"})).await.ok();
    // Every row, across the 1,000-row batch boundary, now reads in Tokyo time (Chicago is 6 h
    // behind UTC, Tokyo 9 h ahead); the instants themselves did not move.
    let r = app.get(key, &format!("/api/v1/appointments/{}", ids[0])).await;
    assert_eq!((r.body["schedule"]["date"].as_str(), r.body["schedule"]["time"].as_str()), (Some("2026-03-08"), Some("09:00:00")));
    assert_eq!(r.body["schedule"]["start"], "2026-03-08T00:00:00.000000Z");
    let last = app.get(key, &format!("/api/v1/appointments/{}", ids[1004])).await;
    assert_eq!((last.body["schedule"]["date"].as_str(), last.body["schedule"]["time"].as_str()), (Some("2026-03-09"), Some("01:44:00")));
    let r = app.get(key, &format!("/api/v1/appointments?filter[date]=2026-03-08&filter[time]=09:00&filter[shop_id]={shop}")).await;
    assert_eq!(r.ids("appointment_id"), vec![ids[0]]);
    let r = app.get(key, &format!("/api/v1/appointments?filter[date]=2026-03-09&filter[shop_id]={shop}&pageSize=1")).await;
    assert_eq!(r.body["meta"]["total"], 1005 - 15 * 60);
    // The other shop is untouched.
    let r = app.get(key, &format!("/api/v1/appointments/{stays}")).await;
    assert_eq!(r.body["schedule"]["time"], "15:00:00");
}

/// A shop PUT without `timezone` keeps the zone it read; when a zone change commits between that
/// read and its write, it puts the old zone back, and its appointments must follow it back.
/// Renames race a zone change through two servers; after each round every appointment's local
/// time must be its start in the shop's zone, whichever write came last.
async fn a_rename_racing_a_zone_change_keeps_appointments_in_the_shops_zone(backend: Backend) {
    let (app, replica, shop) = two_servers_and_a_shop(backend, "Moving").await;
    let (app, key) = (&app, &app.admin_key);
    let mut ids = Vec::new();
    for _ in 0..20 {
        ids.push(create_id(app, key, body(shop, "2026-03-08T00:00:00Z")).await);
    }
    let put = |base: &str, body: serde_json::Value| app.client.put(format!("{base}/api/v1/shops/{shop}")).bearer_auth(key).json(&body);
    for round in 0..30 {
        app.put(key, &format!("/api/v1/shops/{shop}"), json!({"name": "Moving", "timezone": "UTC"})).await.ok();
        let mut racing = vec![put(&app.base, json!({"name": "Moving", "timezone": "Asia/Tokyo"}))];
        for n in 0..3 {
            racing.push(put(if n % 2 == 0 { &replica } else { &app.base }, json!({"name": format!("Renamed {n}")})));
        }
        let statuses = crate::support::together(racing).await;
        assert!(statuses.iter().all(|s| *s == 200), "round {round}: {statuses:?}");
        let zone = app.get(key, &format!("/api/v1/shops/{shop}")).await.ok()["timezone"].as_str().unwrap().to_owned();
        let expected = if zone == "Asia/Tokyo" { "09:00:00" } else { "00:00:00" };
        for id in &ids {
            let r = app.get(key, &format!("/api/v1/appointments/{id}")).await;
            assert_eq!(r.body["schedule"]["time"], expected, "round {round}: the shop is in {zone}, appointment {id} is not");
        }
    }
}

/// A create, an update, an update with If-Match and a booking of a hold that read the shop's
/// zone (from the replica's cache, or the hold's shop) before a zone change commits, and write
/// after it: each reads its local `date` and stores its local date and time in the new zone. The
/// zone change's re-localisation could not see them; the write checks, as it lands, that its
/// shop still has the zone it used, and is validated again when it has not. It waits for the
/// shop before it locks the appointment, as the zone change locks them.
async fn writes_racing_a_zone_change_land_in_the_new_zone(backend: Backend) {
    let app = &TestApp::spawn(backend).await;
    let (key, company) = (&app.admin_key, app.company_id);
    let shop = app.create_shop(key, "Moving", "UTC").await;
    let week: Vec<serde_json::Value> = (0..7).map(|d| json!({"day": d, "open": "00:00", "close": "24:00"})).collect();
    app.put(key, "/api/v1/settings/shop_hours", json!({"shop_id": shop, "hours": week})).await.ok();
    app.create_bay(key, shop, "Lift 1", 1).await;
    // Also puts the shop, in UTC, in the replica's cache.
    let id = create_id(app, key, body(shop, "2026-01-15T10:00:00")).await;
    let url = format!("{}/api/v1/appointments", app.base);
    // The zone each held change moves the shop to, and the schedule the write then has.
    let rounds = [
        ("Asia/Tokyo", ("2026-01-15T01:00:00.000000Z", "2026-01-15", "10:00:00")),
        ("America/Chicago", ("2026-01-15T16:00:00.000000Z", "2026-01-15", "10:00:00")),
        ("Europe/Berlin", ("2026-01-15T09:00:00.000000Z", "2026-01-15", "10:00:00")),
        // The hold's instant, taken in Berlin: 10:00 there.
        ("Asia/Tokyo", ("2030-01-07T09:00:00.000000Z", "2030-01-07", "18:00:00")),
    ];
    for (round, (zone, schedule)) in rounds.into_iter().enumerate() {
        let mut local = body(shop, "2026-01-15T10:00:00");
        let request = match round {
            0 => app.client.post(&url),
            1 => app.client.put(format!("{url}/{id}")),
            2 => {
                let r = app.client.get(format!("{url}/{id}")).bearer_auth(key).send().await.unwrap();
                app.client.put(format!("{url}/{id}")).header("if-match", r.headers()["etag"].clone())
            }
            _ => {
                let hold = app.post(key, "/api/v1/holds", json!({"shop_id": shop, "date": "2030-01-07T10:00:00", "hours": 1})).await;
                assert_eq!(hold.status, 201, "{}", hold.body);
                let fields = local.as_object_mut().unwrap();
                fields.remove("date");
                fields.insert("hold_id".into(), hold.body["hold_id"].clone());
                app.client.post(&url)
            }
        };
        let held = HeldWrite::begin(app).await;
        // As a shop's PUT does: the shop locked, then changed.
        held.lock_row_on_postgres("shops", company, shop).await;
        held.run(&format!("UPDATE shops SET timezone = '{zone}' WHERE company_id = $1 AND id = $2"), &[company, shop]).await;
        let sent = tokio::spawn(request.bearer_auth(key).json(&local).send());
        held.await_a_waiter(app).await;
        assert!(!sent.is_finished(), "round {round}: the write waits for the zone change");
        // As the PUT goes on to do: its appointments re-localised. A write waiting for the shop
        // must hold no appointment locked meanwhile (on PostgreSQL: a deadlock, one aborted).
        let relocalized = held.try_run("UPDATE appointments SET local_time = local_time WHERE company_id = $1 AND shop_id = $2", &[company, shop]).await;
        assert!(relocalized.is_ok(), "round {round}: {relocalized:?}");
        held.commit().await;
        let r = sent.await.unwrap().unwrap();
        let status = r.status();
        let answer: serde_json::Value = r.json().await.unwrap();
        assert!(status.is_success(), "round {round}: {status} {answer}");
        let stored = app.get(key, &format!("/api/v1/appointments/{}", answer["appointment_id"])).await.body;
        for (what, a) in [("answer", &answer), ("stored", &stored)] {
            let got = (a["schedule"]["start"].as_str().unwrap(), a["schedule"]["date"].as_str().unwrap(), a["schedule"]["time"].as_str().unwrap());
            assert_eq!(got, schedule, "round {round} ({what}): localised in the zone before {zone}");
        }
    }
}

/// The promise of the guard under load: creates and updates sent to two servers while a third
/// request flips the shop's zone, round after round. After each round every appointment of the
/// shop shows the local time of its start in the zone the shop has then, none in the other.
async fn writes_on_two_servers_racing_zone_changes_keep_the_shops_zone(backend: Backend) {
    let (app, replica, shop) = two_servers_and_a_shop(backend, "Flipping").await;
    let (app, key) = (&app, &app.admin_key);
    // Every write puts its appointment at 00:00Z: 00:00 in UTC, 09:00 in Tokyo.
    let at_midnight = body(shop, "2026-03-08T00:00:00Z");
    let mut existing = Vec::new();
    for _ in 0..3 {
        existing.push(create_id(app, key, at_midnight.clone()).await);
    }
    let bases = [app.base.clone(), replica];
    for round in 0..16 {
        let zone = if round % 2 == 0 { "Asia/Tokyo" } else { "UTC" };
        let mut racing = Vec::new();
        for n in 0..7 {
            let base = &bases[(round + n) % 2];
            racing.push(match n {
                0 => app.client.put(format!("{base}/api/v1/shops/{shop}")).json(&json!({"name": "Flipping", "timezone": zone})),
                1..=3 => app.client.put(format!("{base}/api/v1/appointments/{}", existing[n - 1])).json(&at_midnight),
                _ => app.client.post(format!("{base}/api/v1/appointments")).json(&at_midnight),
            });
        }
        let sent: Vec<_> = racing.into_iter().map(|r| tokio::spawn(r.bearer_auth(key).send())).collect();
        for (n, answer) in sent.into_iter().enumerate() {
            let r = answer.await.unwrap().unwrap();
            let status = r.status();
            assert!(status.is_success(), "round {round}, request {n}: {status} {}", r.text().await.unwrap());
        }
        let expected = if zone == "Asia/Tokyo" { "09:00:00" } else { "00:00:00" };
        let listed = app.get(key, &format!("/api/v1/appointments?filter[shop_id]={shop}&pageSize=100")).await;
        let rows = listed.body["data"].as_array().unwrap();
        assert_eq!(rows.len(), 3 + 3 * (round + 1), "round {round}");
        for a in rows {
            assert_eq!(a["schedule"]["time"], expected, "round {round}: the shop is in {zone}, appointment {} is not", a["appointment_id"]);
        }
    }
}

/// A server and a second one over the same database, without rate limits, and a shop in UTC.
async fn two_servers_and_a_shop(backend: Backend, name: &str) -> (TestApp, String, i64) {
    let config = autoshop::config::AppConfig { rate_limit: 0.0, ..crate::support::test_config() };
    let app = TestApp::spawn_with(backend, config.clone()).await;
    let replica = app.spawn_replica_with(config).await;
    let shop = app.create_shop(&app.admin_key, name, "UTC").await;
    (app, replica, shop)
}
