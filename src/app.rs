//! Application state, router assembly and the middleware stack.

use std::{panic::AssertUnwindSafe, time::Duration};

use axum::{
    Json, Router,
    extract::{DefaultBodyLimit, Request, State},
    http::{HeaderValue, StatusCode, header},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::get,
};
use futures_util::FutureExt;
use tower_http::{
    compression::CompressionLayer,
    request_id::{PropagateRequestIdLayer, SetRequestIdLayer},
    sensitive_headers::SetSensitiveRequestHeadersLayer,
    trace::TraceLayer,
};
use utoipa::{
    Modify, OpenApi,
    openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme},
};
use utoipa_axum::router::OpenApiRouter;
use utoipa_swagger_ui::SwaggerUi;

use crate::{
    auth,
    config::AppConfig,
    db::Db,
    error::{ApiError, Problem},
    openapi,
    state::AppState,
};

#[derive(OpenApi)]
#[openapi(
    info(title = "autoshop", description = "Shop-management API for automotive service locations: appointments, bays, shop settings, customers, ship-tos and accounts receivable."),
    modifiers(&BearerAuth),
    components(schemas(Problem)),
    tags(
        (name = "appointments", description = "Appointments of the company's shops"),
        (name = "customers", description = "Customers, their ship-to addresses and accounts receivable"),
        (name = "settings", description = "Shop hours, sources and shop information"),
        (name = "bays", description = "Bays (columns) in which appointments are scheduled"),
        (name = "shops", description = "Shop administration"),
        (name = "api_keys", description = "API keys of the caller's company"),
        (name = "events", description = "The change feed: every change, in commit order"),
    )
)]
struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme("bearer", SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()));
    }
}

/// Every `/api/v1` resource route, with its OpenAPI description.
fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(crate::shops::router())
        .merge(crate::bays::router())
        .merge(crate::sources::router())
        .merge(crate::shop_hours::router())
        .merge(crate::api_keys::router())
        .merge(crate::appointments::router())
        .merge(crate::availability::router())
        .merge(crate::holds::router())
        .merge(crate::customers::router())
        .merge(crate::ship_tos::router())
        .merge(crate::receivables::router())
        .merge(crate::events::router())
        .merge(crate::webhooks::router())
}

/// The OpenAPI document, as served at `/api/v1/openapi.json`.
pub fn openapi_document() -> utoipa::openapi::OpenApi {
    let (_, doc) = api_routes().split_for_parts();
    openapi::finish(doc)
}

pub fn build(db: Db, config: AppConfig) -> Router {
    let state = AppState::new(db, config);
    let (api, doc) = api_routes().split_for_parts();
    let api = api.route_layer(middleware::from_fn_with_state(state.clone(), api_checks));
    let doc = openapi::finish(doc);
    let timeout = state.config.request_timeout;
    let body_limit = state.config.max_body_bytes;

    let routes = Router::new()
        .merge(api)
        .merge(SwaggerUi::new("/docs").url("/api/v1/openapi.json", doc))
        // The scheduling board: a page for people, outside the API (and its document), like /docs.
        .merge(crate::board::router())
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state);
    with_middleware(routes, timeout, body_limit)
}

/// The checks of every `/api/v1` resource route, in order: the key (401, 429), the
/// `Idempotency-Key` (a replay instead of running again), `If-None-Match` (a 304). One
/// middleware runs the three, as [`guard`] does around every route: each layer made with
/// `from_fn` clones and boxes the service behind it on every request.
async fn api_checks(State(state): State<AppState>, request: Request, next: Next) -> Response {
    auth::require_key(&state, request, |request| async {
        // Every parameter of an API path is an id, and an id that is not even text (`%FF`) names
        // nothing: 404, as any other id that is not an integer (axum would answer 400).
        if !crate::extract::decodes_to_utf8(request.uri().path()) {
            return ApiError::not_found("Resource").into_response();
        }
        crate::idempotency::replay_or_run(&state, request, |request| crate::conditional::honour_if_none_match(request, |request| next.run(request)))
            .await
    })
    .await
}

/// The stack every request goes through (each layer wraps the ones above it): body limit,
/// [`guard`] (metrics, one error format, panics caught, deadline), gzip, tracing, request id.
fn with_middleware(routes: Router, timeout: Duration, body_limit: usize) -> Router {
    routes
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(middleware::from_fn_with_state(timeout, guard))
        // Pages of JSON shrink several times over for clients that send `Accept-Encoding: gzip`.
        .layer(CompressionLayer::new().gzip(true))
        .layer(TraceLayer::new_for_http().make_span_with(request_span))
        // Keys never reach logs, even with header logging turned on.
        .layer(SetSensitiveRequestHeadersLayer::new([header::AUTHORIZATION]))
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(SetRequestIdLayer::x_request_id(crate::request_id::MakeProcessRequestId))
}

/// The span every log line of a request carries: its method, path (no query string: filters may
/// hold names) and `x-request-id`, which the answer carries too, so a support request quoting
/// the id finds its log lines. At INFO, so that the default filter keeps it.
fn request_span(request: &axum::http::Request<axum::body::Body>) -> tracing::Span {
    let id = request.headers().get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or("");
    tracing::info_span!("request", method = %request.method(), path = request.uri().path(), id)
}

