//! Appointment SQL. Every statement takes the caller's company.

use chrono_tz::Tz;

use super::{
    filters::{ListFilters, Trashed},
    timing::local_parts,
};
use crate::{
    db::{
        Db, DbError, Query, Reader, Rows, ShopFilter, Tx, company_row, now_micros,
        page::{PageRequest, Sort, fetch_page_with, page_statements, page_statements_by_ids},
    },
};

/// Sortable fields and their columns (`date` is the scheduled start).
pub const SORTS: &[Sort] = &[
    ("first_name", "first_name_key"),
    ("last_name", "last_name_key"),
    ("timestamp", "created_at"),
    ("reason", "reason_key"),
    ("year", "year"),
    ("date", "start_at"),
];

/// A stored appointment: its id, the fields a write sets, the timestamps, and its bay's title.
#[derive(Debug, Clone, Default, crate::db::FromRow)]
pub struct AppointmentRow {
    pub id: i64,
    #[row(flatten)]
    pub fields: AppointmentFields,
    pub created_at: i64,
    pub updated_at: i64,
    pub deleted_at: Option<i64>,
    /// The bay's current title.
    pub column_title: Option<String>,
}

const FIELDS: &str = "id, shop_id, customer_id, vehicle_id, repair_order_id, employee_id, first_name, last_name, email, \
     year, make, model, reason, home_phone, work_phone, cell_phone, bay_id, hours, done, source, status, \
     start_at, end_at, local_date, local_time, created_at, updated_at, deleted_at";

/// Columns of a `SELECT ... FROM appointments a`: the bay title comes from its primary key.
fn select_columns() -> String {
    format!("{FIELDS}, (SELECT b.title FROM bays b WHERE b.company_id = a.company_id AND b.id = a.bay_id) AS column_title")
}

/// Columns of a `RETURNING`: the caller already knows the bay's title.
fn returning_columns() -> String {
    format!("{FIELDS}, CAST(NULL AS TEXT) AS column_title")
}

/// A validated appointment, ready to store, in column order.
#[derive(Debug, Clone, Default, crate::db::FromRow)]
pub struct AppointmentFields {
    pub shop_id: i64,
    pub customer_id: Option<i64>,
    pub vehicle_id: Option<i64>,
    pub repair_order_id: Option<i64>,
    pub employee_id: Option<i64>,
    pub first_name: String,
    pub last_name: String,
    pub email: Option<String>,
    pub year: String,
    pub make: String,
    pub model: String,
    pub reason: Option<String>,
    pub home_phone: String,
    pub work_phone: String,
    pub cell_phone: String,
    pub bay_id: Option<i64>,
    pub hours: f64,
    pub done: bool,
    pub source: String,
    pub status: Option<String>,
    pub start_at: i64,
    pub end_at: i64,
    /// Shop-local `YYYY-MM-DD` and `HH:MM:SS` of `start_at`.
    pub local_date: String,
    pub local_time: String,
}

impl AppointmentFields {
    /// Sets `local_date` / `local_time` from `start_at` in the shop's zone.
    pub fn localize(&mut self, tz: Tz) {
        (self.local_date, self.local_time) = local_parts(tz, self.start_at);
    }
}

const WRITE_COLUMNS: &str = "shop_id, customer_id, vehicle_id, repair_order_id, employee_id, first_name, first_name_key, \
     last_name, last_name_key, email, year, make, make_key, model, model_key, reason, reason_key, home_phone, work_phone, \
     cell_phone, bay_id, hours, done, source, status, start_at, end_at, local_date, local_time";

/// Binds the 29 values of [`WRITE_COLUMNS`], in order.
fn bind_fields(mut q: Query, f: &AppointmentFields) -> Query {
    q = q.bind(f.shop_id).bind(f.customer_id).bind(f.vehicle_id).bind(f.repair_order_id).bind(f.employee_id);
    q = q.bind(&f.first_name).bind(crate::db::fold_case(&f.first_name)).bind(&f.last_name).bind(crate::db::fold_case(&f.last_name));
    q = q.bind(f.email.clone()).bind(&f.year).bind(&f.make).bind(crate::db::fold_case(&f.make)).bind(&f.model).bind(crate::db::fold_case(&f.model));
    q = q.bind(f.reason.clone()).bind(crate::db::fold_case(f.reason.as_deref().unwrap_or("")));
    q = q.bind(&f.home_phone).bind(&f.work_phone).bind(&f.cell_phone).bind(f.bay_id).bind(f.hours).bind(f.done);
    q.bind(&f.source).bind(f.status.clone()).bind(f.start_at).bind(f.end_at).bind(&f.local_date).bind(&f.local_time)
}

