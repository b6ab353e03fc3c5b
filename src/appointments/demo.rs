//! Demo appointments: a few thousand over the past and next two weeks, deterministic.

use chrono::{Days, NaiveTime, Utc};

use super::{
    model::Appointment,
    store::{AppointmentFields, AppointmentRow, insert_query},
};
use crate::{
    bays::store as bays,
    customers::store::{self as customers, CustomerFilter},
    change::Change,
    db::{Db, DbError, ShopFilter, page::PageRequest},
    shops::store as shops,
    sources::model::APPOINTMENT_SOURCES,
    time::local_to_utc,
};

const COUNT: usize = 3000;
const VEHICLES: [(&str, &str); 10] = [
    ("Toyota", "Camry"), ("Honda", "Civic"), ("Ford", "F-150"), ("Chevrolet", "Silverado"), ("Subaru", "Outback"),
    ("Tesla", "Model 3"), ("BMW", "330i"), ("Hyundai", "Elantra"), ("Nissan", "Rogue"), ("Jeep", "Wrangler"),
];
const FIRST: [&str; 10] = ["Ana", "Ben", "Chloé", "Dev", "Emma", "Farid", "Grace", "Hiro", "Ines", "Jack"];
const LAST: [&str; 10] = ["Smith", "García", "Nguyen", "Okafor", "Müller", "Kowalski", "Tanaka", "Brown", "Rossi", "Patel"];
const REASONS: [&str; 8] = [
    "Oil change", "Brake noise", "Tire rotation", "Check engine light", "A/C not cooling", "State inspection",
    "Battery replacement", "Alignment",
];
const HOURS: [f64; 5] = [0.5, 1.0, 1.0, 1.5, 2.0];

/// A 64-bit linear congruential generator (Knuth's MMIX constants): reproducible demo data.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// Creates the demo appointments of `company_id` across its shops and bays in one transaction.
pub async fn load_demo(db: &Db, company_id: i64) -> anyhow::Result<()> {
    let shops = shops::list(db, company_id, &ShopFilter::All).await?;
    if shops.is_empty() {
        return Ok(());
    }
    let bays = bays::for_shops(db, company_id, &ShopFilter::All).await?;
    let page = PageRequest { limit: 100, ..Default::default() };
    let (people, _) = customers::list(db, company_id, &ShopFilter::All, &CustomerFilter::default(), &page).await?;
    let now = Utc::now();
    let mut rng = Lcg(0x5eed_0000 + company_id as u64);
    let mut change = Change::begin(db, company_id).await?;
    for _ in 0..COUNT {
        let shop = &shops[rng.below(shops.len())];
        let tz = shop.tz();
        let today = now.with_timezone(&tz).date_naive();
        let day = today.checked_sub_days(Days::new(14)).unwrap_or(today) + Days::new(rng.below(29) as u64);
        let time = NaiveTime::from_hms_opt(8 + rng.below(9) as u32, [0, 15, 30, 45][rng.below(4)], 0).unwrap_or_default();
        let start_at = local_to_utc(tz, day.and_time(time)).timestamp_micros();
        let hours = HOURS[rng.below(HOURS.len())];
        let shop_bays: Vec<_> = bays.iter().filter(|b| b.shop_id == shop.id).collect();
        let (make, model) = VEHICLES[rng.below(VEHICLES.len())];
        let customer = (!people.is_empty() && rng.below(10) < 4).then(|| &people[rng.below(people.len())]);
        let (first_name, last_name, email) = match customer {
            Some(c) => (c.fields.first_name.clone(), c.fields.last_name.clone(), c.fields.email.clone()),
            None => {
                let (f, l) = (FIRST[rng.below(FIRST.len())], LAST[rng.below(LAST.len())]);
                (f.to_owned(), l.to_owned(), Some(format!("{}.{}@example.com", f.to_lowercase(), l.to_lowercase())))
            }
        };
        let past = start_at < now.timestamp_micros();
        let mut fields = AppointmentFields {
            shop_id: shop.id,
            customer_id: customer.map(|c| c.id),
            vehicle_id: None,
            repair_order_id: None,
            employee_id: None,
            first_name,
            last_name,
            email,
            year: (2008 + rng.below(18)).to_string(),
            make: make.into(),
            model: model.into(),
            reason: Some(REASONS[rng.below(REASONS.len())].into()),
            home_phone: String::new(),
            work_phone: String::new(),
            cell_phone: format!("(555) 01{:01}-{:04}", rng.below(10), rng.below(10_000)),
            bay_id: (!shop_bays.is_empty()).then(|| shop_bays[rng.below(shop_bays.len())].id),
            hours,
            done: past && rng.below(10) < 8,
            source: APPOINTMENT_SOURCES[rng.below(APPOINTMENT_SOURCES.len())].into(),
            status: None,
            start_at,
            end_at: start_at + (hours * super::timing::MICROS_PER_HOUR) as i64,
            local_date: String::new(),
            local_time: String::new(),
        };
        fields.localize(tz);
        // Booked up to a week before the visit, never in the future.
        let booked = (start_at - rng.below(7 * 24) as i64 * 3_600_000_000).min(now.timestamp_micros());
        let mut row: AppointmentRow = change.tx().fetch_optional(&insert_query(company_id, &fields, booked)).await?.ok_or(DbError::NoRow)?;
        row.column_title = fields.bay_id.and_then(|id| bays.iter().find(|b| b.id == id)).map(|b| b.title.clone());
        change.record("appointment.created", Some(shop.id), &Appointment::from(row))?;
    }
    change.commit().await?;
    Ok(())
}
