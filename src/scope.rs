//! Which shops a request may touch: the caller's company, narrowed by the key's shop list and
//! by `filter[shop_id]`.

use crate::db::ShopFilter;
use crate::{
    auth::Caller,
    db::Db,
    error::{ApiError, FieldErrors},
    shops::{cache::ShopCache, store as shops},
};

/// Resolves `filter[shop_id]`: absent means every shop the key may see; a shop that does not
/// exist in the company or is outside the key's list answers 404.
pub async fn shop_filter(db: &Db, caller: &Caller, raw: Option<&str>) -> Result<ShopFilter, ApiError> {
    Ok(shop_filter_and_row(db, caller, raw).await?.0)
}

/// [`shop_filter`], also returning the named shop's row (read for the scope check anyway).
pub async fn shop_filter_and_row(
    db: &Db,
    caller: &Caller,
    raw: Option<&str>,
) -> Result<(ShopFilter, Option<shops::ShopRow>), ApiError> {
    let Some(raw) = raw.map(str::trim).filter(|r| !r.is_empty()) else {
        let all = match &caller.shops {
            None => ShopFilter::All,
            Some(ids) => ShopFilter::Only(ids.clone()),
        };
        return Ok((all, None));
    };
    let id = crate::extract::parse_integer(raw)
        .ok_or_else(|| ApiError::invalid("filter[shop_id]", "The filter[shop_id] parameter must be an integer."))?;
    let shop = visible_shop(db, caller, id).await?;
    Ok((ShopFilter::Only(vec![id]), Some(shop)))
}

/// A shop the caller may see, or 404.
pub async fn visible_shop(db: &Db, caller: &Caller, shop_id: i64) -> Result<shops::ShopRow, ApiError> {
    if !caller.can_see_shop(shop_id) {
        return Err(ApiError::not_found("Shop"));
    }
    shops::find(db, caller.company_id, shop_id).await?.ok_or_else(|| ApiError::not_found("Shop"))
}

/// [`body_shop`], with the id and title of each of the shop's bays, read in the same statement
/// or found in the replica's cache.
pub async fn body_shop_with_bays(
    db: &Db,
    cache: &ShopCache,
    caller: &Caller,
    shop_id: i64,
    errors: &mut FieldErrors,
) -> Result<Option<(shops::ShopRow, Vec<(i64, String)>)>, ApiError> {
    in_scope_or_invalid(caller, shop_id, errors, || crate::shops::cache::find_with_bays(db, cache, caller.company_id, shop_id)).await
}

/// Checks a `shop_id` given in a request body: unknown or out of scope is a 422 on that field.
pub async fn body_shop(
    db: &Db,
    caller: &Caller,
    shop_id: Option<i64>,
    errors: &mut FieldErrors,
) -> Result<Option<shops::ShopRow>, ApiError> {
    let Some(id) = shop_id else { return Ok(None) };
    in_scope_or_invalid(caller, id, errors, || shops::find(db, caller.company_id, id)).await
}

/// What `find` reads for a body's `shop_id`, when the key may see the shop and it exists; else
/// a 422 on `shop_id` (an out-of-scope shop is not even read).
async fn in_scope_or_invalid<T, F>(caller: &Caller, shop_id: i64, errors: &mut FieldErrors, find: impl FnOnce() -> F) -> Result<Option<T>, ApiError>
where
    F: std::future::Future<Output = Result<Option<T>, crate::db::DbError>>,
{
    if caller.can_see_shop(shop_id) {
        if let Some(found) = find().await? {
            return Ok(Some(found));
        }
    }
    errors.add("shop_id", "The selected shop_id is invalid.");
    Ok(None)
}
