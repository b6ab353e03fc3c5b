use std::sync::LazyLock;

use crate::{
    db::{Db, DbError, Query, Reader, ShopFilter, Tx, company_row, now_micros},
};

use super::model::ShopFields;

#[derive(Debug, Clone, crate::db::FromRow)]
pub struct ShopRow {
    pub id: i64,
    pub company_id: i64,
    #[row(flatten)]
    pub fields: ShopFields,
}

impl ShopRow {
    pub fn tz(&self) -> chrono_tz::Tz {
        crate::time::parse_timezone(&self.fields.timezone).unwrap_or(chrono_tz::UTC)
    }
}

const COLUMNS: &str = "id, company_id, name, address, city, state, zip, phone, email, website, timezone";

pub async fn find(from: impl Into<Reader<'_>>, company_id: i64, id: i64) -> Result<Option<ShopRow>, DbError> {
    from.into().fetch_optional(company_row(COLUMNS, "shops", company_id, id)).await
}

/// Finds shop `id` while its time zone is still `timezone`: the guard of a write whose local
/// dates and times were derived in that zone ([`crate::change::Change::require`]), which a
/// zone change committed meanwhile would leave wrong (its PUT re-localised the rows it saw).
pub fn zone_unchanged(company_id: i64, id: i64, timezone: &str) -> Query {
    Query::new("SELECT id FROM shops WHERE company_id = $1 AND id = $2 AND timezone = $3").bind(company_id).bind(id).bind(timezone)
}

/// A shop's row and the id and title of each of its bays (by `sort_order`), or `None`: one
/// read where a write checks both (an appointment names its bay by title).
pub async fn find_with_bays(db: &Db, company_id: i64, id: i64) -> Result<Option<(ShopRow, Vec<(i64, String)>)>, DbError> {
    // The bays' columns renamed in a subquery, so the shop's are read by the names of `COLUMNS`.
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT {COLUMNS}, bay_id, bay_title FROM shops LEFT JOIN \
             (SELECT id AS bay_id, title AS bay_title, sort_order AS bay_order FROM bays WHERE company_id = $1 AND shop_id = $2) b ON TRUE \
             WHERE company_id = $1 AND id = $2 ORDER BY bay_order, bay_id"
        )
    });
    let rows: Vec<ShopAndBay> = db.fetch_all(&Query::new(SQL.as_str()).bind(company_id).bind(id)).await?;
    let bays = rows.iter().filter_map(|r| Some((r.bay_id?, r.bay_title.clone()?))).collect();
    Ok(rows.into_iter().next().map(|r| (r.shop, bays)))
}

#[derive(crate::db::FromRow)]
struct ShopAndBay {
    #[row(flatten)]
    shop: ShopRow,
    bay_id: Option<i64>,
    bay_title: Option<String>,
}

pub async fn list(db: &Db, company_id: i64, shops: &ShopFilter) -> Result<Vec<ShopRow>, DbError> {
    let mut q = Query::new(format!("SELECT {COLUMNS} FROM shops WHERE company_id = $1")).bind(company_id);
    shops.push_sql(&mut q, "id");
    q.push(" ORDER BY id");
    db.fetch_all(&q).await
}

/// Inserts a shop inside a transaction (its default sources go in the same one).
/// Binds the fields a write sets, from `name` to `timezone`, as the next parameters.
fn bind_fields(q: Query, f: &ShopFields) -> Query {
    q.bind(&f.name)
        .bind(&f.address)
        .bind(&f.city)
        .bind(&f.state)
        .bind(&f.zip)
        .bind(&f.phone)
        .bind(&f.email)
        .bind(&f.website)
        .bind(&f.timezone)
}

pub async fn insert(tx: &mut Tx, company_id: i64, f: &ShopFields) -> Result<ShopRow, DbError> {
    let now = now_micros();
    let q = Query::new(format!(
        "INSERT INTO shops (company_id, name, address, city, state, zip, phone, email, website, timezone, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11) RETURNING {COLUMNS}"
    ))
    .bind(company_id);
    let q = bind_fields(q, f).bind(now);
    tx.fetch_optional(&q).await?.ok_or(DbError::NoRow)
}

pub async fn update(tx: &mut Tx, company_id: i64, id: i64, f: &ShopFields) -> Result<Option<ShopRow>, DbError> {
    let q = Query::new(format!(
        "UPDATE shops SET name = $3, address = $4, city = $5, state = $6, zip = $7, phone = $8, email = $9, \
         website = $10, timezone = $11, updated_at = $12 WHERE company_id = $1 AND id = $2 RETURNING {COLUMNS}"
    ))
    .bind(company_id)
    .bind(id);
    let q = bind_fields(q, f).bind(now_micros());
    super::cache::announce_change(tx, company_id).await?;
    tx.fetch_optional(&q).await
}
