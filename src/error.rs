//! One error type for the whole API, rendered as RFC 9457 problem+json.

use std::collections::BTreeMap;

use axum::{
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde::Serialize;
use utoipa::ToSchema;

use crate::db::DbError;

pub const PROBLEM_JSON: &str = "application/problem+json";

/// Validation messages by field (Laravel's `errors` map), in field order.
#[derive(Debug, Default, Clone, Serialize)]
pub struct FieldErrors(BTreeMap<String, Vec<String>>);

impl FieldErrors {
    pub fn add(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.entry(field.into()).or_default().push(message.into());
    }

    pub fn has(&self, field: &str) -> bool {
        self.0.contains_key(field)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds `other`'s messages with their fields prefixed (`row 3.` + `first_name`).
    pub fn absorb(&mut self, prefix: &str, other: FieldErrors) {
        for (field, messages) in other.0 {
            self.0.entry(format!("{prefix}{field}")).or_default().extend(messages);
        }
    }

    /// `Ok(())` when nothing was recorded, else the 422 carrying every message.
    pub fn into_result(self) -> Result<(), ApiError> {
        if self.is_empty() { Ok(()) } else { Err(ApiError::Validation(self)) }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Gone(String),
    /// What the request was validated against (a shop's time zone) changed before it was
    /// written: sent again, it is validated afresh. Handlers retry it before it reaches a client.
    #[error("A record this request depends on changed while it was being written; send the request again.")]
    Outdated,
    /// The client paused sending the body longer than the body timeout.
    #[error("The request body did not arrive in time.")]
    BodyTimedOut,
    #[error("{0}")]
    PreconditionFailed(String),
    #[error("{0}")]
    PayloadTooLarge(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("The given data was invalid.")]
    Validation(FieldErrors),
    #[error("Too many requests for this API key; retry after {retry_after_secs} s.")]
    RateLimited { retry_after_secs: u64 },
    #[error("The database is unavailable; retry shortly.")]
    Unavailable,
    /// The server runs as many of this kind of request as it allows at once (exports).
    #[error("{0}")]
    Busy(String),
    /// The request ran past its deadline (`--request-timeout-secs`).
    #[error("The request took longer than the server allows; retry shortly.")]
    TimedOut,
    /// Logged in full; the client sees only a generic message.
    #[error("internal error: {0}")]
    Internal(String),
}

impl ApiError {
    /// A 422 with one message on one field.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        let mut errors = FieldErrors::default();
        errors.add(field, message);
        ApiError::Validation(errors)
    }

    pub fn not_found(what: &str) -> Self {
        ApiError::NotFound(format!("{what} not found."))
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) | ApiError::Outdated => StatusCode::CONFLICT,
            ApiError::Gone(_) => StatusCode::GONE,
            ApiError::PreconditionFailed(_) => StatusCode::PRECONDITION_FAILED,
            ApiError::BodyTimedOut => StatusCode::REQUEST_TIMEOUT,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Validation(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable | ApiError::TimedOut | ApiError::Busy(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl From<DbError> for ApiError {
    fn from(e: DbError) -> Self {
        match e {
            DbError::Unavailable(e) => {
                tracing::warn!(error = %e, "database unavailable");
                ApiError::Unavailable
            }
            DbError::BayNotInShop => ApiError::invalid("column", "The column field must name a bay of the appointment's shop."),
            DbError::Outdated => ApiError::Outdated,
            other => ApiError::Internal(other.to_string()),
        }
    }
}

/// The problem+json body (RFC 9457). `errors` is present on validation failures only.
#[derive(Debug, Serialize, ToSchema)]
pub struct Problem {
    /// Always `about:blank`: the status and `title` identify the problem class.
    #[serde(rename = "type")]
    pub kind: String,
    /// The HTTP status phrase.
    pub title: String,
    pub status: u16,
    /// What went wrong, for a human.
    pub detail: String,
    /// Validation messages keyed by field or query parameter name.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<BTreeMap<String, Vec<String>>>)]
    pub errors: Option<FieldErrors>,
}

impl Problem {
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        Problem {
            kind: "about:blank".into(),
            title: status.canonical_reason().unwrap_or("Error").into(),
            status: status.as_u16(),
            detail: detail.into(),
            errors: None,
        }
    }

    pub fn into_response_with(self, status: StatusCode) -> Response {
        let body = serde_json::to_vec(&self).unwrap_or_default();
        let mut response = (status, body).into_response();
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        response
    }
}

fn validation_detail(errors: &FieldErrors) -> String {
    let mut messages = errors.0.values().flatten();
    let first = messages.next().cloned().unwrap_or_else(|| "The given data was invalid.".into());
    match messages.count() {
        0 => first,
        1 => format!("{first} (and 1 more error)"),
        n => format!("{first} (and {n} more errors)"),
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let retry_after = match &self {
            ApiError::RateLimited { retry_after_secs } => Some(*retry_after_secs),
            ApiError::Unavailable | ApiError::TimedOut => Some(1),
            ApiError::Busy(_) => Some(5),
            _ => None,
        };
        let problem = match self {
            ApiError::Validation(errors) => Problem {
                detail: validation_detail(&errors),
                errors: Some(errors),
                ..Problem::new(status, "")
            },
            ApiError::Internal(message) => {
                tracing::error!(error = %message, "request failed");
                Problem::new(status, "An unexpected error occurred.")
            }
            other => Problem::new(status, other.to_string()),
        };
        let mut response = problem.into_response_with(status);
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(secs) = retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_detail_counts_the_other_messages() {
        let mut errors = FieldErrors::default();
        errors.add("a", "The a field is required.");
        assert_eq!(validation_detail(&errors), "The a field is required.");
        errors.add("b", "The b field is required.");
        errors.add("b", "The b field must be a string.");
        assert_eq!(validation_detail(&errors), "The a field is required. (and 2 more errors)");
    }
}
