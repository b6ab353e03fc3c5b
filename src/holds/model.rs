//! Wire types of the hold routes.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::store::HoldRow;
use crate::time::format_micros;

/// Body of `POST /api/v1/holds`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct HoldInput {
    /// A shop the key may see.
    #[schema(required, nullable = false)]
    pub shop_id: Option<i64>,
    /// The start, read like an appointment's `date` (see its forms); not in the past.
    #[schema(required, schema_with = crate::schemas::appointment_date)]
    pub date: Option<String>,
    /// Duration in hours: more than 0, at most 24.
    #[schema(required, nullable = false, exclusive_minimum = 0, maximum = 24)]
    pub hours: Option<f64>,
    /// Title of an active bay of the shop (case-insensitive). Omitted: the first free active bay
    /// by `order`.
    #[schema(max_length = 255)]
    pub column: Option<String>,
}

/// A bay reserved for a time until `expires_at`; book it with `hold_id` on
/// `POST /api/v1/appointments`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Hold {
    pub hold_id: i64,
    pub shop_id: i64,
    /// Title of the held bay.
    pub column: String,
    /// Start (UTC).
    pub start: String,
    /// End (UTC): start plus `hours`.
    pub end: String,
    /// When the hold lapses unless an appointment consumed it (UTC).
    pub expires_at: String,
}

impl Hold {
    pub fn new(row: &HoldRow, column: String) -> Hold {
        Hold {
            hold_id: row.id,
            shop_id: row.shop_id,
            column,
            start: format_micros(row.start_at),
            end: format_micros(row.end_at),
            expires_at: format_micros(row.expires_at),
        }
    }
}
