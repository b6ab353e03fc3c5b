//! Request extractors that turn every malformed input into our own problem+json errors.

use axum::{
    body::Bytes,
    extract::{FromRequest, FromRequestParts, Path, Request},
    http::{StatusCode, header, request::Parts},
    response::{IntoResponse, Response},
};
use serde::de::DeserializeOwned;

use crate::{conditional::IfMatch, error::ApiError};

/// What a conditional write of one resource names: the path's id (or ids, as a tuple) and the
/// `If-Match` header, read in that order.
pub struct Target<P = String> {
    pub id: P,
    pub if_match: IfMatch,
}

impl<S: Send + Sync, P: DeserializeOwned + Send> FromRequestParts<S> for Target<P> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        let Path(id) = Path::<P>::from_request_parts(parts, state).await.map_err(IntoResponse::into_response)?;
        let if_match = IfMatch::from_request_parts(parts, state).await.map_err(IntoResponse::into_response)?;
        Ok(Target { id, if_match })
    }
}

/// A `PUT` of one resource: its [`Target`], then its [`JsonBody`]. A body that is not JSON is
/// refused at once (400, 413, 415); a value of the wrong type (422) is the body's validation, so
/// it waits in `input` until the handler has found the resource: 404 comes first (docs/api.md,
/// order of checks).
pub struct Replace<T, P = String> {
    pub id: P,
    pub if_match: IfMatch,
    pub input: Result<T, ApiError>,
}

impl<S: Send + Sync, T: DeserializeOwned, P: DeserializeOwned + Send> FromRequest<S> for Replace<T, P> {
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Response> {
        let (mut parts, body) = req.into_parts();
        let Target { id, if_match } = Target::<P>::from_request_parts(&mut parts, state).await?;
        let input = match JsonBody::<T>::from_request(Request::from_parts(parts, body), state).await {
            Ok(JsonBody(input)) => Ok(input),
            Err(e @ ApiError::Validation(_)) => Err(e),
            Err(e) => return Err(e.into_response()),
        };
        Ok(Replace { id, if_match, input })
    }
}

/// A JSON request body. Malformed JSON is a 400, a missing or wrong content type a 415, a body
/// over the limit a 413, and a value of the wrong type a 422 keyed by the field's path.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        if !has_json_content_type(req.headers()) {
            return Err(ApiError::UnsupportedMediaType(
                "Expected a request body with Content-Type: application/json.".into(),
            ));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::PayloadTooLarge("The request body is larger than the limit.".into())
            } else if crate::server::is_body_timeout(&rejection) {
                ApiError::BodyTimedOut
            } else {
                ApiError::BadRequest(format!("Could not read the request body: {}", rejection.body_text()))
            }
        })?;
        let mut value: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::BadRequest(format!("Malformed JSON: {e}.")))?;
        if !value.is_object() {
            return Err(ApiError::invalid("body", "The request body must be a JSON object."));
        }
        whole_numbers_as_integers(&mut value);
        // Unknown fields are ignored (decisions §2), so only what the body type reads is checked.
        let mut ignored: Vec<Vec<String>> = Vec::new();
        let mut on_ignored = |path: serde_ignored::Path| ignored.push(segments(&path));
        let read = serde_ignored::Deserializer::new(&value, &mut on_ignored);
        let body = serde_path_to_error::deserialize(read).map_err(|e| {
            let field = field_name(e.path());
            let message = describe_type_error(&field, &e.inner().to_string());
            ApiError::invalid(field, message)
        })?;
        let mut nul = Vec::new();
        find_nul(&value, &mut Vec::new(), &mut nul);
        if let Some(path) = nul.into_iter().find(|p| !ignored.iter().any(|i| p.starts_with(i))) {
            let field = if path.is_empty() { "body".to_owned() } else { path.join(".") };
            return Err(ApiError::invalid(field.clone(), format!("The {field} field must not contain NUL characters.")));
        }
        Ok(JsonBody(body))
    }
}

/// A whole number written with a fraction (`2.0`) is the integer 2, as JSON Schema reads it, so
/// an integer field takes it. Only values a float holds exactly (up to 2^53) are rewritten.
pub(crate) fn whole_numbers_as_integers(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Number(n) if !n.is_i64() && !n.is_u64() => {
            if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_992.0) {
                *value = Value::from(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_numbers_as_integers),
        Value::Object(map) => map.values_mut().for_each(whole_numbers_as_integers),
        _ => {}
    }
}

/// The path of an ignored field, as segments (`["hours", "0", "extra"]`).
fn segments(path: &serde_ignored::Path) -> Vec<String> {
    use serde_ignored::Path;
    match path {
        Path::Root => Vec::new(),
        Path::Seq { parent, index } => [segments(parent), vec![index.to_string()]].concat(),
        Path::Map { parent, key } => [segments(parent), vec![key.clone()]].concat(),
        Path::Some { parent } | Path::NewtypeStruct { parent } | Path::NewtypeVariant { parent } => segments(parent),
    }
}

