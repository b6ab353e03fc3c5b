//! A SQL text plus its arguments, written once for both backends.
//!
//! Placeholders are `$1, $2, ...`: PostgreSQL's native form. SQLite reads `$1` as a *named*
//! parameter numbered by first appearance, so before SQLite sees a text its `$N` become `?N`
//! (numbered positional parameters): the same text runs on either database.

/// One bound value. Typed nulls keep PostgreSQL's parameter inference happy.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    I64(Option<i64>),
    F64(Option<f64>),
    Text(Option<String>),
    Bool(Option<bool>),
}

macro_rules! arg_from {
    ($t:ty, $variant:ident, $conv:expr) => {
        impl From<$t> for Arg {
            fn from(v: $t) -> Self {
                Arg::$variant(Some($conv(v)))
            }
        }
        impl From<Option<$t>> for Arg {
            fn from(v: Option<$t>) -> Self {
                Arg::$variant(v.map($conv))
            }
        }
    };
}

arg_from!(i64, I64, |v| v);
arg_from!(f64, F64, |v| v);
arg_from!(bool, Bool, |v| v);
arg_from!(String, Text, |v| v);
arg_from!(&str, Text, |v: &str| v.to_owned());
arg_from!(&String, Text, |v: &String| v.clone());

#[derive(Debug, Clone, Default)]
pub struct Query {
    pub(super) sql: String,
    pub(super) args: Vec<Arg>,
}

impl Query {
    pub fn new(sql: impl Into<String>) -> Self {
        Query { sql: sql.into(), args: Vec::new() }
    }

    /// Binds the next numbered placeholder already written in the text.
    pub fn bind(mut self, arg: impl Into<Arg>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// This statement inside a larger one (a data-modifying `WITH`, say), arguments kept.
    pub fn wrapped(mut self, before: &str, after: &str) -> Self {
        self.sql = format!("{before}{}{after}", self.sql);
        self
    }

    pub fn push(&mut self, sql: &str) -> &mut Self {
        self.sql.push_str(sql);
        self
    }

    /// Appends a new placeholder and binds it.
    pub fn push_bind(&mut self, arg: impl Into<Arg>) -> &mut Self {
        self.args.push(arg.into());
        self.sql.push('$');
        self.sql.push_str(&self.args.len().to_string());
        self
    }

    /// Appends `other`, its placeholders renumbered after this query's own: two statements
    /// become one (the parts of a data-modifying `WITH`). Borrowed: a change sent alone on
    /// PostgreSQL keeps its parts to send them again if its shared statement is undone.
    pub fn push_query(&mut self, other: &Query) -> &mut Self {
        let shift = self.args.len();
        let mut chars = other.sql.chars().peekable();
        while let Some(c) = chars.next() {
            self.sql.push(c);
            if c != '$' || !chars.peek().is_some_and(char::is_ascii_digit) {
                continue;
            }
            let mut n = 0usize;
            while let Some(d) = chars.peek().and_then(|d| d.to_digit(10)) {
                n = n * 10 + d as usize;
                chars.next();
            }
            self.sql.push_str(&(n + shift).to_string());
        }
        self.args.extend(other.args.iter().cloned());
        self
    }

    /// Appends `(p1, p2, ...)` for an `IN` list. The caller ensures the list is not empty.
    pub fn push_in_list<T: Into<Arg> + Clone>(&mut self, values: &[T]) -> &mut Self {
        self.sql.push('(');
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                self.sql.push_str(", ");
            }
            self.push_bind(v.clone());
        }
        self.sql.push(')');
        self
    }

    /// `prefix` followed by this query's text, with the same arguments: one filter, several
    /// statements (`SELECT cols` and `SELECT COUNT(*)`).
    pub fn prefixed(&self, prefix: &str) -> Query {
        Query { sql: format!("{prefix}{}", self.sql), args: self.args.clone() }
    }

    pub fn sql(&self) -> &str {
        &self.sql
    }

    /// The text with SQLite's numbered placeholders (`?N`) instead of `$N`. Our statements hold
    /// no `$` in literals or identifiers, so every `$` followed by a digit is a placeholder.
    /// Rewritten byte by byte (an ASCII byte for an ASCII byte keeps the text UTF-8): every
    /// SQLite statement of every request passes here, and the former copy char by char was 1%
    /// of the default page's CPU.
    pub(super) fn sqlite_sql(&self) -> String {
        let mut out = self.sql.clone().into_bytes();
        for i in 1..out.len() {
            if out[i - 1] == b'$' && out[i].is_ascii_digit() {
                out[i - 1] = b'?';
            }
        }
        String::from_utf8(out).expect("ASCII replaced by ASCII")
    }

    /// The bound values, in placeholder order (the benchmark renders statements for pgbench).
    pub fn args(&self) -> &[Arg] {
        &self.args
    }

    /// The bound values, taken.
    pub fn into_args(self) -> Vec<Arg> {
        self.args
    }
}

