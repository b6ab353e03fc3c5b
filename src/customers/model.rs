//! Customer wire types: the response object, the create/update body, and the list parameters.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use super::store::CustomerRow;
use crate::body::{present, serialize_opt_money};
use crate::{
    appointments::model::Appointment,
    receivables::model::{AccountPayment, Receivable},
    ship_tos::model::ShipTo,
    time::format_micros,
};

/// The customer's phone numbers (replaces the deprecated `home_phone`, `work_phone`,
/// `cell_phone` and `fax` fields, which carry the same values).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CustomerPhone {
    pub home: String,
    pub work: String,
    pub cell: String,
    pub fax: String,
}

/// A customer. The `with_details` fields appear only in `GET /api/v1/customers?with_details=true`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Customer {
    pub customer_id: i64,
    pub shop_id: i64,
    pub business_name: String,
    pub first_name: String,
    pub last_name: String,
    pub address: String,
    pub city: String,
    pub state: String,
    pub zip: String,
    pub phone: CustomerPhone,
    pub email: Option<String>,
    pub allow_marketing: bool,
    pub comments: String,
    pub cell_provider: String,
    pub active: bool,
    /// Tax-exempt certificate on file.
    pub tax_exempt: bool,
    /// Money, at most two decimals; null when never set.
    #[serde(serialize_with = "serialize_opt_money")]
    #[schema(value_type = Option<f64>, example = 2500.0)]
    pub credit_limit: Option<i64>,
    /// Accepted as a number or a string; always returned as a string.
    pub extension: String,
    pub customer_type: String,
    /// The name of the customer's terms; the same value as `customer_pay_type`.
    pub terms: String,
    /// Unique in the company when not empty.
    pub customer_number: String,
    /// The name of the customer's terms; the same value as `terms`.
    pub customer_pay_type: String,
    /// Creation time.
    pub timestamp: String,
    pub updated_at: String,
    /// Deprecated: use `phone.home`.
    #[schema(deprecated)]
    pub home_phone: String,
    /// Deprecated: use `phone.cell`.
    #[schema(deprecated)]
    pub cell_phone: String,
    /// Deprecated: use `phone.work`.
    #[schema(deprecated)]
    pub work_phone: String,
    /// Deprecated: use `phone.fax`.
    #[schema(deprecated)]
    pub fax: String,
    /// `with_details`: distinct vehicles of the customer's appointments.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vehicles: Option<Vec<CustomerVehicle>>,
    /// `with_details`: the customer's appointments.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(no_recursion)]
    pub schedule: Option<Vec<Appointment>>,
    /// `with_details`: the customer's ship-to addresses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ship_tos: Option<Vec<ShipTo>>,
    /// `with_details`: the customer's accounts receivable entries (of the shops the key sees).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accounts_receivable: Option<Vec<Receivable>>,
    /// `with_details`: payments on those entries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account_payments: Option<Vec<AccountPayment>>,
}

impl From<CustomerRow> for Customer {
    fn from(row: CustomerRow) -> Self {
        let r = row.fields;
        Customer {
            customer_id: row.id,
            shop_id: r.shop_id,
            business_name: r.business_name,
            first_name: r.first_name,
            last_name: r.last_name,
            address: r.address,
            city: r.city,
            state: r.state,
            zip: r.zip,
            phone: CustomerPhone {
                home: r.home_phone.clone(),
                work: r.work_phone.clone(),
                cell: r.cell_phone.clone(),
                fax: r.fax.clone(),
            },
            email: r.email,
            allow_marketing: r.allow_marketing,
            comments: r.comments,
            cell_provider: r.cell_provider,
            active: r.active,
            tax_exempt: r.tax_exempt,
            credit_limit: r.credit_limit,
            extension: r.extension,
            customer_type: r.customer_type,
            customer_pay_type: r.terms.clone(),
            terms: r.terms,
            customer_number: r.customer_number,
            timestamp: format_micros(row.created_at),
            updated_at: format_micros(row.updated_at),
            home_phone: r.home_phone,
            cell_phone: r.cell_phone,
            work_phone: r.work_phone,
            fax: r.fax,
            vehicles: None,
            schedule: None,
            ship_tos: None,
            accounts_receivable: None,
            account_payments: None,
        }
    }
}

/// A vehicle of the customer's appointments (`with_details`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CustomerVehicle {
    pub vehicle_id: Option<i64>,
    pub year: String,
    pub make: String,
    pub model: String,
}

