use crate::{
    db::{Db, DbError, Query, Reader, ShopFilter, Tx, company_row, now_micros, page::{PageRequest, Sort, fetch_page}},
};

/// Sortable fields and their columns.
pub const SORTS: &[Sort] = &[("name", "name_key")];

#[derive(Debug, Clone, crate::db::FromRow)]
pub struct SourceRow {
    pub id: i64,
    pub shop_id: i64,
    pub name: String,
    pub active: bool,
}

const COLUMNS: &str = "id, shop_id, name, active";

pub async fn list(
    db: &Db,
    company_id: i64,
    shop_id: i64,
    active: bool,
    page: &PageRequest,
) -> Result<(Vec<SourceRow>, i64), DbError> {
    let q = Query::new("FROM sources WHERE company_id = $1 AND shop_id = $2 AND active = $3")
        .bind(company_id)
        .bind(shop_id)
        .bind(active);
    fetch_page(db, COLUMNS, &q, page, "id").await
}

/// Every source of the given shops, for `with[]=sources` on shop info.
pub async fn for_shops(db: &Db, company_id: i64, shops: &ShopFilter) -> Result<Vec<SourceRow>, DbError> {
    db.fetch_all(&shops.rows(COLUMNS, "sources", company_id, "shop_id, id")).await
}

pub async fn find(from: impl Into<Reader<'_>>, company_id: i64, id: i64) -> Result<Option<SourceRow>, DbError> {
    from.into().fetch_optional(company_row(COLUMNS, "sources", company_id, id)).await
}

fn insert_query(company_id: i64, shop_id: i64, name: &str, active: bool) -> Query {
    let q = Query::new(format!(
        "INSERT INTO sources (company_id, shop_id, name, name_key, active, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $6) RETURNING {COLUMNS}"
    ))
    .bind(company_id);
    bind_fields(q, shop_id, name, active).bind(now_micros())
}

/// Binds the next four parameters: shop, name, its sort key, active.
fn bind_fields(q: Query, shop_id: i64, name: &str, active: bool) -> Query {
    q.bind(shop_id).bind(name).bind(crate::db::fold_case(&name)).bind(active)
}

pub async fn insert(tx: &mut Tx, company_id: i64, shop_id: i64, name: &str, active: bool) -> Result<SourceRow, DbError> {
    tx.fetch_optional(&insert_query(company_id, shop_id, name, active)).await?.ok_or(DbError::NoRow)
}

/// A new shop's default sources, inside the transaction that creates the shop.
pub async fn insert_defaults(tx: &mut Tx, company_id: i64, shop_id: i64) -> Result<Vec<SourceRow>, DbError> {
    let mut rows = Vec::new();
    for name in super::model::APPOINTMENT_SOURCES {
        rows.push(insert(tx, company_id, shop_id, name, true).await?);
    }
    Ok(rows)
}

pub async fn update(
    tx: &mut Tx,
    company_id: i64,
    id: i64,
    shop_id: i64,
    name: &str,
    active: bool,
) -> Result<Option<SourceRow>, DbError> {
    let q = Query::new(format!(
        "UPDATE sources SET shop_id = $3, name = $4, name_key = $5, active = $6, updated_at = $7 \
         WHERE company_id = $1 AND id = $2 RETURNING {COLUMNS}"
    ))
    .bind(company_id)
    .bind(id);
    tx.fetch_optional(&bind_fields(q, shop_id, name, active).bind(now_micros())).await
}
