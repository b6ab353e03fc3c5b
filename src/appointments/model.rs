//! Wire types of the appointment routes.

use serde::{Deserialize, Serialize};
use utoipa::{
    IntoParams, ToSchema,
    openapi::schema::{ObjectBuilder, Type},
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
    pub customer: Option<Option<crate::customers::model::Customer>>,
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
    fn from(row: AppointmentRow) -> Self {
        let r = row.fields;
        Appointment {
            appointment_id: row.id,
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
            column: row.column_title,
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
            timestamp: format_micros(row.created_at),
            updated_at: Some(format_micros(row.updated_at)),
            deleted: row.deleted_at.map(format_micros),
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
            None => (None, format!("{}\u{1f}{}\u{1f}{}", v.year, crate::db::fold_case(&v.make), crate::db::fold_case(&v.model))),
        };
        if !seen.contains(&key) {
            seen.push(key);
            out.push(v.clone());
        }
    }
    out
}

/// Body of `POST /api/v1/appointments` (and, without `hold_id`, of `PUT
/// /api/v1/appointments/{id}`, which validates like create). Phones may be empty strings.
/// Omitted optional fields take their defaults on create and keep their stored value on PUT;
/// `null` clears a nullable field (`done`, `hours` and `source` go back to their defaults).
/// With a new `customer_id`, omitted `first_name`, `last_name` and `email` come from that
/// customer.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct AppointmentInput {
    /// A shop the key may see.
    #[serde(default)]
    #[schema(value_type = i64, required = true, nullable = false)]
    pub shop_id: Patch<i64>,
    /// When it starts (see the schema for the accepted forms).
    #[serde(default)]
    #[schema(required = true, schema_with = crate::schemas::appointment_date)]
    pub date: Patch<String>,
    /// Four digits.
    #[serde(default)]
    #[schema(value_type = String, required = true, nullable = false, pattern = r"^[0-9]{4}$")]
    pub year: Patch<String>,
    #[serde(default)]
    #[schema(value_type = String, required = true, nullable = false, max_length = 255, pattern = r"\S")]
    pub make: Patch<String>,
    #[serde(default)]
    #[schema(value_type = String, required = true, nullable = false, max_length = 255, pattern = r"\S")]
    pub model: Patch<String>,
    /// May be empty.
    #[serde(default)]
    #[schema(value_type = String, required = true, nullable = false, max_length = 255)]
    pub home_phone: Patch<String>,
    /// May be empty.
    #[serde(default)]
    #[schema(value_type = String, required = true, nullable = false, max_length = 255)]
    pub work_phone: Patch<String>,
    /// May be empty.
    #[serde(default)]
    #[schema(value_type = String, required = true, nullable = false, max_length = 255)]
    pub cell_phone: Patch<String>,
    /// A customer of the company the key may see; fills omitted `first_name`, `last_name` and
    /// `email` when it changes.
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
    /// Title of a bay of the appointment's shop (case-insensitive); `""` or `null` for none.
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
    /// An e-mail address, or `""` / `null` for none.
    #[serde(default)]
    #[schema(schema_with = crate::schemas::email)]
    pub email: Patch<String>,
    /// One value of the source enum; default `API`.
    #[serde(default)]
    #[schema(schema_with = nullable_source_schema)]
    pub source: Patch<String>,
    /// Create only (a 422 on `PUT`): a live hold (`POST /api/v1/holds`); the appointment takes
    /// exactly its shop, bay and time and consumes it. `shop_id`, `date`, `hours` and `column`,
    /// given, must equal the hold's (else 422); the server also takes `shop_id` and `date`
    /// omitted then. A hold that expired or was used answers 409.
    #[serde(default)]
    pub hold_id: Option<i64>,
}

/// Body of `PUT /api/v1/appointments/{id}`: the create body without `hold_id`.
// Documentation only: the body is read as `AppointmentInput`; `hold_id` there is a 422.
pub struct AppointmentUpdate;

impl utoipa::PartialSchema for AppointmentUpdate {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        crate::schemas::derived::<AppointmentInput>(
            "Body of `PUT /api/v1/appointments/{id}`: PUT validates like create, so it needs every required field too. \
             Omitted optional fields keep their stored value; `null` clears a nullable field (`done`, `hours` and \
             `source` go back to their defaults). With a new `customer_id`, omitted `first_name`, `last_name` and \
             `email` come from that customer.",
            |object| {
                object.properties.shift_remove("hold_id");
            },
        )
    }
}

impl ToSchema for AppointmentUpdate {
    fn schemas(schemas: &mut Vec<(String, utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>)>) {
        <AppointmentInput as ToSchema>::schemas(schemas);
    }
}

/// The `source` of a body: one of the enum's values, or `null` (as omitting it on create) for
/// `API`. A `oneOf` rather than an enum holding `null`, which client generators read as several
/// copies of the enum.
pub fn nullable_source_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    use utoipa::openapi::schema::OneOfBuilder;
    OneOfBuilder::new()
        .item(ObjectBuilder::new().schema_type(Type::String).enum_values(Some(APPOINTMENT_SOURCES)))
        .item(ObjectBuilder::new().schema_type(Type::Null))
        .description(Some("Where the appointment comes from; `null` means `API`."))
        .into()
}

/// Query parameters of `GET /api/v1/appointments/export`: the list's, without paging and details.
pub struct AppointmentExportParams;

impl IntoParams for AppointmentExportParams {
    fn into_params(_: impl Fn() -> Option<utoipa::openapi::path::ParameterIn>) -> Vec<utoipa::openapi::path::Parameter> {
        crate::export::list_params(AppointmentListParams::into_params(crate::export::in_query))
    }
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
    #[param(rename = "filter[date]", value_type = Option<chrono::NaiveDate>)]
    filter_date: Option<String>,
    /// Shop-local start time: `HH:MM` (any second of that minute) or `HH:MM:SS`.
    #[param(rename = "filter[time]", pattern = r"^([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9])?$")]
    filter_time: Option<String>,
    /// `complete`, `incomplete` or `both` (default).
    #[param(rename = "filter[status]", pattern = r"^(complete|incomplete|both)$")]
    filter_status: Option<String>,
    /// Deleted appointments: `with` includes them, `only` lists nothing else. Absent: lists
    /// leave them out. Any other value, the empty one included, is a 422.
    #[param(rename = "filter[trashed]", pattern = r"^(with|only)$")]
    filter_trashed: Option<String>,
    /// Last updated on this UTC day, `YYYY-MM-DD`.
    #[param(rename = "filter[updated_date]", value_type = Option<chrono::NaiveDate>)]
    filter_updated_date: Option<String>,
    /// One shop; omitted means every shop of the company the key may see.
    #[param(rename = "filter[shop_id]")]
    filter_shop_id: Option<i64>,
    /// Inclusive lower bound: `YYYY-MM-DD` or RFC 3339. See `filter_by`.
    #[param(schema_with = crate::schemas::date_or_date_time)]
    start_date: Option<String>,
    /// Inclusive upper bound: `YYYY-MM-DD` (the whole day) or RFC 3339. See `filter_by`.
    #[param(schema_with = crate::schemas::date_or_date_time)]
    end_date: Option<String>,
    /// `appointment_start` or `appointment_end`: the range applies to the scheduled start or
    /// end, and a date-only bound is a day in each shop's own time zone. Absent: the range
    /// applies to the creation time and a date-only bound is a UTC day.
    #[param(pattern = r"^(appointment_start|appointment_end)$")]
    filter_by: Option<String>,
}
