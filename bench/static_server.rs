//! The ceiling for the load benchmark: the same HTTP stack as autoshop (tokio's multi-threaded
//! runtime, axum 0.8, hyper) answering every request with a fixed body (a response captured from
//! the real endpoint), so the ratio to it shows what the application itself costs.
//!
//! `bench_static --listen 127.0.0.1:18081 --body FILE`

use std::net::SocketAddr;

use axum::{
    Router,
    body::Bytes,
    http::{HeaderValue, header},
    response::{IntoResponse, Response},
};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut listen: SocketAddr = "127.0.0.1:18081".parse()?;
    let mut body_file = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--listen" => listen = args.next().ok_or_else(|| anyhow::anyhow!("--listen ADDR"))?.parse()?,
            "--body" => body_file = args.next(),
            other => anyhow::bail!("unknown argument {other}: --listen ADDR --body FILE"),
        }
    }
    let body = Bytes::from(std::fs::read(body_file.ok_or_else(|| anyhow::anyhow!("--body FILE is required"))?)?);
    let app = Router::new().fallback(move || {
        let body = body.clone();
        async move {
            let mut response: Response = body.into_response();
            response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            response
        }
    });
    let listener = tokio::net::TcpListener::bind(listen).await?;
    axum::serve(listener, app).await?;
    Ok(())
}
