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

/// Query parameters for which an empty value is an error: `filter[trashed]` (decisions §10).
const EMPTY_IS_INVALID: [&str; 1] = ["filter[trashed]"];

/// Every optional query parameter also accepts an empty value (`?x=`), which counts as absent:
/// said in the schema so clients and fuzzers know an empty value is not an error. A required
/// parameter, and those of `EMPTY_IS_INVALID`, refuse it.
fn allow_empty_query_values(op: &mut Operation) {
    use utoipa::openapi::{
        path::ParameterIn,
        schema::{AnyOfBuilder, ObjectBuilder, Schema, Type},
    };
    for param in op.parameters.iter_mut().flatten() {
        let RefOr::T(param) = param else { continue };
        let required = matches!(param.required, utoipa::openapi::Required::True);
        if !matches!(param.parameter_in, ParameterIn::Query) || required || EMPTY_IS_INVALID.contains(&param.name.as_str()) {
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

/// Every `POST` takes `Idempotency-Key` (decisions §12): replays say so in a header; the key
/// with another request is a 422; a repeat while the first runs is a 409.
fn accept_idempotency_key(op: &mut Operation) {
    use utoipa::openapi::{
        Required,
        header::HeaderBuilder,
        path::{ParameterBuilder, ParameterIn},
        schema::{ObjectBuilder, Type},
    };
    let key = ObjectBuilder::new().schema_type(Type::String).min_length(Some(1)).max_length(Some(255)).pattern(Some("^[!-~]+$")).build();
    let parameter = ParameterBuilder::new()
        .name("Idempotency-Key")
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(
            "Makes the request safe to retry: the first request with a key runs and its answer is kept 24 hours (per API key); \
             a repeat with the same method, path and body gets that answer again with `Idempotent-Replayed: true` and writes \
             nothing. Failed requests are not kept.",
        ))
        .schema(Some(key))
        .build();
    op.parameters.get_or_insert_with(Vec::new).push(RefOr::T(parameter));
    let replayed = HeaderBuilder::new()
        .schema(Some(ObjectBuilder::new().schema_type(Type::String).enum_values(Some(["true"])).build()))
        .description(Some("Present on a replayed answer."))
        .build();
    for (status, response) in op.responses.responses.iter_mut() {
        if let (true, RefOr::T(response)) = (status.starts_with('2'), response) {
            response.headers.insert("Idempotent-Replayed".to_owned(), RefOr::T(replayed.clone()));
        }
    }
    op.responses.responses.entry("409".to_owned()).or_insert_with(|| {
        RefOr::T(problem_response("A request with the same Idempotency-Key is still running; retry after `Retry-After` seconds"))
    });
    op.responses.responses.entry("400".to_owned()).or_insert_with(|| RefOr::T(problem_response("Malformed `Idempotency-Key` header")));
    op.responses.responses.entry("422".to_owned()).or_insert_with(|| {
        RefOr::T(problem_response("The `Idempotency-Key` was used with another request (method, path or body)"))
    });
}

/// Query parameters whose rule is a computed pattern, given their schema here: utoipa's `pattern`
/// takes only a literal, and its `schema_with` drops a parameter's description and `required`.
const PARAM_SCHEMAS: [ParamSchema; 2] = [
    ("/api/v1/availability", "start_date", crate::schemas::booking_date),
    ("/api/v1/availability", "end_date", crate::schemas::booking_date),
];

/// (path, parameter, schema)
type ParamSchema = (&'static str, &'static str, fn() -> utoipa::openapi::schema::Object);

fn set_param_schemas(path: &str, op: &mut Operation) {
    for (_, name, schema) in PARAM_SCHEMAS.iter().filter(|(p, _, _)| *p == path) {
        let param = op.parameters.iter_mut().flatten().find_map(|param| match param {
            RefOr::T(param) if param.name == *name => Some(param),
            _ => None,
        });
        let param = param.unwrap_or_else(|| panic!("{path} has no parameter {name}"));
        param.schema = Some(RefOr::T(utoipa::openapi::schema::Schema::Object(schema())));
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
        if let Some(op) = item.post.as_mut() {
            accept_idempotency_key(op);
        }
        describe_conditions(path, item);
        for op in [&mut item.get, &mut item.put, &mut item.post, &mut item.delete, &mut item.patch].into_iter().flatten() {
            set_param_schemas(path, op);
            finish_operation(op);
        }
    }
    doc.info.version = env!("CARGO_PKG_VERSION").to_owned();
    crate::openapi_public::complete(&mut doc);
    doc
}

/// ETags and conditional requests (decisions §13): every answer carrying one resource has an
/// `ETag`; a single resource's `GET` takes `If-None-Match` (304), its `PUT` and `DELETE` take
/// `If-Match` (412).
fn describe_conditions(path: &str, item: &mut utoipa::openapi::path::PathItem) {
    use utoipa::openapi::{
        Required,
        header::HeaderBuilder,
        path::{ParameterBuilder, ParameterIn},
        schema::{ObjectBuilder, Type},
    };
    let etag = HeaderBuilder::new()
        .schema(Some(ObjectBuilder::new().schema_type(Type::String).build()))
        .description(Some(
            "Strong entity tag of the resource's current representation",
        ))
        .build();
    let condition = |name: &str, description: &str| {
        RefOr::T(
            ParameterBuilder::new()
                .name(name)
                .parameter_in(ParameterIn::Header)
                .required(Required::False)
                .description(Some(description))
                .schema(Some(ObjectBuilder::new().schema_type(Type::String).pattern(Some(crate::schemas::ETAG_LIST)).build()))
                .build(),
        )
    };
    let malformed = |op: &mut Operation, name: &str| {
        op.responses.responses.entry("400".to_owned()).or_insert_with(|| RefOr::T(problem_response(&format!("Malformed `{name}` header"))));
    };
    let tag_responses = |op: &mut Operation, statuses: &[&str]| {
        for (status, response) in op.responses.responses.iter_mut() {
            if let (true, RefOr::T(response)) = (statuses.contains(&status.as_str()), response) {
                response
                    .headers
                    .insert("ETag".to_owned(), RefOr::T(etag.clone()));
            }
        }
    };
    if let Some(op) = item.post.as_mut() {
        tag_responses(op, &["201"]);
    }
    if !path.ends_with('}') {
        return;
    }
    if let Some(op) = item.get.as_mut() {
        tag_responses(op, &["200"]);
        op.parameters.get_or_insert_with(Vec::new).push(condition(
            "If-None-Match",
            "ETags (or `*`) the client holds: when one matches, the answer is 304 with no body",
        ));
        malformed(op, "If-None-Match");
        let not_modified = ResponseBuilder::new()
            .description("Not modified: the resource still has the ETag sent")
            .header("ETag", etag.clone())
            .build();
        op.responses
            .responses
            .insert("304".to_owned(), RefOr::T(not_modified));
    }
    for op in [item.put.as_mut(), item.delete.as_mut()]
        .into_iter()
        .flatten()
    {
        tag_responses(op, &["200"]);
        op.parameters.get_or_insert_with(Vec::new).push(condition(
            "If-Match",
            "Write only if the resource still has one of these ETags (or exists, for `*`); checked atomically with the write",
        ));
        malformed(op, "If-Match");
        op.responses.responses.insert(
            "412".to_owned(),
            RefOr::T(problem_response(
                "The resource changed since the ETag in If-Match: nothing was written",
            )),
        );
    }
}
