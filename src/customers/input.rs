//! Turning a customer body into the values to store: defaults on create, kept values on PUT,
//! every field error collected at once.

use serde_json::Value;

use super::{
    model::{CustomerInput, PHONE_KEYS, PhoneBody},
    store::CustomerFields,
};
use crate::{
    body::{In, Reader},
    validate,
};

const MAX_TEXT: usize = 255;
const MAX_COMMENTS: usize = 10_000;

enum Rule {
    /// Required on create, never blank.
    Required,
    /// Required on create, may be empty (`business_name`).
    Present,
    /// Optional; null clears it to "".
    Optional,
}

/// The most characters a text field takes (as sent, before trimming).
fn max_chars(field: &str) -> usize {
    if field == "comments" { MAX_COMMENTS } else { MAX_TEXT }
}

fn text(r: &mut Reader, field: &str, value: In<String>, current: Option<&str>, rule: Rule) -> String {
    let value = match rule {
        Rule::Required => r.not_blank(field, value),
        _ => value,
    };
    match (rule, value, current) {
        (_, In::Set(v), _) => v,
        (Rule::Optional, In::Null, _) => String::new(),
        (Rule::Optional, In::Absent, current) => current.unwrap_or_default().to_owned(),
        (_, In::Absent, Some(current)) => current.to_owned(),
        (_, value, _) => {
            r.required(field, value);
            String::new()
        }
    }
}

fn flag(r: &mut Reader, field: &str, value: Option<Value>, current: Option<bool>, default: bool) -> bool {
    match r.bool(field, value) {
        In::Set(v) => v,
        In::Null => {
            r.errors.add(field, format!("The {field} field must be a boolean."));
            default
        }
        In::Absent => current.unwrap_or(default),
    }
}

/// The four phones: the `phone` object's entries win over the deprecated fields.
fn phones(r: &mut Reader, input: &mut CustomerInput, current: Option<&CustomerFields>) -> [String; 4] {
    let mut object = match input.phone.take() {
        None => None,
        Some(PhoneBody::Object(map)) => Some(map),
        Some(PhoneBody::Other(_)) => {
            r.errors.add("phone", "The phone field must be an object.");
            None
        }
    };
    let deprecated = [input.home_phone.take(), input.work_phone.take(), input.cell_phone.take(), input.fax.take()];
    let current = current.map(|c| [c.home_phone.as_str(), c.work_phone.as_str(), c.cell_phone.as_str(), c.fax.as_str()]);
    let mut out: [String; 4] = Default::default();
    for (i, (key, old_name)) in PHONE_KEYS.into_iter().zip(["home_phone", "work_phone", "cell_phone", "fax"]).enumerate() {
        let from_object = object.as_mut().and_then(|m| m.remove(key));
        let value = match r.text(&format!("phone.{key}"), from_object, MAX_TEXT) {
            In::Absent => r.text(old_name, deprecated[i].clone(), MAX_TEXT),
            given => given,
        };
        out[i] = text(r, old_name, value, current.map(|c| c[i]), Rule::Optional);
    }
    out
}

