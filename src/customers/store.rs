//! Customer queries. Every statement is scoped by `company_id`; filters read the shadow columns
//! (`*_key`, `phone_digits`) that inserts and updates keep in step with the values.

use crate::{
    db::{
        Db, DbError, Query, Reader, ShopFilter, Tx, company_row, now_micros,
        page::{PageRequest, Sort, fetch_page_with, page_statements},
    },
};

/// Sortable fields and their (lower-cased) columns.
pub const SORTS: &[Sort] = &[
    ("first_name", "first_name_key"),
    ("last_name", "last_name_key"),
    ("business_name", "business_name_key"),
    ("address", "address_key"),
];

/// A stored customer: its id, the fields a write sets, and the timestamps.
#[derive(Debug, Clone, Default, crate::db::FromRow)]
pub struct CustomerRow {
    pub id: i64,
    #[row(flatten)]
    pub fields: CustomerFields,
    pub created_at: i64,
    pub updated_at: i64,
}

pub const COLUMNS: &str = "id, shop_id, business_name, first_name, last_name, address, city, state, zip, \
    home_phone, work_phone, cell_phone, fax, email, comments, cell_provider, active, tax_exempt, allow_marketing, \
    credit_limit, extension, customer_type, terms, customer_number, created_at, updated_at";

/// What a create or update writes (the stored values, already validated), in column order.
#[derive(Debug, Clone, Default, crate::db::FromRow)]
pub struct CustomerFields {
    pub shop_id: i64,
    pub business_name: String,
    pub first_name: String,
    pub last_name: String,
    pub address: String,
    pub city: String,
    pub state: String,
    pub zip: String,
    pub home_phone: String,
    pub work_phone: String,
    pub cell_phone: String,
    pub fax: String,
    /// `None` when the customer has no e-mail address.
    pub email: Option<String>,
    pub comments: String,
    pub cell_provider: String,
    pub active: bool,
    pub tax_exempt: bool,
    pub allow_marketing: bool,
    /// Cents; `None` when never set.
    pub credit_limit: Option<i64>,
    pub extension: String,
    pub customer_type: String,
    pub terms: String,
    pub customer_number: String,
}

/// The digits of a phone number: what `filter[phone]` compares.
pub fn digits(s: &str) -> String {
    s.chars().filter(char::is_ascii_digit).collect()
}

/// `|home|work|cell|fax|` as digits: a `LIKE '%d%'` on it matches inside one number only.
pub fn phone_digits(f: &CustomerFields) -> String {
    format!("|{}|{}|{}|{}|", digits(&f.home_phone), digits(&f.work_phone), digits(&f.cell_phone), digits(&f.fax))
}

/// An FTS5 query for `text` as a substring of one column: `column : "text"`, quotes doubled.
fn trigram_phrase(column: &str, text: &str) -> String {
    format!("{column} : \"{}\"", text.replace('"', "\"\""))
}

/// The list filters, already parsed (text lower-cased, phone reduced to digits).
#[derive(Debug, Default)]
pub struct CustomerFilter {
    pub id: Option<i64>,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub address: Option<String>,
    pub phone_digits: Option<String>,
    pub customer_number: Option<String>,
    /// `[from, to)` in microseconds.
    pub updated: Option<(i64, i64)>,
}

impl CustomerFilter {
    /// No filter but (possibly) the shops. The destructuring names every field, so a filter
    /// added later cannot be forgotten here (the list's total would be the counter's, wrong).
    pub fn is_unfiltered(&self) -> bool {
        let CustomerFilter { id, first_name, last_name, address, phone_digits, customer_number, updated } = self;
        id.is_none()
            && first_name.is_none()
            && last_name.is_none()
            && address.is_none()
            && phone_digits.is_none()
            && customer_number.is_none()
            && updated.is_none()
    }
}

/// Which statement a `FROM ... WHERE ...` is for: the same rows either way, found differently.
#[derive(Clone, Copy, PartialEq)]
enum Statement {
    /// The rows of a page or an export, in the list's order.
    Rows,
    /// A list's total.
    Count,
}