/// `text` as the lower-cased keys hold it, for case-insensitive filters, sorts and uniqueness:
/// lower case, and the final sigma `ς` as `σ`. `str::to_lowercase` writes a capital `Σ` as `ς`
/// at the end of a word and `σ` inside one, so a term (`ΚΑΣ`, "κας") would not be found inside the
/// word it starts (`ΚΑΣΤΡΟ`, "καστρο"); with both sides folded it is.
pub fn fold_case(text: &str) -> String {
    let lower = text.to_lowercase();
    if lower.contains('ς') { lower.replace('ς', "σ") } else { lower }
}

/// More characters than any stored search key has: texts are at most 255 characters, lower
/// case turns one character into at most two (`İ`), and a customer's phone key joins three
/// phones' digits.
const LONGER_THAN_ANY_KEY: usize = 1024;

/// A substring filter's term cut to [`LONGER_THAN_ANY_KEY`] characters: longer or cut, it is
/// found in no key, but its pattern stays inside SQLite's limit on LIKE patterns (50,000 bytes,
/// beyond which the statement fails where PostgreSQL finds nothing).
pub fn capped_term(mut term: String) -> String {
    if let Some((cut, _)) = term.char_indices().nth(LONGER_THAN_ANY_KEY) {
        term.truncate(cut);
    }
    term
}

/// A substring filter's term as keys are compared with it: folded ([`fold_case`]) and capped
/// ([`capped_term`]).
pub fn search_term(text: &str) -> String {
    capped_term(fold_case(text))
}

/// A `LIKE ... ESCAPE '\'` pattern matching `text` anywhere: `%`, `_` and `\` in the text are
/// escaped, so they match themselves.
pub fn like_contains(text: &str) -> String {
    format!("%{}", like_prefix(text))
}

/// A `LIKE ... ESCAPE '\'` pattern matching what starts with `text` (escaped as in
/// [`like_contains`]).
pub fn like_prefix(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 1);
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_terms_are_folded_and_cut_past_any_key() {
        assert_eq!(search_term("ΚΑΣ"), "κασ");
        let long = "İ".repeat(3000);
        assert_eq!(search_term(&long).chars().count(), LONGER_THAN_ANY_KEY);
        assert_eq!(capped_term("5".repeat(2000)), "5".repeat(LONGER_THAN_ANY_KEY));
        assert_eq!(capped_term("short".into()), "short");
    }

    #[test]
    fn like_patterns_escape_wildcards() {
        assert_eq!(like_contains("smith"), "%smith%");
        assert_eq!(like_contains("50%_a\\b"), "%50\\%\\_a\\\\b%");
    }

    #[test]
    fn push_bind_numbers_placeholders_after_static_ones() {
        let mut q = Query::new("SELECT 1 FROM t WHERE a = $1").bind(5i64);
        q.push(" AND b IN ").push_in_list(&[1i64, 2]);
        q.push(" AND c = ").push_bind("x");
        assert_eq!(q.sql(), "SELECT 1 FROM t WHERE a = $1 AND b IN ($2, $3) AND c = $4");
        assert_eq!(q.args.len(), 4);
        assert_eq!(q.sqlite_sql(), "SELECT 1 FROM t WHERE a = ?1 AND b IN (?2, ?3) AND c = ?4");
        // Only a `$` before a digit is a placeholder; text around it is kept, multi-byte or not.
        assert_eq!(Query::new("SELECT 'é$' || $12, '$x', $").sqlite_sql(), "SELECT 'é$' || ?12, '$x', $");
    }

    #[test]
    fn an_appended_query_numbers_its_placeholders_after_ours() {
        let mut q = Query::new("WITH a AS (INSERT INTO t VALUES ($1, $2, $2))").bind(1i64).bind("x");
        // Eleven arguments, so two-digit placeholders are renumbered whole.
        let mut other = Query::new("INSERT INTO u VALUES ($1, '$', $10, $11)").bind("y");
        other.args.extend((1..11).map(|n| Arg::I64(Some(n))));
        q.push(", b AS (").push_query(&other).push(")");
        assert_eq!(q.sql(), "WITH a AS (INSERT INTO t VALUES ($1, $2, $2)), b AS (INSERT INTO u VALUES ($3, '$', $12, $13))");
        assert_eq!(q.args.len(), 13);
        assert_eq!((&q.args[2], &q.args[12]), (&Arg::Text(Some("y".into())), &Arg::I64(Some(10))));
    }
}