/// Phone numbers in a request; each one is optional (`null` clears it).
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct PhoneInput {
    #[schema(max_length = 255)]
    home: Option<String>,
    #[schema(max_length = 255)]
    work: Option<String>,
    #[schema(max_length = 255)]
    cell: Option<String>,
    #[schema(max_length = 255)]
    fax: Option<String>,
}

/// Body of `POST /api/v1/customers`: the update body with the fields create requires.
// Documentation only: the body is read as `CustomerInput`, which applies the create rules. Its
// schema is `CustomerInput`'s with the required list of a create, so the two never drift.
pub struct NewCustomer;

/// What create requires (decisions §6); PUT requires nothing.
const CREATE_REQUIRES: [&str; 8] = ["shop_id", "business_name", "first_name", "last_name", "address", "city", "state", "zip"];

impl utoipa::PartialSchema for NewCustomer {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        crate::schemas::derived::<CustomerInput>(
            "Body of `POST /api/v1/customers`. Required: `shop_id`, `business_name` (may be empty), `first_name`, \
             `last_name`, `address`, `city`, `state`, `zip`. Phones may come in the `phone` object or the deprecated \
             fields; the object wins.",
            |object| object.required = CREATE_REQUIRES.iter().map(|f| (*f).to_owned()).collect(),
        )
    }
}

impl ToSchema for NewCustomer {
    fn schemas(schemas: &mut Vec<(String, utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>)>) {
        <CustomerInput as ToSchema>::schemas(schemas);
    }
}

/// The `phone` object of a customer body as sent: its four numbers, for the body reader to
/// check. Other keys are skipped as `IgnoredAny`, so they are ignored like any unknown field
/// (the body extractor's NUL check included); a value that is not an object is kept for the
/// reader's type error.
#[derive(Debug, Clone)]
pub enum PhoneBody {
    Object(serde_json::Map<String, Value>),
    Other(Value),
}

pub const PHONE_KEYS: [&str; 4] = ["home", "work", "cell", "fax"];

impl<'de> Deserialize<'de> for PhoneBody {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
        struct Phones;
        impl<'de> Visitor<'de> for Phones {
            type Value = PhoneBody;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PhoneBody, A::Error> {
                let mut known = serde_json::Map::new();
                while let Some(key) = map.next_key::<String>()? {
                    if PHONE_KEYS.contains(&key.as_str()) {
                        known.insert(key, map.next_value::<Value>()?);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(PhoneBody::Object(known))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<PhoneBody, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(PhoneBody::Other(Value::Array(Vec::new())))
            }
            fn visit_bool<E>(self, v: bool) -> Result<PhoneBody, E> {
                Ok(PhoneBody::Other(Value::Bool(v)))
            }
            fn visit_i64<E>(self, v: i64) -> Result<PhoneBody, E> {
                Ok(PhoneBody::Other(Value::from(v)))
            }
            fn visit_u64<E>(self, v: u64) -> Result<PhoneBody, E> {
                Ok(PhoneBody::Other(Value::from(v)))
            }
            fn visit_f64<E>(self, v: f64) -> Result<PhoneBody, E> {
                Ok(PhoneBody::Other(Value::from(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<PhoneBody, E> {
                Ok(PhoneBody::Other(Value::from(v)))
            }
        }
        d.deserialize_any(Phones)
    }
}

/// Body of `PUT /api/v1/customers/{CustomerID}` (and, with the fields create requires, of
/// `POST`). PUT requires nothing: omitted fields keep their value, and read-only fields of the
/// response (`customer_id`, `timestamp`, `updated_at`) are ignored. `null` clears the optional
/// fields; on the fields create requires, and on the booleans, it is a 422. Phones may come in
/// the `phone` object or the deprecated fields; the object wins. Text is trimmed.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct CustomerInput {
    /// A shop the key may see.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = i64)]
    pub shop_id: Option<Value>,
    /// May be empty.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = String, max_length = 255)]
    pub business_name: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = String, max_length = 255, pattern = r"\S")]
    pub first_name: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = String, max_length = 255, pattern = r"\S")]
    pub last_name: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = String, max_length = 255, pattern = r"\S")]
    pub address: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = String, max_length = 255, pattern = r"\S")]
    pub city: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = String, max_length = 255, pattern = r"\S")]
    pub state: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = String, max_length = 255, pattern = r"\S")]
    pub zip: Option<Value>,
    /// `{home, work, cell, fax}`; wins over the deprecated fields.
    #[serde(default)]
    #[schema(value_type = Option<PhoneInput>)]
    pub phone: Option<PhoneBody>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, max_length = 255, deprecated)]
    pub home_phone: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, max_length = 255, deprecated)]
    pub work_phone: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, max_length = 255, deprecated)]
    pub cell_phone: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, max_length = 255, deprecated)]
    pub fax: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    #[schema(schema_with = crate::schemas::email)]
    pub email: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, max_length = 10000)]
    pub comments: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, max_length = 255)]
    pub cell_provider: Option<Value>,
    /// Default true.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = bool)]
    pub active: Option<Value>,
    /// Default false.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = bool)]
    pub tax_exempt: Option<Value>,
    /// Default false.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = bool)]
    pub allow_marketing: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    #[schema(schema_with = crate::schemas::credit_limit)]
    pub credit_limit: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    #[schema(schema_with = crate::schemas::text_or_number)]
    pub extension: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, max_length = 255)]
    pub customer_type: Option<Value>,
    /// The customer's terms (same value as `terms`; when both are sent they must match).
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, max_length = 255)]
    pub customer_pay_type: Option<Value>,
    /// Same value as `customer_pay_type`.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, max_length = 255)]
    pub terms: Option<Value>,
    /// Unique in the company when not empty.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, max_length = 255)]
    pub customer_number: Option<Value>,
}