/// Whether PostgreSQL counts a term of a column with a grams index (migration 0018: `last_name`
/// only) through that index rather than as the page finds it.
fn counts_by_grams(term: &str) -> bool {
    (1..=2).contains(&term.len())
}

/// Whether a list's total needs a `FROM ... WHERE ...` of its own ([`Statement::Count`]) rather
/// than the page's.
fn count_differs(db: &Db, filter: &CustomerFilter) -> bool {
    !db.is_sqlite() && filter.last_name.as_deref().is_some_and(counts_by_grams)
}

/// The `FROM ... WHERE ...` of a list or an export: company first, then shops, then each filter.
fn filtered(db: &Db, company_id: i64, shops: &ShopFilter, filter: &CustomerFilter, statement: Statement) -> Query {
    let mut q = Query::new("FROM customers WHERE company_id = $1").bind(company_id);
    shops.push_sql(&mut q, "shop_id");
    if let Some(id) = filter.id {
        q.push(" AND id = ").push_bind(id);
    }
    for (column, value, has_grams) in [
        ("first_name_key", &filter.first_name, false),
        ("last_name_key", &filter.last_name, true),
        ("address_key", &filter.address, false),
        ("phone_digits", &filter.phone_digits, false),
    ] {
        if let Some(value) = value {
            // On SQLite a value of three characters or more is first looked up in the trigram
            // index (migration 0005); the LIKE then decides, with the exact rules everywhere.
            let has_trigram = value.chars().count() >= 3;
            if db.is_sqlite() && has_trigram {
                q.push(" AND id IN (SELECT rowid FROM customers_search WHERE customers_search MATCH ")
                    .push_bind(trigram_phrase(column, value))
                    .push(")");
            }
            if db.is_sqlite() || has_trigram {
                q.push(" AND ").push(column).push(" LIKE ").push_bind(crate::db::like_contains(value)).push(" ESCAPE '\\'");
            } else if statement == Statement::Count && has_grams && counts_by_grams(value) {
                // A term of one or two bytes (one or two ASCII characters, or one accented
                // letter) is a substring of the name exactly when it is one of the name's
                // characters or character pairs, which migration 0018 indexes: the count
                // visits the matches only instead of every customer of the company.
                q.push(" AND search_grams(last_name_key) @> ARRAY[CAST(").push_bind(value.clone()).push(" AS TEXT)]");
            } else {
                // The same containment as the LIKE, in a statement of its own: after five runs
                // PostgreSQL plans a prepared LIKE once for every value, through the trigram
                // index, and for a term too short for a trigram that plan reads the whole index
                // and rechecks every row (100 ms for `ez` on 200k customers, 4x a table scan).
                q.push(" AND strpos(").push(column).push(", ").push_bind(value.clone()).push(") > 0");
            }
        }
    }
    if let Some(number) = &filter.customer_number {
        // The `<> ''` term lets both backends use the partial unique index on the number.
        q.push(" AND customer_number <> '' AND customer_number = ").push_bind(number);
    }
    if let Some((from, to)) = filter.updated {
        q.push(" AND updated_at >= ").push_bind(from).push(" AND updated_at < ").push_bind(to);
    }
    q
}

pub async fn list(
    db: &Db,
    company_id: i64,
    shops: &ShopFilter,
    filter: &CustomerFilter,
    page: &PageRequest,
) -> Result<(Vec<CustomerRow>, i64), DbError> {
    let (rows, count) = page_statements(COLUMNS, &filtered(db, company_id, shops, filter, Statement::Rows), page, "id");
    if !filter.is_unfiltered() {
        let count = if count_differs(db, filter) {
            filtered(db, company_id, shops, filter, Statement::Count).prefixed("SELECT COUNT(*) ")
        } else {
            count
        };
        return fetch_page_with(db, &rows, &count, page).await;
    }
    // Nothing but the shops narrows the list: its total is the sum of the shops' counters
    // (migration 0006, kept by triggers) instead of a COUNT(*) over every customer.
    let mut total = Query::new("SELECT CAST(COALESCE(SUM(n), 0) AS BIGINT) FROM customer_counts WHERE company_id = $1").bind(company_id);
    shops.push_sql(&mut total, "shop_id");
    fetch_page_with(db, &rows, &total, page).await
}

