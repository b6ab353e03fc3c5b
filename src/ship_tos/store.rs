//! Ship-to queries, always scoped by company and customer.

use crate::{
    db::{Db, DbError, Query, Reader, Rows, Tx, now_micros, page::{PageRequest, Sort, fetch_page}},
};

/// Sortable fields and their columns. `number` has no lower-cased column: `lower()` lowers ASCII
/// letters alone on both databases (SQLite's built-in; PostgreSQL's under the column's "C"
/// collation), so the order is the same on both.
pub const SORTS: &[Sort] = &[("number", "lower(number)"), ("name", "name_key")];

/// A stored ship-to: its id and customer, then the fields a write sets.
#[derive(Debug, Clone, crate::db::FromRow)]
pub struct ShipToRow {
    pub id: i64,
    pub customer_id: i64,
    #[row(flatten)]
    pub fields: ShipToFields,
}

const COLUMNS: &str =
    "id, customer_id, number, name, address, city, state, zip, email, work_phone, fax, home_phone, cell_phone";

/// What a create or update writes, in column order.
#[derive(Debug, Clone, crate::db::FromRow)]
pub struct ShipToFields {
    pub number: String,
    pub name: String,
    pub address: String,
    pub city: String,
    pub state: String,
    pub zip: String,
    pub email: Option<String>,
    pub work_phone: String,
    pub fax: String,
    pub home_phone: String,
    pub cell_phone: String,
}

pub async fn list(db: &Db, company_id: i64, customer_id: i64, page: &PageRequest) -> Result<(Vec<ShipToRow>, i64), DbError> {
    let q = Query::new("FROM ship_tos WHERE company_id = $1 AND customer_id = $2").bind(company_id).bind(customer_id);
    fetch_page(db, COLUMNS, &q, page, "id").await
}

/// Every ship-to of these (at least one) customers (`with_details`), by customer then id.
pub fn for_customers(company_id: i64, customer_ids: &[i64]) -> Rows<ShipToRow> {
    let mut q = Query::new(format!("SELECT {COLUMNS} FROM ship_tos WHERE company_id = $1 AND customer_id IN ")).bind(company_id);
    q.push_in_list(customer_ids).push(" ORDER BY customer_id, id");
    Rows::of(q)
}

pub async fn find(from: impl Into<Reader<'_>>, company_id: i64, customer_id: i64, id: i64) -> Result<Option<ShipToRow>, DbError> {
    let q = Query::new(format!("SELECT {COLUMNS} FROM ship_tos WHERE company_id = $1 AND customer_id = $2 AND id = $3"))
        .bind(company_id)
        .bind(customer_id)
        .bind(id);
    from.into().fetch_optional(q).await
}

fn bind_fields(q: Query, f: &ShipToFields) -> Query {
    q.bind(&f.number)
        .bind(&f.name)
        .bind(crate::db::fold_case(&f.name))
        .bind(&f.address)
        .bind(&f.city)
        .bind(&f.state)
        .bind(&f.zip)
        .bind(f.email.clone())
        .bind(&f.work_phone)
        .bind(&f.fax)
        .bind(&f.home_phone)
        .bind(&f.cell_phone)
}

fn insert_query(company_id: i64, customer_id: i64, f: &ShipToFields, now: i64) -> Query {
    let q = Query::new(format!(
        "INSERT INTO ship_tos (company_id, customer_id, created_at, updated_at, number, name, name_key, address, city, \
         state, zip, email, work_phone, fax, home_phone, cell_phone) \
         VALUES ($1, $2, $3, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) RETURNING {COLUMNS}"
    ))
    .bind(company_id)
    .bind(customer_id)
    .bind(now);
    bind_fields(q, f)
}

/// `Err(DbError::Unique)` when the customer already has a ship-to with that number.
pub async fn insert(tx: &mut Tx, company_id: i64, customer_id: i64, f: &ShipToFields, now: i64) -> Result<ShipToRow, DbError> {
    tx.fetch_optional(&insert_query(company_id, customer_id, f, now)).await?.ok_or(DbError::NoRow)
}

/// `None` when the customer has no such ship-to; `Err(DbError::Unique)` on a duplicate number.
pub async fn update(tx: &mut Tx, company_id: i64, customer_id: i64, id: i64, f: &ShipToFields) -> Result<Option<ShipToRow>, DbError> {
    let q = Query::new(format!(
        "UPDATE ship_tos SET updated_at = $4, number = $5, name = $6, name_key = $7, address = $8, city = $9, \
         state = $10, zip = $11, email = $12, work_phone = $13, fax = $14, home_phone = $15, cell_phone = $16 \
         WHERE company_id = $1 AND customer_id = $2 AND id = $3 RETURNING {COLUMNS}"
    ))
    .bind(company_id)
    .bind(customer_id)
    .bind(id)
    .bind(now_micros());
    tx.fetch_optional(&bind_fields(q, f)).await
}
