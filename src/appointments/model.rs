//! Wire types of the appointment routes.

use serde::{Deserialize, Serialize};
use utoipa::{
    IntoParams, ToSchema,
    openapi::schema::{Object, ObjectBuilder, SchemaType, Type},
};

use super::{patch::Patch, store::AppointmentRow};
use crate::{sources::model::APPOINTMENT_SOURCES, time::format_micros};

/// An appointment, as created, updated and listed.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Appointment {
    pub appointment_id: i64,
    pub shop_id: i64,
    pub customer_id: Option<i64>,
    pub vehicle_id: Option<i64>,
    pub repair_order_id: Option<i64>,
    pub employee_id: Option<i64>,
    pub first_name: String,
    pub last_name: String,
    pub vehicle: Vehicle,
    pub reason: Option<String>,
    pub phone: Phone,
    /// Duration in hours.
    pub hours: f64,
    /// Title of the bay the appointment is scheduled in; null when none.
    pub column: Option<String>,
    pub done: bool,
    pub email: Option<String>,
    /// One of `Website`, `Partner Link`, `Mobile`, `Appointment`, `Call Center`,
    /// `Customer Portal`, `Mobile Van`, `API`.
    pub source: String,
    pub schedule: Schedule,
    /// Creation time (UTC).
    pub timestamp: String,
    pub updated_at: Option<String>,
    /// When the appointment was cancelled (`DELETE`); null while it is live.
    pub deleted: Option<String>,
    /// Status of the linked work order, if any.
    pub status: Option<String>,
    /// Only with `with_details=true`: the appointment's customer, or null.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<crate::customers::model::Customer>)]
    pub customer: Option<Option<serde_json::Value>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Vehicle {
    pub vehicle_id: Option<i64>,
    pub year: String,
    pub make: String,
    pub model: String,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Phone {
    pub home: String,
    pub work: String,
    pub cell: String,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Schedule {
    /// Shop-local calendar date of the start, `YYYY-MM-DD`.
    pub date: String,
    /// Shop-local start time, `HH:MM:SS`.
    pub time: String,
    /// Start (UTC).
    pub start: String,
    /// End (UTC): start plus `hours`.
    pub end: String,
    pub hours: f64,
    /// `complete` or `incomplete`.
    pub flag: String,
}

impl From<AppointmentRow> for Appointment {
    fn from(r: AppointmentRow) -> Self {
        Appointment {
            appointment_id: r.id,
            shop_id: r.shop_id,
            customer_id: r.customer_id,
            vehicle_id: r.vehicle_id,
            repair_order_id: r.repair_order_id,
            employee_id: r.employee_id,
            first_name: r.first_name,
            last_name: r.last_name,
            vehicle: Vehicle { vehicle_id: r.vehicle_id, year: r.year, make: r.make, model: r.model },
            reason: r.reason,
            phone: Phone { home: r.home_phone, work: r.work_phone, cell: r.cell_phone },
            hours: r.hours,
            column: r.column_title,
            done: r.done,
            email: r.email,
            source: r.source,
            schedule: Schedule {
                date: r.local_date,
                time: r.local_time,
                start: format_micros(r.start_at),
                end: format_micros(r.end_at),
                hours: r.hours,
                flag: if r.done { "complete" } else { "incomplete" }.into(),
            },
            timestamp: format_micros(r.created_at),
            updated_at: Some(format_micros(r.updated_at)),
            deleted: r.deleted_at.map(format_micros),
            status: r.status,
            customer: None,
        }
    }
}

/// The distinct vehicles of some appointments (a customer's `vehicles`): by `vehicle_id` when
/// set, else by year, make and model (ignoring case), in order of first appearance.
pub fn distinct_vehicles<'a>(appointments: impl IntoIterator<Item = &'a Appointment>) -> Vec<Vehicle> {
    let mut seen: Vec<(Option<i64>, String)> = Vec::new();
    let mut out = Vec::new();
    for a in appointments {
        let v = &a.vehicle;
        let key = match v.vehicle_id {
            Some(id) => (Some(id), String::new()),
            None => (None, format!("{}\u{1f}{}\u{1f}{}", v.year, v.make.to_lowercase(), v.model.to_lowercase())),
        };
        if !seen.contains(&key) {
            seen.push(key);
            out.push(v.clone());
        }
    }
    out
}

/// Body of `PUT /api/v1/appointments/{id}` (and, with the required fields, of `POST`): omitted
/// fields keep their value and `null` clears a nullable field (`done`, `hours` and `source` go
/// back to their defaults).
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct AppointmentInput {
    /// Required on create; a shop the key may see.
    #[serde(default)]
    #[schema(value_type = i64, nullable = false)]
    pub shop_id: Patch<i64>,
    /// Required on create. RFC 3339 with an offset or `Z` (`2024-07-09T08:30:00-05:00`), or a
    /// local date-time without offset (`2024-07-09T08:30:00`, `2024-07-09 08:30`) read in the
    /// shop's time zone. A local time skipped by a daylight-saving change moves forward by the
    /// change (02:30 becomes 03:30); a repeated one takes its first occurrence.
    #[serde(default)]
    #[schema(value_type = String, nullable = false)]
    pub date: Patch<String>,
    /// Required on create; four digits.
    #[serde(default)]
    #[schema(value_type = String, nullable = false, pattern = r"^[0-9]{4}$")]
    pub year: Patch<String>,
    /// Required on create.
    #[serde(default)]
    #[schema(value_type = String, nullable = false, max_length = 255, pattern = r"\S")]
    pub make: Patch<String>,
    /// Required on create.
    #[serde(default)]
    #[schema(value_type = String, nullable = false, max_length = 255, pattern = r"\S")]
    pub model: Patch<String>,
    /// Required on create; may be empty.
    #[serde(default)]
    #[schema(value_type = String, nullable = false, max_length = 255)]
    pub home_phone: Patch<String>,
    /// Required on create; may be empty.
    #[serde(default)]
    #[schema(value_type = String, nullable = false, max_length = 255)]
    pub work_phone: Patch<String>,
    /// Required on create; may be empty.
    #[serde(default)]
    #[schema(value_type = String, nullable = false, max_length = 255)]
    pub cell_phone: Patch<String>,
    /// A customer of the company; fills omitted `first_name`, `last_name` and `email`.
    #[serde(default)]
    #[schema(value_type = Option<i64>)]
    pub customer_id: Patch<i64>,
    #[serde(default)]
    #[schema(value_type = Option<i64>, minimum = 1)]
    pub vehicle_id: Patch<i64>,
    #[serde(default)]
    #[schema(value_type = Option<i64>, minimum = 1)]
    pub repair_order_id: Patch<i64>,
    #[serde(default)]
    #[schema(value_type = Option<i64>, minimum = 1)]
    pub employee_id: Patch<i64>,
    /// Default false.
    #[serde(default)]
    #[schema(value_type = Option<bool>)]
    pub done: Patch<bool>,
    /// Title of a bay of the appointment's shop (case-insensitive).
    #[serde(default)]
    #[schema(value_type = Option<String>, max_length = 255)]
    pub column: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>, max_length = 255)]
    pub reason: Patch<String>,
    /// Status of the linked work order.
    #[serde(default)]
    #[schema(value_type = Option<String>, max_length = 255)]
    pub status: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>, max_length = 255)]
    pub first_name: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>, max_length = 255)]
    pub last_name: Patch<String>,
    /// Duration in hours: more than 0, at most 24. Default 1.
    #[serde(default)]
    #[schema(value_type = Option<f64>, exclusive_minimum = 0, maximum = 24)]
    pub hours: Patch<f64>,
    /// An e-mail address (or null / empty).
    #[serde(default)]
    #[schema(value_type = Option<String>, max_length = 255)]
    pub email: Patch<String>,
    /// One value of the source enum; default `API`.
    #[serde(default)]
    #[schema(schema_with = nullable_source_schema)]
    pub source: Patch<String>,
    /// Create only: book exactly the shop, bay and time of this hold (`POST /api/v1/holds`)
    /// and consume it.
    #[serde(default)]
    pub hold_id: Option<i64>,
}

