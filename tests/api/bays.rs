use serde_json::json;

use std::{sync::Arc, time::Duration};

use crate::support::{Backend, HeldWrite, TestApp};

crate::backend_tests!(
    a_bay_put_keeps_what_omitted_fields_hold_when_it_lands,
    lists_bays_with_defaults_filters_and_sorts,
    paginates_bays_with_links_and_edges,
    creates_and_updates_bays_with_validation,
    a_bay_with_appointments_stays_in_its_shop,
    a_move_is_checked_on_the_shop_the_bay_has_when_it_writes,
    an_appointment_never_lands_on_a_bay_that_left_its_shop,
);

async fn lists_bays_with_defaults_filters_and_sorts(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let a = app.create_shop(key, "A", "UTC").await;
    let b = app.create_shop(key, "B", "UTC").await;
    let b1 = app.create_bay(key, a, "Lift", 2).await;
    let b2 = app.create_bay(key, a, "alignment", 1).await;
    let b3 = app.create_bay(key, b, "Bay Z", 0).await;
    let r = app.put(key, &format!("/api/v1/bays/{b3}"), json!({"shop_id": b, "title": "Bay Z", "active": false})).await;
    assert_eq!(r.ok()["active"], false);

    // Default: active only, id ascending, page size 10.
    let r = app.get(key, "/api/v1/bays").await;
    assert_eq!(r.ids("id"), vec![b1, b2]);
    assert_eq!(r.body["meta"]["per_page"], 10);
    assert_eq!(r.body["data"][0], json!({"id": b1, "shop_id": a, "title": "Lift", "order": 2, "active": true}));

    for (filter, want) in [("false", vec![b3]), ("true", vec![b1, b2]), ("0", vec![b3]), ("null", vec![b1, b2, b3]), ("all", vec![b1, b2, b3]), ("", vec![b1, b2, b3])] {
        let r = app.get(key, &format!("/api/v1/bays?filter%5Bactive%5D={filter}")).await;
        assert_eq!(r.ids("id"), want, "filter[active]={filter}");
    }
    app.get(key, "/api/v1/bays?filter[active]=maybe").await.invalid("filter[active]");

    let r = app.get(key, &format!("/api/v1/bays?filter[shop_id]={b}&filter[active]=all")).await;
    assert_eq!(r.ids("id"), vec![b3]);

    // Sorting: case-insensitive title, order, descending, several fields, id tie-break.
    assert_eq!(app.get(key, "/api/v1/bays?sort=title").await.ids("id"), vec![b2, b1]);
    assert_eq!(app.get(key, "/api/v1/bays?sort=-title").await.ids("id"), vec![b1, b2]);
    assert_eq!(app.get(key, "/api/v1/bays?sort=order").await.ids("id"), vec![b2, b1]);
    assert_eq!(app.get(key, "/api/v1/bays?sort=-order&filter[active]=all").await.ids("id"), vec![b1, b2, b3]);
    let b4 = app.create_bay(key, b, "Extra", 1).await;
    assert_eq!(app.get(key, "/api/v1/bays?sort=order,-title").await.ids("id"), vec![b4, b2, b1]);

    let r = app.get(key, "/api/v1/bays?sort=color").await;
    let detail = r.problem(400)["detail"].as_str().unwrap().to_owned();
    assert!(detail.contains("title") && detail.contains("order"), "{detail}");
    let r = app.get(key, "/api/v1/bays?filter[color]=red").await;
    assert!(r.problem(400)["detail"].as_str().unwrap().contains("filter[shop_id]"));
}

