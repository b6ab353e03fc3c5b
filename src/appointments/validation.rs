//! Turns a create or update body into complete, validated [`AppointmentFields`] (decisions §5).

use super::{
    patch::Patch,
    model::AppointmentInput,
    store::{AppointmentFields, AppointmentRow},
    timing::{duration_micros, parse_schedule},
};
use crate::{
    auth::Caller,
    customers::store::{self as customers, CustomerRow},
    db::Db,
    error::{ApiError, FieldErrors},
    scope,
    shops::{cache::ShopCache, store::ShopRow},
    sources::model::APPOINTMENT_SOURCES,
    validate,
};

const MAX_TEXT: usize = 255;

/// Validated fields, the title of the chosen bay (for the response), and the shop's time zone
/// the local dates and times were derived in.
pub struct Validated {
    pub fields: AppointmentFields,
    pub column_title: Option<String>,
    pub zone: String,
}

impl Validated {
    /// The guard of the write ([`crate::change::Change::require`]): its shop still has the zone
    /// its local times were derived in.
    pub fn zone_guard(&self, company_id: i64) -> crate::db::Query {
        crate::shops::store::zone_unchanged(company_id, self.fields.shop_id, &self.zone)
    }
}

/// A field that create requires: an update requires it too (PUT validates like create,
/// decisions §5), so omitted and `null` are both refused.
fn required<T>(errors: &mut FieldErrors, field: &str, patch: Patch<T>) -> Option<T> {
    match patch {
        Patch::Value(v) => Some(v),
        _ => {
            errors.add(field, format!("The {field} field is required."));
            None
        }
    }
}

/// Checks the length as sent, then trims.
fn text(errors: &mut FieldErrors, field: &str, value: Option<String>) -> Option<String> {
    if let Some(v) = &value {
        validate::max_len(errors, field, v, MAX_TEXT);
    }
    value.map(|v| v.trim().to_owned())
}

fn positive_id(errors: &mut FieldErrors, field: &str, value: Option<i64>) -> Option<i64> {
    if value.is_some_and(|v| v < 1) {
        errors.add(field, format!("The {field} field must be a positive integer."));
    }
    value
}

/// Validates `input` for a create (`current` is `None`) or an update of `current`: every
/// field error is collected before answering.
pub async fn validate(
    db: &Db,
    shops: &ShopCache,
    caller: &Caller,
    input: AppointmentInput,
    current: Option<&AppointmentRow>,
) -> Result<Validated, ApiError> {
    let linked = current.and_then(|c| c.fields.customer_id);
    let named = References::read(db, shops, caller, &input, linked).await?;
    check(named, input, current)
}

/// What a body names that lives in other rows, read before its write (so that a write holding
/// a lock reads nothing more): the shop (its zone reads local dates) with its bays (a bay named
/// by title), mostly from the replica's cache, and the customer it links (fills names and
/// e-mail).
pub struct References {
    shop: Option<(ShopRow, Vec<(i64, String)>)>,
    shop_errors: FieldErrors,
    customer: Lookup,
}

/// The customer a body names, as read.
enum Lookup {
    /// The body names none.
    NoneNamed,
    /// Not read: the appointment was linked to it already.
    Skipped(i64),
    /// Read: `None` when unknown or in a shop the key may not see.
    Read(i64, Option<Box<CustomerRow>>),
}

impl References {
    /// Reads what `input` names; the customer unless it is `linked`, the one the appointment
    /// is linked to (`None`: read it whatever it is).
    pub async fn read(db: &Db, shops: &ShopCache, caller: &Caller, input: &AppointmentInput, linked: Option<i64>) -> Result<References, ApiError> {
        let mut shop_errors = FieldErrors::default();
        let shop = match &input.shop_id {
            Patch::Value(id) => scope::body_shop_with_bays(db, shops, caller, *id, &mut shop_errors).await?,
            _ => None,
        };
        let customer = match input.customer_id {
            Patch::Value(id) if linked == Some(id) => Lookup::Skipped(id),
            Patch::Value(id) => Lookup::Read(id, customers::find(db, caller.company_id, id).await?.filter(|c| caller.can_see_shop(c.fields.shop_id)).map(Box::new)),
            _ => Lookup::NoneNamed,
        };
        Ok(References { shop, shop_errors, customer })
    }

    /// The guard of a write validated with these ([`Validated::zone_guard`]), known before
    /// validation: `None` when the body names no shop the key may see (it fails validation).
    pub fn zone_guard(&self, company_id: i64) -> Option<crate::db::Query> {
        self.shop.as_ref().map(|(shop, _)| crate::shops::store::zone_unchanged(company_id, shop.id, &shop.fields.timezone))
    }
}

