//! Conditional requests (RFC 9110 §13): every response carrying one resource has a strong
//! `ETag`, a hash of the resource's JSON exactly as the client receives it, so it changes
//! whenever any part of that representation changes (a bay rename changes its appointments').
//! `GET` honours `If-None-Match` with 304; `PUT` and `DELETE` honour `If-Match` with 412, the
//! check made inside the write's transaction on a locked row.

use axum::{
    body::Body,
    extract::{FromRequestParts, Request},
    http::{HeaderMap, HeaderValue, Method, StatusCode, header, request::Parts},
    middleware::Next,
    response::{IntoResponse, Response},
};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::{db::DbError, error::ApiError};

/// The strong ETag of a representation: 128 bits of its SHA-256, quoted.
pub fn etag_of_bytes(body: &[u8]) -> String {
    let digest = Sha256::digest(body);
    let mut tag = String::with_capacity(34);
    tag.push('"');
    crate::hex::push(&mut tag, &digest[..16]);
    tag.push('"');
    tag
}

/// The ETag of `value` as the API serializes it.
pub fn etag_of<T: Serialize>(value: &T) -> Result<String, ApiError> {
    let body = serde_json::to_vec(value).map_err(|e| ApiError::Internal(format!("serializing a resource: {e}")))?;
    Ok(etag_of_bytes(&body))
}

/// A `200 OK` carrying one resource, with its `ETag`.
pub struct One<T>(pub T);

impl<T: Serialize> IntoResponse for One<T> {
    fn into_response(self) -> Response {
        match serde_json::to_vec(&self.0) {
            Ok(body) => json_with_etag(StatusCode::OK, body),
            Err(e) => ApiError::Internal(format!("serializing a resource: {e}")).into_response(),
        }
    }
}

/// A JSON response whose `ETag` is the hash of `body`.
pub fn json_with_etag(status: StatusCode, body: Vec<u8>) -> Response {
    let tag = etag_of_bytes(&body);
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Ok(value) = HeaderValue::from_str(&tag) {
        headers.insert(header::ETAG, value);
    }
    response
}

/// Replaces a response's `ETag` with `tag`: a create whose answer carries a secret, which the
/// resource's representation (and so its ETag) leaves out.
pub fn with_etag(mut response: Response, tag: &str) -> Response {
    if let Ok(value) = HeaderValue::from_str(tag) {
        response.headers_mut().insert(header::ETAG, value);
    }
    response
}

/// A parsed `If-Match` or `If-None-Match`: `*`, or a list of entity tags (quoted, weak ones
/// with their `W/` prefix kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TagList {
    Any,
    Tags(Vec<String>),
}

impl TagList {
    /// `None` when the header is absent; a 400 when it is not `*` or a list of quoted tags.
    pub fn from_headers(headers: &HeaderMap, name: header::HeaderName) -> Result<Option<TagList>, ApiError> {
        let mut tags = Vec::new();
        let mut seen = false;
        let mut star = false;
        for value in headers.get_all(&name) {
            seen = true;
            let text = value.to_str().map_err(|_| invalid(&name))?;
            for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                // `*` stands alone (RFC 9110: `"*" / #entity-tag`).
                if entry == "*" && !star && tags.is_empty() {
                    star = true;
                    continue;
                }
                if star {
                    return Err(invalid(&name));
                }
                let quoted = entry.strip_prefix("W/").unwrap_or(entry);
                let well_formed = quoted.len() >= 2 && quoted.starts_with('"') && quoted.ends_with('"') && !quoted[1..quoted.len() - 1].contains('"');
                if !well_formed {
                    return Err(invalid(&name));
                }
                tags.push(entry.to_owned());
            }
        }
        match (seen, tags.is_empty()) {
            _ if star => Ok(Some(TagList::Any)),
            (false, _) => Ok(None),
            (true, true) => Err(invalid(&name)),
            (true, false) => Ok(Some(TagList::Tags(tags))),
        }
    }

    /// Strong comparison (`If-Match`): a weak tag never matches.
    pub fn matches_strongly(&self, current: &str) -> bool {
        match self {
            TagList::Any => true,
            TagList::Tags(tags) => tags.iter().any(|t| t == current),
        }
    }

    /// Weak comparison (`If-None-Match`): `W/"x"` matches `"x"`.
    pub fn matches_weakly(&self, current: &str) -> bool {
        match self {
            TagList::Any => true,
            TagList::Tags(tags) => tags.iter().any(|t| t.strip_prefix("W/").unwrap_or(t) == current),
        }
    }
}

fn invalid(name: &header::HeaderName) -> ApiError {
    ApiError::BadRequest(format!("The {name} header must be * or a comma-separated list of quoted ETags."))
}

/// The `If-Match` of a `PUT` or `DELETE`.
pub struct IfMatch(pub Option<TagList>);

impl<S: Send + Sync> FromRequestParts<S> for IfMatch {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        TagList::from_headers(&parts.headers, header::IF_MATCH).map(IfMatch)
    }
}

