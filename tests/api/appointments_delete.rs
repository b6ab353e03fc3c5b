//! Cancelling appointments (decisions §10): a soft delete, read-only tombstones, `filter[trashed]`.

use serde_json::json;

use crate::{
    appointments::{body, create_customer, create_id},
    support::{Backend, HeldWrite, TestApp},
};

crate::backend_tests!(
    delete_keeps_a_read_only_tombstone,
    lists_leave_deleted_out_unless_trashed_asks,
    delete_obeys_roles_scope_and_companies,
    a_delete_by_a_shop_key_misses_an_appointment_moved_out_of_its_shops,
    updated_at_only_rises_whatever_the_writers_clock_says,
);

async fn delete_keeps_a_read_only_tombstone(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "Chicago", "America/Chicago").await;
    let id = create_id(&app, key, body(shop, "2030-01-07T09:00:00-06:00")).await;
    let path = format!("/api/v1/appointments/{id}");
    let before = app.get(key, &path).await.ok().clone();
    assert_eq!(before["deleted"], serde_json::Value::Null);

    tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    let r = app.delete(key, &path).await;
    assert_eq!(r.status, 204);
    assert_eq!(r.body, serde_json::Value::Null, "204 has no body");
    let after = app.get(key, &path).await.ok().clone();
    let deleted = after["deleted"].as_str().expect("deleted is set").to_owned();
    assert_eq!(after["updated_at"], deleted, "DELETE sets updated_at to the same instant");
    assert_ne!(after["updated_at"], before["updated_at"]);
    for field in ["vehicle", "schedule", "shop_id", "timestamp", "reason"] {
        assert_eq!(after[field], before[field], "{field} is kept");
    }

    // Read-only: PUT is a 409; a second DELETE is a 204 that keeps the first time.
    let r = app.put(key, &path, body(shop, "2030-01-07T10:00:00-06:00")).await;
    r.problem(409);
    tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    assert_eq!(app.delete(key, &path).await.status, 204);
    let again = app.get(key, &path).await.ok().clone();
    assert_eq!(again["deleted"], deleted);
    assert_eq!(again, after);
}

async fn lists_leave_deleted_out_unless_trashed_asks(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "Chicago", "America/Chicago").await;
    let customer = create_customer(&app, key, shop, "Ann", "Lee", "ann@example.com").await;
    let mut ids = Vec::new();
    for hour in 9..13 {
        let mut b = body(shop, &format!("2030-01-07T{hour:02}:00:00-06:00"));
        b["customer_id"] = json!(customer);
        b["make"] = json!(format!("Make{hour}"));
        ids.push(create_id(&app, key, b).await);
    }
    let gone = ids[1];
    assert_eq!(app.delete(key, &format!("/api/v1/appointments/{gone}")).await.status, 204);
    let live: Vec<i64> = ids.iter().copied().filter(|i| *i != gone).collect();

    let list = |q: &'static str| {
        let app = &app;
        async move {
            let r = app.get(key, &format!("/api/v1/appointments?sort=date&pageSize=100{q}")).await;
            (r.ids("appointment_id"), r.body["meta"]["total"].clone())
        }
    };
    // The unfiltered list's total comes from the per-shop counters: they follow the delete.
    let (got, total) = list("").await;
    assert_eq!(got, live);
    assert_eq!(total, json!(3));
    let (got, total) = list("&filter[trashed]=with").await;
    assert_eq!(got, ids);
    assert_eq!(total, json!(4));
    let (got, total) = list("&filter[trashed]=only").await;
    assert_eq!(got, vec![gone]);
    assert_eq!(total, json!(1));
    let (got, _) = list("&filter[make]=make1").await;
    assert_eq!(got, vec![ids[2], ids[3]], "filtered lists leave it out too");
    let (got, _) = list("&filter[make]=make10&filter[trashed]=only").await;
    assert_eq!(got, vec![gone]);
    for bad in ["", "yes", "without", "WITH"] {
        let r = app.get(key, &format!("/api/v1/appointments?filter[trashed]={bad}")).await;
        r.invalid("filter[trashed]");
    }

    // A customer's schedule (with_details) leaves it out.
    let r = app.get(key, &format!("/api/v1/customers?customer_id={customer}&with_details=true")).await;
    let schedule: Vec<i64> = r.ok()["data"][0]["schedule"].as_array().unwrap().iter().map(|a| a["appointment_id"].as_i64().unwrap()).collect();
    assert_eq!(schedule, live);
}