/// The `source` enum of a create body.
pub fn source_schema() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(APPOINTMENT_SOURCES))
        .description(Some("Where the appointment comes from; default `API`."))
        .build()
}

/// The `source` of an update body: `null` sets it back to `API`.
pub fn nullable_source_schema() -> Object {
    let values = APPOINTMENT_SOURCES.iter().map(|s| serde_json::Value::from(*s)).chain([serde_json::Value::Null]);
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .enum_values(Some(values))
        .description(Some("Where the appointment comes from; `null` sets it back to `API`."))
        .build()
}

/// Query parameters of `GET /api/v1/appointments`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct AppointmentListParams {
    /// Page number, from 1.
    #[param(minimum = 1)]
    page: Option<i64>,
    /// Items per page, 1 to 100.
    #[param(rename = "pageSize", minimum = 1, maximum = 100)]
    page_size: Option<i64>,
    /// Comma-separated fields among `first_name`, `last_name`, `timestamp`, `reason`, `year`,
    /// `date` (scheduled start); prefix `-` for descending. Ties break by id ascending.
    #[param(pattern = r"^([-+]?(first_name|last_name|timestamp|reason|year|date)(,[-+]?(first_name|last_name|timestamp|reason|year|date))*)?$")]
    sort: Option<String>,
    /// Add `customer` (the customer object, or null) to every appointment.
    with_details: Option<bool>,
    /// One appointment id.
    appointment_id: Option<i64>,
    /// Case-insensitive substring.
    #[param(rename = "filter[first_name]")]
    filter_first_name: Option<String>,
    /// Case-insensitive substring.
    #[param(rename = "filter[last_name]")]
    filter_last_name: Option<String>,
    /// Case-insensitive substring.
    #[param(rename = "filter[reason]")]
    filter_reason: Option<String>,
    /// Exact vehicle year.
    #[param(rename = "filter[year]")]
    filter_year: Option<String>,
    /// Case-insensitive substring.
    #[param(rename = "filter[make]")]
    filter_make: Option<String>,
    /// Case-insensitive substring.
    #[param(rename = "filter[model]")]
    filter_model: Option<String>,
    /// Shop-local calendar date of the start, `YYYY-MM-DD`.
    #[param(rename = "filter[date]", pattern = r"^([0-9]{4}-[0-9]{2}-[0-9]{2})?$")]
    filter_date: Option<String>,
    /// Shop-local start time: `HH:MM` (any second of that minute) or `HH:MM:SS`.
    #[param(rename = "filter[time]", pattern = r"^([0-9]{2}:[0-9]{2}(:[0-9]{2})?)?$")]
    filter_time: Option<String>,
    /// `complete`, `incomplete` or `both` (default).
    #[param(rename = "filter[status]", pattern = r"^(complete|incomplete|both)?$")]
    filter_status: Option<String>,
    /// Deleted appointments: `with` includes them, `only` lists nothing else. Absent: lists
    /// leave them out. Any other value, the empty one included, is a 422.
    #[param(rename = "filter[trashed]", pattern = r"^(with|only)$")]
    filter_trashed: Option<String>,
    /// Last updated on this UTC day, `YYYY-MM-DD`.
    #[param(rename = "filter[updated_date]", pattern = r"^([0-9]{4}-[0-9]{2}-[0-9]{2})?$")]
    filter_updated_date: Option<String>,
    /// One shop; omitted means every shop of the company the key may see.
    #[param(rename = "filter[shop_id]")]
    filter_shop_id: Option<i64>,
    /// Inclusive lower bound: `YYYY-MM-DD` or RFC 3339. See `filter_by`.
    start_date: Option<String>,
    /// Inclusive upper bound: `YYYY-MM-DD` (the whole day) or RFC 3339. See `filter_by`.
    end_date: Option<String>,
    /// `appointment_start` or `appointment_end`: the range applies to the scheduled start or
    /// end, and a date-only bound is a day in each shop's own time zone. Absent: the range
    /// applies to the creation time and a date-only bound is a UTC day.
    #[param(pattern = r"^(appointment_start|appointment_end)?$")]
    filter_by: Option<String>,
}

