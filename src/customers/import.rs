//! `POST /api/v1/customers/import`: a CSV file of customers in the export's columns, validated
//! row by row like `POST /api/v1/customers` and written all or nothing (decisions §16).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::{
    input,
    model::{Customer, CustomerInput},
    store::{self, CustomerFields, CustomerRow},
};
use crate::{
    auth::Caller,
    change::Change,
    csv,
    db::{Db, DbError, now_micros},
    error::{ApiError, FieldErrors},
    respond::unique_as_invalid,
    scope,
};

/// Rows one file may hold.
pub const MAX_ROWS: usize = 100_000;
/// Rows whose errors a 422 lists; the rest are counted.
const MAX_ROWS_REPORTED: usize = 100;
/// Customers per `INSERT` (28 values each: far under both databases' limits on placeholders).
const INSERT_CHUNK: usize = 500;

/// Columns of the export that an import ignores: the server sets them.
const READ_ONLY: [&str; 3] = ["customer_id", "timestamp", "updated_at"];
/// Columns a file must have to create customers (`shop_id` unless the query names the shop).
const REQUIRED: [&str; 7] = ["business_name", "first_name", "last_name", "address", "city", "state", "zip"];
const BOOLEANS: [&str; 3] = ["active", "tax_exempt", "allow_marketing"];
/// Columns where an empty cell means `null`.
const NULLABLE: [&str; 2] = ["email", "credit_limit"];

/// What an import wrote.
#[derive(Debug, Serialize, ToSchema)]
pub struct ImportSummary {
    /// Customers created.
    pub created: usize,
    /// Customers updated (`?match=customer_number`).
    pub updated: usize,
}

pub struct ImportOptions {
    /// `?shop_id=`: every row's shop.
    pub shop_id: Option<i64>,
    /// `?match=customer_number`.
    pub match_number: bool,
}

/// One data row, read: its number (from 1), what to write, and the customer it updates (as read).
struct Row {
    number: usize,
    fields: CustomerFields,
    updates: Option<CustomerRow>,
    /// Its `shop_id` is still to be checked against the company and the key's shops, as
    /// `POST` and `PUT` check theirs (a new shop, read without error).
    check_shop: bool,
}

/// Validates the whole file, then writes it in one transaction with an event per customer.
/// With `?match=customer_number`, a row that updates a customer is merged onto that customer as
/// it is when written (as a customer `PUT` is): the file is checked against the customers as
/// read, and if one of them changes before the write, checked again against them read locked.
pub async fn run(db: &Db, caller: &Caller, file: &[u8], options: ImportOptions) -> Result<ImportSummary, ApiError> {
    let (header, records) = parse(file, &options)?;
    let numbers = numbers(&header, &records);
    let mut shops = ShopVerdicts::default();
    let existing = store::by_numbers(db, caller.company_id, &numbers).await?;
    let rows = check(db, caller, &header, records, &options, &existing, &mut shops).await?;
    // A shop a matched customer was in is one the key may write to (it could see the customer
    // there): a row that named it unchanged was not checked, but may move the customer there
    // once it changed.
    for customer in existing.iter().filter(|c| caller.can_see_shop(c.fields.shop_id)) {
        shops.entry(customer.fields.shop_id).or_insert(false);
    }
    drop(existing);
    if let Some(summary) = write(Change::begin(db, caller.company_id).await?, rows, Updates::UnlessChanged).await? {
        return Ok(summary);
    }
    // The second check, under the locks, reuses the first one's shop verdicts: it reads nothing
    // more from the database while the customers (or SQLite's writer) are held.
    let (header, records) = parse(file, &options)?;
    let mut change = Change::begin(db, caller.company_id).await?;
    let existing = store::by_numbers(change.tx(), caller.company_id, &numbers).await?;
    let rows = check(db, caller, &header, records, &options, &existing, &mut shops).await?;
    write(change, rows, Updates::Locked).await?.ok_or_else(|| ApiError::Internal("a locked import found its customers changed".into()))
}

/// Whether the key may write to each shop looked up so far (`true`: refused).
type ShopVerdicts = HashMap<i64, bool>;