/// Reads a body on top of `current` (PUT) or the defaults (create). `shop_id` is 0 when it is
/// missing, in which case an error is recorded.
pub fn read(mut input: CustomerInput, current: Option<CustomerFields>) -> (CustomerFields, Reader) {
    let mut r = Reader::default();
    let cur = current.as_ref();
    let shop_id = match r.int("shop_id", input.shop_id.take()) {
        In::Set(id) => id,
        In::Absent if cur.is_some() => cur.map(|c| c.shop_id).unwrap_or_default(),
        other => {
            r.required("shop_id", other);
            0
        }
    };
    let [home_phone, work_phone, cell_phone, fax] = phones(&mut r, &mut input, cur);
    let t = |r: &mut Reader, field: &str, v: Option<Value>, current: Option<&String>, rule| {
        let value = r.text(field, v, max_chars(field));
        text(r, field, value, current.map(String::as_str), rule)
    };
    let business_name = t(&mut r, "business_name", input.business_name, cur.map(|c| &c.business_name), Rule::Present);
    let first_name = t(&mut r, "first_name", input.first_name, cur.map(|c| &c.first_name), Rule::Required);
    let last_name = t(&mut r, "last_name", input.last_name, cur.map(|c| &c.last_name), Rule::Required);
    let address = t(&mut r, "address", input.address, cur.map(|c| &c.address), Rule::Required);
    let city = t(&mut r, "city", input.city, cur.map(|c| &c.city), Rule::Required);
    let state = t(&mut r, "state", input.state, cur.map(|c| &c.state), Rule::Required);
    let zip = t(&mut r, "zip", input.zip, cur.map(|c| &c.zip), Rule::Required);
    let comments = t(&mut r, "comments", input.comments, cur.map(|c| &c.comments), Rule::Optional);
    let cell_provider = t(&mut r, "cell_provider", input.cell_provider, cur.map(|c| &c.cell_provider), Rule::Optional);
    let customer_type = t(&mut r, "customer_type", input.customer_type, cur.map(|c| &c.customer_type), Rule::Optional);
    let customer_number =
        t(&mut r, "customer_number", input.customer_number, cur.map(|c| &c.customer_number), Rule::Optional);
    let extension = match r.text_or_number("extension", input.extension, MAX_TEXT) {
        In::Set(v) => v,
        In::Null => String::new(),
        In::Absent => cur.map(|c| c.extension.clone()).unwrap_or_default(),
    };

    let email = match r.text("email", input.email, MAX_TEXT) {
        In::Set(v) if v.is_empty() => None,
        In::Set(v) => {
            validate::email(&mut r.errors, "email", &v);
            Some(v)
        }
        In::Null => None,
        In::Absent => cur.and_then(|c| c.email.clone()),
    };

    // `terms` and `customer_pay_type` are one value under two names.
    let pay_type = r.text("customer_pay_type", input.customer_pay_type, MAX_TEXT);
    let terms_in = r.text("terms", input.terms, MAX_TEXT);
    // Given under both names, the values must agree (null and a value disagree).
    let differ = match (&pay_type, &terms_in) {
        (In::Absent, _) | (_, In::Absent) | (In::Null, In::Null) => false,
        (In::Set(a), In::Set(b)) => a != b,
        _ => true,
    };
    if differ {
        r.errors.add("terms", "The terms and customer_pay_type fields are the same value and must match.");
    }
    let terms_value = if pay_type.is_absent() { terms_in } else { pay_type };
    let terms = text(&mut r, "terms", terms_value, cur.map(|c| c.terms.as_str()), Rule::Optional);

    let credit_limit = match r.money("credit_limit", input.credit_limit) {
        In::Set(c) if c < 0 => {
            r.errors.add("credit_limit", "The credit_limit field must not be negative.");
            None
        }
        In::Set(c) => Some(c),
        In::Null => None,
        In::Absent => cur.and_then(|c| c.credit_limit),
    };

    let active = flag(&mut r, "active", input.active, cur.map(|c| c.active), true);
    let tax_exempt = flag(&mut r, "tax_exempt", input.tax_exempt, cur.map(|c| c.tax_exempt), false);
    let allow_marketing = flag(&mut r, "allow_marketing", input.allow_marketing, cur.map(|c| c.allow_marketing), false);

    let fields = CustomerFields {
        shop_id,
        business_name,
        first_name,
        last_name,
        address,
        city,
        state,
        zip,
        home_phone,
        work_phone,
        cell_phone,
        fax,
        email,
        comments,
        cell_provider,
        active,
        tax_exempt,
        allow_marketing,
        credit_limit,
        extension,
        customer_type,
        terms,
        customer_number,
    };
    (fields, r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(v: serde_json::Value) -> CustomerInput {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn create_reports_every_missing_field_and_applies_defaults() {
        let (f, r) = read(input(serde_json::json!({"first_name": ""})), None);
        for field in ["shop_id", "business_name", "first_name", "last_name", "address", "city", "state", "zip"] {
            assert!(r.errors.has(field), "{field}");
        }
        assert!(f.active && !f.tax_exempt && !f.allow_marketing);
    }

    #[test]
    fn phone_object_wins_per_number_and_deprecated_fields_fill_the_rest() {
        let (f, r) = read(
            input(serde_json::json!({"phone": {"home": "1"}, "home_phone": "2", "work_phone": "3", "extension": 42})),
            None,
        );
        assert_eq!((f.home_phone.as_str(), f.work_phone.as_str(), f.extension.as_str()), ("1", "3", "42"));
        assert!(!r.errors.has("home_phone"));
    }
}