/// Validates `input` over `current` with what it names, read already: reads nothing.
pub fn check(named: References, mut input: AppointmentInput, current: Option<&AppointmentRow>) -> Result<Validated, ApiError> {
    let References { shop, shop_errors: mut errors, customer } = named;
    let stored = current.map(|c| &c.fields);
    if !matches!(input.shop_id, Patch::Value(_)) {
        errors.add("shop_id", "The shop_id field is required.");
    }
    let (shop, bays) = shop.unzip();
    let bays = bays.unwrap_or_default();
    let tz = shop.as_ref().map(ShopRow::tz).unwrap_or(chrono_tz::UTC);
    let zone = shop.as_ref().map(|s| s.fields.timezone.clone()).unwrap_or_default();
    let new_customer = linked_customer(&mut errors, customer, stored)?;
    let customer_id = input.customer_id.clone().apply(stored.and_then(|c| c.customer_id));
    let start_at = start(&mut errors, std::mem::take(&mut input.date), tz);
    let vehicle = vehicle_and_phones(&mut errors, &mut input);
    let (first_name, last_name, email) = contact(&mut errors, &mut input, new_customer.as_ref(), stored);
    let (hours, done, source) = work(&mut errors, &input, stored);
    let (bay_id, column_title) = bay(&mut errors, &input.column, shop.as_ref(), &bays, current);
    let reason = text(&mut errors, "reason", input.reason.apply(stored.and_then(|c| c.reason.clone())));
    let status = text(&mut errors, "status", input.status.apply(stored.and_then(|c| c.status.clone())));
    let vehicle_id = positive_id(&mut errors, "vehicle_id", input.vehicle_id.apply(stored.and_then(|c| c.vehicle_id)));
    let repair_order_id = positive_id(&mut errors, "repair_order_id", input.repair_order_id.apply(stored.and_then(|c| c.repair_order_id)));
    let employee_id = positive_id(&mut errors, "employee_id", input.employee_id.apply(stored.and_then(|c| c.employee_id)));

    errors.into_result()?;
    let VehicleAndPhones { year, make, model, phones: [home_phone, work_phone, cell_phone] } = vehicle;
    let (Some(shop), Some(start_at), Some(year)) = (shop, start_at, year) else {
        return Err(ApiError::Internal("validated appointment without shop, date or year".into()));
    };
    let mut fields = AppointmentFields {
        shop_id: shop.id,
        customer_id,
        vehicle_id,
        repair_order_id,
        employee_id,
        first_name,
        last_name,
        email,
        year,
        make,
        model,
        reason,
        home_phone,
        work_phone,
        cell_phone,
        bay_id,
        hours,
        done,
        source,
        status,
        start_at,
        end_at: start_at + duration_micros(hours),
        local_date: String::new(),
        local_time: String::new(),
    };
    fields.localize(tz);
    Ok(Validated { fields, column_title, zone })
}

/// The customer a body links anew (one the key may see), whose names and e-mail fill omitted
/// ones; `None` when it names none or the one `stored` links already.
fn linked_customer(errors: &mut FieldErrors, named: Lookup, stored: Option<&AppointmentFields>) -> Result<Option<CustomerRow>, ApiError> {
    let already = |id| stored.and_then(|c| c.customer_id) == Some(id);
    match named {
        Lookup::NoneNamed => Ok(None),
        Lookup::Skipped(id) | Lookup::Read(id, _) if already(id) => Ok(None),
        Lookup::Skipped(_) => Err(ApiError::Internal("an appointment validated against a customer it did not read".into())),
        Lookup::Read(_, found) => {
            if found.is_none() {
                errors.add("customer_id", "The selected customer_id is invalid.");
            }
            Ok(found.map(|customer| *customer))
        }
    }
}

/// The start: an RFC 3339 date-time, or a local one read in the shop's zone.
fn start(errors: &mut FieldErrors, date: Patch<String>, tz: chrono_tz::Tz) -> Option<i64> {
    let Patch::Value(raw) = date else {
        errors.add("date", "The date field is required.");
        return None;
    };
    let parsed = parse_schedule(&raw, tz).map(|t| t.timestamp_micros());
    if parsed.is_none() {
        errors.add(
            "date",
            "The date field must be an RFC 3339 date-time or a local date-time (YYYY-MM-DDTHH:MM[:SS]) in the years 1900 to 2200.",
        );
    }
    parsed
}

/// Year, make, model and the three phones: all required, make and model not blank.
struct VehicleAndPhones {
    year: Option<String>,
    make: String,
    model: String,
    /// Home, work, cell; may be empty.
    phones: [String; 3],
}

