//! No endpoint shows or touches another company's data.

use serde_json::json;

use crate::support::{Backend, TestApp};

crate::backend_tests!(another_company_sees_nothing_of_the_first);

async fn another_company_sees_nothing_of_the_first(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let a = &app.admin_key;
    let shop = app.create_shop(a, "A shop", "UTC").await;
    let bay = app.create_bay(a, shop, "A bay", 0).await;
    app.put(a, "/api/v1/settings/shop_hours", json!({"shop_id": shop, "hours": [{"day": 1, "open": "08:00", "close": "17:00"}]})).await.ok();
    let source = app.get(a, &format!("/api/v1/settings/sources?filter[shop_id]={shop}")).await.ids("id")[0];
    let a_key_id = app.get(a, "/api/v1/api_keys").await.ids("id")[0];

    let (_, b) = app.new_company("B").await;
    let b_shop = app.create_shop(&b, "B shop", "UTC").await;

    // Lists: nothing of A.
    assert_eq!(app.get(&b, "/api/v1/bays?filter[active]=all").await.body["meta"]["total"], 0);
    assert_eq!(app.get(&b, "/api/v1/settings/shop_info").await.ids("shop_id"), vec![b_shop]);
    assert_eq!(app.get(&b, "/api/v1/settings/shop_hours").await.body["data"], json!([]));
    let keys = app.get(&b, "/api/v1/api_keys").await;
    assert!(!keys.ids("id").contains(&a_key_id));
    // A's shop in a filter, a path, or a body.
    for path in [
        format!("/api/v1/bays?filter[shop_id]={shop}"),
        format!("/api/v1/settings/sources?filter[shop_id]={shop}"),
        format!("/api/v1/settings/shop_hours?filter[shop_id]={shop}"),
        format!("/api/v1/settings/shop_info?filter[shop_id]={shop}"),
        format!("/api/v1/shops/{shop}"),
        format!("/api/v1/bays/{bay}"),
        format!("/api/v1/settings/sources/{source}"),
    ] {
        app.get(&b, &path).await.problem(404);
    }
    app.put(&b, &format!("/api/v1/bays/{bay}"), json!({"title": "Mine now"})).await.problem(404);
    app.put(&b, &format!("/api/v1/settings/sources/{source}"), json!({"active": false})).await.problem(404);
    app.put(&b, &format!("/api/v1/shops/{shop}"), json!({"name": "Mine now"})).await.problem(404);
    app.delete(&b, &format!("/api/v1/api_keys/{a_key_id}")).await.problem(404);
    app.post(&b, "/api/v1/bays", json!({"shop_id": shop, "title": "Intruder"})).await.invalid("shop_id");
    app.post(&b, "/api/v1/settings/sources", json!({"shop_id": shop, "name": "Intruder"})).await.invalid("shop_id");
    app.put(&b, "/api/v1/settings/shop_hours", json!({"shop_id": shop, "hours": []})).await.invalid("shop_id");

    // A's data is unchanged and A's key still works.
    assert_eq!(app.get(a, &format!("/api/v1/bays/{bay}")).await.body["title"], "A bay");
    assert_eq!(app.get(a, &format!("/api/v1/shops/{shop}")).await.body["name"], "A shop");
    assert_eq!(app.get(a, &format!("/api/v1/settings/shop_hours?filter[shop_id]={shop}")).await.body["data"].as_array().unwrap().len(), 1);
}
