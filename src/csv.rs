//! CSV (RFC 4180) for exports and imports: a resource flattened into one record (nested objects'
//! fields named with dots: `phone.home`, `schedule.start`), and a parser for uploaded files.
//!
//! Flattening is a `serde` serializer, so a record holds exactly the fields, in exactly the order
//! and format, of the resource's JSON: one resource, one shape.

use serde::{
    Serialize,
    ser::{self, Impossible},
};

/// The column names of `value`'s record (`phone.home` for the `home` field of `phone`).
pub fn header<T: Serialize>(value: &T) -> Vec<String> {
    let mut names = Vec::new();
    let mut scratch = String::new();
    let _ = value.serialize(&mut Flatten { line: &mut scratch, names: Some(&mut names), path: Vec::new(), cells: 0 });
    names
}

/// Appends `names` as a header line (CRLF-terminated).
pub fn push_header(line: &mut String, names: &[String]) {
    for (i, name) in names.iter().enumerate() {
        if i > 0 {
            line.push(',');
        }
        push_cell(line, name);
    }
    line.push_str("\r\n");
}

/// Appends `value` as one record (CRLF-terminated). `null` is an empty cell, `true`/`false` and
/// numbers are written as JSON writes them.
pub fn push_record<T: Serialize>(line: &mut String, value: &T) -> Result<(), FlattenError> {
    value.serialize(&mut Flatten { line, names: None, path: Vec::new(), cells: 0 })?;
    line.push_str("\r\n");
    Ok(())
}

/// One cell, quoted when it holds a comma, a quote or a line break (quotes doubled).
fn push_cell(line: &mut String, text: &str) {
    if text.contains([',', '"', '\r', '\n']) {
        line.push('"');
        line.push_str(&text.replace('"', "\"\""));
        line.push('"');
    } else {
        line.push_str(text);
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct FlattenError(String);

impl ser::Error for FlattenError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        FlattenError(msg.to_string())
    }
}

struct Flatten<'a> {
    line: &'a mut String,
    /// Collects the column names when set.
    names: Option<&'a mut Vec<String>>,
    path: Vec<&'static str>,
    cells: usize,
}

impl Flatten<'_> {
    fn cell(&mut self, text: &str) -> Result<(), FlattenError> {
        if self.cells > 0 {
            self.line.push(',');
        }
        self.cells += 1;
        push_cell(self.line, text);
        if let Some(names) = self.names.as_deref_mut() {
            names.push(self.path.join("."));
        }
        Ok(())
    }

    fn unsupported(&self, what: &str) -> FlattenError {
        FlattenError(format!("{} cannot be flattened into CSV: {what}", self.path.join(".")))
    }
}

macro_rules! display_cell {
    ($($method:ident: $t:ty),*) => {
        $(fn $method(self, v: $t) -> Result<(), FlattenError> {
            self.cell(&v.to_string())
        })*
    };
}

impl<'a, 'b> ser::Serializer for &'a mut Flatten<'b> {
    type Ok = ();
    type Error = FlattenError;
    type SerializeSeq = Impossible<(), FlattenError>;
    type SerializeTuple = Impossible<(), FlattenError>;
    type SerializeTupleStruct = Impossible<(), FlattenError>;
    type SerializeTupleVariant = Impossible<(), FlattenError>;
    type SerializeMap = Impossible<(), FlattenError>;
    type SerializeStruct = Self;
    type SerializeStructVariant = Impossible<(), FlattenError>;

    display_cell!(serialize_bool: bool, serialize_i8: i8, serialize_i16: i16, serialize_i32: i32, serialize_i64: i64,
        serialize_u8: u8, serialize_u16: u16, serialize_u32: u32, serialize_u64: u64, serialize_char: char);

    fn serialize_f32(self, v: f32) -> Result<(), FlattenError> {
        self.serialize_f64(f64::from(v))
    }

    /// As JSON writes it (`1.5`, `2.0`), so a cell reads back as the same number.
    fn serialize_f64(self, v: f64) -> Result<(), FlattenError> {
        let text = serde_json::to_string(&v).map_err(|e| FlattenError(e.to_string()))?;
        self.cell(&text)
    }

