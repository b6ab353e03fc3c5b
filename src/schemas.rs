//! JSON Schema fragments for rules the server checks, so the document states them exactly and
//! clients and fuzzers can tell a valid request from an invalid one without asking the server.

use utoipa::openapi::{
    RefOr,
    schema::{AnyOfBuilder, KnownFormat, Object, ObjectBuilder, Schema, SchemaFormat, SchemaType, Type},
};

/// White space as the server trims it (Rust's `char::is_whitespace`, Unicode's `White_Space`),
/// spelled out for use inside a character class. Patterns never say `\s`: ECMA-262 counts U+FEFF
/// and not U+0085, Python counts U+001C-U+001F, so each tool would read another rule.
macro_rules! white_space {
    () => {
        r"\u0009-\u000d\u0020\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
    };
}

/// Text that is not blank once trimmed: a character that is neither white space nor NUL,
/// anywhere in text without NUL.
pub const NOT_BLANK: &str = concat!(r"^[^\u0000]*[^", white_space!(), r"\u0000][^\u0000]*$");

/// Any text without NUL characters (no database stores them).
pub const NO_NUL: &str = r"^[^\u0000]*$";

/// `If-Match` / `If-None-Match` as the server reads them (`conditional::TagList`): `*` or
/// quoted entity tags (optionally weak, `W/"..."`), comma-separated, spaces around commas and
/// empty entries allowed, at least one entry; `*` stands alone.
pub const ETAG_LIST: &str = r#"^([ ,]*\*[ ,]*|( *,)* *(W/)?"[ !#-+\--~]*" *(, *((W/)?"[ !#-+\--~]*" *)?)*)$"#;

/// What `validate::email` accepts once the server has trimmed the text (one `@`, something before
/// it, a dotted domain after it that neither starts nor ends with a dot, no white space), or text
/// that trims to nothing. No NUL anywhere (decisions: text never holds NUL characters).
pub const EMAIL_OR_EMPTY: &str = concat!(
    r"^[", white_space!(), r"]*",
    r"([^@", white_space!(), r"\u0000]+@[^@.", white_space!(), r"\u0000][^@", white_space!(), r"\u0000]*",
    r"\.[^@", white_space!(), r"\u0000]*[^@.", white_space!(), r"\u0000])?",
    r"[", white_space!(), r"]*$"
);

fn email_builder() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(SchemaType::from_iter([Type::String, Type::Null])).pattern(Some(EMAIL_OR_EMPTY))
}

/// An e-mail address, `""` or `null` (both meaning none), at most 255 characters.
pub fn email() -> Object {
    email_builder().max_length(Some(255)).description(Some("An e-mail address; `\"\"` or `null` for none.")).build()
}

/// A shop's e-mail address or `""`; `null` keeps the stored one.
pub fn shop_email() -> Object {
    email_builder().max_length(Some(255)).description(Some("An e-mail address, or `\"\"`; `null` or omitted keeps the stored value.")).build()
}

/// The schema of `T` changed by `edit`: for a documented body that is another body's schema
/// with a different required list or a property less, so the two cannot drift.
pub fn derived<T: utoipa::PartialSchema>(description: &str, edit: impl FnOnce(&mut Object)) -> RefOr<Schema> {
    let mut schema = T::schema();
    if let RefOr::T(Schema::Object(object)) = &mut schema {
        edit(object);
        object.description = Some(description.to_owned());
    }
    schema
}

/// `start_date` / `end_date` of the appointment list: a calendar date or an RFC 3339 date-time.
pub fn date_or_date_time() -> RefOr<Schema> {
    let string = |format| ObjectBuilder::new().schema_type(Type::String).format(Some(SchemaFormat::KnownFormat(format))).build();
    AnyOfBuilder::new()
        .item(string(KnownFormat::Date))
        .item(string(KnownFormat::DateTime))
        .description(Some("`YYYY-MM-DD` or an RFC 3339 date-time"))
        .into()
}