fn placeholders(from: usize, count: usize) -> String {
    (from..from + count).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
}

/// The `INSERT` statement shared by the API and the demo loader (same text: one prepared
/// statement per connection).
pub fn insert_query(company_id: i64, f: &AppointmentFields, created_at: i64) -> Query {
    let q = Query::new(format!(
        "INSERT INTO appointments (company_id, created_at, updated_at, {WRITE_COLUMNS}) VALUES ($1, $2, $2, {}) RETURNING {}",
        placeholders(3, 29),
        returning_columns()
    ))
    .bind(company_id)
    .bind(created_at);
    bind_fields(q, f)
}

/// A new appointment's insert. With an id reserved beforehand (`Tx::reserve_id`) it returns
/// nothing, and the row it stores comes with it: the caller answers from that row before the
/// statement runs. Without one, the database assigns the id and the statement returns the row.
pub fn insert_new(company_id: i64, id: Option<i64>, f: &AppointmentFields, created_at: i64) -> (Query, Option<AppointmentRow>) {
    let Some(id) = id else { return (insert_query(company_id, f, created_at), None) };
    let q = Query::new(format!(
        "INSERT INTO appointments (company_id, created_at, updated_at, {WRITE_COLUMNS}, id) VALUES ($1, $2, $2, {}, $32)",
        placeholders(3, 29)
    ))
    .bind(company_id)
    .bind(created_at);
    let row = AppointmentRow { id, fields: f.clone(), created_at, updated_at: created_at, deleted_at: None, column_title: None };
    (bind_fields(q, f).bind(id), Some(row))
}

/// Many rows in one statement, `(fields, created_at)` each, with exactly the columns and shadow
/// values of [`insert_query`] (the benchmark's data generator writes a million rows this way).
/// Each row takes 30 placeholders: keep a statement under 1,000 rows for SQLite's limit.
pub fn insert_many_query(company_id: i64, rows: &[(AppointmentFields, i64)]) -> Query {
    let mut sql = format!("INSERT INTO appointments (company_id, created_at, updated_at, {WRITE_COLUMNS}) VALUES ");
    for i in 0..rows.len() {
        let created = 2 + i * 30;
        let sep = if i == 0 { "" } else { ", " };
        sql.push_str(&format!("{sep}($1, ${created}, ${created}, {})", placeholders(created + 1, 29)));
    }
    let mut q = Query::new(sql).bind(company_id);
    for (f, created_at) in rows {
        q = bind_fields(q.bind(*created_at), f);
    }
    q
}

pub async fn insert(tx: &mut Tx, company_id: i64, f: &AppointmentFields) -> Result<AppointmentRow, DbError> {
    tx.fetch_optional(&insert_query(company_id, f, now_micros())).await?.ok_or(DbError::NoRow)
}

/// `None` when the appointment is deleted (or does not exist): deleted ones are read-only.
pub async fn update(tx: &mut Tx, company_id: i64, id: i64, f: &AppointmentFields) -> Result<Option<AppointmentRow>, DbError> {
    tx.fetch_optional(&update_query(company_id, id, f)).await
}

/// The `UPDATE` of a live appointment to `f`, returning its row (none when deleted or absent).
pub fn update_query(company_id: i64, id: i64, f: &AppointmentFields) -> Query {
    let mut q = update_statement(company_id, id, f, None);
    q.push(&format!(" RETURNING {}", returning_columns()));
    q
}

/// [`update_query`] that applies only while the appointment still holds `read` (every stored
/// value but the lower-cased search keys, which follow the values) and while `condition` (an
/// `AND ...` of [`crate::change::Change::guard_condition`]) holds: no row when it changed since
/// it was read, was deleted, or the condition failed. Merge again onto a fresh read then.
pub fn update_unless_changed(company_id: i64, id: i64, read: &AppointmentFields, f: &AppointmentFields, condition: &Query) -> Query {
    let mut q = update_statement(company_id, id, f, Some(read));
    q.push_query(condition);
    q.push(&format!(" RETURNING {}", returning_columns()));
    q
}

/// An appointment's new `updated_at` (`$3` the writer's clock): later than the one it has, so
/// the stamps of one appointment only rise in commit order, though a change is stamped before it
/// waits for the row (or the writer), and replicas' clocks differ. Clients (the board, syncs by
/// `filter[updated_date]`) may then take the higher stamp as the newer state.
const NEXT_UPDATED_AT: &str = "CASE WHEN updated_at >= $3 THEN updated_at + 1 ELSE $3 END";

