//! `GET /board`: the scheduling board's page and assets are served from the binary to anyone;
//! the API calls the page makes still need a key. (The page's behaviour in a browser is tested
//! by `.ci/board`.)

use reqwest::StatusCode;

use crate::support::{Backend, TestApp};

crate::backend_tests!(the_board_page_and_its_assets_load_without_a_key, the_board_revalidates_and_refuses_unknown_files);

/// The `href`/`src` values of the page that point at the board's own assets.
fn asset_urls(html: &str) -> Vec<String> {
    let mut urls = Vec::new();
    for attr in ["href=\"", "src=\""] {
        for part in html.split(attr).skip(1) {
            let url = part.split('"').next().unwrap();
            if url.starts_with("/board/assets/") {
                urls.push(url.to_owned());
            }
        }
    }
    urls
}

/// The modules a script imports (`from "./x.js"`), as URLs beside it.
fn imports(script_url: &str, text: &str) -> Vec<String> {
    let dir = script_url.rsplit_once('/').unwrap().0;
    text.lines()
        .filter(|l| l.starts_with("import "))
        .filter_map(|l| l.split("from \"./").nth(1))
        .map(|rest| format!("{dir}/{}", rest.split('"').next().unwrap()))
        .collect()
}

async fn the_board_page_and_its_assets_load_without_a_key(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let page = app.client.get(format!("{}/board", app.base)).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let headers = page.headers().clone();
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    assert_eq!(headers["cache-control"], "no-cache");
    assert!(headers["etag"].to_str().unwrap().starts_with('"'));
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'self'") && csp.contains("connect-src 'self'"), "{csp}");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    let html = page.text().await.unwrap();
    assert!(html.contains("<title>Scheduling board"), "{html}");
    assert!(html.contains("id=\"key\"") && html.contains("type=\"password\""), "the page asks for a key");

    let urls = asset_urls(&html);
    assert!(urls.iter().any(|u| u.ends_with("/board.css")) && urls.iter().any(|u| u.ends_with("/board.js")), "{urls:?}");
    let mut queue = urls;
    let mut seen = Vec::new();
    while let Some(url) = queue.pop() {
        if seen.contains(&url) {
            continue;
        }
        let resp = app.client.get(format!("{}{url}", app.base)).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "{url}");
        let expected = if url.ends_with(".css") { "text/css; charset=utf-8" } else { "text/javascript; charset=utf-8" };
        assert_eq!(resp.headers()["content-type"], expected, "{url}");
        assert_eq!(resp.headers()["cache-control"], "public, max-age=31536000, immutable", "{url}");
        assert!(resp.headers().contains_key("etag"), "{url}");
        let text = resp.text().await.unwrap();
        assert!(!text.is_empty(), "{url}");
        if url.ends_with(".js") {
            queue.extend(imports(&url, &text));
        }
        seen.push(url);
    }
    for module in ["board.js", "state.js", "view.js", "moves.js", "dom.js", "api.js", "stream.js", "layout.js", "zone.js"] {
        assert!(seen.iter().any(|u| u.ends_with(&format!("/{module}"))), "{module} is not reachable from the page: {seen:?}");
    }

    // The page is public; the API it calls is not.
    for path in ["/api/v1/settings/shop_info?with=hours,bays", "/api/v1/appointments?filter%5Bshop_id%5D=1", "/api/v1/events/stream"] {
        let resp = app.client.get(format!("{}{path}", app.base)).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "{path}");
    }
    let shops = app.get(&app.admin_key, "/api/v1/settings/shop_info?with=hours,bays").await;
    assert_eq!(shops.status, StatusCode::OK, "{}", shops.body);

    // A page for people, like /docs: not an operation of the API document.
    let doc = serde_json::to_value(autoshop::app::openapi_document()).unwrap();
    assert!(doc["paths"].as_object().unwrap().keys().all(|p| !p.starts_with("/board")));
}

async fn the_board_revalidates_and_refuses_unknown_files(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let page = app.client.get(format!("{}/board", app.base)).send().await.unwrap();
    let tag = page.headers()["etag"].to_str().unwrap().to_owned();
    let html = page.text().await.unwrap();

    let again = app.client.get(format!("{}/board", app.base)).header("if-none-match", &tag).send().await.unwrap();
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(again.headers()["etag"], tag.as_str());
    assert_eq!(again.headers()["cache-control"], "no-cache");

    let css = asset_urls(&html).into_iter().find(|u| u.ends_with(".css")).unwrap();
    let dir = css.rsplit_once('/').unwrap().0;
    let missing = app.client.get(format!("{}{dir}/nothing.js", app.base)).send().await.unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    assert_eq!(missing.headers()["content-type"], "application/problem+json");
    // A page of another version (a replica mid-upgrade) still gets the file, just not for keeps.
    let other = app.client.get(format!("{}/board/assets/0000000000000000/board.css", app.base)).send().await.unwrap();
    assert_eq!(other.status(), StatusCode::OK);
    assert_eq!(other.headers()["cache-control"], "no-cache");
    // Not a directory listing or anything else under /board.
    let listing = app.client.get(format!("{}/board/assets/", app.base)).send().await.unwrap();
    assert_eq!(listing.status(), StatusCode::NOT_FOUND);
}
