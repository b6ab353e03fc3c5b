//! Accounts receivable and payment queries, always scoped by company and customer.

use crate::{
    db::{Db, DbError, Query, Reader, Rows, ShopFilter, Tx, page::{PageRequest, Sort, fetch_page}},
};

/// Sortable fields and their columns. `reference` has no lower-cased column: `lower()` lowers
/// ASCII letters alone on both databases (SQLite's built-in; PostgreSQL's under the column's
/// "C" collation), so the order is the same on both.
pub const SORTS: &[Sort] = &[("reference", "lower(reference)"), ("due_date", "due_date"), ("date", "date"), ("actual_date", "actual_date")];

/// A stored entry: its id and customer, the fields a create sets, and what payments change.
#[derive(Debug, Clone, crate::db::FromRow)]
pub struct ReceivableRow {
    pub id: i64,
    pub customer_id: i64,
    #[row(flatten)]
    pub fields: ReceivableFields,
    /// Cents.
    pub balance: i64,
    pub payment_date: Option<String>,
}

const COLUMNS: &str =
    "id, customer_id, shop_id, reference, repair_order_id, date, due_date, actual_date, amount, balance, payment_date";

#[derive(Debug, Clone, crate::db::FromRow)]
pub struct PaymentRow {
    pub id: i64,
    pub customer_id: i64,
    pub accounts_receivable_id: i64,
    pub amount: i64,
    pub date: String,
}

/// The list filters, parsed. `ranges` are `(column, ">=" or "<=", YYYY-MM-DD)`.
#[derive(Debug, Default)]
pub struct ReceivableFilter {
    pub paid: Option<bool>,
    pub ranges: Vec<(&'static str, &'static str, String)>,
    pub reference: Option<String>,
    pub repair_order_id: Option<i64>,
}

pub async fn list(
    db: &Db,
    company_id: i64,
    customer_id: i64,
    shops: &ShopFilter,
    filter: &ReceivableFilter,
    page: &PageRequest,
) -> Result<(Vec<ReceivableRow>, i64), DbError> {
    let mut q = Query::new("FROM accounts_receivable WHERE company_id = $1 AND customer_id = $2").bind(company_id).bind(customer_id);
    shops.push_sql(&mut q, "shop_id");
    match filter.paid {
        Some(true) => q.push(" AND balance = 0"),
        Some(false) => q.push(" AND balance > 0"),
        None => &mut q,
    };
    for (column, op, date) in &filter.ranges {
        q.push(" AND ").push(column).push(" ").push(op).push(" ").push_bind(date.as_str());
    }
    if let Some(reference) = &filter.reference {
        q.push(" AND reference = ").push_bind(reference);
    }
    if let Some(id) = filter.repair_order_id {
        q.push(" AND repair_order_id = ").push_bind(id);
    }
    fetch_page(db, COLUMNS, &q, page, "id").await
}

pub async fn find(from: impl Into<Reader<'_>>, company_id: i64, customer_id: i64, id: i64) -> Result<Option<ReceivableRow>, DbError> {
    let q = Query::new(format!(
        "SELECT {COLUMNS} FROM accounts_receivable WHERE company_id = $1 AND customer_id = $2 AND id = $3"
    ))
    .bind(company_id)
    .bind(customer_id)
    .bind(id);
    from.into().fetch_optional(q).await
}

/// Every entry of these (at least one) customers in the given shops (`with_details`), by
/// customer then id.
pub fn for_customers(company_id: i64, shops: &ShopFilter, customer_ids: &[i64]) -> Rows<ReceivableRow> {
    let mut q = Query::new(format!("SELECT {COLUMNS} FROM accounts_receivable WHERE company_id = $1")).bind(company_id);
    shops.push_sql(&mut q, "shop_id");
    q.push(" AND customer_id IN ").push_in_list(customer_ids).push(" ORDER BY customer_id, id");
    Rows::of(q)
}