fn update_statement(company_id: i64, id: i64, f: &AppointmentFields, unless_changed_from: Option<&AppointmentFields>) -> Query {
    let sets: Vec<String> = WRITE_COLUMNS.split(',').enumerate().map(|(i, c)| format!("{} = ${}", c.trim(), i + 4)).collect();
    let q = Query::new(format!(
        "UPDATE appointments SET updated_at = {NEXT_UPDATED_AT}, {} WHERE company_id = $1 AND id = $2 AND deleted_at IS NULL",
        sets.join(", ")
    ))
        .bind(company_id)
        .bind(id)
        .bind(now_micros());
    let mut q = bind_fields(q, f);
    if let Some(read) = unless_changed_from {
        let old = bind_fields(Query::new(""), read).into_args();
        for (column, value) in WRITE_COLUMNS.split(',').map(str::trim).zip(old) {
            if !column.ends_with("_key") {
                q.push(" AND ").push(column).push(" IS NOT DISTINCT FROM ").push_bind(value);
            }
        }
    }
    q
}

/// Soft-deletes an appointment of one of `shops` (`None`: any shop): sets `deleted_at` and
/// `updated_at`. `None` when it was deleted already (the first time is kept), does not exist,
/// or is in another shop by now (moved since it was read).
pub async fn soft_delete(tx: &mut Tx, company_id: i64, id: i64, shops: Option<&[i64]>, now: i64) -> Result<Option<AppointmentRow>, DbError> {
    let mut q = Query::new(format!(
        "UPDATE appointments SET deleted_at = {NEXT_UPDATED_AT}, updated_at = {NEXT_UPDATED_AT} WHERE company_id = $1 AND id = $2 AND deleted_at IS NULL"
    ))
        .bind(company_id)
        .bind(id)
        .bind(now);
    if let Some(shops) = shops {
        q.push(" AND shop_id IN ").push_in_list(shops);
    }
    // SQLite's RETURNING cannot see a table alias: the bay subquery names the table.
    q.push(&format!(
        " RETURNING {FIELDS}, (SELECT b.title FROM bays b WHERE b.company_id = appointments.company_id AND b.id = appointments.bay_id) AS column_title"
    ));
    tx.fetch_optional(&q).await
}

pub async fn find(from: impl Into<Reader<'_>>, company_id: i64, id: i64) -> Result<Option<AppointmentRow>, DbError> {
    from.into().fetch_optional(company_row(&select_columns(), "appointments a", company_id, id)).await
}

/// The `FROM ... WHERE ...` of a list: company first, then shops, then each filter.
pub fn list_query(company_id: i64, shops: &ShopFilter, f: &ListFilters) -> Query {
    let mut q = Query::new("FROM appointments a WHERE company_id = $1").bind(company_id);
    shops.push_sql(&mut q, "shop_id");
    match f.trashed {
        Trashed::Without => q.push(" AND deleted_at IS NULL"),
        Trashed::With => &mut q,
        Trashed::Only => q.push(" AND deleted_at IS NOT NULL"),
    };
    if let Some(id) = f.appointment_id {
        q.push(" AND id = ").push_bind(id);
    }
    for (column, pattern) in &f.text {
        q.push(" AND ").push(column).push(" LIKE ").push_bind(pattern.as_str()).push(" ESCAPE '\\'");
    }
    if let Some(year) = &f.year {
        q.push(" AND year = ").push_bind(year.as_str());
    }
    if let Some(date) = &f.local_date {
        q.push(" AND local_date = ").push_bind(date.as_str());
    }
    if let Some((from, to)) = &f.local_time {
        if from == to {
            q.push(" AND local_time = ").push_bind(from.as_str());
        } else {
            q.push(" AND local_time >= ").push_bind(from.as_str()).push(" AND local_time <= ").push_bind(to.as_str());
        }
    }
    if let Some(done) = f.done {
        q.push(" AND done = ").push_bind(done);
    }
    if let Some((from, to)) = f.updated {
        q.push(" AND updated_at >= ").push_bind(from).push(" AND updated_at <= ").push_bind(to);
    }
    if let Some(range) = &f.range {
        if let Some((lo, hi)) = range.start_envelope {
            push_bounds(&mut q, "start_at", lo, hi);
        }
        let zoned = range.zones.len() > 1;
        if zoned {
            q.push(" AND (");
        }
        for (i, (shop_ids, lo, hi)) in range.zones.iter().enumerate() {
            if zoned {
                q.push(if i == 0 { "(shop_id IN " } else { " OR (shop_id IN " }).push_in_list(shop_ids);
            }
            push_bounds(&mut q, range.column, *lo, *hi);
            if zoned {
                q.push(")");
            }
        }
        if zoned {
            q.push(")");
        }
    }
    q
}