async fn paginates_bays_with_links_and_edges(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "A", "UTC").await;
    let mut ids = Vec::new();
    for i in 0..7 {
        ids.push(app.create_bay(key, shop, &format!("Bay {i}"), 0).await);
    }
    let r = app.get(key, "/api/v1/bays?pageSize=3&page=2&sort=order").await;
    assert_eq!(r.ids("id"), ids[3..6].to_vec());
    let meta = &r.body["meta"];
    assert_eq!((meta["current_page"].as_i64(), meta["from"].as_i64(), meta["to"].as_i64()), (Some(2), Some(4), Some(6)));
    assert_eq!((meta["last_page"].as_i64(), meta["total"].as_i64(), meta["per_page"].as_i64()), (Some(3), Some(7), Some(3)));
    assert_eq!(meta["path"], format!("{}/api/v1/bays", app.base));
    let links = &r.body["links"];
    assert_eq!(links["next"], format!("{}/api/v1/bays?pageSize=3&sort=order&page=3", app.base));
    assert_eq!(links["prev"], format!("{}/api/v1/bays?pageSize=3&sort=order&page=1", app.base));
    assert_eq!(links["first"], format!("{}/api/v1/bays?pageSize=3&sort=order&page=1", app.base));
    assert_eq!(links["last"], format!("{}/api/v1/bays?pageSize=3&sort=order&page=3", app.base));

    // Last page: short, no next. Walking every page visits every id once.
    let r = app.get(key, "/api/v1/bays?pageSize=3&page=3").await;
    assert_eq!(r.ids("id"), vec![ids[6]]);
    assert!(r.body["links"]["next"].is_null());
    assert_eq!(r.body["meta"]["total"], 7);

    // Past the end: 200, empty, from/to null, last_page still computed.
    let r = app.get(key, "/api/v1/bays?pageSize=3&page=9").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.ids("id"), Vec::<i64>::new());
    assert!(r.body["meta"]["from"].is_null() && r.body["meta"]["to"].is_null());
    assert_eq!((r.body["meta"]["current_page"].as_i64(), r.body["meta"]["last_page"].as_i64()), (Some(9), Some(3)));

    // Page size bounds.
    assert_eq!(app.get(key, "/api/v1/bays?pageSize=100").await.ids("id").len(), 7);
    for bad in ["pageSize=0", "pageSize=101", "pageSize=abc"] {
        app.get(key, &format!("/api/v1/bays?{bad}")).await.invalid("pageSize");
    }
    for bad in ["page=0", "page=-1", "page=x"] {
        app.get(key, &format!("/api/v1/bays?{bad}")).await.invalid("page");
    }

    // An empty list has one (empty) page.
    let r = app.get(key, "/api/v1/bays?filter[active]=false").await;
    assert_eq!((r.body["meta"]["total"].as_i64(), r.body["meta"]["last_page"].as_i64()), (Some(0), Some(1)));
}

async fn creates_and_updates_bays_with_validation(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "A", "UTC").await;
    let r = app.post(key, "/api/v1/bays", json!({"shop_id": shop, "title": "Lift 1"})).await;
    assert_eq!(r.status, 201);
    let id = r.body["id"].as_i64().unwrap();
    assert_eq!(r.header("location"), Some(format!("/api/v1/bays/{id}").as_str()));
    assert_eq!(r.body, json!({"id": id, "shop_id": shop, "title": "Lift 1", "order": 0, "active": true}));
    assert_eq!(app.get(key, &format!("/api/v1/bays/{id}")).await.body, r.body);

    app.post(key, "/api/v1/bays", json!({"shop_id": shop, "title": "LIFT 1"})).await.invalid("title");
    let r = app.post(key, "/api/v1/bays", json!({})).await;
    r.invalid("shop_id");
    r.invalid("title");
    app.post(key, "/api/v1/bays", json!({"shop_id": 999_999, "title": "x"})).await.invalid("shop_id");
    app.post(key, "/api/v1/bays", json!({"shop_id": shop, "title": 5})).await.invalid("title");

    // PUT validates like create: `shop_id` and `title` are required; omitted `order` and
    // `active` keep their value.
    let r = app.put(key, &format!("/api/v1/bays/{id}"), json!({"order": 4})).await;
    r.invalid("shop_id");
    r.invalid("title");
    app.put(key, &format!("/api/v1/bays/{id}"), json!({"shop_id": shop, "title": " ", "order": 4})).await.invalid("title");
    app.put(key, &format!("/api/v1/bays/{id}"), json!({"shop_id": shop, "title": "Lift 1", "active": false})).await.ok();
    let r = app.put(key, &format!("/api/v1/bays/{id}"), json!({"shop_id": shop, "title": "Lift 1", "order": 4})).await;
    assert_eq!(r.ok(), &json!({"id": id, "shop_id": shop, "title": "Lift 1", "order": 4, "active": false}));
    let other = app.create_bay(key, shop, "Lift 2", 0).await;
    app.put(key, &format!("/api/v1/bays/{other}"), json!({"shop_id": shop, "title": "lift 1"})).await.invalid("title");
    app.put(key, "/api/v1/bays/999999", json!({"shop_id": shop, "title": "x"})).await.problem(404);
    app.put(key, "/api/v1/bays/abc", json!({"shop_id": shop, "title": "x"})).await.problem(404);
    // The failed update changed nothing.
    assert_eq!(app.get(key, &format!("/api/v1/bays/{other}")).await.body["title"], "Lift 2");
}

