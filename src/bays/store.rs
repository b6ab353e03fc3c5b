use crate::{
    db::{Db, DbError, Query, Reader, ShopFilter, Tx, company_row, now_micros, page::{PageRequest, Sort, fetch_page}},
};

/// Sortable fields and their columns.
pub const SORTS: &[Sort] = &[("title", "title_key"), ("order", "sort_order")];

#[derive(Debug, Clone, crate::db::FromRow)]
pub struct BayRow {
    pub id: i64,
    pub shop_id: i64,
    pub title: String,
    pub sort_order: i64,
    pub active: bool,
}

const COLUMNS: &str = "id, shop_id, title, sort_order, active";

pub async fn list(
    db: &Db,
    company_id: i64,
    shops: &ShopFilter,
    active: Option<bool>,
    page: &PageRequest,
) -> Result<(Vec<BayRow>, i64), DbError> {
    let mut q = Query::new("FROM bays WHERE company_id = $1").bind(company_id);
    shops.push_sql(&mut q, "shop_id");
    if let Some(active) = active {
        q.push(" AND active = ").push_bind(active);
    }
    fetch_page(db, COLUMNS, &q, page, "id").await
}

/// Every bay of the given shops, for `with[]=bays` on shop info.
pub async fn for_shops(db: &Db, company_id: i64, shops: &ShopFilter) -> Result<Vec<BayRow>, DbError> {
    db.fetch_all(&shops.rows(COLUMNS, "bays", company_id, "shop_id, sort_order, id")).await
}

pub async fn find(from: impl Into<Reader<'_>>, company_id: i64, id: i64) -> Result<Option<BayRow>, DbError> {
    from.into().fetch_optional(company_row(COLUMNS, "bays", company_id, id)).await
}

pub struct BayFields {
    pub shop_id: i64,
    pub title: String,
    pub order: i64,
    pub active: bool,
}

impl BayFields {
    /// Binds the next five parameters: shop, title, its sort key, order, active.
    fn bind(&self, q: Query) -> Query {
        q.bind(self.shop_id).bind(&self.title).bind(crate::db::fold_case(&self.title)).bind(self.order).bind(self.active)
    }
}

/// `Err(DbError::Unique)` when the shop already has a bay of that title.
pub async fn insert(tx: &mut Tx, company_id: i64, f: &BayFields) -> Result<BayRow, DbError> {
    let q = Query::new(format!(
        "INSERT INTO bays (company_id, shop_id, title, title_key, sort_order, active, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $7) RETURNING {COLUMNS}"
    ))
    .bind(company_id);
    crate::shops::cache::announce_change(tx, company_id).await?;
    tx.fetch_optional(&f.bind(q).bind(now_micros())).await?.ok_or(DbError::NoRow)
}

pub async fn update(tx: &mut Tx, company_id: i64, id: i64, f: &BayFields) -> Result<Option<BayRow>, DbError> {
    let q = Query::new(format!(
        "UPDATE bays SET shop_id = $3, title = $4, title_key = $5, sort_order = $6, active = $7, updated_at = $8 \
         WHERE company_id = $1 AND id = $2 RETURNING {COLUMNS}"
    ))
    .bind(company_id)
    .bind(id);
    crate::shops::cache::announce_change(tx, company_id).await?;
    tx.fetch_optional(&f.bind(q).bind(now_micros())).await
}

/// Whether the bay can move to `to_shop` ([`Move`]), or would strand something of its shop: an appointment
/// (deleted ones keep their bay) or a live hold. The bay's shop is read with its row locked
/// (PostgreSQL; SQLite's writer runs one change at a time), not taken from a read before the
/// transaction: a move committed meanwhile would make this PUT a move, or a move from another
/// shop, that a stale read did not see. An appointment written with the bay after this lock
/// fails (the rule of migration 0021 checks it against the bay's shop when it writes). Holds that expired unbooked are retired first (a hold
/// is booked only while `held`, so none of them can be booked after), and then stand in
/// nobody's way. Holds and availability are worked out per shop, so a bay in use must stay.
/// The lock makes a hold committed before visible here, and one after see the new shop. (A
/// rare admin check: it walks the shop's appointments through the `(company_id, shop_id, ...)`
/// index.)
pub async fn move_blocked(tx: &mut Tx, company_id: i64, bay_id: i64, to_shop: i64, now: i64) -> Result<Move, DbError> {
    // Expired holds first, in id order, then the bay: the order a hold's writer locks them in
    // (`holds::store::retire_expired`, then `lock_bay`), so the two wait, never deadlock.
    let mut pick = Query::new("SELECT id FROM holds WHERE company_id = $1 AND bay_id = $2 AND state = 'held' AND expires_at <= $3 ORDER BY id");
    if !tx.is_sqlite() {
        pick.push(" FOR UPDATE");
    }
    let retire = pick
        .wrapped("UPDATE holds SET state = 'expired' WHERE company_id = $1 AND id IN (", ")")
        .bind(company_id)
        .bind(bay_id)
        .bind(now);
    tx.execute(&retire).await?;
    tx.lock_row("bays", company_id, bay_id).await?;
    let shop = Query::new("SELECT shop_id FROM bays WHERE company_id = $1 AND id = $2").bind(company_id).bind(bay_id);
    let Some((from_shop,)) = tx.fetch_optional::<(i64,)>(&shop).await? else { return Ok(Move::Gone) };
    if from_shop == to_shop {
        return Ok(Move::Stays);
    }
    // A move is a key update: FOR UPDATE waits for the appointment writes in flight on the bay
    // (their foreign key locks it FOR KEY SHARE), which the check below then sees. Only a move
    // takes it, so a bay's other edits leave its bookings alone. (No deadlock: those writers
    // wait for nothing this holds.)
    if !tx.is_sqlite() {
        tx.execute(&Query::new("SELECT 1 FROM bays WHERE company_id = $1 AND id = $2 FOR UPDATE").bind(company_id).bind(bay_id)).await?;
    }
    let q = Query::new(
        "SELECT id FROM appointments WHERE company_id = $1 AND shop_id = $2 AND bay_id = $3 \
         UNION ALL SELECT id FROM holds WHERE company_id = $1 AND bay_id = $3 AND state = 'held' LIMIT 1",
    )
    .bind(company_id)
    .bind(from_shop)
    .bind(bay_id);
    Ok(if tx.fetch_optional::<(i64,)>(&q).await?.is_some() { Move::Blocked } else { Move::From(from_shop) })
}

/// The bay as it is now, inside a change that locked it already ([`move_blocked`]): a plain
/// read, as `FOR UPDATE` would wait for the bookings on the bay.
pub async fn find_locked_already(tx: &mut Tx, company_id: i64, id: i64) -> Result<Option<BayRow>, DbError> {
    tx.fetch_optional(&company_row(COLUMNS, "bays", company_id, id)).await
}

/// What [`move_blocked`] found.
pub enum Move {
    /// The bay is in the shop the PUT names.
    Stays,
    /// The bay may leave this shop.
    From(i64),
    /// It cannot: something of its shop uses it.
    Blocked,
    /// No such bay (any more).
    Gone,
}