fn vehicle_and_phones(errors: &mut FieldErrors, input: &mut AppointmentInput) -> VehicleAndPhones {
    let year = required(errors, "year", std::mem::take(&mut input.year));
    if year.as_ref().is_some_and(|y| y.len() != 4 || !y.bytes().all(|b| b.is_ascii_digit())) {
        errors.add("year", "The year field must be four digits.");
    }
    let mut given = |field: &str, patch: &mut Patch<String>, blank_allowed: bool| {
        let value = required(errors, field, std::mem::take(patch));
        let value = text(errors, field, value);
        if !blank_allowed && value.as_ref().is_some_and(|v| v.is_empty()) {
            errors.add(field, format!("The {field} field is required."));
        }
        value.unwrap_or_default()
    };
    VehicleAndPhones {
        make: given("make", &mut input.make, false),
        model: given("model", &mut input.model, false),
        phones: [
            given("home_phone", &mut input.home_phone, true),
            given("work_phone", &mut input.work_phone, true),
            given("cell_phone", &mut input.cell_phone, true),
        ],
        year,
    }
}

/// Names and e-mail: given values win, `null` clears, omitted ones come from a newly linked
/// customer, else keep their stored value.
fn contact(
    errors: &mut FieldErrors,
    input: &mut AppointmentInput,
    new_customer: Option<&CustomerRow>,
    stored: Option<&AppointmentFields>,
) -> (String, String, Option<String>) {
    let linked = new_customer.map(|c| &c.fields);
    let mut pick = |field: &str, patch: &mut Patch<String>, from_customer: Option<&String>, from_stored: Option<&String>| {
        let value = match std::mem::take(patch) {
            Patch::Value(v) => Some(v),
            Patch::Null => None,
            Patch::Missing if new_customer.is_some() => from_customer.cloned(),
            Patch::Missing => from_stored.cloned(),
        };
        text(errors, field, value)
    };
    let first_name = pick("first_name", &mut input.first_name, linked.map(|c| &c.first_name), stored.map(|c| &c.first_name));
    let last_name = pick("last_name", &mut input.last_name, linked.map(|c| &c.last_name), stored.map(|c| &c.last_name));
    let email = pick("email", &mut input.email, linked.and_then(|c| c.email.as_ref()), stored.and_then(|c| c.email.as_ref())).filter(|e| !e.is_empty());
    if let Some(e) = &email {
        validate::email(errors, "email", e);
    }
    (first_name.unwrap_or_default(), last_name.unwrap_or_default(), email)
}

/// Hours, done and source: `null` restores the default, omitted keeps the stored value.
fn work(errors: &mut FieldErrors, input: &AppointmentInput, stored: Option<&AppointmentFields>) -> (f64, bool, String) {
    let hours = match input.hours {
        Patch::Value(h) => h,
        Patch::Null => 1.0,
        Patch::Missing => stored.map_or(1.0, |c| c.hours),
    };
    if !(hours > 0.0 && hours <= 24.0) {
        errors.add("hours", "The hours field must be greater than 0 and at most 24.");
    }
    let done = match input.done {
        Patch::Value(d) => d,
        Patch::Null => false,
        Patch::Missing => stored.is_some_and(|c| c.done),
    };
    let source = match &input.source {
        Patch::Value(s) => match APPOINTMENT_SOURCES.iter().find(|v| *v == s) {
            Some(v) => (*v).to_owned(),
            None => {
                errors.add("source", format!("The source field must be one of: {}.", APPOINTMENT_SOURCES.join(", ")));
                String::new()
            }
        },
        Patch::Null => "API".into(),
        Patch::Missing => stored.map_or_else(|| "API".into(), |c| c.source.clone()),
    };
    (hours, done, source)
}

/// The bay, named by title among the shop's `bays` (id and title each), and its title; an
/// omitted column keeps its bay unless the appointment moves to another shop.
fn bay(
    errors: &mut FieldErrors,
    column: &Patch<String>,
    shop: Option<&ShopRow>,
    bays: &[(i64, String)],
    current: Option<&AppointmentRow>,
) -> (Option<i64>, Option<String>) {
    match column {
        Patch::Value(title) if !title.trim().is_empty() => {
            if shop.is_none() {
                return (None, None);
            }
            let wanted = crate::db::fold_case(title.trim());
            match bays.iter().find(|(_, title)| crate::db::fold_case(title) == wanted) {
                Some((id, title)) => (Some(*id), Some(title.clone())),
                None => {
                    errors.add("column", "The column field must name a bay of the appointment's shop.");
                    (None, None)
                }
            }
        }
        Patch::Value(_) | Patch::Null => (None, None),
        Patch::Missing => {
            let Some(current) = current.filter(|c| c.fields.bay_id.is_some()) else { return (None, None) };
            if shop.is_some_and(|s| s.id != current.fields.shop_id) {
                errors.add("column", "The column field must name a bay of the new shop (or be null) when shop_id changes.");
            }
            (current.fields.bay_id, current.column_title.clone())
        }
    }
}
