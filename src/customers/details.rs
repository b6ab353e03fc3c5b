//! `with_details=true`: the related records of a whole page of customers, loaded with one query
//! per relation (`customer_id IN (...)`), never one query per customer, all four in one read.

use super::model::{Customer, CustomerVehicle};
use crate::respond::group_by;
use crate::{
    appointments::{customers_appointments, model::distinct_vehicles, schedules_of_customers},
    auth::Caller,
    db::{Db, ShopFilter},
    error::ApiError,
    receivables::{
        model::{AccountPayment, Receivable},
        store as receivables,
    },
    ship_tos::{model::ShipTo, store as ship_tos},
};

/// Fills the detail lists of every customer of a page. Accounts receivable follow the key's shop
/// list, like the accounts receivable endpoint.
pub async fn attach(db: &Db, caller: &Caller, customers: &mut [Customer]) -> Result<(), ApiError> {
    let ids: Vec<i64> = customers.iter().map(|c| c.customer_id).collect();
    if ids.is_empty() {
        return Ok(());
    }
    let shops = match &caller.shops {
        None => ShopFilter::All,
        Some(ids) => ShopFilter::Only(ids.clone()),
    };
    let company = caller.company_id;
    // One read for the four lists: on SQLite one snapshot, so a customer's lists agree.
    let (ship_to_rows, entry_rows, payment_rows, appointment_rows) = db
        .read_together((
            ship_tos::for_customers(company, &ids),
            receivables::for_customers(company, &shops, &ids),
            receivables::payments_for_customers(company, &shops, &ids),
            customers_appointments(company, &ids),
        ))
        .await?;
    let mut ship_tos = group_by(ship_to_rows, |r| r.customer_id, ShipTo::from);
    let mut entries = group_by(entry_rows, |r| r.customer_id, Receivable::from);
    let mut payments = group_by(payment_rows, |r| r.customer_id, AccountPayment::from);
    let mut schedules = schedules_of_customers(appointment_rows, &shops);
    for customer in customers {
        let id = customer.customer_id;
        let schedule = schedules.remove(&id).unwrap_or_default();
        // Distinct vehicles: by `vehicle_id` when set, else by year, make and model.
        let vehicles = distinct_vehicles(&schedule)
            .into_iter()
            .map(|v| CustomerVehicle { vehicle_id: v.vehicle_id, year: v.year, make: v.make, model: v.model })
            .collect();
        customer.vehicles = Some(vehicles);
        customer.schedule = Some(schedule);
        customer.ship_tos = Some(ship_tos.remove(&id).unwrap_or_default());
        customer.accounts_receivable = Some(entries.remove(&id).unwrap_or_default());
        customer.account_payments = Some(payments.remove(&id).unwrap_or_default());
    }
    Ok(())
}