async fn a_bay_with_appointments_stays_in_its_shop(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let a = app.create_shop(key, "A", "UTC").await;
    let b = app.create_shop(key, "B", "UTC").await;
    let busy = app.create_bay(key, a, "Lift", 0).await;
    let idle = app.create_bay(key, a, "Spare", 1).await;
    let r = app
        .post(key, "/api/v1/appointments", json!({"shop_id": a, "date": "2026-12-01T09:00:00Z", "year": "2020", "make": "Ford",
            "model": "Focus", "home_phone": "", "work_phone": "", "cell_phone": "", "column": "lift"}))
        .await;
    let appointment = r.ok()["appointment_id"].as_i64().unwrap();
    app.put(key, &format!("/api/v1/bays/{busy}"), json!({"shop_id": b, "title": "Lift"})).await.invalid("shop_id");
    assert_eq!(app.get(key, &format!("/api/v1/bays/{busy}")).await.body["shop_id"], a);
    assert_eq!(app.get(key, &format!("/api/v1/appointments/{appointment}")).await.body["column"], "Lift");
    // Renaming it is fine (appointments show the new title); a bay without appointments moves.
    app.put(key, &format!("/api/v1/bays/{busy}"), json!({"shop_id": a, "title": "Lift A"})).await.ok();
    assert_eq!(app.get(key, &format!("/api/v1/appointments/{appointment}")).await.body["column"], "Lift A");
    assert_eq!(app.put(key, &format!("/api/v1/bays/{idle}"), json!({"shop_id": b, "title": "Spare"})).await.ok()["shop_id"], b);
}

/// A PUT reads the bay before its transaction; a move and a booking in the new shop that commit
/// in between must still stop it from taking the bay back (here the test's own transaction
/// makes both, and commits once the PUT has read the bay and waits for the lock).
async fn a_move_is_checked_on_the_shop_the_bay_has_when_it_writes(backend: Backend) {
    let app = Arc::new(TestApp::spawn(backend).await);
    let key = &app.admin_key;
    let a = app.create_shop(key, "A", "UTC").await;
    let b = app.create_shop(key, "B", "UTC").await;
    let bay = app.create_bay(key, a, "Lift", 0).await;
    let r = app
        .post(key, "/api/v1/appointments", json!({"shop_id": b, "date": "2026-12-01T09:00:00Z", "year": "2020", "make": "Ford",
            "model": "Focus", "home_phone": "", "work_phone": "", "cell_phone": ""}))
        .await;
    let appointment = r.ok()["appointment_id"].as_i64().unwrap();

    let held = HeldWrite::begin(&app).await;
    held.run("UPDATE bays SET shop_id = $1 WHERE company_id = $2 AND id = $3", &[b, app.company_id, bay]).await;
    held.run("UPDATE appointments SET bay_id = $1 WHERE company_id = $2 AND id = $3", &[bay, app.company_id, appointment]).await;
    let back = {
        let app = app.clone();
        tokio::spawn(async move { app.put(&app.admin_key, &format!("/api/v1/bays/{bay}"), json!({"shop_id": a, "title": "Lift"})).await })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!back.is_finished(), "the PUT waits for the bay");
    held.commit().await;
    back.await.unwrap().invalid("shop_id");
    assert_eq!(app.get(key, &format!("/api/v1/bays/{bay}")).await.body["shop_id"], b);
    assert_eq!(app.get(key, &format!("/api/v1/appointments/{appointment}")).await.body["column"], "Lift");

    // A key limited to shop A read the bay there; moved meanwhile to a shop the key cannot see,
    // the bay is not the key's to take back.
    let c = app.create_shop(key, "C", "UTC").await;
    let spare = app.create_bay(key, a, "Spare", 1).await;
    let a_admin = app.create_key(key, "admin", Some(vec![a])).await;
    let held = HeldWrite::begin(&app).await;
    held.run("UPDATE bays SET shop_id = $1 WHERE company_id = $2 AND id = $3", &[c, app.company_id, spare]).await;
    let back = {
        let (app, a_admin) = (app.clone(), a_admin.clone());
        tokio::spawn(async move { app.put(&a_admin, &format!("/api/v1/bays/{spare}"), json!({"shop_id": a, "title": "Spare"})).await })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!back.is_finished(), "the PUT waits for the bay");
    held.commit().await;
    back.await.unwrap().problem(404);
    assert_eq!(app.get(key, &format!("/api/v1/bays/{spare}")).await.body["shop_id"], c);
}