/// Data records with their line numbers.
type Records = Vec<(usize, Vec<String>)>;

/// The file's header, checked, and its data records.
fn parse(file: &[u8], options: &ImportOptions) -> Result<(Vec<String>, Records), ApiError> {
    let records = csv::parse(file).map_err(|e| ApiError::invalid("file", format!("The file is not valid CSV: {e}.")))?;
    let mut records = records.into_iter();
    let Some((_, header)) = records.next() else {
        return Err(ApiError::invalid("header", "The file is empty: the first line must name the columns."));
    };
    let records: Records = records.collect();
    if records.len() > MAX_ROWS {
        return Err(ApiError::PayloadTooLarge(format!("The file has {} data rows; an import takes at most {MAX_ROWS}.", records.len())));
    }
    Ok((check_header(header, options)?, records))
}

/// A record's `customer_number`, trimmed, when it has one.
fn number_of<'a>(header: &[String], cells: &'a [String]) -> Option<&'a str> {
    let column = header.iter().position(|h| h == "customer_number")?;
    cells.get(column).map(|c| c.trim()).filter(|c| !c.is_empty())
}

fn numbers(header: &[String], records: &Records) -> Vec<String> {
    records.iter().filter_map(|(_, cells)| number_of(header, cells)).map(str::to_owned).collect()
}

/// Every record validated (against `existing`, the company's customers with the file's
/// numbers), or the 422 that lists the rows' errors.
async fn check(
    db: &Db,
    caller: &Caller,
    header: &[String],
    records: Records,
    options: &ImportOptions,
    existing: &[CustomerRow],
    shops: &mut ShopVerdicts,
) -> Result<Vec<Row>, ApiError> {
    let existing: HashMap<&str, &CustomerRow> = existing.iter().map(|c| (c.fields.customer_number.as_str(), c)).collect();
    let mut errors = RowErrors::default();
    let mut rows = Vec::with_capacity(records.len());
    let mut seen_numbers: HashMap<String, usize> = HashMap::new();
    // Each record is dropped once read: the file is not held twice.
    for (index, (line, cells)) in records.into_iter().enumerate() {
        let number = index + 1;
        let mut row_errors = FieldErrors::default();
        if cells.len() != header.len() {
            row_errors.add("file", format!("Line {line} has {} cells; the header has {}.", cells.len(), header.len()));
            errors.add(number, row_errors);
            continue;
        }
        let matched = number_of(header, &cells).and_then(|n| existing.get(n).copied());
        let updates = match matched {
            Some(found) if options.match_number && !caller.can_see_shop(found.fields.shop_id) => {
                row_errors.add("customer_number", "The customer_number matches a customer in a shop this key cannot access.");
                None
            }
            Some(found) if options.match_number => Some(found),
            Some(_) => {
                row_errors.add("customer_number", "The customer_number has already been taken.");
                None
            }
            None => None,
        };
        for (name, _) in header.iter().zip(&cells).filter(|(_, cell)| cell.contains('\0')) {
            // No database stores a NUL in text (PostgreSQL refuses it), as for a JSON body.
            row_errors.add(name, format!("The {name} field must not contain NUL characters."));
        }
        let body = row_body(header, &cells, options.shop_id);
        let input: CustomerInput = serde_json::from_value(Value::Object(body)).unwrap_or_default();
        let (fields, reader) = input::read(input, updates.map(|c| c.fields.clone()));
        let check_shop = !reader.errors.has("shop_id") && updates.is_none_or(|c| c.fields.shop_id != fields.shop_id);
        row_errors.absorb("", reader.errors);
        if !fields.customer_number.is_empty() {
            if let Some(first) = seen_numbers.insert(fields.customer_number.clone(), number) {
                row_errors.add("customer_number", format!("The customer_number is also on row {first}."));
            }
        }
        errors.add(number, row_errors);
        rows.push(Row { number, fields, updates: updates.cloned(), check_shop });
    }
    check_shops(db, caller, &rows, &mut errors, shops).await?;
    errors.into_result()?;
    Ok(rows)
}