/// The paths of the strings (and keys) holding a NUL character: no database stores one in text
/// (PostgreSQL refuses it), so it is a validation error rather than a failure deep down.
fn find_nul(value: &serde_json::Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match value {
        serde_json::Value::String(s) if s.contains('\0') => out.push(path.clone()),
        serde_json::Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                path.push(i.to_string());
                find_nul(v, path, out);
                path.pop();
            }
        }
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                path.push(k.clone());
                if k.contains('\0') {
                    out.push(path.clone());
                } else {
                    find_nul(v, path, out);
                }
                path.pop();
            }
        }
        _ => {}
    }
}

/// A body path in Laravel's dotted form (`hours.0.day`), as every validation message keys it.
fn field_name(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let parts: Vec<String> = path
        .iter()
        .map(|segment| match segment {
            Segment::Seq { index } => index.to_string(),
            Segment::Map { key } => key.clone(),
            Segment::Enum { variant } => variant.clone(),
            Segment::Unknown => "?".into(),
        })
        .collect();
    if parts.is_empty() { "body".into() } else { parts.join(".") }
}

fn has_json_content_type(headers: &axum::http::HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let mime = value.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))
}

/// Turns serde's "invalid type: string \"x\", expected i64" into a sentence an integrator reads.
fn describe_type_error(field: &str, serde_message: &str) -> String {
    let expected = serde_message.rsplit("expected ").next().unwrap_or("");
    let wanted = if serde_message.contains("expected ") {
        match expected {
            e if e.starts_with('i') || e.starts_with('u') || e.contains("integer") => "an integer",
            e if e.starts_with('f') || e.contains("number") => "a number",
            e if e.contains("bool") => "a boolean",
            e if e.contains("string") || e.contains("str") => "a string",
            e if e.contains("sequence") || e.contains("array") => "an array",
            e if e.contains("map") || e.contains("struct") => "an object",
            _ => "",
        }
    } else {
        ""
    };
    if wanted.is_empty() {
        format!("The {field} field is invalid: {serde_message}.")
    } else {
        format!("The {field} field must be {wanted}.")
    }
}

/// The raw query string as ordered `(name, value)` pairs, percent-decoded.
#[derive(Debug, Clone, Default)]
pub struct QueryParams(pub Vec<(String, String)>);

impl QueryParams {
    pub fn parse(query: &str) -> Self {
        QueryParams(form_urlencoded::parse(query.as_bytes()).into_owned().collect())
    }

    /// Parses a request's query string, refusing NUL characters (422 keyed by the parameter).
    pub fn from_request_query(query: &str) -> Result<Self, ApiError> {
        let params = Self::parse(query);
        if let Some((name, _)) = params.0.iter().find(|(k, v)| k.contains('\0') || v.contains('\0')) {
            return Err(ApiError::invalid(name.clone(), format!("The {name} parameter must not contain NUL characters.")));
        }
        Ok(params)
    }

    /// The last value given for `name` (Laravel's behaviour for repeated scalars). An empty or
    /// blank value (`?page=`, `?page=%20`) counts as absent, as Laravel's trimming and
    /// empty-string-to-null conversion have it.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).filter(|v| !v.trim().is_empty())
    }

    /// A boolean parameter: `true/false/1/0` (absent: `None`).
    pub fn bool(&self, name: &str) -> Result<Option<bool>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => parse_bool(v)
                .map(Some)
                .ok_or_else(|| ApiError::invalid(name, format!("The {name} parameter must be true, false, 1 or 0."))),
        }
    }

    /// An integer parameter (absent: `None`), read by [`parse_integer`].
    pub fn i64(&self, name: &str) -> Result<Option<i64>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => parse_integer(v)
                .map(Some)
                .ok_or_else(|| ApiError::invalid(name, format!("The {name} parameter must be an integer."))),
        }
    }
}

/// An integer as a query parameter writes it: decimal digits, optionally signed, around them
/// white space. A fraction of zeros (`2.0`) is allowed too: JSON Schema reads `2.0` as the
/// integer 2, a body takes it ([`JsonBody`]), and a client that copies a number from a body into
/// a query prints it so.
pub fn parse_integer(raw: &str) -> Option<i64> {
    let raw = raw.trim();
    let whole = match raw.split_once('.') {
        Some((whole, zeros)) if !zeros.is_empty() && zeros.bytes().all(|b| b == b'0') => whole,
        Some(_) => return None,
        None => raw,
    };
    whole.parse().ok()
}

