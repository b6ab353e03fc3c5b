//! Reading JSON request bodies field by field, so one response reports every invalid field at
//! once, and a PUT can tell an omitted field (keep) from an explicit `null` (clear).
//!
//! Body structs declare their fields as `Option<Value>` with `#[serde(default, deserialize_with =
//! "present")]` (and `#[schema(value_type = ...)]` for the documented type); handlers turn each
//! one into an [`In`] with a [`Reader`].

use serde::{Deserialize, Deserializer};
use serde_json::{Number, Value};

use crate::error::FieldErrors;

/// Keeps an explicit `null` as `Some(Value::Null)`; a missing field stays `None` (via `default`).
pub fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// One body field after reading: omitted, explicit null, or a value of the right type.
#[derive(Debug, Clone, PartialEq)]
pub enum In<T> {
    Absent,
    Null,
    Set(T),
}

impl<T> In<T> {
    pub fn set(self) -> Option<T> {
        match self {
            In::Set(v) => Some(v),
            _ => None,
        }
    }

    pub fn is_absent(&self) -> bool {
        matches!(self, In::Absent)
    }
}

/// Collects every field error of one body.
#[derive(Default)]
pub struct Reader {
    pub errors: FieldErrors,
}

impl Reader {
    fn read<T>(&mut self, field: &str, v: Option<Value>, what: &str, parse: impl FnOnce(Value) -> Option<T>) -> In<T> {
        match v {
            None => In::Absent,
            Some(Value::Null) => In::Null,
            Some(v) => match parse(v) {
                Some(v) => In::Set(v),
                None => {
                    self.errors.add(field, format!("The {field} field must be {what}."));
                    In::Absent
                }
            },
        }
    }

    /// A string of at most `max` characters, returned trimmed. The length is the sent text's,
    /// white space included, as the document's `maxLength` counts it.
    pub fn text(&mut self, field: &str, v: Option<Value>, max: usize) -> In<String> {
        self.check_length(field, &v, max);
        self.read(field, v, "a string", |v| match v {
            Value::String(s) => Some(s.trim().to_owned()),
            _ => None,
        })
    }