/// The header's columns, checked: every name known, none twice, the required ones there.
fn check_header(header: Vec<String>, options: &ImportOptions) -> Result<Vec<String>, ApiError> {
    let known = csv::header(&Customer::from(CustomerRow::default()));
    let header: Vec<String> = header.into_iter().map(|h| h.trim().to_owned()).collect();
    let mut errors = FieldErrors::default();
    let unknown: Vec<&str> = header.iter().filter(|h| !known.contains(h)).map(String::as_str).collect();
    if !unknown.is_empty() {
        errors.add("header", format!("Unknown columns: {}. The columns are the export's: {}.", unknown.join(", "), known.join(", ")));
    }
    let mut seen = BTreeSet::new();
    let repeated: BTreeSet<&str> = header.iter().filter(|h| !seen.insert(h.as_str())).map(String::as_str).collect();
    if !repeated.is_empty() {
        errors.add("header", format!("Columns named twice: {}.", repeated.into_iter().collect::<Vec<_>>().join(", ")));
    }
    // Matching by number may update with fewer columns; rows that create are then checked
    // field by field like any create.
    let mut required: Vec<&str> = if options.match_number { Vec::new() } else { REQUIRED.to_vec() };
    if options.shop_id.is_none() && !options.match_number {
        required.insert(0, "shop_id");
    }
    if options.match_number {
        required.push("customer_number");
    }
    let missing: Vec<&str> = required.into_iter().filter(|r| !header.iter().any(|h| h == r)).collect();
    if !missing.is_empty() {
        errors.add("header", format!("Missing columns: {}.", missing.join(", ")));
    }
    errors.into_result()?;
    Ok(header)
}

/// A row as the JSON body `POST /api/v1/customers` would take: `phone.home` inside `phone`,
/// booleans and numbers typed when they parse (else left as text for the validation to name),
/// empty cells absent, or `null` where the export writes `null` as an empty cell.
fn row_body(header: &[String], cells: &[String], shop_id: Option<i64>) -> Map<String, Value> {
    let mut body = Map::new();
    let mut phone = Map::new();
    for (name, raw) in header.iter().zip(cells) {
        let name = name.as_str();
        if READ_ONLY.contains(&name) || (name == "shop_id" && shop_id.is_some()) {
            continue;
        }
        let value = if raw.trim().is_empty() && NULLABLE.contains(&name) {
            Value::Null
        } else if raw.trim().is_empty() && (BOOLEANS.contains(&name) || name == "shop_id") {
            continue;
        } else if BOOLEANS.contains(&name) {
            match raw.trim().to_ascii_lowercase().as_str() {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => Value::String(raw.clone()),
            }
        } else if name == "shop_id" || name == "credit_limit" {
            // A number as JSON would carry it (an integer exactly, past 2^53 too), else the text
            // (which the validation refuses by name).
            let trimmed = raw.trim();
            trimmed
                .parse::<i64>()
                .map(Value::from)
                .ok()
                .or_else(|| trimmed.parse::<f64>().ok().and_then(serde_json::Number::from_f64).map(Value::Number))
                .unwrap_or_else(|| Value::String(raw.clone()))
        } else {
            Value::String(raw.clone())
        };
        match name.strip_prefix("phone.") {
            Some(key) => {
                phone.insert(key.to_owned(), value);
            }
            None => {
                body.insert(name.to_owned(), value);
            }
        }
    }
    if let Some(id) = shop_id {
        body.insert("shop_id".into(), Value::from(id));
    }
    if !phone.is_empty() {
        body.insert("phone".into(), Value::Object(phone));
    }
    // As a JSON body is read: a whole number written with a fraction (`2.0`) is that integer.
    body.values_mut().for_each(crate::extract::whole_numbers_as_integers);
    body
}

