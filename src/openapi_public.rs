//! What the published document owes integrators beyond the handlers' annotations: a description
//! on every response (OpenAPI requires one; generators refuse a document without), the
//! `Location` header of every 201, a server entry (the document's own origin), and the rule that
//! request text holds no NUL character, stated on every string a request carries.

use utoipa::openapi::{
    OpenApi, RefOr,
    header::HeaderBuilder,
    path::Operation,
    schema::{ArrayItems, ObjectBuilder, Schema, SchemaType, Type},
    server::Server,
};

/// The description of an error response an operation names without one. The errors every
/// route shares (401, 403, 429, 5xx, and the body errors) are described where they are added.
fn error_description(status: &str, op: &Operation) -> Option<&'static str> {
    Some(match status {
        "400" if op.request_body.is_some() => "Malformed JSON",
        "400" => "Unknown `filter[...]` key, `sort` field or `with[]` value; the message lists the allowed ones",
        "404" => "No such record, or not visible to the key (another company's, or outside the key's shops)",
        "422" => "Validation failed; `errors` maps each field or query parameter to its messages",
        _ => return None,
    })
}

fn complete_operation(op: &mut Operation) {
    let described: Vec<(String, &'static str)> = op
        .responses
        .responses
        .iter()
        .filter_map(|(status, r)| match r {
            RefOr::T(r) if r.description.is_empty() => error_description(status, op).map(|d| (status.clone(), d)),
            _ => None,
        })
        .collect();
    for (status, description) in described {
        if let Some(RefOr::T(r)) = op.responses.responses.get_mut(&status) {
            r.description = description.to_owned();
        }
    }
    if let Some(RefOr::T(created)) = op.responses.responses.get_mut("201") {
        let location = HeaderBuilder::new()
            .schema(Some(ObjectBuilder::new().schema_type(Type::String).build()))
            .description(Some("Path of the created (or, for a payment, the updated) record"))
            .build();
        created.headers.entry("Location".to_owned()).or_insert(RefOr::T(location));
    }
}

pub fn complete(doc: &mut OpenApi) {
    for item in doc.paths.paths.values_mut() {
        for op in [&mut item.get, &mut item.put, &mut item.post, &mut item.delete, &mut item.patch].into_iter().flatten() {
            complete_operation(op);
        }
    }
    // Relative: clients and tools resolve paths against the address they read the document from.
    doc.servers = Some(vec![Server::new("/")]);
    state_text_rules(doc);
    reference_generic_items(doc);
}

/// utoipa inlines a generic argument (`Page<Appointment>`'s items are a copy of `Appointment`),
/// so generated clients would have one class for a list's items and another for the record. An
/// array property whose items equal a component becomes a reference to that component.
fn reference_generic_items(doc: &mut OpenApi) {
    let Some(components) = doc.components.as_mut() else { return };
    let named: Vec<(String, serde_json::Value)> =
        components.schemas.iter().map(|(name, schema)| (name.clone(), serde_json::to_value(schema).unwrap_or_default())).collect();
    for schema in components.schemas.values_mut() {
        let RefOr::T(Schema::Object(object)) = schema else { continue };
        for property in object.properties.values_mut() {
            let RefOr::T(Schema::Array(array)) = property else { continue };
            let ArrayItems::RefOrSchema(items) = &mut array.items else { continue };
            if matches!(**items, RefOr::Ref(_)) {
                continue;
            }
            let inline = serde_json::to_value(&**items).unwrap_or_default();
            if let Some((name, _)) = named.iter().find(|(_, schema)| *schema == inline) {
                **items = RefOr::Ref(utoipa::openapi::Ref::from_schema_name(name.clone()));
            }
        }
    }
}

/// Text in a request never holds NUL (the server refuses it: no database stores it), and a
/// "not blank" field (annotated `pattern = r"\S"`) needs a character the server does not trim.
/// Both are said on every string schema of request bodies and query parameters: a string
/// without a pattern, format or enum gets `NO_NUL`, and `\S` becomes `NOT_BLANK`.
fn state_text_rules(doc: &mut OpenApi) {
    let json = serde_json::to_value(&*doc).unwrap_or_default();
    let mut request_schemas: Vec<String> = Vec::new();
    let mut pending: Vec<String> = Vec::new();
    collect_refs(&json["paths"], "requestBody", &mut pending);
    while let Some(name) = pending.pop() {
        if !request_schemas.contains(&name) {
            collect_refs(&json["components"]["schemas"][&name], "", &mut pending);
            request_schemas.push(name);
        }
    }
    if let Some(components) = doc.components.as_mut() {
        for name in &request_schemas {
            if let Some(schema) = components.schemas.get_mut(name) {
                rule_strings(schema);
            }
        }
    }
    for item in doc.paths.paths.values_mut() {
        for op in [&mut item.get, &mut item.put, &mut item.post, &mut item.delete, &mut item.patch].into_iter().flatten() {
            for param in op.parameters.iter_mut().flatten() {
                let RefOr::T(param) = param else { continue };
                if let (utoipa::openapi::path::ParameterIn::Query, Some(schema)) = (&param.parameter_in, param.schema.as_mut()) {
                    rule_strings(schema);
                }
            }
        }
    }
}

/// The component names `$ref`ed under `value` (only under keys named `under`, when given).
fn collect_refs(value: &serde_json::Value, under: &str, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                if k == "$ref" && under.is_empty() {
                    if let Some(name) = v.as_str().and_then(|r| r.strip_prefix("#/components/schemas/")) {
                        out.push(name.to_owned());
                    }
                }
                collect_refs(v, if k == under { "" } else { under }, out);
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect_refs(v, under, out)),
        _ => {}
    }
}