/// Around every route: the request's metrics, then one error format for every answer, a 500
/// for a panic, and the deadline.
async fn guard(State(limit): State<Duration>, request: Request, next: Next) -> Response {
    crate::http_metrics::measured(request, |request| async move {
        let answer = catch_panic(within_deadline(limit, next.run(request))).await;
        problem_for_bare_errors(answer)
    })
    .await
}

/// Answers 503 with `Retry-After` when the request (reading its body included) runs past the
/// deadline, instead of leaving the client waiting. A response that has started streaming (the
/// event stream) is not cut: the deadline covers the work before the first byte.
async fn within_deadline(limit: Duration, answer: impl Future<Output = Response>) -> Response {
    match tokio::time::timeout(limit, answer).await {
        Ok(response) => response,
        Err(_) => {
            tracing::warn!(limit_secs = limit.as_secs_f64(), "request cut off at its deadline");
            ApiError::TimedOut.into_response()
        }
    }
}

/// The answer, or a 500 when computing it panics: the panic ends this request, not the
/// connection or the worker thread (the panic's message goes to the log through the panic hook).
async fn catch_panic(answer: impl Future<Output = Response>) -> Response {
    AssertUnwindSafe(answer).catch_unwind().await.unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

async fn not_found() -> Response {
    Problem::new(StatusCode::NOT_FOUND, "No route matches this path.").into_response_with(StatusCode::NOT_FOUND)
}

async fn method_not_allowed() -> Response {
    Problem::new(StatusCode::METHOD_NOT_ALLOWED, "This route does not accept that method.")
        .into_response_with(StatusCode::METHOD_NOT_ALLOWED)
}

/// Turns any error response that is not already problem+json (a timeout, a caught panic, a
/// framework rejection) into one, so clients see a single error format.
fn problem_for_bare_errors(response: Response) -> Response {
    let status = response.status();
    let is_problem = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(crate::error::PROBLEM_JSON.as_bytes()));
    if !(status.is_client_error() || status.is_server_error()) || is_problem {
        return response;
    }
    let detail = match status {
        StatusCode::INTERNAL_SERVER_ERROR => "An unexpected error occurred.",
        StatusCode::PAYLOAD_TOO_LARGE => "The request body is larger than the limit.",
        _ => status.canonical_reason().unwrap_or("Error"),
    };
    let mut problem = Problem::new(status, detail).into_response_with(status);
    for name in [header::ALLOW, header::RETRY_AFTER, header::WWW_AUTHENTICATE] {
        if let Some(v) = response.headers().get(&name) {
            problem.headers_mut().insert(name, v.clone());
        }
    }
    problem
}

async fn healthz() -> Json<serde_json::Value> {
    Json(serde_json::json!({"status": "ok"}))
}

async fn readyz(State(state): State<AppState>) -> Response {
    match state.db.ping().await {
        Ok(()) => Json(serde_json::json!({"status": "ok", "database": state.db.backend()})).into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "readiness check failed");
            Problem::new(StatusCode::SERVICE_UNAVAILABLE, "The database is not reachable.").into_response_with(StatusCode::SERVICE_UNAVAILABLE)
        }
    }
}

async fn metrics(State(state): State<AppState>) -> Response {
    for (pool, size, idle) in state.db.pool_stats() {
        metrics::gauge!("db_pool_connections", "pool" => pool).set(size as f64);
        metrics::gauge!("db_pool_idle_connections", "pool" => pool).set(idle as f64);
    }
    if let Some(counts) = state.db.one_statement_changes() {
        metrics::counter!("db_one_statement_changes_total", "outcome" => "committed").absolute(counts.committed);
        metrics::counter!("db_one_statement_changes_total", "outcome" => "refused").absolute(counts.refused);
        metrics::counter!("db_one_statement_shared_changes_total").absolute(counts.shared);
    }
    if let Some(bytes) = state.db.engine_memory_bytes() {
        metrics::gauge!("sqlite_memory_bytes").set(bytes as f64);
    }
    let mut response = state.metrics.render().into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::{Body, to_bytes};
    use tower::ServiceExt;

    async fn call(router: Router, path: &str) -> (StatusCode, axum::http::HeaderMap, serde_json::Value) {
        let response = router.oneshot(Request::get(path).body(Body::empty()).unwrap()).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let body = to_bytes(response.into_body(), 1 << 20).await.unwrap();
        (status, headers, serde_json::from_slice(&body).unwrap())
    }

    #[tokio::test]
    async fn a_panic_is_a_500_problem_without_internals() {
        async fn boom() -> &'static str {
            panic!("secret internals")
        }
        let routes = Router::new().route("/boom", get(boom));
        let (status, headers, body) = call(with_middleware(routes, Duration::from_secs(5), 1024), "/boom").await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(headers[header::CONTENT_TYPE], crate::error::PROBLEM_JSON);
        assert_eq!(body["status"], 500);
        assert!(!body.to_string().contains("secret"));
    }

    #[tokio::test]
    async fn a_slow_request_is_cut_off_with_a_503_problem_and_retry_after() {
        let routes = Router::new().route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                "late"
            }),
        );
        let (status, headers, body) = call(with_middleware(routes, Duration::from_millis(50), 1024), "/slow").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(headers[header::CONTENT_TYPE], crate::error::PROBLEM_JSON);
        assert_eq!(headers[header::RETRY_AFTER], "1");
        assert_eq!(body["detail"], "The request took longer than the server allows; retry shortly.");
    }
}