/// The largest amount of money a body takes (`body::MONEY_LIMIT_CENTS` in units).
const MONEY_MAX: f64 = 9_999_999_999_999.99;

fn money_builder(nullable: bool) -> ObjectBuilder {
    let schema_type = if nullable { SchemaType::from_iter([Type::Number, Type::Null]) } else { SchemaType::Type(Type::Number) };
    ObjectBuilder::new().schema_type(schema_type).multiple_of(Some(0.01)).maximum(Some(MONEY_MAX))
}

/// An amount: more than 0, at most two decimals.
pub fn amount() -> Object {
    money_builder(false).exclusive_minimum(Some(0.0)).description(Some("More than 0, at most two decimals.")).build()
}

/// A customer's credit limit: not negative, at most two decimals; `null` for none.
pub fn credit_limit() -> Object {
    money_builder(true).minimum(Some(0.0)).description(Some("Not negative, at most two decimals; `null` for none.")).build()
}

/// `extension`: a string or a number (returned as a string), at most 255 characters.
pub fn text_or_number() -> Object {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Number, Type::Null]))
        .max_length(Some(255))
        .description(Some("A string or a number; returned as a string."))
        .build()
}

/// A real calendar date `YYYY-MM-DD` in the years 1900 to 2200 (`appointments::timing::YEARS`), as a regular
/// expression without anchors.
fn calendar_date() -> String {
    // Leap years from 1900 to 2200: every fourth, but not 1900, 2100 or 2200.
    let leap_year = "(19(0[48]|[2468][048]|[13579][26])|20([02468][048]|[13579][26])|21(0[48]|[2468][048]|[13579][26]))";
    let year = "(19[0-9]{2}|2[01][0-9]{2}|2200)";
    let month_day = "((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))";
    format!("({year}-{month_day}|{leap_year}-02-29)")
}

/// A shop-local date of availability (`availability::dates`): `YYYY-MM-DD` in the years 1900 to
/// 2200, the years an appointment takes, blanks around it ignored.
pub fn booking_date() -> Object {
    let blanks = concat!("[", white_space!(), "]*");
    ObjectBuilder::new()
        .schema_type(Type::String)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Date)))
        .pattern(Some(format!("^{blanks}{}{blanks}$", calendar_date())))
        .examples(["2030-01-07"])
        .build()
}

/// An appointment `date` as the server reads it (`appointments::timing::parse_schedule`): a real
/// calendar date in the years 1900 to 2200 as written, then either a local time (`T` or a
/// space, `HH:MM`, optional seconds and fraction) or an RFC 3339 time with its offset.
pub fn appointment_date() -> Object {
    let date = calendar_date();
    let (hh_mm, ss, fraction) = ("([01][0-9]|2[0-3]):[0-5][0-9]", ":[0-5][0-9]", r"(\.[0-9]{1,9})?");
    let offset = "([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
    let pattern = format!("^{date}([T ]{hh_mm}({ss}{fraction})?|[Tt ]{hh_mm}{ss}{fraction}{offset})$");
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(pattern))
        .examples(["2024-07-09T08:30:00-05:00", "2024-07-09 08:30"])
        .description(Some(
            "RFC 3339 with an offset or `Z` (`2024-07-09T08:30:00-05:00`), or a local date-time without offset \
             (`2024-07-09T08:30:00`, `2024-07-09 08:30`) read in the shop's time zone, in the years 1900 to 2200. \
             A local time skipped by a daylight-saving change moves forward by the change (02:30 becomes 03:30); \
             a repeated one takes its first occurrence.",
        ))
        .build()
}

