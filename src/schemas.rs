//! JSON Schema fragments for rules the server checks, so the document states them exactly and
//! clients and fuzzers can tell a valid request from an invalid one without asking the server.

use utoipa::openapi::schema::{Object, ObjectBuilder, SchemaType, Type};

/// What `validate::email` accepts (one `@`, something before it, a dotted domain after it that
/// neither starts nor ends with a dot, no spaces), or the empty string. No NUL anywhere
/// (decisions: text never holds NUL characters).
pub const EMAIL_OR_EMPTY: &str = r"^([^@\s\u0000]+@[^@\s.\u0000][^@\s\u0000]*\.[^@\s\u0000]*[^@\s.\u0000])?$";

fn email_builder() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(SchemaType::from_iter([Type::String, Type::Null])).pattern(Some(EMAIL_OR_EMPTY))
}

/// An e-mail address, `""` or `null` (both meaning none), at most 255 characters.
pub fn email() -> Object {
    email_builder().max_length(Some(255)).description(Some("An e-mail address; `\"\"` or `null` for none.")).build()
}

/// A shop's e-mail address or `""`; `null` keeps the stored one.
pub fn shop_email() -> Object {
    email_builder().description(Some("An e-mail address, or `\"\"`; `null` or omitted keeps the stored value.")).build()
}