/// Every customer a list with these filters shows, in its order, without pages (an export).
pub fn export_query(db: &Db, company_id: i64, shops: &ShopFilter, filter: &CustomerFilter, page: &PageRequest) -> Query {
    let mut q = filtered(db, company_id, shops, filter, Statement::Rows).prefixed(&format!("SELECT {COLUMNS} "));
    page.push_order(&mut q, "id");
    q
}

/// One customer of the company (whatever its shop: callers check the key's shop list).
pub async fn find(from: impl Into<Reader<'_>>, company_id: i64, id: i64) -> Result<Option<CustomerRow>, DbError> {
    from.into().fetch_optional(company_row(COLUMNS, "customers", company_id, id)).await
}

/// The company's customers among `ids`, in id order (unknown ids are skipped).
pub async fn by_ids(db: &Db, company_id: i64, ids: &[i64]) -> Result<Vec<CustomerRow>, DbError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut q = Query::new(format!("SELECT {COLUMNS} FROM customers WHERE company_id = $1 AND id IN ")).bind(company_id);
    q.push_in_list(ids).push(" ORDER BY id");
    db.fetch_all(&q).await
}

/// The company's customers with these (non-empty) numbers, in `customer_number` order (bytes,
/// as Rust sorts strings: both databases compare the column so), read in batches that follow
/// that order; locked, from a transaction, so two transactions lock shared customers in one order.
pub async fn by_numbers(from: impl Into<Reader<'_>>, company_id: i64, numbers: &[String]) -> Result<Vec<CustomerRow>, DbError> {
    let mut from = from.into();
    let mut numbers = numbers.to_vec();
    numbers.sort();
    numbers.dedup();
    let mut out = Vec::new();
    for chunk in numbers.chunks(500) {
        let mut q = Query::new(format!("SELECT {COLUMNS} FROM customers WHERE company_id = $1 AND customer_number <> '' AND customer_number IN "))
            .bind(company_id);
        q.push_in_list(chunk).push(" ORDER BY customer_number");
        out.extend(from.again().fetch_all::<CustomerRow>(q).await?);
    }
    Ok(out)
}

/// Binds the stored values and their shadow columns as `$first..$first+27` in [`VALUE_COLUMNS`]
/// order.
fn bind_fields(q: Query, f: &CustomerFields) -> Query {
    q.bind(f.shop_id)
        .bind(&f.business_name)
        .bind(&f.first_name)
        .bind(&f.last_name)
        .bind(&f.address)
        .bind(&f.city)
        .bind(&f.state)
        .bind(&f.zip)
        .bind(&f.home_phone)
        .bind(&f.work_phone)
        .bind(&f.cell_phone)
        .bind(&f.fax)
        .bind(f.email.clone())
        .bind(&f.comments)
        .bind(&f.cell_provider)
        .bind(f.active)
        .bind(f.tax_exempt)
        .bind(f.allow_marketing)
        .bind(f.credit_limit)
        .bind(&f.extension)
        .bind(&f.customer_type)
        .bind(&f.terms)
        .bind(&f.customer_number)
        .bind(crate::db::fold_case(&f.first_name))
        .bind(crate::db::fold_case(&f.last_name))
        .bind(crate::db::fold_case(&f.business_name))
        .bind(crate::db::fold_case(&f.address))
        .bind(phone_digits(f))
}

const VALUE_COLUMNS: [&str; 28] = [
    "shop_id", "business_name", "first_name", "last_name", "address", "city", "state", "zip", "home_phone",
    "work_phone", "cell_phone", "fax", "email", "comments", "cell_provider", "active", "tax_exempt",
    "allow_marketing", "credit_limit", "extension", "customer_type", "terms", "customer_number",
    "first_name_key", "last_name_key", "business_name_key", "address_key", "phone_digits",
];

