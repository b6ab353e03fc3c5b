use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::store::BayRow;

/// A bay (column) of a shop in which appointments are scheduled.
#[derive(Debug, Serialize, ToSchema)]
pub struct Bay {
    pub id: i64,
    pub shop_id: i64,
    pub title: String,
    /// Display position among the shop's bays.
    pub order: i64,
    pub active: bool,
}

impl From<BayRow> for Bay {
    fn from(r: BayRow) -> Self {
        Bay { id: r.id, shop_id: r.shop_id, title: r.title, order: r.sort_order, active: r.active }
    }
}

/// Body of `POST /api/v1/bays` and `PUT /api/v1/bays/{id}`. PUT validates like create; an
/// omitted (or null) `order` or `active` keeps its stored value there.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct BayInput {
    /// A shop the key may see. A bay with appointments cannot move to another shop.
    #[schema(required, nullable = false)]
    pub shop_id: Option<i64>,
    /// Unique per shop, ignoring case.
    #[schema(required, nullable = false, max_length = 100, pattern = r"\S")]
    pub title: Option<String>,
    /// Display position; default 0.
    pub order: Option<i64>,
    /// Default true.
    pub active: Option<bool>,
}

/// Query parameters of `GET /api/v1/bays`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct BayListParams {
    /// Page number, from 1.
    #[param(minimum = 1)]
    page: Option<i64>,
    /// Items per page, 1 to 100.
    #[param(rename = "pageSize", minimum = 1, maximum = 100)]
    page_size: Option<i64>,
    /// Comma-separated fields among `title`, `order`; prefix `-` for descending.
    #[param(pattern = r"^([-+]?(title|order)(,[-+]?(title|order))*)?$")]
    sort: Option<String>,
    /// One shop; omitted means every shop of the company the key may see.
    #[param(rename = "filter[shop_id]")]
    filter_shop_id: Option<i64>,
    /// `true` (default), `false`, or `null`/`all`/empty for both (`1`/`0` too; case-insensitive).
    #[param(rename = "filter[active]", schema_with = active_filter_schema)]
    filter_active: Option<String>,
}

/// `filter[active]` on bays: a boolean spelling, or `null`/`all` for active and inactive alike.
fn active_filter_schema() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    ObjectBuilder::new().schema_type(Type::String).enum_values(Some(["true", "false", "1", "0", "null", "all"])).build()
}