fn rule_strings(schema: &mut RefOr<Schema>) {
    use crate::schemas::{NO_NUL, NOT_BLANK};
    let RefOr::T(schema) = schema else { return };
    match schema {
        Schema::Object(object) => {
            let is_string = match &object.schema_type {
                SchemaType::Type(t) => *t == Type::String,
                SchemaType::Array(types) => types.contains(&Type::String),
                SchemaType::AnyValue => false,
            };
            if is_string && object.enum_values.is_none() && object.format.is_none() {
                match object.pattern.as_deref() {
                    None => object.pattern = Some(NO_NUL.to_owned()),
                    Some(r"\S") => object.pattern = Some(NOT_BLANK.to_owned()),
                    Some(_) => {}
                }
            }
            object.properties.values_mut().for_each(rule_strings);
        }
        Schema::Array(array) => {
            if let ArrayItems::RefOrSchema(items) = &mut array.items {
                rule_strings(items);
            }
        }
        Schema::OneOf(one) => one.items.iter_mut().for_each(rule_strings),
        Schema::AnyOf(any) => any.items.iter_mut().for_each(rule_strings),
        Schema::AllOf(all) => all.items.iter_mut().for_each(rule_strings),
        _ => {}
    }
}

/// The problems that make validators or client generators refuse the document, or that leak
/// implementation names to integrators; empty when it is fit to publish.
pub fn problems(doc: &OpenApi) -> Vec<String> {
    let mut out = Vec::new();
    for (path, item) in &doc.paths.paths {
        let ops = [("get", &item.get), ("put", &item.put), ("post", &item.post), ("delete", &item.delete), ("patch", &item.patch)];
        for (method, op) in ops {
            let Some(op) = op else { continue };
            for (status, response) in &op.responses.responses {
                if matches!(response, RefOr::T(r) if r.description.trim().is_empty()) {
                    out.push(format!("{method} {path}: response {status} has no description"));
                }
            }
        }
    }
    let json = serde_json::to_value(doc).unwrap_or_default();
    leaked_names(&json, "#", &mut out);
    out
}

/// Rust doc-comment links (`[`Name`]`) and type syntax in descriptions and summaries.
fn leaked_names(v: &serde_json::Value, at: &str, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                let here = format!("{at}/{k}");
                if let (true, Some(text)) = (k == "description" || k == "summary", v.as_str()) {
                    if ["[`", "`]", "::", "Option<", "Vec<"].iter().any(|p| text.contains(p)) {
                        out.push(format!("{here}: internal name in {text:?}"));
                    }
                }
                leaked_names(v, &here, out);
            }
        }
        serde_json::Value::Array(items) => items.iter().enumerate().for_each(|(i, v)| leaked_names(v, &format!("{at}/{i}"), out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_document_is_fit_to_publish() {
        let problems = super::problems(&crate::app::openapi_document());
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
}
