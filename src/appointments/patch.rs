//! A body field that distinguishes "omitted" from "explicitly null": PUT keeps omitted fields
//! and clears nullable fields sent as `null`.

use serde::{Deserialize, Deserializer};

#[derive(Debug, Clone, Default, PartialEq)]
pub enum Patch<T> {
    /// The body does not name the field.
    #[default]
    Missing,
    /// The body sets the field to `null`.
    Null,
    Value(T),
}

impl<T> Patch<T> {
    /// The stored value after applying this patch to a nullable field holding `current`.
    pub fn apply(self, current: Option<T>) -> Option<T> {
        match self {
            Patch::Missing => current,
            Patch::Null => None,
            Patch::Value(v) => Some(v),
        }
    }
}

/// Used with `#[serde(default)]`: an absent field never reaches this and stays `Missing`.
impl<'de, T: Deserialize<'de>> Deserialize<'de> for Patch<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Option::<T>::deserialize(d)?.map_or(Patch::Null, Patch::Value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Body {
        #[serde(default)]
        a: Patch<i64>,
    }

    #[test]
    fn missing_null_and_value_are_distinct() {
        let parse = |s: &str| serde_json::from_str::<Body>(s).unwrap().a;
        assert_eq!(parse("{}"), Patch::Missing);
        assert_eq!(parse(r#"{"a": null}"#), Patch::Null);
        assert_eq!(parse(r#"{"a": 3}"#), Patch::Value(3));
        assert!(serde_json::from_str::<Body>(r#"{"a": "x"}"#).is_err());
        assert_eq!(Patch::Missing.apply(Some(1)), Some(1));
        assert_eq!(Patch::<i64>::Null.apply(Some(1)), None);
    }
}