/// Query parameters of `POST /api/v1/customers/import`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct ImportParams {
    /// The shop of every row (a shop the key may see); without it, each row's `shop_id` column.
    shop_id: Option<i64>,
    /// `customer_number`: a row whose `customer_number` matches a customer of the company
    /// updates it instead of creating one. Its cells replace the stored values (an empty cell
    /// clears a field; an empty boolean keeps it); columns the file does not have keep theirs.
    #[param(rename = "match", pattern = "^customer_number$")]
    match_: Option<String>,
}

/// Query parameters of `GET /api/v1/customers/export`: the list's, without paging and details.
pub struct CustomerExportParams;

impl IntoParams for CustomerExportParams {
    fn into_params(_: impl Fn() -> Option<utoipa::openapi::path::ParameterIn>) -> Vec<utoipa::openapi::path::Parameter> {
        crate::export::list_params(CustomerListParams::into_params(crate::export::in_query))
    }
}

/// Query parameters of `GET /api/v1/customers`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct CustomerListParams {
    /// Page number, from 1.
    #[param(minimum = 1)]
    page: Option<i64>,
    /// Items per page, 1 to 100 (default 10).
    #[param(rename = "pageSize", minimum = 1, maximum = 100)]
    page_size: Option<i64>,
    /// Comma-separated fields among `first_name`, `last_name`, `business_name`, `address`
    /// (case-insensitive); prefix `-` for descending. Ties are broken by id.
    #[param(pattern = r"^([-+]?(first_name|last_name|business_name|address)(,[-+]?(first_name|last_name|business_name|address))*)?$")]
    sort: Option<String>,
    /// Adds `vehicles`, `schedule`, `ship_tos`, `accounts_receivable` and `account_payments`.
    with_details: Option<bool>,
    /// One customer by id.
    customer_id: Option<i64>,
    /// Case-insensitive substring.
    #[param(rename = "filter[first_name]")]
    filter_first_name: Option<String>,
    /// Case-insensitive substring.
    #[param(rename = "filter[last_name]")]
    filter_last_name: Option<String>,
    /// Case-insensitive substring of the street address.
    #[param(rename = "filter[address]")]
    filter_address: Option<String>,
    /// Digits only (`(555) 010-2030` = `5550102030`), a substring of any of the four phones.
    #[param(rename = "filter[phone]", pattern = r"^[^\u0000]*[0-9][^\u0000]*$")]
    filter_phone: Option<String>,
    /// Exact.
    #[param(rename = "filter[customer_number]")]
    filter_customer_number: Option<String>,
    /// `YYYY-MM-DD`: last updated on that UTC day.
    #[param(rename = "filter[updated_date]", value_type = Option<chrono::NaiveDate>)]
    filter_updated_date: Option<String>,
    /// One shop; omitted means every shop of the company the key may see.
    #[param(rename = "filter[shop_id]")]
    filter_shop_id: Option<i64>,
}