/// Every shop named must be one the key may write to: each is looked up once (`verdicts`).
async fn check_shops(db: &Db, caller: &Caller, rows: &[Row], errors: &mut RowErrors, verdicts: &mut ShopVerdicts) -> Result<(), ApiError> {
    let shops: BTreeSet<i64> = rows.iter().filter(|r| r.check_shop).map(|r| r.fields.shop_id).collect();
    for shop in shops {
        if verdicts.contains_key(&shop) {
            continue;
        }
        let mut check = FieldErrors::default();
        scope::body_shop(db, caller, Some(shop), &mut check).await?;
        verdicts.insert(shop, !check.is_empty());
    }
    let refused = |shop: &i64| verdicts.get(shop).copied().unwrap_or(true);
    for row in rows.iter().filter(|r| r.check_shop && refused(&r.fields.shop_id)) {
        let mut e = FieldErrors::default();
        e.add("shop_id", "The selected shop_id is invalid.");
        errors.add(row.number, e);
    }
    Ok(())
}

/// How [`write`] updates the customers a file matched.
#[derive(PartialEq)]
enum Updates {
    /// Only while each still holds what was read before the transaction.
    UnlessChanged,
    /// Whatever they hold: they were read locked in this transaction.
    Locked,
}

/// Creates and updates in one transaction, each customer with its event; `None` (nothing
/// written) when a customer to update changed since it was read, or (first pass) a number the
/// file creates was taken meanwhile: the locked pass's check then names its row.
async fn write(mut change: Change, rows: Vec<Row>, how: Updates) -> Result<Option<ImportSummary>, ApiError> {
    let company_id = change.company_id();
    let taken = |e: DbError| match (e, &how) {
        (DbError::Unique, Updates::UnlessChanged) => None,
        (e, _) => Some(unique_as_invalid("customer_number")(e)),
    };
    let (mut updates, creates): (Vec<Row>, Vec<Row>) = rows.into_iter().partition(|r| r.updates.is_some());
    let creates: Vec<CustomerFields> = creates.into_iter().map(|r| r.fields).collect();
    let now = now_micros();
    let mut created = 0;
    for chunk in creates.chunks(INSERT_CHUNK) {
        let q = store::insert_many_query(company_id, chunk, now);
        let mut inserted: Vec<CustomerRow> = match change.tx().fetch_all(&q).await {
            Ok(rows) => rows,
            Err(e) => return taken(e).map_or(Ok(None), Err),
        };
        inserted.sort_by_key(|c| c.id);
        for row in inserted {
            let customer = Customer::from(row);
            change.record("customer.created", Some(customer.shop_id), &customer)?;
            created += 1;
        }
    }
    // In customer_number order, as the locked read takes them (`store::by_numbers`): two imports
    // lock their shared customers in one order. (Two imports that also create one same new
    // number can still deadlock over it on PostgreSQL; one of them fails, as it would anyway.)
    updates.sort_by(|a, b| a.fields.customer_number.cmp(&b.fields.customer_number));
    let mut updated = 0;
    for row in &updates {
        let Some(read) = &row.updates else { continue };
        let q = match how {
            Updates::UnlessChanged => store::update_unless_changed(company_id, read.id, &read.fields, &row.fields),
            Updates::Locked => store::update_query(company_id, read.id, &row.fields),
        };
        let stored: Option<CustomerRow> = match change.tx().fetch_optional(&q).await {
            Ok(stored) => stored,
            Err(e) => return taken(e).map_or(Ok(None), Err),
        };
        let Some(stored) = stored else {
            return Ok(None);
        };
        let customer = Customer::from(stored);
        change.record("customer.updated", Some(customer.shop_id), &customer)?;
        updated += 1;
    }
    let summary = ImportSummary { created, updated };
    change.replay_as(axum::http::StatusCode::CREATED, None, &summary)?;
    change.commit().await?;
    Ok(Some(summary))
}

/// The errors of the rows, keyed `row N.field`: the [`MAX_ROWS_REPORTED`] first rows with errors
/// are listed, the rest only counted. A row may get errors twice (its cells, then its shop): it
/// counts once, and a listed row gets all of its errors. Rows are listed by number whichever
/// check found their errors, so a row whose only error is its shop keeps its place.
#[derive(Default)]
struct RowErrors {
    listed: BTreeMap<usize, FieldErrors>,
    rows: BTreeSet<usize>,
}

