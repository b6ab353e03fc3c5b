//! Response helpers shared by the handlers.

use axum::{
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde::Serialize;
use std::collections::HashMap;

use crate::{conditional::json_with_etag, db::DbError, error::ApiError};

/// `201 Created` with a `Location` header and the new record, with its `ETag`.
pub fn created<T: Serialize>(location: String, body: T) -> Response {
    let mut response = match serde_json::to_vec(&body) {
        Ok(body) => json_with_etag(StatusCode::CREATED, body),
        Err(e) => return ApiError::Internal(format!("serializing a resource: {e}")).into_response(),
    };
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

/// Maps a unique-constraint violation to a 422 on the field it guards.
pub fn unique_as_invalid(field: &'static str) -> impl FnOnce(DbError) -> ApiError {
    move |e| match e {
        DbError::Unique => ApiError::invalid(field, format!("The {field} has already been taken.")),
        other => other.into(),
    }
}

/// Groups rows by a parent's id (the bays of each shop, the ship-tos of each customer),
/// converting each and keeping their order: what an embedded list of a page is made from.
pub fn group_by<R, T>(rows: Vec<R>, parent_id: impl Fn(&R) -> i64, into: impl Fn(R) -> T) -> HashMap<i64, Vec<T>> {
    let mut out: HashMap<i64, Vec<T>> = HashMap::new();
    for row in rows {
        out.entry(parent_id(&row)).or_default().push(into(row));
    }
    out
}

/// `200 OK` with `value` as JSON, written into one buffer of about `capacity` bytes (a page of
/// rows grows a small buffer many times over otherwise).
pub fn json_ok<T: Serialize>(value: &T, capacity: usize) -> Response {
    let mut body = Vec::with_capacity(capacity);
    if let Err(e) = serde_json::to_writer(&mut body, value) {
        return ApiError::Internal(format!("serializing a response: {e}")).into_response();
    }
    let mut response = (StatusCode::OK, body).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}