    fn serialize_str(self, v: &str) -> Result<(), FlattenError> {
        self.cell(v)
    }

    fn serialize_bytes(self, _: &[u8]) -> Result<(), FlattenError> {
        Err(self.unsupported("bytes"))
    }

    fn serialize_none(self) -> Result<(), FlattenError> {
        self.cell("")
    }

    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result<(), FlattenError> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), FlattenError> {
        self.cell("")
    }

    fn serialize_unit_struct(self, _: &'static str) -> Result<(), FlattenError> {
        self.cell("")
    }

    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Result<(), FlattenError> {
        self.cell(variant)
    }

    fn serialize_newtype_struct<T: ?Sized + Serialize>(self, _: &'static str, value: &T) -> Result<(), FlattenError> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: ?Sized + Serialize>(self, _: &'static str, _: u32, _: &'static str, _: &T) -> Result<(), FlattenError> {
        Err(self.unsupported("an enum with data"))
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, FlattenError> {
        Err(self.unsupported("a list"))
    }

    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, FlattenError> {
        Err(self.unsupported("a tuple"))
    }

    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeTupleStruct, FlattenError> {
        Err(self.unsupported("a tuple"))
    }

    fn serialize_tuple_variant(self, _: &'static str, _: u32, _: &'static str, _: usize) -> Result<Self::SerializeTupleVariant, FlattenError> {
        Err(self.unsupported("an enum with data"))
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, FlattenError> {
        Err(self.unsupported("a map"))
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self, FlattenError> {
        Ok(self)
    }

    fn serialize_struct_variant(self, _: &'static str, _: u32, _: &'static str, _: usize) -> Result<Self::SerializeStructVariant, FlattenError> {
        Err(self.unsupported("an enum with data"))
    }
}

impl<'a, 'b> ser::SerializeStruct for &'a mut Flatten<'b> {
    type Ok = ();
    type Error = FlattenError;

    fn serialize_field<T: ?Sized + Serialize>(&mut self, key: &'static str, value: &T) -> Result<(), FlattenError> {
        self.path.push(key);
        let result = value.serialize(&mut **self);
        self.path.pop();
        result
    }

    fn end(self) -> Result<(), FlattenError> {
        Ok(())
    }
}

/// Why an uploaded file is not CSV.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum ParseError {
    #[error("the file is not UTF-8 text")]
    NotUtf8,
    #[error("line {line}: a quoted cell is not closed")]
    Unclosed { line: usize },
    #[error("line {line}: a quote inside a cell that does not start with one (quote the cell and double the quote)")]
    StrayQuote { line: usize },
    #[error("line {line}: text after a closing quote")]
    AfterQuote { line: usize },
}

/// The records of an RFC 4180 file: cells split on commas, quoted cells may hold commas, doubled
/// quotes and line breaks; lines end with CRLF or LF; a UTF-8 byte order mark is skipped, and so
/// are blank lines. Returns each record with the line it starts on.
pub fn parse(bytes: &[u8]) -> Result<Vec<(usize, Vec<String>)>, ParseError> {
    let text = std::str::from_utf8(bytes).map_err(|_| ParseError::NotUtf8)?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut records = Vec::new();
    let mut chars = text.chars().peekable();
    let mut line = 1;
    while chars.peek().is_some() {
        let start_line = line;
        let mut record = Vec::new();
        loop {
            let mut cell = String::new();
            if chars.next_if_eq(&'"').is_some() {
                // A quoted cell: up to the quote that is not doubled.
                loop {
                    match chars.next() {
                        None => return Err(ParseError::Unclosed { line: start_line }),
                        Some('"') if chars.next_if_eq(&'"').is_some() => cell.push('"'),
                        Some('"') => break,
                        Some(c) => {
                            line += usize::from(c == '\n');
                            cell.push(c);
                        }
                    }
                }
                if !matches!(chars.peek(), None | Some(',' | '\r' | '\n')) {
                    return Err(ParseError::AfterQuote { line });
                }
            }
            loop {
                match chars.peek() {
                    None | Some(',' | '\n') => break,
                    Some('\r') => {
                        let mut ahead = chars.clone();
                        ahead.next();
                        if ahead.peek() == Some(&'\n') {
                            break;
                        }
                        cell.push('\r');
                        chars.next();
                    }
                    Some('"') => return Err(ParseError::StrayQuote { line }),
                    Some(&c) => {
                        cell.push(c);
                        chars.next();
                    }
                }
            }
            record.push(cell);
            match chars.next() {
                Some(',') => continue,
                Some('\r') => {
                    chars.next();
                    line += 1;
                }
                Some('\n') => line += 1,
                _ => {}
            }
            break;
        }
        if !(record.len() == 1 && record[0].is_empty()) {
            records.push((start_line, record));
        }
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Serialize)]
    struct Inner {
        home: String,
        cell: Option<String>,
    }

    #[derive(Serialize)]
    struct Outer {
        id: i64,
        name: String,
        phone: Inner,
        hours: f64,
        done: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        details: Option<Vec<i64>>,
    }

    fn sample() -> Outer {
        Outer {
            id: 7,
            name: "O'Hara, \"Jim\"\nJr".into(),
            phone: Inner { home: "555".into(), cell: None },
            hours: 2.0,
            done: true,
            details: None,
        }
    }

    #[test]
    fn nested_fields_are_named_with_dots_in_field_order() {
        assert_eq!(header(&sample()), ["id", "name", "phone.home", "phone.cell", "hours", "done"]);
    }

    #[test]
    fn records_quote_what_needs_it_and_write_json_scalars() {
        let mut line = String::new();
        push_record(&mut line, &sample()).unwrap();
        assert_eq!(line, "7,\"O'Hara, \"\"Jim\"\"\nJr\",555,,2.0,true\r\n");
    }

    #[test]
    fn lists_are_refused() {
        let mut value = sample();
        value.details = Some(vec![1]);
        let err = push_record(&mut String::new(), &value).unwrap_err();
        assert!(err.to_string().contains("details"), "{err}");
    }

    #[test]
    fn parse_reads_quotes_line_breaks_and_both_line_ends() {
        let file = "\u{feff}a,b,c\r\n1,\"x, \"\"y\"\"\r\nz\",\n\n2,\"\",3";
        let records = parse(file.as_bytes()).unwrap();
        assert_eq!(
            records,
            vec![
                (1, vec!["a".to_owned(), "b".into(), "c".into()]),
                (2, vec!["1".to_owned(), "x, \"y\"\r\nz".into(), "".into()]),
                (5, vec!["2".to_owned(), "".into(), "3".into()]),
            ]
        );
    }

    #[test]
    fn parse_reports_broken_quotes_with_their_line() {
        assert_eq!(parse(b"a\n\"open"), Err(ParseError::Unclosed { line: 2 }));
        assert_eq!(parse(b"a\nb\"c"), Err(ParseError::StrayQuote { line: 2 }));
        assert_eq!(parse(b"\"a\"b"), Err(ParseError::AfterQuote { line: 1 }));
        assert_eq!(parse(&[0xff, 0xfe]), Err(ParseError::NotUtf8));
    }

    proptest! {
        /// Whatever the cells hold, writing a record and parsing it gives the cells back.
        #[test]
        fn cells_round_trip(rows in proptest::collection::vec(proptest::collection::vec("[a-z,\"\r\n é]{0,6}", 1..5), 1..5)) {
            let mut file = String::new();
            for row in &rows {
                // A record of one empty cell is a blank line, which the parser skips.
                prop_assume!(!(row.len() == 1 && row[0].is_empty()));
                let names: Vec<String> = row.clone();
                push_header(&mut file, &names);
            }
            let parsed: Vec<Vec<String>> = parse(file.as_bytes()).unwrap().into_iter().map(|(_, r)| r).collect();
            prop_assert_eq!(parsed, rows);
        }
    }
}