/// Body of `POST /api/v1/appointments` (for the OpenAPI document; it is read as
/// [`AppointmentInput`]). Phones may be empty strings; omitted optional fields take their
/// defaults, and with `customer_id` omitted names and e-mail come from the customer.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct NewAppointment {
    shop_id: i64,
    /// RFC 3339 with an offset or `Z`, or a local date-time without offset read in the shop's
    /// time zone.
    date: String,
    #[schema(pattern = r"^[0-9]{4}$")]
    year: String,
    #[schema(max_length = 255, pattern = r"\S")]
    make: String,
    #[schema(max_length = 255, pattern = r"\S")]
    model: String,
    #[schema(max_length = 255)]
    home_phone: String,
    #[schema(max_length = 255)]
    work_phone: String,
    #[schema(max_length = 255)]
    cell_phone: String,
    customer_id: Option<i64>,
    #[schema(minimum = 1)]
    vehicle_id: Option<i64>,
    #[schema(minimum = 1)]
    repair_order_id: Option<i64>,
    #[schema(minimum = 1)]
    employee_id: Option<i64>,
    /// Default false.
    done: Option<bool>,
    /// Title of a bay of the shop (case-insensitive).
    #[schema(max_length = 255)]
    column: Option<String>,
    #[schema(max_length = 255)]
    reason: Option<String>,
    #[schema(max_length = 255)]
    status: Option<String>,
    #[schema(max_length = 255)]
    first_name: Option<String>,
    #[schema(max_length = 255)]
    last_name: Option<String>,
    /// Default 1.
    #[schema(exclusive_minimum = 0, maximum = 24)]
    hours: Option<f64>,
    #[schema(max_length = 255)]
    email: Option<String>,
    /// Default `API`.
    #[schema(schema_with = source_schema)]
    source: Option<String>,
    /// A live hold (`POST /api/v1/holds`): the appointment takes exactly its shop, bay and time
    /// and consumes it. `shop_id`, `date`, `hours` and `column` may then be omitted; given,
    /// they must equal the hold's (else 422). A hold that expired or was used answers 409.
    hold_id: Option<i64>,
}
