//! `GET /board`: the scheduling board (decisions §15), a web page of plain HTML, CSS and
//! JavaScript modules compiled into the binary (`assets/`: no build step, nothing fetched from
//! elsewhere). The page needs no key to load; it asks for one and keeps it in the tab's
//! `sessionStorage`, and everything it shows or changes goes through the public API.
//!
//! The page itself is revalidated on every load (`no-cache` with an `ETag`); its assets live
//! under a path naming a hash of them all, so a browser may keep them for good and a new binary
//! is picked up at once.

use std::sync::LazyLock;

use axum::{
    Router,
    extract::Path,
    http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header},
    middleware,
    response::{IntoResponse, Response},
    routing::get,
};

use crate::{conditional::etag_of_bytes, error::Problem};

struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

const JS: &str = "text/javascript; charset=utf-8";

const ASSETS: [Asset; 10] = [
    Asset { name: "board.css", content_type: "text/css; charset=utf-8", body: include_bytes!("assets/board.css") },
    Asset { name: "board.js", content_type: JS, body: include_bytes!("assets/board.js") },
    Asset { name: "state.js", content_type: JS, body: include_bytes!("assets/state.js") },
    Asset { name: "view.js", content_type: JS, body: include_bytes!("assets/view.js") },
    Asset { name: "moves.js", content_type: JS, body: include_bytes!("assets/moves.js") },
    Asset { name: "dom.js", content_type: JS, body: include_bytes!("assets/dom.js") },
    Asset { name: "api.js", content_type: JS, body: include_bytes!("assets/api.js") },
    Asset { name: "stream.js", content_type: JS, body: include_bytes!("assets/stream.js") },
    Asset { name: "layout.js", content_type: JS, body: include_bytes!("assets/layout.js") },
    Asset { name: "zone.js", content_type: JS, body: include_bytes!("assets/zone.js") },
];

const PAGE: &str = include_str!("assets/index.html");

/// Scripts, styles and API calls from this origin only; no inline code, no framing. The board
/// holds an API key, so a script injected from elsewhere must not run.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; \
                   base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The assets' version: 16 hex digits of a hash over all of them.
static VERSION: LazyLock<String> = LazyLock::new(|| {
    let mut all = Vec::new();
    for asset in &ASSETS {
        all.extend_from_slice(asset.name.as_bytes());
        all.push(0);
        all.extend_from_slice(asset.body);
    }
    etag_of_bytes(&all)[1..17].to_owned()
});

/// The page, pointing at this version's assets, and its ETag.
static INDEX: LazyLock<(String, String)> = LazyLock::new(|| {
    let html = PAGE.replace("{{assets}}", &assets_path());
    let tag = etag_of_bytes(html.as_bytes());
    (html, tag)
});

/// Where this binary's assets are served.
pub fn assets_path() -> String {
    format!("/board/assets/{}", *VERSION)
}

/// `GET /board` and its assets. No key needed; `If-None-Match` answers 304.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/board", get(page))
        .route("/board/assets/{version}/{file}", get(asset))
        .route_layer(middleware::from_fn(crate::conditional::not_modified))
}

async fn page() -> Response {
    let (html, tag) = &*INDEX;
    let mut response = (StatusCode::OK, html.clone()).into_response();
    let headers = response.headers_mut();
    set(headers, header::CONTENT_TYPE, "text/html; charset=utf-8");
    set(headers, header::CACHE_CONTROL, "no-cache");
    set(headers, header::ETAG, tag);
    set(headers, header::CONTENT_SECURITY_POLICY, CSP);
    set(headers, header::REFERRER_POLICY, "no-referrer");
    set(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(headers, header::X_FRAME_OPTIONS, "DENY");
    response
}

async fn asset(Path((version, file)): Path<(String, String)>) -> Response {
    let Some(asset) = ASSETS.iter().find(|a| a.name == file) else {
        return Problem::new(StatusCode::NOT_FOUND, "No such file.").into_response_with(StatusCode::NOT_FOUND);
    };
    let mut response = (StatusCode::OK, asset.body).into_response();
    let headers = response.headers_mut();
    set(headers, header::CONTENT_TYPE, asset.content_type);
    // An older page (another replica, mid-upgrade) asks for another version: it gets this one,
    // but not for keeps.
    let cache = if version == *VERSION { "public, max-age=31536000, immutable" } else { "no-cache" };
    set(headers, header::CACHE_CONTROL, cache);
    set(headers, header::ETAG, &etag_of_bytes(asset.body));
    set(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    response
}

fn set(headers: &mut HeaderMap, name: HeaderName, value: &str) {
    if let Ok(value) = HeaderValue::from_str(value) {
        headers.insert(name, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_names_every_asset_it_loads_and_no_other_origin() {
        let (html, _) = &*INDEX;
        assert!(html.contains(&format!("{}/board.css", assets_path())));
        assert!(html.contains(&format!("{}/board.js", assets_path())));
        assert!(!html.contains("{{"), "a placeholder is left in the page");
        for asset in &ASSETS {
            let text = std::str::from_utf8(asset.body).unwrap();
            assert!(!text.contains("http://") && !text.contains("https://"), "{} refers to another origin", asset.name);
            // Every module a script imports is served.
            for line in text.lines().filter(|l| l.starts_with("import ")) {
                let target = line.rsplit("\"./").next().and_then(|t| t.split('"').next()).unwrap();
                assert!(ASSETS.iter().any(|a| a.name == target), "{} imports {target}, which is not served", asset.name);
            }
        }
    }
}
