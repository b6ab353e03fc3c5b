//! Demo customers with ship-tos and receivables: deterministic (a fixed-seed LCG), in one
//! transaction.

use chrono::{Duration, NaiveDate};

use super::store::{self, CustomerFields};
use crate::{
    db::{Db, now_micros},
    change::Change,
    customers::model::Customer,
    receivables::{
        model::Receivable,
        store::{self as receivables, Payment, ReceivableFields},
    },
    ship_tos::{
        model::ShipTo,
        store::{self as ship_tos, ShipToFields},
    },
};

const CUSTOMERS: usize = 300;

const FIRST: [&str; 16] = [
    "James", "Mary", "Robert", "Patricia", "John", "Jennifer", "Michael", "Linda", "David", "Elizabeth", "William",
    "Barbara", "Richard", "Susan", "Joseph", "Jessica",
];
const LAST: [&str; 16] = [
    "Smith", "Johnson", "Williams", "Brown", "Jones", "Garcia", "Miller", "Davis", "Rodriguez", "Martinez", "Hernandez",
    "Lopez", "Gonzalez", "Wilson", "Anderson", "Thomas",
];
const STREETS: [&str; 8] = ["Oak Street", "Maple Avenue", "Cedar Lane", "Elm Drive", "Pine Road", "Lake Shore Drive", "Hill Street", "Park Avenue"];
const BUSINESSES: [&str; 6] = ["", "", "", "Acme Logistics", "Northside Plumbing", "Bright Florists"];
const TERMS: [&str; 4] = ["", "Net 15", "Net 30", "COD"];

/// Numerical Recipes' 64-bit LCG: the same data on every run.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

fn phone(rng: &mut Lcg) -> String {
    format!("(555) {:03}-{:04}", rng.below(1000), rng.below(10_000))
}

/// A few hundred customers across `shop_ids`, with ship-tos and receivables (paid, partly paid,
/// open and overdue), dated around today.
pub async fn load_demo(db: &Db, company_id: i64, shop_ids: &[i64]) -> anyhow::Result<()> {
    if shop_ids.is_empty() {
        return Ok(());
    }
    let mut rng = Lcg(0x5eed_2024);
    let today = chrono::Utc::now().date_naive();
    let day = |d: NaiveDate| d.format("%Y-%m-%d").to_string();
    let now = now_micros();
    let mut change = Change::begin(db, company_id).await?;
    for n in 0..CUSTOMERS {
        let first = rng.pick(&FIRST);
        let last = rng.pick(&LAST);
        let (city, state, zip) = [("Springfield", "IL", "62701"), ("Riverside", "CA", "92501"), ("Franklin", "TN", "37064")][n % 3];
        let fields = CustomerFields {
            shop_id: shop_ids[n % shop_ids.len()],
            business_name: rng.pick(&BUSINESSES).to_owned(),
            first_name: first.to_owned(),
            last_name: last.to_owned(),
            address: format!("{} {}", 100 + rng.below(9_800), rng.pick(&STREETS)),
            city: city.to_owned(),
            state: state.to_owned(),
            zip: zip.to_owned(),
            home_phone: phone(&mut rng),
            work_phone: if rng.below(3) == 0 { phone(&mut rng) } else { String::new() },
            cell_phone: phone(&mut rng),
            fax: String::new(),
            email: (rng.below(4) != 0).then(|| format!("{}.{}{}@example.com", first.to_lowercase(), last.to_lowercase(), n)),
            comments: String::new(),
            cell_provider: String::new(),
            active: rng.below(20) != 0,
            tax_exempt: rng.below(15) == 0,
            allow_marketing: rng.below(2) == 0,
            credit_limit: (rng.below(3) == 0).then(|| (1 + rng.below(50)) as i64 * 10_000),
            extension: String::new(),
            customer_type: if rng.below(4) == 0 { "Fleet".into() } else { "Retail".into() },
            terms: rng.pick(&TERMS).to_owned(),
            customer_number: format!("C{:05}", n + 1),
        };
        let customer = store::insert(change.tx(), company_id, &fields, now).await?;
        change.record("customer.created", Some(fields.shop_id), &Customer::from(customer.clone()))?;
        for s in 0..rng.below(3) {
            let ship_to = ShipToFields {
                number: format!("{}", s + 1),
                name: format!("{} {} site {}", first, last, s + 1),
                address: format!("{} {}", 10 + rng.below(990), rng.pick(&STREETS)),
                city: city.to_owned(),
                state: state.to_owned(),
                zip: zip.to_owned(),
                email: None,
                work_phone: phone(&mut rng),
                fax: String::new(),
                home_phone: String::new(),
                cell_phone: String::new(),
            };
            let row = ship_tos::insert(change.tx(), company_id, customer.id, &ship_to, now).await?;
            change.record("ship_to.created", Some(fields.shop_id), &ShipTo::from(row))?;
        }
        for a in 0..rng.below(4) {
            let date = today - Duration::days(5 + rng.below(120) as i64);
            let amount = (2_000 + rng.below(150_000)) as i64;
            let entry = ReceivableFields {
                shop_id: fields.shop_id,
                reference: format!("INV-{:05}-{}", n + 1, a + 1),
                repair_order_id: Some(10_000 + (n * 4 + a) as i64),
                date: day(date),
                due_date: day(date + Duration::days(30)),
                actual_date: day(date),
                amount,
            };
            let row = receivables::insert(change.tx(), company_id, customer.id, &entry, now).await?;
            change.record("receivable.created", Some(fields.shop_id), &Receivable::from(row.clone()))?;
            // About a third paid in full, a third partly paid, the rest open (overdue when the
            // due date has passed).
            let paid = match rng.below(3) {
                0 => amount,
                1 => amount / 2,
                _ => 0,
            };
            if paid > 0 {
                let paid_on = day(date + Duration::days(rng.below(30) as i64));
                if let Payment::Applied(row) = receivables::pay(change.tx(), company_id, customer.id, row.id, paid, &paid_on, now).await? {
                    change.record("payment.created", Some(fields.shop_id), &Receivable::from(row))?;
                }
            }
        }
    }
    change.commit().await?;
    Ok(())
}
