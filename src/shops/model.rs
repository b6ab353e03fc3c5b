use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{
    bays::model::Bay,
    error::FieldErrors,
    shop_hours::model::HoursRecord,
    sources::model::Source,
    validate,
};

use super::store::ShopRow;

/// Body of `POST /api/v1/shops` and `PUT /api/v1/shops/{id}`: only `name` is required. PUT
/// validates like create; omitted (or null) optional fields keep their stored value there.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct ShopInput {
    #[schema(required, nullable = false, max_length = 255, pattern = r"\S")]
    pub name: Option<String>,
    #[schema(max_length = 255)]
    pub address: Option<String>,
    #[schema(max_length = 255)]
    pub city: Option<String>,
    #[schema(max_length = 255)]
    pub state: Option<String>,
    #[schema(max_length = 255)]
    pub zip: Option<String>,
    #[schema(max_length = 255)]
    pub phone: Option<String>,
    #[schema(schema_with = crate::schemas::shop_email)]
    pub email: Option<String>,
    #[schema(max_length = 255)]
    pub website: Option<String>,
    /// IANA time zone name, e.g. `America/Chicago`. Default `UTC`.
    #[schema(schema_with = timezone_schema)]
    pub timezone: Option<String>,
}

/// A shop's `timezone` in a body: a string, checked by the server against the names
/// `GET /api/v1/settings/timezones` lists (an enum of them would break client generators).
/// `null` is allowed too: like an omitted field, it keeps the stored zone (`UTC` on create).
pub fn timezone_schema() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .min_length(Some(1))
        .max_length(Some(64))
        .examples(["America/Chicago"])
        .description(Some(
            "IANA time zone name, e.g. `America/Chicago`; `GET /api/v1/settings/timezones` lists the accepted names. Default `UTC`.",
        ))
        .build()
}

/// A shop's editable fields, complete and validated, in column order.
#[derive(Debug, Clone, Default, crate::db::FromRow)]
pub struct ShopFields {
    pub name: String,
    pub address: String,
    pub city: String,
    pub state: String,
    pub zip: String,
    pub phone: String,
    pub email: String,
    pub website: String,
    pub timezone: String,
}

impl ShopInput {
    /// Applies the input over `base` (the stored shop on update, `None` on create) and validates.
    pub fn into_fields(self, base: Option<ShopFields>) -> Result<ShopFields, FieldErrors> {
        let mut errors = FieldErrors::default();
        let base = base.unwrap_or_else(|| ShopFields { timezone: "UTC".into(), ..ShopFields::default() });
        // PUT validates like create: `name` is required on both.
        let name = validate::required_text(&mut errors, "name", self.name).unwrap_or_default();
        // Counted as sent, as the document's `maxLength` counts it; stored trimmed.
        validate::max_len(&mut errors, "name", &name, 255);
        // The other texts as customers' are: at most 255 characters as sent, stored trimmed; an
        // omitted one keeps the stored value.
        let mut text = |field: &str, value: Option<String>, stored: String| match value {
            Some(v) => {
                validate::max_len(&mut errors, field, &v, 255);
                v.trim().to_owned()
            }
            None => stored,
        };
        let fields = ShopFields {
            name: name.trim().to_owned(),
            address: text("address", self.address, base.address),
            city: text("city", self.city, base.city),
            state: text("state", self.state, base.state),
            zip: text("zip", self.zip, base.zip),
            phone: text("phone", self.phone, base.phone),
            email: text("email", self.email, base.email),
            website: text("website", self.website, base.website),
            timezone: self.timezone.unwrap_or(base.timezone),
        };
        validate::email(&mut errors, "email", &fields.email);
        if crate::time::parse_timezone(&fields.timezone).is_none() {
            errors.add("timezone", "The timezone field must be a valid IANA time zone name.");
        }
        if errors.is_empty() { Ok(fields) } else { Err(errors) }
    }
}

/// A shop as `GET /api/v1/settings/shop_info` and the shop admin routes return it.
#[derive(Debug, Serialize, ToSchema)]
pub struct ShopInfo {
    pub shop_id: i64,
    pub company_id: i64,
    pub name: String,
    pub address: String,
    pub city: String,
    pub state: String,
    pub zip: String,
    pub phone: String,
    pub email: String,
    pub website: String,
    /// IANA time zone of the shop; appointment times are local to it.
    pub timezone: String,
    /// Present with `with[]=hours`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hours: Option<Vec<HoursRecord>>,
    /// Present with `with[]=bays` (inactive bays included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bays: Option<Vec<Bay>>,
    /// Present with `with[]=sources` (inactive sources included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sources: Option<Vec<Source>>,
}

impl From<ShopRow> for ShopInfo {
    fn from(ShopRow { id, company_id, fields }: ShopRow) -> Self {
        let ShopFields { name, address, city, state, zip, phone, email, website, timezone } = fields;
        ShopInfo {
            shop_id: id,
            company_id,
            name,
            address,
            city,
            state,
            zip,
            phone,
            email,
            website,
            timezone,
            hours: None,
            bays: None,
            sources: None,
        }
    }
}
