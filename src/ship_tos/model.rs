//! Ship-to wire types.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use super::store::ShipToRow;
use crate::body::present;

/// A ship-to address of a customer.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ShipTo {
    pub id: i64,
    pub customer_id: i64,
    /// The number assigned to the ship-to; unique per customer.
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

impl From<ShipToRow> for ShipTo {
    fn from(row: ShipToRow) -> Self {
        let r = row.fields;
        ShipTo {
            id: row.id,
            customer_id: row.customer_id,
            number: r.number,
            name: r.name,
            address: r.address,
            city: r.city,
            state: r.state,
            zip: r.zip,
            email: r.email,
            work_phone: r.work_phone,
            fax: r.fax,
            home_phone: r.home_phone,
            cell_phone: r.cell_phone,
        }
    }
}

/// Body of a ship-to's `POST` and `PUT` (the same): every field is required; `email` may be
/// null or empty, the phones and fax may be empty strings. `number` is unique per customer.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct ShipToInput {
    #[schema(value_type = String, required = true, max_length = 255, pattern = r"\S")]
    #[serde(default, deserialize_with = "present")]
    pub number: Option<Value>,
    #[schema(value_type = String, required = true, max_length = 255, pattern = r"\S")]
    #[serde(default, deserialize_with = "present")]
    pub name: Option<Value>,
    #[schema(value_type = String, required = true, max_length = 255, pattern = r"\S")]
    #[serde(default, deserialize_with = "present")]
    pub address: Option<Value>,
    #[schema(value_type = String, required = true, max_length = 255, pattern = r"\S")]
    #[serde(default, deserialize_with = "present")]
    pub city: Option<Value>,
    #[schema(value_type = String, required = true, max_length = 255, pattern = r"\S")]
    #[serde(default, deserialize_with = "present")]
    pub state: Option<Value>,
    #[schema(value_type = String, required = true, max_length = 255, pattern = r"\S")]
    #[serde(default, deserialize_with = "present")]
    pub zip: Option<Value>,
    #[schema(schema_with = crate::schemas::email, required = true)]
    #[serde(default, deserialize_with = "present")]
    pub email: Option<Value>,
    #[schema(value_type = String, required = true, max_length = 255)]
    #[serde(default, deserialize_with = "present")]
    pub work_phone: Option<Value>,
    #[schema(value_type = String, required = true, max_length = 255)]
    #[serde(default, deserialize_with = "present")]
    pub fax: Option<Value>,
    #[schema(value_type = String, required = true, max_length = 255)]
    #[serde(default, deserialize_with = "present")]
    pub home_phone: Option<Value>,
    #[schema(value_type = String, required = true, max_length = 255)]
    #[serde(default, deserialize_with = "present")]
    pub cell_phone: Option<Value>,
}

/// Query parameters of `GET /api/v1/customers/{customer_id}/ship_tos`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct ShipToListParams {
    #[param(minimum = 1)]
    page: Option<i64>,
    /// Items per page, 1 to 100 (default 10).
    #[param(rename = "pageSize", minimum = 1, maximum = 100)]
    page_size: Option<i64>,
    /// `number` and/or `name` (case-insensitive), comma-separated; prefix `-` for descending.
    #[param(pattern = r"^([-+]?(number|name)(,[-+]?(number|name))*)?$")]
    sort: Option<String>,
    /// The customer's shop: another shop the key may see gives an empty list; a shop outside the
    /// key's scope answers 404.
    #[param(rename = "filter[shop_id]")]
    filter_shop_id: Option<i64>,
}