async fn delete_obeys_roles_scope_and_companies(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "Chicago", "America/Chicago").await;
    let other_shop = app.create_shop(key, "Other", "America/Chicago").await;
    let id = create_id(&app, key, body(shop, "2030-01-07T09:00:00-06:00")).await;
    let path = format!("/api/v1/appointments/{id}");

    let read = app.create_key(key, "read", None).await;
    app.delete(&read, &path).await.problem(403);
    let elsewhere = app.create_key(key, "write", Some(vec![other_shop])).await;
    app.delete(&elsewhere, &path).await.problem(404);
    let (_, stranger) = app.new_company("Other company").await;
    app.delete(&stranger, &path).await.problem(404);
    app.delete(key, "/api/v1/appointments/999999999").await.problem(404);
    app.delete(key, "/api/v1/appointments/abc").await.problem(404);
    assert_eq!(app.get(key, &path).await.ok()["deleted"], serde_json::Value::Null, "refused deletes change nothing");

    let writer = app.create_key(key, "write", Some(vec![shop])).await;
    assert_eq!(app.delete(&writer, &path).await.status, 204);
    assert!(app.get(key, &path).await.ok()["deleted"].is_string());
}

/// A key limited to shop A reads the appointment in A, but it moves to shop B before the delete
/// writes (the test's transaction, committed while the delete waits): the key may not delete in
/// B, so it gets a 404 and the appointment stays; an unlimited key still deletes it.
async fn a_delete_by_a_shop_key_misses_an_appointment_moved_out_of_its_shops(backend: Backend) {
    let app = std::sync::Arc::new(TestApp::spawn(backend).await);
    let key = &app.admin_key;
    let a = app.create_shop(key, "A", "UTC").await;
    let b = app.create_shop(key, "B", "UTC").await;
    let shop_key = app.create_key(key, "write", Some(vec![a])).await;
    let id = create_id(&app, key, body(a, "2030-01-07T09:00:00Z")).await;
    let held = HeldWrite::begin(&app).await;
    held.lock_row_on_postgres("appointments", app.company_id, id).await;
    held.run("UPDATE appointments SET shop_id = $1 WHERE company_id = $2 AND id = $3", &[b, app.company_id, id]).await;
    let delete = {
        let (app, shop_key) = (app.clone(), shop_key.clone());
        tokio::spawn(async move { app.delete(&shop_key, &format!("/api/v1/appointments/{id}")).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert!(!delete.is_finished(), "the delete waits for the row");
    held.commit().await;
    delete.await.unwrap().problem(404);
    let stored = app.get(key, &format!("/api/v1/appointments/{id}")).await;
    assert_eq!((stored.ok()["shop_id"].clone(), stored.body["deleted"].clone()), (json!(b), json!(null)));
    assert_eq!(app.delete(key, &format!("/api/v1/appointments/{id}")).await.status, 204);
    assert!(app.get(key, &format!("/api/v1/appointments/{id}")).await.body["deleted"].is_string());
}

/// A change stamped by a clock behind the last one (another replica's, or a change that waited
/// for the row) still gets a later `updated_at`, so the higher stamp is always the newer state:
/// here the stored stamp is a day ahead, as if a replica's clock had been.
async fn updated_at_only_rises_whatever_the_writers_clock_says(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = &app.admin_key;
    let shop = app.create_shop(key, "Clocks", "UTC").await;
    let id = create_id(&app, key, body(shop, "2030-01-07T09:00:00Z")).await;
    let ahead = autoshop::db::now_micros() + 86_400_000_000;
    let q = autoshop::db::Query::new("UPDATE appointments SET updated_at = $1 WHERE company_id = $2 AND id = $3").bind(ahead).bind(app.company_id).bind(id);
    assert_eq!(app.db.execute(&q).await.unwrap(), 1);
    let stamp = |v: &serde_json::Value| chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap()).unwrap().timestamp_micros();
    let path = format!("/api/v1/appointments/{id}");
    let put = app.put(key, &path, body(shop, "2030-01-07T10:00:00Z")).await;
    assert_eq!(stamp(&put.ok()["updated_at"]), ahead + 1, "{}", put.body);
    assert_eq!(app.delete(key, &path).await.status, 204);
    let deleted = app.get(key, &path).await;
    assert_eq!(stamp(&deleted.ok()["updated_at"]), ahead + 2);
    assert_eq!(deleted.body["deleted"], deleted.body["updated_at"], "deleted and updated_at are one instant");
}
