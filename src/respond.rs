//! Response helpers shared by the handlers.

use axum::{
    Json,
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde::Serialize;

use crate::{db::DbError, error::ApiError};

/// `201 Created` with a `Location` header and the new record.
pub fn created<T: Serialize>(location: String, body: T) -> Response {
    let mut response = (StatusCode::CREATED, Json(body)).into_response();
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