    /// A string that may also be sent as a number (`extension`); returned as a string. A string
    /// is at most `max` characters, counted like [`Reader::text`].
    pub fn text_or_number(&mut self, field: &str, v: Option<Value>, max: usize) -> In<String> {
        self.check_length(field, &v, max);
        self.read(field, v, "a string or a number", |v| match v {
            Value::String(s) => Some(s.trim().to_owned()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
    }

    fn check_length(&mut self, field: &str, v: &Option<Value>, max: usize) {
        if let Some(Value::String(s)) = v {
            crate::validate::max_len(&mut self.errors, field, s, max);
        }
    }

    pub fn bool(&mut self, field: &str, v: Option<Value>) -> In<bool> {
        self.read(field, v, "a boolean", |v| v.as_bool())
    }

    pub fn int(&mut self, field: &str, v: Option<Value>) -> In<i64> {
        self.read(field, v, "an integer", |v| v.as_i64())
    }

    /// Money: a JSON number with at most two decimals, read into integer cents.
    pub fn money(&mut self, field: &str, v: Option<Value>) -> In<i64> {
        self.read(field, v, "a number with at most two decimals, at most 9999999999999.99", |v| match v {
            Value::Number(n) => money_cents(&n),
            _ => None,
        })
    }

    /// A calendar date `YYYY-MM-DD`.
    pub fn date(&mut self, field: &str, v: Option<Value>) -> In<String> {
        self.read(field, v, "a date (YYYY-MM-DD)", |v| v.as_str().and_then(parse_date))
    }

    /// A required field: records "The x field is required." when it was omitted or null.
    pub fn required<T>(&mut self, field: &str, value: In<T>) -> Option<T> {
        match value {
            In::Set(v) => Some(v),
            In::Null => {
                self.errors.add(field, format!("The {field} field is required."));
                None
            }
            // An omitted field is required too, unless it was already reported as mistyped.
            In::Absent => {
                if !self.errors.has(field) {
                    self.errors.add(field, format!("The {field} field is required."));
                }
                None
            }
        }
    }

    /// A text value that must not be blank (when given).
    pub fn not_blank(&mut self, field: &str, value: In<String>) -> In<String> {
        match value {
            In::Set(s) if s.is_empty() => {
                self.errors.add(field, format!("The {field} field is required."));
                In::Absent
            }
            other => other,
        }
    }
}

/// `YYYY-MM-DD` exactly (a real calendar date), normalised.
pub fn parse_date(s: &str) -> Option<String> {
    crate::time::parse_ymd(s).map(|d| d.format("%Y-%m-%d").to_string())
}

/// The largest amount accepted, in cents: 9,999,999,999,999.99. JSON numbers arrive as f64,
/// which holds every decimal of up to 15 significant digits exactly; beyond that a value could
/// be silently rounded, so it is refused instead.
pub const MONEY_LIMIT_CENTS: i64 = 999_999_999_999_999;

/// Integer cents from a JSON number with at most two decimals (`12`, `12.5`, `12.34`); more
/// decimals, or an amount beyond ±[`MONEY_LIMIT_CENTS`], is refused rather than rounded.
pub fn money_cents(n: &Number) -> Option<i64> {
    const LIMIT: i64 = MONEY_LIMIT_CENTS;
    if let Some(i) = n.as_i64() {
        return i.checked_mul(100).filter(|c| c.abs() <= LIMIT);
    }
    // Floats print in their shortest round-trip form, which is what the client wrote.
    let text = n.to_string();
    if text.contains(['e', 'E']) {
        return None;
    }
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.as_str()),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    let fraction = fraction.trim_end_matches('0');
    if fraction.len() > 2 || whole.is_empty() {
        return None;
    }
    let whole: i64 = whole.parse().ok()?;
    let fraction: i64 = if fraction.is_empty() { 0 } else { format!("{fraction:0<2}").parse().ok()? };
    let cents = whole.checked_mul(100)?.checked_add(fraction)?;
    (cents <= LIMIT).then_some(if negative { -cents } else { cents })
}

/// Integer cents as a JSON number with at most two decimals.
pub fn serialize_money<S: serde::Serializer>(cents: &i64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(*cents as f64 / 100.0)
}

pub fn serialize_opt_money<S: serde::Serializer>(cents: &Option<i64>, s: S) -> Result<S::Ok, S::Error> {
    match cents {
        Some(c) => serialize_money(c, s),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cents(json: &str) -> Option<i64> {
        match serde_json::from_str::<Value>(json).unwrap() {
            Value::Number(n) => money_cents(&n),
            _ => unreachable!(),
        }
    }

    #[test]
    fn money_is_exact_to_the_cent() {
        assert_eq!(cents("12"), Some(1200));
        assert_eq!(cents("12.5"), Some(1250));
        assert_eq!(cents("12.34"), Some(1234));
        assert_eq!(cents("0.1"), Some(10));
        assert_eq!(cents("-3.07"), Some(-307));
        assert_eq!(cents("1234567.89"), Some(123_456_789));
        assert_eq!(cents("12.340"), Some(1234));
        assert_eq!(cents("12.345"), None);
        assert_eq!(cents("1e30"), None);
        // Past 15 significant digits an f64 cannot hold every cent: refused, never rounded.
        assert_eq!(cents("9999999999999.99"), Some(999_999_999_999_999));
        assert_eq!(cents("89999999999999.99"), None);
        assert_eq!(cents("70368744177664.01"), None);
        assert_eq!(cents("10000000000000"), None);
        let out = serde_json::to_string(&Wrap(1234)).unwrap();
        assert_eq!(out, "12.34");
        assert_eq!(serde_json::to_string(&Wrap(10)).unwrap(), "0.1");
    }

    struct Wrap(i64);
    impl serde::Serialize for Wrap {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            serialize_money(&self.0, s)
        }
    }

    #[test]
    fn dates_are_strict() {
        assert_eq!(parse_date("2024-02-29").as_deref(), Some("2024-02-29"));
        for bad in ["2023-02-29", "2024-2-01", "2024-02-01T00:00:00Z", "", "01/02/2024", "2024- 2-01", "2024-02- 1", "+024-02-01", "2024-2-1  "] {
            assert_eq!(parse_date(bad), None, "{bad}");
        }
    }

    #[test]
    fn reader_tells_absent_from_null_and_reports_types() {
        let mut r = Reader::default();
        assert_eq!(r.text("a", None, 3), In::Absent);
        assert_eq!(r.text("a", Some(Value::Null), 3), In::Null);
        assert_eq!(r.text("a", Some(Value::from(" x ")), 3), In::Set("x".into()));
        assert_eq!(r.text_or_number("ext", Some(Value::from(12)), 3), In::Set("12".into()));
        assert!(!r.errors.has("a") && !r.errors.has("ext"));
        // The length is the sent text's: white space the server trims counts too.
        assert_eq!(r.text("b", Some(Value::from(" xyz")), 3), In::Set("xyz".into()));
        assert!(r.errors.has("b"));
        assert_eq!(r.text_or_number("ext2", Some(Value::from(12345)), 3), In::Set("12345".into()));
        assert!(!r.errors.has("ext2"), "a number has no length in the document");
        assert_eq!(r.bool("b", Some(Value::from("yes"))), In::Absent);
        assert!(r.errors.has("b") && !r.errors.has("a"));
    }
}
