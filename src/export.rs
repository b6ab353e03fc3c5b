//! Exports: a list's rows as a streamed CSV file (decisions §16). The rows come from the
//! database in batches through a short channel, each batch becomes one chunk of the body, so a
//! million-row export starts at once and holds a few batches in memory whatever its size.

use axum::{
    body::{Body, Bytes},
    http::{HeaderValue, header},
    response::{IntoResponse, Response},
};
use serde::Serialize;
use utoipa::openapi::path::{Parameter, ParameterIn};

use crate::{
    csv,
    db::{FromRow, Query},
    error::{ApiError, FieldErrors},
    extract::QueryParams,
    state::AppState,
};

/// Rows per chunk of the body, and chunks read ahead of the client.
const BATCH: usize = 500;
const DEPTH: usize = 4;

pub const CSV: &str = "text/csv; charset=utf-8; header=present";

/// Answers `200 text/csv`: the header row named after `sample`'s fields, then one record per row
/// of `q` as the resource `R` shows it. The answer waits for the database's first row (or the
/// end of an empty result), so an outage before any row is a 503 like any request's. A database error after that
/// ends the body without its last chunk, so the client sees a broken transfer, never a short file
/// that looks complete.
///
/// At most `--max-exports` run at once per server (each holds a database connection of its own
/// while its read runs): one more is a 503 with `Retry-After`.
pub async fn csv_response<T, R>(state: &AppState, q: Query, sample: R, name: &str) -> Result<Response, ApiError>
where
    T: FromRow,
    R: Serialize + From<T> + Send + 'static,
{
    let running = state.exports.clone().try_acquire_owned().map_err(|_| {
        ApiError::Busy(format!("This server runs {} exports at once already; retry shortly.", state.config.max_exports))
    })?;
    // The permit goes with the read, which ends (and closes its connection) once the body is
    // dropped (a download given up, an answer cut at its deadline) or its last row is read.
    let mut rows = state.db.stream::<T, _>(q, BATCH, DEPTH, running);
    let mut first = String::new();
    csv::push_header(&mut first, &csv::header(&sample));
    match rows.recv().await {
        Some(Err(e)) => return Err(e.into()),
        Some(Ok(batch)) => push_records::<T, R>(&mut first, batch)?,
        None => {}
    }
    let chunks = futures_util::stream::unfold((Some(first), rows), |(first, mut rows)| async move {
        if let Some(first) = first {
            return Some((Ok(Bytes::from(first)), (None, rows)));
        }
        let chunk = match rows.recv().await? {
            Ok(batch) => {
                let mut chunk = String::with_capacity(batch.len() * 256);
                push_records::<T, R>(&mut chunk, batch).map(|()| chunk)
            }
            Err(e) => Err(ApiError::from(e)),
        };
        match chunk {
            Ok(chunk) => Some((Ok(Bytes::from(chunk)), (None, rows))),
            Err(e) => {
                tracing::error!(error = %e, "an export stopped");
                Some((Err(std::io::Error::other(e.to_string())), (None, rows)))
            }
        }
    });
    // Fused: the gzip layer polls a body once more after its end, which `unfold` forbids.
    let chunks = futures_util::StreamExt::fuse(chunks);
    let day = chrono::Utc::now().format("%Y-%m-%d");
    let disposition = format!("attachment; filename=\"{name}-{day}.csv\"");
    let mut response = Body::from_stream(chunks).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(CSV));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    Ok(response)
}

fn push_records<T, R: Serialize + From<T>>(out: &mut String, batch: Vec<T>) -> Result<(), ApiError> {
    for row in batch {
        csv::push_record(out, &R::from(row)).map_err(|e| ApiError::Internal(format!("an export could not write a record: {e}")))?;
    }
    Ok(())
}

/// An export takes a list's parameters but not its paging or its nested details.
pub fn refuse_list_only_parameters(params: &QueryParams) -> Result<(), ApiError> {
    let mut errors = FieldErrors::default();
    for name in ["page", "pageSize", "with_details"] {
        if params.get(name).is_some() {
            errors.add(name, format!("Exports return every matching row and no nested lists: the {name} parameter is not accepted."));
        }
    }
    errors.into_result()
}

/// A list's documented parameters without `page`, `pageSize` and `with_details`.
pub fn list_params(all: Vec<Parameter>) -> Vec<Parameter> {
    all.into_iter().filter(|p| !matches!(p.name.as_str(), "page" | "pageSize" | "with_details")).collect()
}

/// Where a list's parameters go (the query string), for [`utoipa::IntoParams::into_params`].
pub fn in_query() -> Option<ParameterIn> {
    Some(ParameterIn::Query)
}
