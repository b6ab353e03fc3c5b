//! Small validation helpers shared by the request models; messages follow Laravel's wording.

use crate::error::FieldErrors;

/// A required field: missing (or null) records "The x field is required.".
pub fn required<T>(errors: &mut FieldErrors, field: &str, value: Option<T>) -> Option<T> {
    if value.is_none() {
        errors.add(field, format!("The {field} field is required."));
    }
    value
}

/// A required string that must also not be blank.
pub fn required_text(errors: &mut FieldErrors, field: &str, value: Option<String>) -> Option<String> {
    match value {
        Some(v) if !v.trim().is_empty() => Some(v),
        _ => {
            errors.add(field, format!("The {field} field is required."));
            None
        }
    }
}

pub fn max_len(errors: &mut FieldErrors, field: &str, value: &str, max: usize) {
    if value.chars().count() > max {
        errors.add(field, format!("The {field} field must not be greater than {max} characters."));
    }
}

/// A plausible e-mail address: one `@`, something before it, a dotted domain after it, no spaces.
pub fn is_email(value: &str) -> bool {
    let Some((local, domain)) = value.split_once('@') else { return false };
    !local.is_empty()
        && !domain.contains('@')
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !value.chars().any(char::is_whitespace)
}

pub fn email(errors: &mut FieldErrors, field: &str, value: &str) {
    if !value.is_empty() && !is_email(value) {
        errors.add(field, format!("The {field} field must be a valid email address."));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails() {
        for ok in ["a@b.co", "first.last+tag@shop.example.com"] {
            assert!(is_email(ok), "{ok}");
        }
        for bad in ["", "a", "a@b", "@b.co", "a@.co", "a@b.", "a b@c.co", "a@b@c.co"] {
            assert!(!is_email(bad), "{bad}");
        }
    }

    #[test]
    fn required_text_rejects_blank() {
        let mut e = FieldErrors::default();
        assert_eq!(required_text(&mut e, "name", Some("  ".into())), None);
        assert!(e.has("name"));
    }
}