/// Whether a path's percent-escapes decode to UTF-8, decoded as axum decodes a path parameter
/// (a `%` not followed by two hex digits stays as it is).
pub fn decodes_to_utf8(path: &str) -> bool {
    percent_encoding::percent_decode_str(path).decode_utf8().is_ok()
}

pub fn parse_bool(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" => Some(true),
        "false" | "0" => Some(false),
        _ => None,
    }
}

impl<S: Send + Sync> FromRequestParts<S> for QueryParams {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        QueryParams::from_request_query(parts.uri.query().unwrap_or(""))
    }
}

/// A record id from the path. Anything that is not a positive integer cannot name a record, so
/// it answers 404 like an id that does not exist.
pub fn path_id(raw: &str, what: &str) -> Result<i64, ApiError> {
    raw.parse::<i64>().ok().filter(|id| *id > 0).ok_or_else(|| ApiError::not_found(what))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_decode_to_utf8_or_not() {
        assert!(decodes_to_utf8("/api/v1/appointments/42"));
        assert!(decodes_to_utf8("/api/v1/customers/%C3%A9"));
        assert!(decodes_to_utf8("/api/v1/customers/100%"));
        assert!(decodes_to_utf8("/api/v1/customers/%zz"));
        assert!(!decodes_to_utf8("/api/v1/appointments/%FF"));
        assert!(!decodes_to_utf8("/api/v1/customers/%C3"));
    }

    #[test]
    fn type_errors_read_as_sentences() {
        assert_eq!(
            describe_type_error("shop_id", "invalid type: string \"x\", expected i64"),
            "The shop_id field must be an integer."
        );
        assert_eq!(
            describe_type_error("active", "invalid type: integer `3`, expected a boolean"),
            "The active field must be a boolean."
        );
        assert_eq!(
            describe_type_error("title", "invalid type: integer `3`, expected a string"),
            "The title field must be a string."
        );
    }

    #[test]
    fn query_params_decode_brackets_and_keep_the_last_value() {
        let q = QueryParams::parse("filter%5Bshop_id%5D=3&page=1&page=2&name=a+b");
        assert_eq!(q.get("filter[shop_id]"), Some("3"));
        assert_eq!(q.get("page"), Some("2"));
        assert_eq!(q.get("name"), Some("a b"));
        assert_eq!(QueryParams::parse("page=").get("page"), None, "empty is absent");
    }

    #[test]
    fn nul_characters_are_found_by_path() {
        let nuls = |v: serde_json::Value| {
            let mut out = Vec::new();
            find_nul(&v, &mut Vec::new(), &mut out);
            out.into_iter().map(|p| p.join(".")).collect::<Vec<_>>()
        };
        assert_eq!(nuls(serde_json::json!({"a": "ok", "b": [1, {"c": "x\u{0}"}], "d\u{0}": 1})), vec!["b.1.c", "d\u{0}"]);
        assert!(nuls(serde_json::json!({"a": "ok"})).is_empty());
        assert!(QueryParams::from_request_query("filter%5Bx%5D=a%00").is_err());
    }

    #[test]
    fn integer_parameters_take_a_fraction_of_zeros() {
        for (raw, parsed) in [
            ("2", Some(2)),
            (" -7 ", Some(-7)),
            ("+3", Some(3)),
            ("2.0", Some(2)),
            ("2.000", Some(2)),
            ("-0.0", Some(0)),
            ("9223372036854775807", Some(i64::MAX)),
            ("2.5", None),
            ("2.", None),
            (".0", None),
            ("2.0.0", None),
            ("2e0", None),
            ("0x10", None),
            ("9223372036854775808", None),
            ("", None),
        ] {
            assert_eq!(parse_integer(raw), parsed, "{raw:?}");
        }
    }

    #[test]
    fn whole_numbers_become_integers() {
        let mut v = serde_json::json!({"a": 2.0, "b": [-0.0, 2.5, 1e300], "c": 7});
        whole_numbers_as_integers(&mut v);
        assert_eq!(v, serde_json::json!({"a": 2, "b": [0, 2.5, 1e300], "c": 7}));
    }

    #[test]
    fn booleans_accept_the_four_spellings() {
        for (raw, want) in [("true", true), ("1", true), ("FALSE", false), ("0", false)] {
            assert_eq!(parse_bool(raw), Some(want));
        }
        assert_eq!(parse_bool("yes"), None);
    }

    #[test]
    fn path_ids_must_be_positive_integers() {
        assert_eq!(path_id("12", "Bay").unwrap(), 12);
        assert!(path_id("abc", "Bay").is_err());
        assert!(path_id("-1", "Bay").is_err());
        assert!(path_id("99999999999999999999", "Bay").is_err());
    }
}
