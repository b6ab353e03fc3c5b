//! Turns a create or update body into complete, validated [`AppointmentFields`] (decisions §5).

use super::{
    patch::Patch,
    model::AppointmentInput,
    store::{AppointmentFields, AppointmentRow},
    timing::{MICROS_PER_HOUR, parse_schedule},
};
use crate::{
    auth::Caller,
    bays::store as bays,
    customers::store::{self as customers, CustomerRow},
    db::{Db, ShopFilter},
    error::{ApiError, FieldErrors},
    scope,
    shops::store::ShopRow,
    sources::model::APPOINTMENT_SOURCES,
    validate,
};

const MAX_TEXT: usize = 255;

/// Validated fields and the title of the chosen bay (for the response).
pub struct Validated {
    pub fields: AppointmentFields,
    pub column_title: Option<String>,
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

/// Validates `input` for a create (`current` is `None`) or an update of `current`.
pub async fn validate(db: &Db, caller: &Caller, input: AppointmentInput, current: Option<&AppointmentRow>) -> Result<Validated, ApiError> {
    let mut errors = FieldErrors::default();
    let company_id = caller.company_id;

    // The shop (its zone reads local dates) and the customer (fills names and e-mail).
    let shop: Option<ShopRow> = match &input.shop_id {
        Patch::Value(id) => scope::body_shop(db, caller, Some(*id), &mut errors).await?,
        _ => {
            errors.add("shop_id", "The shop_id field is required.");
            None
        }
    };
    let tz = shop.as_ref().map(ShopRow::tz).unwrap_or(chrono_tz::UTC);
    let shop_changed = current.is_some_and(|c| shop.as_ref().is_some_and(|s| s.id != c.shop_id));

    let new_customer: Option<CustomerRow> = match input.customer_id {
        Patch::Value(id) if current.and_then(|c| c.customer_id) != Some(id) => {
            let found = customers::find(db, company_id, id).await?.filter(|c| caller.can_see_shop(c.shop_id));
            if found.is_none() {
                errors.add("customer_id", "The selected customer_id is invalid.");
            }
            found
        }
        _ => None,
    };
    let customer_id = input.customer_id.apply(current.and_then(|c| c.customer_id));

    let start_at = match input.date {
        Patch::Value(raw) => match parse_schedule(&raw, tz) {
            Some(t) => Some(t.timestamp_micros()),
            None => {
                errors.add(
                    "date",
                    "The date field must be an RFC 3339 date-time or a local date-time (YYYY-MM-DDTHH:MM[:SS]) in the years 1900 to 2200.",
                );
                None
            }
        },
        _ => {
            errors.add("date", "The date field is required.");
            None
        }
    };

    let year = required(&mut errors, "year", input.year);
    if year.as_ref().is_some_and(|y| y.len() != 4 || !y.bytes().all(|b| b.is_ascii_digit())) {
        errors.add("year", "The year field must be four digits.");
    }
    let mut nonblank = |field: &str, patch: Patch<String>| {
        let given = required(&mut errors, field, patch);
        let v = text(&mut errors, field, given);
        if v.as_ref().is_some_and(|v| v.is_empty()) {
            errors.add(field, format!("The {field} field is required."));
        }
        v.unwrap_or_default()
    };
    let make = nonblank("make", input.make);
    let model = nonblank("model", input.model);
    let mut phone = |field: &str, patch: Patch<String>| {
        let given = required(&mut errors, field, patch);
        text(&mut errors, field, given).unwrap_or_default()
    };
    let home_phone = phone("home_phone", input.home_phone);
    let work_phone = phone("work_phone", input.work_phone);
    let cell_phone = phone("cell_phone", input.cell_phone);

    // Names and e-mail: given values win, `null` clears, omitted ones come from a newly linked
    // customer, else keep their stored value.
    let from_customer = |patch: Patch<String>, customer: Option<String>, stored: Option<String>| match patch {
        Patch::Value(v) => Some(v),
        Patch::Null => None,
        Patch::Missing => match &new_customer {
            Some(_) => customer,
            None => stored,
        },
    };
    let first_name = from_customer(input.first_name, new_customer.as_ref().map(|c| c.first_name.clone()), current.map(|c| c.first_name.clone()));
    let first_name = text(&mut errors, "first_name", first_name).unwrap_or_default();
    let last_name = from_customer(input.last_name, new_customer.as_ref().map(|c| c.last_name.clone()), current.map(|c| c.last_name.clone()));
    let last_name = text(&mut errors, "last_name", last_name).unwrap_or_default();
    let email = from_customer(input.email, new_customer.as_ref().and_then(|c| c.email.clone()), current.and_then(|c| c.email.clone()));
    let email = text(&mut errors, "email", email).filter(|e| !e.is_empty());
    if let Some(e) = &email {
        validate::email(&mut errors, "email", e);
    }

    let hours = match input.hours {
        Patch::Value(h) => h,
        Patch::Null => 1.0,
        Patch::Missing => current.map_or(1.0, |c| c.hours),
    };
    if !(hours > 0.0 && hours <= 24.0) {
        errors.add("hours", "The hours field must be greater than 0 and at most 24.");
    }
    let done = match input.done {
        Patch::Value(d) => d,
        Patch::Null => false,
        Patch::Missing => current.is_some_and(|c| c.done),
    };
    let source = match input.source {
        Patch::Value(s) => match APPOINTMENT_SOURCES.iter().find(|v| **v == s) {
            Some(v) => (*v).to_owned(),
            None => {
                errors.add("source", format!("The source field must be one of: {}.", APPOINTMENT_SOURCES.join(", ")));
                String::new()
            }
        },
        Patch::Null => "API".into(),
        Patch::Missing => current.map_or_else(|| "API".into(), |c| c.source.clone()),
    };

    // The bay: named by title among the shop's bays; an omitted column keeps its bay unless the
    // appointment moves to another shop.
    let mut column_title = None;
    let bay_id = match input.column {
        Patch::Value(title) if !title.trim().is_empty() => match &shop {
            Some(shop) => {
                let wanted = title.trim().to_lowercase();
                let bays = bays::for_shops(db, company_id, &ShopFilter::Only(vec![shop.id])).await?;
                match bays.into_iter().find(|b| b.title.to_lowercase() == wanted) {
                    Some(bay) => {
                        column_title = Some(bay.title);
                        Some(bay.id)
                    }
                    None => {
                        errors.add("column", "The column field must name a bay of the appointment's shop.");
                        None
                    }
                }
            }
            None => None,
        },
        Patch::Value(_) | Patch::Null => None,
        Patch::Missing => {
            let kept = current.and_then(|c| c.bay_id.map(|id| (id, c.column_title.clone())));
            if kept.is_some() && shop_changed {
                errors.add("column", "The column field must name a bay of the new shop (or be null) when shop_id changes.");
            }
            kept.map(|(id, title)| {
                column_title = title;
                id
            })
        }
    };

    let reason = text(&mut errors, "reason", input.reason.apply(current.and_then(|c| c.reason.clone())));
    let status = text(&mut errors, "status", input.status.apply(current.and_then(|c| c.status.clone())));
    let vehicle_id = positive_id(&mut errors, "vehicle_id", input.vehicle_id.apply(current.and_then(|c| c.vehicle_id)));
    let repair_order_id =
        positive_id(&mut errors, "repair_order_id", input.repair_order_id.apply(current.and_then(|c| c.repair_order_id)));
    let employee_id = positive_id(&mut errors, "employee_id", input.employee_id.apply(current.and_then(|c| c.employee_id)));

    errors.into_result()?;
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
        end_at: start_at + (hours * MICROS_PER_HOUR).round() as i64,
        local_date: String::new(),
        local_time: String::new(),
    };
    fields.localize(tz);
    Ok(Validated { fields, column_title })
}