impl RowErrors {
    fn add(&mut self, number: usize, row: FieldErrors) {
        if row.is_empty() {
            return;
        }
        self.rows.insert(number);
        if let Some(listed) = self.listed.get_mut(&number) {
            listed.absorb("", row);
            return;
        }
        if self.listed.len() == MAX_ROWS_REPORTED {
            // Full: a later row waits its turn; an earlier one takes the last row's place (which
            // then never comes back: every row still listed is before it).
            match self.listed.last_key_value() {
                Some((&last, _)) if last > number => drop(self.listed.remove(&last)),
                _ => return,
            }
        }
        self.listed.insert(number, row);
    }

    fn into_result(self) -> Result<(), ApiError> {
        let mut errors = FieldErrors::default();
        for (number, row) in self.listed {
            errors.absorb(&format!("row {number}."), row);
        }
        if self.rows.len() > MAX_ROWS_REPORTED {
            errors.add("rows", format!("{} rows have errors; the first {MAX_ROWS_REPORTED} are listed.", self.rows.len()));
        }
        errors.into_result()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn the_first_rows_with_errors_are_listed_whichever_check_found_them() {
        let error = |field: &str| {
            let mut e = FieldErrors::default();
            e.add(field, "bad");
            e
        };
        let mut errors = RowErrors::default();
        // The cells' pass finds rows 2..=201 (even numbers); the shops' pass then rows 1..=99 (odd).
        for n in (2..=201).step_by(2) {
            errors.add(n, error("email"));
        }
        for n in (1..100).step_by(2) {
            errors.add(n, error("shop_id"));
        }
        errors.add(2, error("shop_id"));
        let ApiError::Validation(listed) = errors.into_result().unwrap_err() else { panic!() };
        let text = serde_json::to_value(&listed).unwrap().to_string();
        for n in 1..=100 {
            assert!(text.contains(&format!("\"row {n}.")), "row {n} is listed: {text}");
        }
        assert!(!text.contains("\"row 101."), "{text}");
        assert!(text.contains("\"row 2.shop_id\"") && text.contains("\"row 2.email\""), "{text}");
        assert!(text.contains("150 rows have errors; the first 100 are listed."), "{text}");
    }

    #[test]
    fn rows_become_the_create_body() {
        let h = header(&["customer_id", "shop_id", "first_name", "phone.home", "email", "active", "credit_limit", "zip"]);
        let cells = header(&["9", "3", "Ann", "555", "", "FALSE", "12.5", ""]);
        let body = Value::Object(row_body(&h, &cells, None));
        assert_eq!(
            body,
            serde_json::json!({"shop_id": 3, "first_name": "Ann", "email": null, "active": false, "credit_limit": 12.5, "zip": "", "phone": {"home": "555"}})
        );
    }

    #[test]
    fn unparsed_values_stay_text_for_the_validation_to_name() {
        let h = header(&["shop_id", "active", "credit_limit"]);
        let body = Value::Object(row_body(&h, &header(&["x", "yes", "lots"]), Some(4)));
        assert_eq!(body, serde_json::json!({"shop_id": 4, "active": "yes", "credit_limit": "lots"}));
        let body = Value::Object(row_body(&header(&["shop_id"]), &header(&["2.0"]), None));
        assert_eq!(body, serde_json::json!({"shop_id": 2}), "a whole number with a fraction, as in JSON");
        let body = Value::Object(row_body(&header(&["shop_id"]), &header(&["2.5"]), None));
        assert_eq!(body, serde_json::json!({"shop_id": 2.5}), "a fraction stays a number, refused by the validation as in JSON");
    }

    #[test]
    fn headers_name_unknown_repeated_and_missing_columns() {
        let options = ImportOptions { shop_id: None, match_number: false };
        let err = check_header(header(&["first_name", "nickname", "first_name"]), &options).unwrap_err();
        let ApiError::Validation(errors) = err else { panic!("{err:?}") };
        let text = serde_json::to_string(&errors).unwrap();
        assert!(text.contains("Unknown columns: nickname."), "{text}");
        assert!(text.contains("Columns named twice: first_name."), "{text}");
        assert!(text.contains("Missing columns: shop_id, business_name, last_name, address, city, state, zip."), "{text}");
    }
}
