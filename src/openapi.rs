//! Finishing touches on the OpenAPI document generated from the handlers: the bearer
//! requirement and the error responses every `/api/v1` route shares, and the problem+json media
//! type on every error response.

use utoipa::openapi::{
    OpenApi, Ref, RefOr,
    content::ContentBuilder,
    path::Operation,
    response::{Response, ResponseBuilder},
    security::SecurityRequirement,
};

use crate::error::PROBLEM_JSON;

const SHARED_ERRORS: [(&str, &str); 5] = [
    ("401", "Missing, malformed, unknown or revoked API key"),
    ("403", "The key's role or shop list does not allow this operation"),
    ("429", "Rate limit of the API key exceeded; see Retry-After"),
    ("500", "Unexpected failure (no internals are disclosed)"),
    ("503", "Database unavailable or request timed out; retry later"),
];

fn problem_response(description: &str) -> Response {
    ResponseBuilder::new()
        .description(description)
        .content(PROBLEM_JSON, ContentBuilder::new().schema(Some(Ref::from_schema_name("Problem"))).build())
        .build()
}

const BODY_ERRORS: [(&str, &str); 4] = [
    ("400", "Malformed JSON"),
    ("413", "Request body larger than the limit"),
    ("415", "The body is not `application/json`"),
    ("422", "Validation failed; `errors` maps each field to its messages"),
];

/// Every query parameter also accepts an empty value (`?x=`), which counts as absent: said in
/// the schema so clients and fuzzers know an empty value is not an error.
fn allow_empty_query_values(op: &mut Operation) {
    use utoipa::openapi::{
        path::ParameterIn,
        schema::{AnyOfBuilder, ObjectBuilder, Schema, Type},
    };
    for param in op.parameters.iter_mut().flatten() {
        let RefOr::T(param) = param else { continue };
        if !matches!(param.parameter_in, ParameterIn::Query) {
            continue;
        }
        if matches!(param.schema, Some(RefOr::T(Schema::Array(_)))) {
            continue;
        }
        if let Some(schema) = param.schema.take() {
            let empty = ObjectBuilder::new().schema_type(Type::String).enum_values(Some([""])).build();
            param.schema = Some(RefOr::T(Schema::AnyOf(AnyOfBuilder::new().item(schema).item(empty).build())));
        }
    }
}

fn finish_operation(op: &mut Operation) {
    allow_empty_query_values(op);
    op.security = Some(vec![SecurityRequirement::new("bearer", Vec::<String>::new())]);
    let body_errors = if op.request_body.is_some() { &BODY_ERRORS[..] } else { &[] };
    for (status, description) in SHARED_ERRORS.iter().chain(body_errors) {
        op.responses.responses.entry((*status).to_owned()).or_insert_with(|| RefOr::T(problem_response(description)));
    }
    for (status, response) in op.responses.responses.iter_mut() {
        let RefOr::T(response) = response else { continue };
        if status.starts_with('4') || status.starts_with('5') {
            if let Some(content) = response.content.shift_remove("application/json") {
                response.content.insert(PROBLEM_JSON.to_owned(), content);
            }
        }
    }
}

pub fn finish(mut doc: OpenApi) -> OpenApi {
    for (path, item) in doc.paths.paths.iter_mut() {
        if !path.starts_with("/api/v1/") {
            continue;
        }
        for op in [&mut item.get, &mut item.put, &mut item.post, &mut item.delete, &mut item.patch].into_iter().flatten() {
            finish_operation(op);
        }
    }
    doc.info.version = env!("CARGO_PKG_VERSION").to_owned();
    doc
}