/// The `INSERT` of a customer, returning its row (`DbError::Unique` on a taken number).
pub fn insert_query(company_id: i64, f: &CustomerFields, now: i64) -> Query {
    let placeholders: Vec<String> = (3..3 + VALUE_COLUMNS.len()).map(|n| format!("${n}")).collect();
    let q = Query::new(format!(
        "INSERT INTO customers (company_id, created_at, updated_at, {}) VALUES ($1, $2, $2, {}) RETURNING {COLUMNS}",
        VALUE_COLUMNS.join(", "),
        placeholders.join(", ")
    ))
    .bind(company_id)
    .bind(now);
    bind_fields(q, f)
}

/// Many customers in one statement, with exactly the columns and shadow values of a single
/// insert; returns the rows (the benchmark's data generator). Each row takes 28 placeholders.
pub fn insert_many_query(company_id: i64, rows: &[CustomerFields], now: i64) -> Query {
    let mut sql = format!("INSERT INTO customers (company_id, created_at, updated_at, {}) VALUES ", VALUE_COLUMNS.join(", "));
    for i in 0..rows.len() {
        let first = 3 + i * VALUE_COLUMNS.len();
        let placeholders: Vec<String> = (first..first + VALUE_COLUMNS.len()).map(|n| format!("${n}")).collect();
        sql.push_str(&format!("{}($1, $2, $2, {})", if i == 0 { "" } else { ", " }, placeholders.join(", ")));
    }
    sql.push_str(&format!(" RETURNING {COLUMNS}"));
    rows.iter().fold(Query::new(sql).bind(company_id).bind(now), bind_fields)
}

/// `Err(DbError::Unique)` when the company already has a customer with that `customer_number`.
pub async fn insert(tx: &mut Tx, company_id: i64, f: &CustomerFields, now: i64) -> Result<CustomerRow, DbError> {
    tx.fetch_optional(&insert_query(company_id, f, now)).await?.ok_or(DbError::NoRow)
}

/// The `UPDATE` of a customer read as `read` to `f` that sets only the columns whose value
/// changes (an index, or the search index, over untouched columns is then not rewritten: the
/// update did half the work), and applies only while every other column still holds what was
/// read. No row when the customer changed since (or is gone): merge again onto a fresh read.
pub fn update_unless_changed(company_id: i64, id: i64, read: &CustomerFields, f: &CustomerFields) -> Query {
    let new = bind_fields(Query::new(""), f).into_args();
    let old = bind_fields(Query::new(""), read).into_args();
    let mut q = Query::new("UPDATE customers SET updated_at = $3").bind(company_id).bind(id).bind(now_micros());
    let mut unchanged = Vec::new();
    for ((column, new), old) in VALUE_COLUMNS.iter().zip(new).zip(old) {
        if new == old {
            unchanged.push((column, old));
        } else {
            q.push(", ").push(column).push(" = ").push_bind(new);
        }
    }
    q.push(" WHERE company_id = $1 AND id = $2");
    for (column, value) in unchanged {
        q.push(" AND ").push(column).push(" IS NOT DISTINCT FROM ").push_bind(value);
    }
    q.push(&format!(" RETURNING {COLUMNS}"));
    q
}

/// The `UPDATE` of a customer to `f`, returning its row (none when there is no such customer).
pub fn update_query(company_id: i64, id: i64, f: &CustomerFields) -> Query {
    let sets: Vec<String> = VALUE_COLUMNS.iter().enumerate().map(|(i, c)| format!("{c} = ${}", i + 4)).collect();
    let q = Query::new(format!(
        "UPDATE customers SET updated_at = $3, {} WHERE company_id = $1 AND id = $2 RETURNING {COLUMNS}",
        sets.join(", ")
    ))
    .bind(company_id)
    .bind(id)
    .bind(now_micros());
    bind_fields(q, f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trigram_phrases_quote_the_text() {
        assert_eq!(trigram_phrase("last_name_key", "o\"brien"), "last_name_key : \"o\"\"brien\"");
    }

    #[test]
    fn phones_reduce_to_separated_digits() {
        assert_eq!(digits("(555) 010-2030"), "5550102030");
    }
}