fn push_bounds(q: &mut Query, column: &str, lo: Option<i64>, hi: Option<i64>) {
    if let Some(lo) = lo {
        q.push(" AND ").push(column).push(" >= ").push_bind(lo);
    }
    if let Some(hi) = hi {
        q.push(" AND ").push(column).push(" <= ").push_bind(hi);
    }
}

pub async fn list(
    db: &Db,
    company_id: i64,
    shops: &ShopFilter,
    f: &ListFilters,
    page: &PageRequest,
) -> Result<(Vec<AppointmentRow>, i64), DbError> {
    let (rows, count) = list_statements(company_id, shops, f, page);
    fetch_page_with(db, &rows, &count, page).await
}

/// The page and count statements of a list, as [`list`] runs them (the benchmark gives the same
/// statements to pgbench).
pub fn list_statements(company_id: i64, shops: &ShopFilter, f: &ListFilters, page: &PageRequest) -> (Query, Query) {
    // A date or range filter is served by its own index, then the matches are sorted. Ordering
    // by the bare primary key instead tempts PostgreSQL to walk the primary key and filter,
    // which at a million rows costs hundreds of milliseconds when the matches are recent.
    let by_index_then_sorted = f.range.is_some() || f.local_date.is_some() || f.updated.is_some();
    let tie_break = if by_index_then_sorted { "id + 0" } else { "id" };
    let from_where = list_query(company_id, shops, f);
    if by_index_then_sorted {
        // A shop's week is hundreds of matches: the range page served 6x the requests this way
        // on SQLite (1M rows).
        return page_statements_by_ids(&select_columns(), "appointments", &from_where, page, tie_break);
    }
    let (rows, count) = page_statements(&select_columns(), &from_where, page, tie_break);
    if !f.is_unfiltered() {
        return (rows, count);
    }
    // Nothing but the shops narrows the list: its total is the sum of the shops' counters
    // (migration 0004, kept by triggers), not a COUNT(*) over every appointment of the company,
    // which took tens of milliseconds per page at a million rows.
    let mut total = Query::new("SELECT CAST(COALESCE(SUM(n), 0) AS BIGINT) FROM appointment_counts WHERE company_id = $1").bind(company_id);
    shops.push_sql(&mut total, "shop_id");
    (rows, total)
}

/// Every appointment a list with these filters shows, in its order, without pages (an export).
pub fn export_query(company_id: i64, shops: &ShopFilter, f: &ListFilters, page: &PageRequest) -> Query {
    let mut q = list_query(company_id, shops, f).prefixed(&format!("SELECT {} ", select_columns()));
    page.push_order(&mut q, "id");
    q
}

/// Every live (not deleted) appointment of the given (at least one) customers (one query for a
/// page of customers), by customer, then scheduled start, then id.
pub fn for_customers(company_id: i64, customer_ids: &[i64]) -> Rows<AppointmentRow> {
    let mut q = Query::new(format!("SELECT {} FROM appointments a WHERE company_id = $1 AND deleted_at IS NULL AND customer_id IN ", select_columns()))
        .bind(company_id);
    q.push_in_list(customer_ids).push(" ORDER BY customer_id, start_at, id");
    Rows::of(q)
}

#[derive(crate::db::FromRow)]
struct StartRow {
    id: i64,
    start_at: i64,
}

/// Recomputes the stored shop-local date and time of a shop's appointments after its time zone
/// changed: one transaction, rows rewritten in batches of 1,000 (`UPDATE ... FROM (VALUES ...)`,
/// which both backends run). Returns how many rows it rewrote.
pub async fn relocalize_shop(tx: &mut Tx, company_id: i64, shop_id: i64, tz: Tz) -> Result<u64, DbError> {
    let rows: Vec<StartRow> = tx
        .fetch_all(&Query::new("SELECT id, start_at FROM appointments WHERE company_id = $1 AND shop_id = $2").bind(company_id).bind(shop_id))
        .await?;
    let mut changed = 0;
    for chunk in rows.chunks(1000) {
        let mut q = Query::new("UPDATE appointments SET local_date = v.column2, local_time = v.column3 FROM (VALUES ")
            .bind(company_id)
            .bind(shop_id);
        // `push_bind` numbers on from the two values bound above: the VALUES rows start at $3.
        for (i, row) in chunk.iter().enumerate() {
            let (date, time) = local_parts(tz, row.start_at);
            q.push(if i == 0 { "(" } else { ", (" }).push_bind(row.id).push(", ").push_bind(date).push(", ").push_bind(time).push(")");
        }
        q.push(
            ") AS v WHERE appointments.company_id = $1 AND appointments.shop_id = $2 AND appointments.id = v.column1 \
             AND (appointments.local_date <> v.column2 OR appointments.local_time <> v.column3)",
        );
        changed += tx.execute(&q).await?;
    }
    Ok(changed)
}