/// Every payment on those entries (`with_details`), by customer then id.
pub fn payments_for_customers(company_id: i64, shops: &ShopFilter, customer_ids: &[i64]) -> Rows<PaymentRow> {
    let mut q = Query::new(
        "SELECT p.id, p.customer_id, p.accounts_receivable_id, p.amount, p.date FROM account_payments p \
         JOIN accounts_receivable a ON a.company_id = p.company_id AND a.id = p.accounts_receivable_id \
         WHERE p.company_id = $1",
    )
    .bind(company_id);
    shops.push_sql(&mut q, "a.shop_id");
    q.push(" AND p.customer_id IN ").push_in_list(customer_ids).push(" ORDER BY p.customer_id, p.id");
    Rows::of(q)
}

/// What a create writes, in column order.
#[derive(Debug, Clone, crate::db::FromRow)]
pub struct ReceivableFields {
    pub shop_id: i64,
    pub reference: String,
    pub repair_order_id: Option<i64>,
    pub date: String,
    pub due_date: String,
    pub actual_date: String,
    /// Cents.
    pub amount: i64,
}

/// A new entry: nothing paid yet, so the balance is the amount.
fn insert_query(company_id: i64, customer_id: i64, f: &ReceivableFields, now: i64) -> Query {
    Query::new(format!(
        "INSERT INTO accounts_receivable (company_id, customer_id, shop_id, reference, repair_order_id, date, due_date, \
         actual_date, amount, balance, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10, $10) RETURNING {COLUMNS}"
    ))
    .bind(company_id)
    .bind(customer_id)
    .bind(f.shop_id)
    .bind(&f.reference)
    .bind(f.repair_order_id)
    .bind(&f.date)
    .bind(&f.due_date)
    .bind(&f.actual_date)
    .bind(f.amount)
    .bind(now)
}

/// Outcome of [`pay`].
pub enum Payment {
    Applied(ReceivableRow),
    /// The amount is more than the entry's balance (which is returned).
    ExceedsBalance(i64),
    NotFound,
}

/// Records a payment and lowers the balance. The balance check and the decrement are one
/// conditional `UPDATE`, so concurrent payments can never overdraw an entry.
pub async fn pay(
    tx: &mut Tx,
    company_id: i64,
    customer_id: i64,
    id: i64,
    amount: i64,
    date: &str,
    now: i64,
) -> Result<Payment, DbError> {
    // Both statements take the payment as $1..$6.
    let payment = |q: Query| q.bind(company_id).bind(customer_id).bind(id).bind(amount).bind(date).bind(now);
    let q = Query::new(format!(
        "UPDATE accounts_receivable SET balance = balance - $4, updated_at = $6, \
         payment_date = CASE WHEN payment_date IS NULL OR payment_date < $5 THEN $5 ELSE payment_date END \
         WHERE company_id = $1 AND customer_id = $2 AND id = $3 AND balance >= $4 RETURNING {COLUMNS}"
    ));
    let Some(row) = tx.fetch_optional::<ReceivableRow>(&payment(q)).await? else {
        let q = Query::new("SELECT balance FROM accounts_receivable WHERE company_id = $1 AND customer_id = $2 AND id = $3")
            .bind(company_id)
            .bind(customer_id)
            .bind(id);
        return Ok(match tx.fetch_optional::<(i64,)>(&q).await? {
            Some((balance,)) => Payment::ExceedsBalance(balance),
            None => Payment::NotFound,
        });
    };
    let q = Query::new(
        "INSERT INTO account_payments (company_id, customer_id, accounts_receivable_id, amount, date, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    );
    tx.execute(&payment(q)).await?;
    Ok(Payment::Applied(row))
}

pub async fn insert(tx: &mut Tx, company_id: i64, customer_id: i64, f: &ReceivableFields, now: i64) -> Result<ReceivableRow, DbError> {
    tx.fetch_optional(&insert_query(company_id, customer_id, f, now))
        .await?
        .ok_or(DbError::NoRow)
}