/// The published patterns accept what the server accepts: strings drawn from each pattern pass
/// the server's own check, and for the simple rules the two agree on arbitrary text.
#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    fn pattern(schema: &str, property: &str) -> String {
        static DOC: std::sync::LazyLock<serde_json::Value> =
            std::sync::LazyLock::new(|| serde_json::to_value(crate::app::openapi_document()).unwrap());
        DOC["components"]["schemas"][schema]["properties"][property]["pattern"].as_str().unwrap().to_owned()
    }

    /// (`\uXXXX` escapes read the same in Rust's regex, ECMA-262 and Python.)
    fn compile(pattern: &str) -> regex::Regex {
        regex::Regex::new(pattern).unwrap()
    }

    fn drawn_from(pattern: &str) -> impl Strategy<Value = String> {
        proptest::string::string_regex(pattern.trim_start_matches('^').trim_end_matches('$')).unwrap()
    }

    /// Every pattern the document publishes, with where it is.
    fn published_patterns() -> Vec<(String, String)> {
        fn walk(at: &str, value: &serde_json::Value, out: &mut Vec<(String, String)>) {
            match value {
                serde_json::Value::Object(map) => {
                    for (k, v) in map {
                        match (k.as_str(), v) {
                            ("pattern", serde_json::Value::String(p)) => out.push((at.to_owned(), p.clone())),
                            _ => walk(&format!("{at}/{k}"), v, out),
                        }
                    }
                }
                serde_json::Value::Array(items) => items.iter().enumerate().for_each(|(i, v)| walk(&format!("{at}/{i}"), v, out)),
                _ => {}
            }
        }
        let mut out = Vec::new();
        walk("", &serde_json::to_value(crate::app::openapi_document()).unwrap(), &mut out);
        out
    }

    /// Clients, fuzzers and validators read the patterns in ECMA-262's or Python's dialect, where
    /// the shorthand classes mean other sets than in Rust (`\s` and U+0085 or U+FEFF, `\d` and
    /// non-ASCII digits, `\w`, `\b`). A published pattern spells its sets out.
    #[test]
    fn published_patterns_read_the_same_in_every_dialect() {
        let patterns = published_patterns();
        assert!(patterns.len() > 20, "{patterns:?}");
        for (at, pattern) in patterns {
            for shorthand in [r"\s", r"\S", r"\d", r"\D", r"\w", r"\W", r"\b", r"\B", r"\p", r"\P"] {
                assert!(!pattern.replace(r"\\", "").contains(shorthand), "{at}: {pattern} uses {shorthand}");
            }
            compile(&pattern);
        }
    }

    #[test]
    fn white_space_is_what_the_server_trims() {
        let class = regex::Regex::new(concat!("^[", white_space!(), "]$")).unwrap();
        for c in (0..=0x10ffff).filter_map(char::from_u32) {
            assert_eq!(class.is_match(c.encode_utf8(&mut [0; 4])), c.is_whitespace(), "U+{:04X}", c as u32);
        }
    }

    #[test]
    fn appointment_dates_agree_on_edges() {
        use crate::appointments::timing::parse_schedule;
        let re = compile(&pattern("AppointmentInput", "date"));
        for (raw, ok) in [
            ("2024-02-29T10:00:00Z", true),
            ("2000-02-29 10:00", true),
            ("2200-12-31T23:59:59.123456789-05:00", true),
            ("1900-01-01t00:00:00+01:00", true),
            ("2024-07-09T08:30", true),
            ("1900-02-29 10:00", false),
            ("2100-02-29 10:00", false),
            ("2023-02-29T10:00:00Z", false),
            ("2024-04-31 10:00", false),
            ("1899-12-31T23:59:59Z", false),
            ("2201-01-01 00:00", false),
            ("2024-07-09T08:30Z", false),
            ("2024-07-09t08:30", false),
            ("2024-07-09", false),
            ("2024-07-09T24:00", false),
        ] {
            assert_eq!(re.is_match(raw), ok, "pattern on {raw}");
            assert_eq!(parse_schedule(raw, chrono_tz::America::Chicago).is_some(), ok, "server on {raw}");
        }
    }

    #[test]
    fn booking_dates_agree_on_edges() {
        let re = compile(super::booking_date().pattern.as_deref().unwrap());
        for (raw, ok) in [
            ("2030-01-07", true),
            (" 2030-01-07\u{3000}", true),
            ("1900-01-01", true),
            ("2200-12-31", true),
            ("2000-02-29", true),
            ("1899-12-31", false),
            ("2201-01-01", false),
            ("9999-12-31", false),
            ("2100-02-29", false),
            ("2030-1-7", false),
            ("2030-01-07T00:00", false),
        ] {
            assert_eq!(re.is_match(raw), ok, "pattern on {raw:?}");
            assert_eq!(crate::availability::booking_date(raw).is_some(), ok, "server on {raw:?}");
        }
    }

    #[test]
    fn webhook_urls_agree_on_edges() {
        let re = compile(&pattern("WebhookInput", "url"));
        for (raw, ok) in [
            ("https://hooks.example.com/x?y=1", true),
            ("HTTP://1.2.3.4:65535/x", true),
            ("http://a.b:0080#f", true),
            ("http://256.1.1.1/", false),
            ("http://01.2.3.4/", false),
            ("http://a.b:00080/", false),
            ("http://a.b:65536/", false),
            ("http://a--b.example/", false),
            ("http://a.123/", false),
            ("http://a*/", false),
            ("http://a.b /", false),
            (" http://a.b/", false),
            ("http://[::1]/", false),
            ("ftp://a.b/", false),
        ] {
            assert_eq!(re.is_match(raw), ok, "pattern on {raw}");
            assert_eq!(crate::webhooks::model::url_syntax_ok(raw), ok, "server on {raw}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

        #[test]
        fn every_patterned_date_is_accepted(raw in drawn_from(&pattern("AppointmentInput", "date"))) {
            prop_assert!(crate::appointments::timing::parse_schedule(&raw, chrono_tz::Australia::Sydney).is_some(), "{}", raw);
        }

        #[test]
        fn every_patterned_webhook_url_is_accepted(raw in drawn_from(&pattern("WebhookInput", "url"))) {
            // (Nested repeats draw long strings; the length limit is `maxLength`'s, checked apart.)
            use crate::webhooks::model::{check_url, url_syntax_ok};
            prop_assert!(raw.len() > 2048 || (url_syntax_ok(&raw) && check_url(&raw, true).is_ok()), "{}", raw);
        }

        #[test]
        fn webhook_url_syntax_agrees(raw in "(https?|HTTP)://[a1-9.:0*/ -]{0,14}") {
            let re = compile(&pattern("WebhookInput", "url"));
            prop_assert_eq!(re.is_match(&raw), crate::webhooks::model::url_syntax_ok(&raw), "{:?}", raw);
        }

        #[test]
        fn emails_agree(raw in "[a@. \t\u{85}\u{3000}\u{feff}\u{1c}x.-]{0,12}") {
            // As the body reader hands it over: trimmed.
            let trimmed = raw.trim();
            let server = trimmed.is_empty() || crate::validate::is_email(trimmed);
            prop_assert_eq!(compile(&pattern("AppointmentInput", "email")).is_match(&raw), server, "{:?}", raw);
            prop_assert_eq!(compile(&pattern("ShopInput", "email")).is_match(&raw), server, "{:?}", raw);
        }

        #[test]
        fn etag_lists_agree(raw in r#"[ ,*W/"a!#-]{0,10}"#) {
            use axum::http::{HeaderMap, HeaderValue, header::IF_MATCH};
            let mut headers = HeaderMap::new();
            headers.insert(IF_MATCH, HeaderValue::from_str(&raw).unwrap());
            let server = matches!(crate::conditional::TagList::from_headers(&headers, IF_MATCH), Ok(Some(_)));
            prop_assert_eq!(compile(super::ETAG_LIST).is_match(&raw), server, "{:?}", raw);
        }

        #[test]
        fn not_blank_agrees_with_trimming(raw in "[a \t\u{85}\u{a0}\u{3000}\u{feff}\u{1c}\u{0}]{0,6}") {
            let re = compile(&pattern("BayInput", "title"));
            prop_assert_eq!(re.is_match(&raw), !raw.trim().is_empty() && !raw.contains('\0'), "{:?}", raw);
        }
    }
}
