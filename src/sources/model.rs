use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::store::SourceRow;

/// The values of the appointment `source` enum; every new shop starts with one source of each.
pub const APPOINTMENT_SOURCES: [&str; 8] =
    ["Website", "Partner Link", "Mobile", "Appointment", "Call Center", "Customer Portal", "Mobile Van", "API"];

/// Where a shop's appointments come from.
#[derive(Debug, Serialize, ToSchema)]
pub struct Source {
    pub id: i64,
    pub shop_id: i64,
    pub name: String,
    pub active: bool,
}

impl From<SourceRow> for Source {
    fn from(r: SourceRow) -> Self {
        Source { id: r.id, shop_id: r.shop_id, name: r.name, active: r.active }
    }
}

/// Body of `POST /api/v1/settings/sources` and `PUT /api/v1/settings/sources/{id}`. PUT
/// validates like create; an omitted (or null) `active` keeps its stored value there.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SourceInput {
    /// A shop the key may see.
    #[schema(required, nullable = false)]
    pub shop_id: Option<i64>,
    /// Unique per shop, ignoring case.
    #[schema(required, nullable = false, max_length = 100, pattern = r"\S")]
    pub name: Option<String>,
    /// Default true.
    pub active: Option<bool>,
}

/// Query parameters of `GET /api/v1/settings/sources`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct SourceListParams {
    /// Required: the shop whose sources to list.
    #[param(rename = "filter[shop_id]", required = true)]
    filter_shop_id: i64,
    #[param(minimum = 1)]
    page: Option<i64>,
    #[param(rename = "pageSize", minimum = 1, maximum = 100)]
    page_size: Option<i64>,
    /// `name` or `-name`.
    #[param(pattern = r"^([-+]?(name)(,[-+]?(name))*)?$")]
    sort: Option<String>,
    /// Default true.
    #[param(rename = "filter[active]")]
    filter_active: Option<bool>,
}