/// An appointment's write checks its bay before its transaction, and a bay's move checks the
/// appointments in its transaction. Each must still see the other when they overlap: a move
/// committed while a create or an update waits fails that write (422 on `column`, nothing
/// stored), and a move waits for a write on the bay still in flight, then refuses to move. The
/// test's own transaction plays the other side and commits once the request waits for it.
async fn an_appointment_never_lands_on_a_bay_that_left_its_shop(backend: Backend) {
    let app = Arc::new(TestApp::spawn(backend).await);
    let key = &app.admin_key;
    let a = app.create_shop(key, "A", "UTC").await;
    let b = app.create_shop(key, "B", "UTC").await;
    let lift = app.create_bay(key, a, "Lift", 0).await;
    let spare = app.create_bay(key, a, "Spare", 1).await;
    let third = app.create_bay(key, a, "Third", 2).await;
    let body = |column: Option<&str>| {
        json!({"shop_id": a, "date": "2026-12-01T09:00:00Z", "year": "2020", "make": "Ford", "model": "Focus",
            "home_phone": "", "work_phone": "", "cell_phone": "", "column": column})
    };
    let unbooked = app.post(key, "/api/v1/appointments", body(None)).await.ok()["appointment_id"].as_i64().unwrap();
    let move_to_b = "UPDATE bays SET shop_id = $1 WHERE company_id = $2 AND id = $3";

    // A create of an appointment of A on Lift, while Lift moves to B.
    let held = HeldWrite::begin(&app).await;
    assert_eq!(held.run(move_to_b, &[b, app.company_id, lift]).await, 1);
    let create = {
        let app = app.clone();
        let body = body(Some("Lift"));
        tokio::spawn(async move { app.post(&app.admin_key, "/api/v1/appointments", body).await })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!create.is_finished(), "the create waits for the bay");
    held.commit().await;
    create.await.unwrap().invalid("column");
    assert_eq!(app.get(key, &format!("/api/v1/appointments?filter[shop_id]={a}")).await.ids("appointment_id"), vec![unbooked]);

    // An update that puts an appointment of A on Third, while Third moves to B.
    let held = HeldWrite::begin(&app).await;
    assert_eq!(held.run(move_to_b, &[b, app.company_id, third]).await, 1);
    let update = {
        let app = app.clone();
        let body = body(Some("Third"));
        tokio::spawn(async move { app.put(&app.admin_key, &format!("/api/v1/appointments/{unbooked}"), body).await })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!update.is_finished(), "the update waits for the bay");
    held.commit().await;
    update.await.unwrap().invalid("column");
    assert_eq!(app.get(key, &format!("/api/v1/appointments/{unbooked}")).await.body["column"], json!(null));

    // A move of Spare to B, while an update that puts the appointment on Spare is in flight.
    let held = HeldWrite::begin(&app).await;
    let book = "UPDATE appointments SET bay_id = $1 WHERE company_id = $2 AND id = $3";
    assert_eq!(held.run(book, &[spare, app.company_id, unbooked]).await, 1);
    let moved = {
        let app = app.clone();
        tokio::spawn(async move { app.put(&app.admin_key, &format!("/api/v1/bays/{spare}"), json!({"shop_id": b, "title": "Spare"})).await })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!moved.is_finished(), "the move waits for the booking");
    held.commit().await;
    moved.await.unwrap().invalid("shop_id");
    assert_eq!(app.get(key, &format!("/api/v1/bays/{spare}")).await.body["shop_id"], a);
    assert_eq!(app.get(key, &format!("/api/v1/appointments/{unbooked}")).await.body["column"], "Spare");

    // The rule is the database's, whoever writes: neither side of it can be broken in SQL.
    for (sql, params) in [(move_to_b, [b, app.company_id, spare]), (book, [lift, app.company_id, unbooked])] {
        let held = HeldWrite::begin(&app).await;
        let refused = held.try_run(sql, &params).await;
        assert!(refused.as_ref().is_err_and(|e| e.contains("appointments_bay_in_shop")), "{sql}: {refused:?}");
    }
}

/// A bay PUT that read the bay before another write switched it off and moved it to place 7,
/// and lands after that write committed: the omitted `active` and `order` keep the other
/// write's values.
async fn a_bay_put_keeps_what_omitted_fields_hold_when_it_lands(backend: Backend) {
    let app = Arc::new(TestApp::spawn(backend).await);
    let key = app.admin_key.clone();
    let shop = app.create_shop(&key, "A", "UTC").await;
    let bay = app.create_bay(&key, shop, "Lift 1", 3).await;
    let held = HeldWrite::begin(&app).await;
    held.lock_row_on_postgres("bays", app.company_id, bay).await;
    held.run("UPDATE bays SET active = false, sort_order = 7 WHERE company_id = $1 AND id = $2", &[app.company_id, bay]).await;
    let put = crate::support::put_across(&app, held, &key, &format!("/api/v1/bays/{bay}"), json!({"shop_id": shop, "title": "Lift One"})).await;
    assert_eq!(
        (put.ok()["title"].clone(), put.body["active"].clone(), put.body["order"].clone()),
        (json!("Lift One"), json!(false), json!(7))
    );
}