impl IfMatch {
    /// Checks the condition against the representation the handler read before its
    /// transaction (`seen`) and the one it read, locked, inside it (`locked`; `None`: gone).
    /// Both must be the same representation, and it must match: the write then applies to
    /// exactly what the client saw. `*` asks only that the resource exist: a change since
    /// `seen` is then the write's to handle, as without the header.
    pub fn check<T: Serialize>(&self, seen: &T, locked: Option<&T>) -> Result<(), ApiError> {
        let Some(condition) = &self.0 else {
            return Ok(());
        };
        let Some(locked) = locked else {
            return Err(precondition_failed());
        };
        if *condition == TagList::Any {
            return Ok(());
        }
        let (seen, now) = (etag_of(seen)?, etag_of(locked)?);
        if now != seen || !condition.matches_strongly(&now) {
            return Err(precondition_failed());
        }
        Ok(())
    }

    /// Checks the condition inside a write's transaction: `seen` is the row the handler read
    /// and validated against, `locked` reads it again inside the transaction, locked (only
    /// when the request has an `If-Match`).
    pub async fn verify<T, R>(&self, seen: &R, locked: impl Future<Output = Result<Option<R>, DbError>>) -> Result<(), ApiError>
    where
        T: Serialize,
        R: Clone + Into<T>,
    {
        if self.0.is_none() {
            return Ok(());
        }
        let locked: Option<T> = locked.await?.map(Into::into);
        self.check(&seen.clone().into(), locked.as_ref())
    }

    /// [`IfMatch::check`] against a row the handler read locked itself.
    pub fn check_row<T, R>(&self, seen: &R, locked: &R) -> Result<(), ApiError>
    where
        T: Serialize,
        R: Clone + Into<T>,
    {
        if self.0.is_none() {
            return Ok(());
        }
        self.check::<T>(&seen.clone().into(), Some(&locked.clone().into()))
    }

    /// Checks the condition outside a transaction, where nothing is written when it holds
    /// (deleting what is deleted already).
    pub fn check_current<T: Serialize>(&self, current: &T) -> Result<(), ApiError> {
        self.check(current, Some(current))
    }

    pub fn is_present(&self) -> bool {
        self.0.is_some()
    }
}

fn precondition_failed() -> ApiError {
    ApiError::PreconditionFailed(
        "The resource has changed since the ETag in If-Match was issued: GET it again, then retry with its current ETag.".into(),
    )
}

/// Middleware answering `If-None-Match` (see [`honour_if_none_match`]).
pub async fn not_modified(request: Request, next: Next) -> Response {
    honour_if_none_match(request, |request| next.run(request)).await
}

/// `If-None-Match` on a `GET`: a 200 from `next` whose `ETag` matches becomes a 304 carrying
/// that `ETag`.
pub async fn honour_if_none_match<F: Future<Output = Response>>(request: Request, next: impl FnOnce(Request) -> F) -> Response {
    if request.method() != Method::GET || !request.headers().contains_key(header::IF_NONE_MATCH) {
        return next(request).await;
    }
    let condition = match TagList::from_headers(request.headers(), header::IF_NONE_MATCH) {
        Ok(Some(condition)) => condition,
        Ok(None) => return next(request).await,
        Err(e) => return e.into_response(),
    };
    let response = next(request).await;
    let current = response.headers().get(header::ETAG).and_then(|v| v.to_str().ok());
    match current {
        Some(tag) if response.status() == StatusCode::OK && condition.matches_weakly(tag) => {
            let mut not_modified = Response::new(Body::empty());
            *not_modified.status_mut() = StatusCode::NOT_MODIFIED;
            for name in [header::ETAG, header::CACHE_CONTROL, header::VARY] {
                if let Some(value) = response.headers().get(&name) {
                    not_modified.headers_mut().insert(name, value.clone());
                }
            }
            not_modified
        }
        _ => response,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(values: &[&str]) -> Result<Option<TagList>, ApiError> {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append(header::IF_MATCH, HeaderValue::from_str(v).unwrap());
        }
        TagList::from_headers(&headers, header::IF_MATCH)
    }

    #[test]
    fn parses_lists_star_and_rejects_bare_tokens() {
        assert_eq!(parse(&[]).unwrap(), None);
        assert_eq!(parse(&["*"]).unwrap(), Some(TagList::Any));
        assert_eq!(parse(&["\"a\", W/\"b\"", "\"c\""]).unwrap(), Some(TagList::Tags(vec!["\"a\"".into(), "W/\"b\"".into(), "\"c\"".into()])));
        for bad in ["abc", "\"a", "", "W/x", "\"a\"b\"", "*, \"a\"", "\"a\", *", "*, *"] {
            assert!(parse(&[bad]).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn strong_comparison_ignores_weak_tags_and_weak_comparison_does_not() {
        let list = parse(&["W/\"x\", \"y\""]).unwrap().unwrap();
        assert!(!list.matches_strongly("\"x\""));
        assert!(list.matches_strongly("\"y\""));
        assert!(list.matches_weakly("\"x\""));
        assert!(!list.matches_weakly("\"z\""));
    }

    #[test]
    fn etag_is_quoted_and_follows_every_byte() {
        let a = etag_of_bytes(br#"{"id":1,"title":"Bay 1"}"#);
        let b = etag_of_bytes(br#"{"id":1,"title":"Bay 2"}"#);
        assert_eq!(a.len(), 34);
        assert!(a.starts_with('"') && a.ends_with('"'));
        assert_ne!(a, b);
        assert_eq!(a, etag_of_bytes(br#"{"id":1,"title":"Bay 1"}"#));
    }
}
