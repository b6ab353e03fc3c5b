//! Benchmark data: a realistic company (shops with bays and hours, customers with ship-tos and
//! receivables, appointments over two years) written with big multi-row INSERTs in big
//! transactions, through autoshop's own store functions so every shadow column (lower-cased
//! keys, phone digits, shop-local date and time, micros instants) is what the API would write.
//!
//! ```text
//! cargo run --release --example bench_seed -- seed --database-url sqlite://bench/data/x.db \
//!     --appointments 1000000 --customers 200000 --shops 50
//! cargo run --release --example bench_seed -- pgbench --database-url postgres://... --company-id 1 --case range
//! ```
//!
//! `seed` prints one JSON line: the company, its admin key and what the load scripts need.
//! `pgbench` prints a pgbench script with the page and count statements the app issues for a
//! list case (`default` or `range`), taken from the app's own statement builder.

use std::time::{Duration, Instant};

use anyhow::Context;
use autoshop::{
    api_keys::create_company,
    appointments::{
        filters::ListFilters,
        store::{AppointmentFields, insert_many_query, list_statements},
        timing::MICROS_PER_HOUR,
    },
    bays::store::{self as bays, BayFields},
    customers::store::{self as customers, CustomerFields, CustomerRow},
    db::{Arg, Db, DbConfig, Query, now_micros},
    extract::QueryParams,
    listing::{ListQuery, ListSpec},
    db::ShopFilter,
    change::Change,
    shop_hours,
    shops::{self, model::ShopFields},
    sources::model::APPOINTMENT_SOURCES,
    time::local_to_utc,
};
use chrono::{Days, NaiveTime, Utc};
use clap::{Parser, Subcommand};

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Create a company with its data in an empty (or any) database.
    Seed {
        #[arg(long)]
        database_url: String,
        #[arg(long, default_value_t = 1_000_000)]
        appointments: usize,
        #[arg(long, default_value_t = 200_000)]
        customers: usize,
        #[arg(long, default_value_t = 50)]
        shops: usize,
        /// Days of history before today (appointments also run 60 days ahead).
        #[arg(long, default_value_t = 730)]
        history_days: u64,
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
    /// Print a pgbench script with the statements of one list request.
    Pgbench {
        #[arg(long)]
        database_url: String,
        #[arg(long)]
        company_id: i64,
        /// `default` (first page, default order) or `range` (one shop, a week, sort=-date).
        #[arg(long)]
        case: String,
        /// For `range`: first shop id and number of shops, first day (YYYY-MM-DD) and days.
        #[arg(long, default_value_t = 1)]
        first_shop: i64,
        #[arg(long, default_value_t = 1)]
        shop_count: i64,
        #[arg(long, default_value = "2024-01-01")]
        first_day: String,
        #[arg(long, default_value_t = 1)]
        days: i64,
    },
    /// The outbox's cost: appointment inserts with and without their event (and the webhook
    /// fan-out check), in alternating rounds on one database, printed as a ratio.
    Outbox {
        #[arg(long)]
        database_url: String,
        #[arg(long, default_value_t = 16)]
        concurrency: usize,
        #[arg(long, default_value_t = 5)]
        seconds: u64,
        #[arg(long, default_value_t = 3)]
        rounds: usize,
    },
}

/// SplitMix64: fast, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

const ZONES: [&str; 10] = [
    "America/New_York", "America/Chicago", "America/Denver", "America/Los_Angeles", "America/Phoenix",
    "America/New_York", "America/Chicago", "America/Toronto", "Pacific/Honolulu", "Australia/Sydney",
];
const CITIES: [(&str, &str, &str); 10] = [
    ("Boston", "MA", "02108"), ("Chicago", "IL", "60601"), ("Denver", "CO", "80202"), ("Los Angeles", "CA", "90025"),
    ("Phoenix", "AZ", "85004"), ("Atlanta", "GA", "30303"), ("Dallas", "TX", "75201"), ("Toronto", "ON", "M5H 2N2"),
    ("Honolulu", "HI", "96813"), ("Sydney", "NSW", "2000"),
];
const FIRST: [&str; 60] = [
    "James", "Mary", "Robert", "Patricia", "John", "Jennifer", "Michael", "Linda", "David", "Elizabeth", "William",
    "Barbara", "Richard", "Susan", "Joseph", "Jessica", "Thomas", "Sarah", "Charles", "Karen", "Christopher", "Lisa",
    "Daniel", "Nancy", "Matthew", "Betty", "Anthony", "Margaret", "Mark", "Sandra", "Donald", "Ashley", "Steven",
    "Kimberly", "Paul", "Emily", "Andrew", "Donna", "Joshua", "Michelle", "Kenneth", "Carol", "Kevin", "Amanda",
    "Brian", "Melissa", "George", "Deborah", "Timothy", "Stephanie", "Ronald", "Rebecca", "Jason", "Sharon", "Chloé",
    "José", "Hiro", "Ines", "Farid", "Dev",
];
const LAST: [&str; 100] = [
    "Smith", "Johnson", "Williams", "Brown", "Jones", "Garcia", "Miller", "Davis", "Rodriguez", "Martinez", "Hernandez",
    "Lopez", "Gonzalez", "Wilson", "Anderson", "Thomas", "Taylor", "Moore", "Jackson", "Martin", "Lee", "Perez",
    "Thompson", "White", "Harris", "Sanchez", "Clark", "Ramirez", "Lewis", "Robinson", "Walker", "Young", "Allen",
    "King", "Wright", "Scott", "Torres", "Nguyen", "Hill", "Flores", "Green", "Adams", "Nelson", "Baker", "Hall",
    "Rivera", "Campbell", "Mitchell", "Carter", "Roberts", "Gomez", "Phillips", "Evans", "Turner", "Diaz", "Parker",
    "Cruz", "Edwards", "Collins", "Reyes", "Stewart", "Morris", "Morales", "Murphy", "Cook", "Rogers", "Gutierrez",
    "Ortiz", "Morgan", "Cooper", "Peterson", "Bailey", "Reed", "Kelly", "Howard", "Ramos", "Kim", "Cox", "Ward",
    "Richardson", "Watson", "Brooks", "Chavez", "Wood", "James", "Bennett", "Gray", "Mendoza", "Ruiz", "Hughes",
    "Price", "Alvarez", "Castillo", "Sanders", "Patel", "Myers", "Long", "Ross", "Foster", "Müller",
];
const STREETS: [&str; 24] = [
    "Oak", "Maple", "Cedar", "Elm", "Pine", "Lake Shore", "Hill", "Park", "Washington", "Lincoln", "Jefferson",
    "Madison", "Franklin", "Highland", "Sunset", "Ridge", "River", "Meadow", "Spring", "Church", "Mill", "Walnut",
    "Chestnut", "Willow",
];
const SUFFIXES: [&str; 6] = ["Street", "Avenue", "Road", "Drive", "Lane", "Boulevard"];
const BUSINESSES: [&str; 8] = ["Acme Logistics", "Northside Plumbing", "Bright Florists", "City Cabs", "Green Lawn Care", "Metro Couriers", "Sunrise Bakery", "Apex Electric"];
const VEHICLES: [(&str, &str); 16] = [
    ("Toyota", "Camry"), ("Honda", "Civic"), ("Ford", "F-150"), ("Chevrolet", "Silverado"), ("Subaru", "Outback"),
    ("Tesla", "Model 3"), ("BMW", "330i"), ("Hyundai", "Elantra"), ("Nissan", "Rogue"), ("Jeep", "Wrangler"),
    ("Toyota", "RAV4"), ("Honda", "Accord"), ("Ford", "Explorer"), ("Kia", "Sorento"), ("Mazda", "CX-5"), ("Ram", "1500"),
];
const REASONS: [&str; 12] = [
    "Oil change", "Brake noise", "Tire rotation", "Check engine light", "A/C not cooling", "State inspection",
    "Battery replacement", "Alignment", "Transmission service", "Coolant flush", "Wiper blades", "Pre-purchase inspection",
];
const TERMS: [&str; 4] = ["", "Net 15", "Net 30", "COD"];
const HOURS: [f64; 6] = [0.5, 1.0, 1.0, 1.5, 2.0, 3.0];
const BAYS: [&str; 6] = ["Bay 1", "Bay 2", "Bay 3", "Bay 4", "Alignment", "Express Lube"];

fn phone(rng: &mut Rng) -> String {
    format!("({:03}) {:03}-{:04}", 200 + rng.below(800), 200 + rng.below(800), rng.below(10_000))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Cmd::Seed { database_url, appointments, customers, shops, history_days, seed } => {
            let db = open(&database_url).await?;
            let out = seed_company(&db, appointments, customers, shops.max(1), history_days, seed).await?;
            println!("{out}");
            db.close().await;
        }
        Cmd::Outbox { database_url, concurrency, seconds, rounds } => {
            let db = Db::connect(&DbConfig { url: database_url, max_connections: concurrency as u32 + 2 }).await?;
            db.migrate().await.context("migrating")?;
            outbox_cost(&db, concurrency, Duration::from_secs(seconds), rounds).await?;
            db.close().await;
        }
        Cmd::Pgbench { database_url, company_id, case, first_shop, shop_count, first_day, days } => {
            let db = open(&database_url).await?;
            print!("{}", pgbench_script(&db, company_id, &case, first_shop, shop_count, &first_day, days).await?);
            db.close().await;
        }
    }
    Ok(())
}

async fn open(url: &str) -> anyhow::Result<Db> {
    let db = Db::connect(&DbConfig { url: url.to_owned(), max_connections: 2 }).await?;
    db.migrate().await.context("migrating")?;
    Ok(db)
}

/// Rows per multi-row INSERT. PostgreSQL: 1,000 (30,000 placeholders of its 65,535). SQLite
/// finds a `$N` placeholder by a linear search of the statement's names, so binding costs grow
/// with the square of the placeholders: 20 rows per statement is fastest there.
fn chunk(db: &Db) -> usize {
    if db.backend() == "sqlite" { 20 } else { 1000 }
}
/// Rows per transaction.
const TX_ROWS: usize = 100_000;

async fn seed_company(
    db: &Db,
    appointment_count: usize,
    customer_count: usize,
    shop_count: usize,
    history_days: u64,
    seed: u64,
) -> anyhow::Result<serde_json::Value> {
    let started = Instant::now();
    let mut rng = Rng(seed);
    let (company_id, api_key) = create_company(db, "Bench Auto Group").await?;

    // Shops (through the API's own create: default sources come with them), bays, hours, with
    // their events; the bulk rows below go in without events (the feed is not benchmarked).
    let mut change = Change::begin(db, company_id).await?;
    let mut shop_rows = Vec::with_capacity(shop_count);
    let mut shop_bays: Vec<Vec<i64>> = Vec::with_capacity(shop_count);
    for n in 0..shop_count {
        let (city, state, zip) = CITIES[n % CITIES.len()];
        let name = format!("{city} Auto Care #{}", n + 1);
        let slug = format!("shop{}", n + 1);
        let fields = ShopFields {
            name,
            address: format!("{} Main Street", 100 + n),
            city: city.into(),
            state: state.into(),
            zip: zip.into(),
            phone: phone(&mut rng),
            email: format!("service@{slug}.example.com"),
            website: format!("https://{slug}.example.com"),
            timezone: ZONES[n % ZONES.len()].into(),
        };
        let shop = shops::create(&mut change, &fields).await.map_err(|e| anyhow::anyhow!("creating a shop: {e}"))?;
        let mut ids = Vec::new();
        // The first shop is the big one: 20 bays (the availability figure searches it).
        let titles: Vec<String> = match n {
            0 => BAYS.iter().map(|t| t.to_string()).chain((5..=18).map(|i| format!("Bay {i}"))).collect(),
            _ => BAYS.iter().take(3 + n % 4).map(|t| t.to_string()).collect(),
        };
        for (order, title) in titles.iter().enumerate() {
            let bay = bays::insert(change.tx(), company_id, &BayFields { shop_id: shop.id, title: title.clone(), order: order as i64, active: true }).await?;
            ids.push(bay.id);
        }
        let week: Vec<_> = (1..=5).map(|d| (d, 7 * 60 + 30, 18 * 60)).chain([(6, 8 * 60, 14 * 60)]).collect();
        shop_hours::replace_week(&mut change, &shop, &week).await.map_err(|e| anyhow::anyhow!("storing hours: {e}"))?;
        shop_rows.push(shop);
        shop_bays.push(ids);
    }
    change.commit().await?;
    let shop_ids: Vec<i64> = shop_rows.iter().map(|s| s.id).collect();
    let now = now_micros();
    let chunk = chunk(db);
    let today = Utc::now().date_naive();

    // Customers, a thousand per statement; the returned rows give their ids.
    let mut people: Vec<Vec<CustomerRow>> = vec![Vec::new(); shop_count];
    let mut all_ids: Vec<i64> = Vec::with_capacity(customer_count);
    let mut made = 0;
    while made < customer_count {
        let mut tx = db.begin().await?;
        let tx_end = (made + TX_ROWS).min(customer_count);
        while made < tx_end {
            let n = (tx_end - made).min(chunk);
            let rows: Vec<CustomerFields> = (made..made + n).map(|i| customer(&mut rng, i, &shop_ids)).collect();
            let q = customers::insert_many_query(company_id, &rows, now);
            for row in tx.fetch_all::<CustomerRow>(&q).await? {
                all_ids.push(row.id);
                let shop = shop_ids.iter().position(|s| *s == row.fields.shop_id).unwrap_or(0);
                people[shop].push(row);
            }
            made += n;
        }
        tx.commit().await?;
    }
    eprintln!("seed: {customer_count} customers in {:.1}s", started.elapsed().as_secs_f64());

    // Ship-tos and receivables with payments, for about half of the customers.
    let mut customer_rows: Vec<&CustomerRow> = people.iter().flatten().collect();
    customer_rows.sort_by_key(|c| c.id);
    let mut tx = db.begin().await?;
    let mut ship_tos = Vec::new();
    let mut entries = Vec::new();
    let mut written = 0;
    for c in &customer_rows {
        for s in 0..[0, 0, 1, 1, 2][rng.below(5)] {
            ship_tos.push((c.id, s + 1, format!("{} {} site {}", c.fields.first_name, c.fields.last_name, s + 1), format!("{} {} {}", 10 + rng.below(990), rng.pick(&STREETS), rng.pick(&SUFFIXES)), c.fields.city.clone(), c.fields.state.clone(), c.fields.zip.clone(), phone(&mut rng)));
        }
        for a in 0..[0, 0, 1, 2, 3][rng.below(5)] {
            let date = today - Days::new(5 + rng.below(400) as u64);
            let amount = (2_000 + rng.below(250_000)) as i64;
            let paid = match rng.below(3) {
                0 => amount,
                1 => amount / 2,
                _ => 0,
            };
            let paid_on = (paid > 0).then(|| (date + Days::new(rng.below(30) as u64)).format("%Y-%m-%d").to_string());
            entries.push((c.id, c.fields.shop_id, format!("INV-{}-{}", c.id, a + 1), date.format("%Y-%m-%d").to_string(), (date + Days::new(30)).format("%Y-%m-%d").to_string(), amount, paid, paid_on));
        }
        if ship_tos.len() >= chunk {
            written += insert_ship_tos(&mut tx, company_id, &mut ship_tos, now).await?;
        }
        if entries.len() >= chunk {
            written += insert_receivables(&mut tx, company_id, &mut entries, now).await?;
        }
    }
    written += insert_ship_tos(&mut tx, company_id, &mut ship_tos, now).await?;
    written += insert_receivables(&mut tx, company_id, &mut entries, now).await?;
    tx.commit().await?;
    eprintln!("seed: {written} ship-tos, receivables and payments in {:.1}s", started.elapsed().as_secs_f64());

    // Appointments, in creation order (ids grow with time, as in a real shop): from
    // `history_days` ago to 60 days ahead, 40% for a known customer of the shop.
    let span = history_days + 60;
    let first_day = today - Days::new(history_days);
    let mut made = 0;
    while made < appointment_count {
        let mut tx = db.begin().await?;
        let tx_end = (made + TX_ROWS).min(appointment_count);
        while made < tx_end {
            let n = (tx_end - made).min(chunk);
            let mut rows = Vec::with_capacity(n);
            for i in made..made + n {
                let s = rng.below(shop_count);
                let shop = &shop_rows[s];
                let tz = shop.tz();
                let day = first_day + Days::new((i as u64 * span) / appointment_count.max(1) as u64);
                let time = NaiveTime::from_hms_opt(7 + rng.below(11) as u32, [0, 15, 30, 45][rng.below(4)], 0).unwrap_or_default();
                let start_at = local_to_utc(tz, day.and_time(time)).timestamp_micros();
                let hours = HOURS[rng.below(HOURS.len())];
                let known = (!people[s].is_empty() && rng.chance(40)).then(|| &people[s][rng.below(people[s].len())]);
                let (first_name, last_name, email) = match known {
                    Some(c) => (c.fields.first_name.clone(), c.fields.last_name.clone(), c.fields.email.clone()),
                    None => {
                        let (f, l) = (rng.pick(&FIRST), rng.pick(&LAST));
                        let email = rng.chance(60).then(|| format!("{}.{}{}@example.com", f.to_lowercase(), l.to_lowercase(), rng.below(1000)));
                        (f.to_owned(), l.to_owned(), email)
                    }
                };
                let (make, model) = VEHICLES[rng.below(VEHICLES.len())];
                let past = start_at < now;
                let bays = &shop_bays[s];
                let mut fields = AppointmentFields {
                    shop_id: shop.id,
                    customer_id: known.map(|c| c.id),
                    vehicle_id: rng.chance(30).then(|| 1 + rng.below(500_000) as i64),
                    repair_order_id: (past && rng.chance(50)).then(|| 1 + i as i64),
                    employee_id: rng.chance(20).then(|| 1 + rng.below(200) as i64),
                    first_name,
                    last_name,
                    email,
                    year: (2005 + rng.below(21)).to_string(),
                    make: make.into(),
                    model: model.into(),
                    reason: rng.chance(90).then(|| REASONS[rng.below(REASONS.len())].into()),
                    home_phone: if rng.chance(30) { phone(&mut rng) } else { String::new() },
                    work_phone: String::new(),
                    cell_phone: phone(&mut rng),
                    bay_id: (!bays.is_empty() && rng.chance(85)).then(|| bays[rng.below(bays.len())]),
                    hours,
                    done: past && rng.chance(90),
                    source: APPOINTMENT_SOURCES[rng.below(APPOINTMENT_SOURCES.len())].into(),
                    status: (past && rng.chance(50)).then(|| "Closed".to_owned()),
                    start_at,
                    end_at: start_at + (hours * MICROS_PER_HOUR) as i64,
                    local_date: String::new(),
                    local_time: String::new(),
                };
                fields.localize(tz);
                // Booked up to two weeks ahead, never in the future.
                let booked = (start_at - rng.below(14 * 24) as i64 * 3_600_000_000 - rng.below(3_600) as i64 * 1_000_000).min(now);
                rows.push((fields, booked));
            }
            tx.execute(&insert_many_query(company_id, &rows)).await?;
            made += n;
        }
        tx.commit().await?;
        eprintln!("seed: {made} appointments in {:.1}s", started.elapsed().as_secs_f64());
    }

    // PostgreSQL: what autovacuum would have done by now on a database that grew over years
    // (statistics, visibility map for index-only scans). SQLite: nothing (the app never runs
    // ANALYZE), so the planner sees what it sees in production.
    if db.backend() == "postgres" {
        db.execute(&Query::new("VACUUM ANALYZE")).await?;
    }
    eprintln!("seed: done in {:.1}s", started.elapsed().as_secs_f64());
    all_ids.sort_unstable();
    Ok(serde_json::json!({
        "company_id": company_id,
        "api_key": api_key,
        "first_shop": shop_ids.first(),
        "shop_count": shop_ids.len(),
        "first_customer": all_ids.first(),
        "last_customer": all_ids.last(),
        "first_day": first_day.format("%Y-%m-%d").to_string(),
        "days": span,
        "appointments": appointment_count,
        "customers": customer_count,
    }))
}

fn customer(rng: &mut Rng, i: usize, shop_ids: &[i64]) -> CustomerFields {
    let first = rng.pick(&FIRST);
    let last = rng.pick(&LAST);
    let (city, state, zip) = CITIES[rng.below(CITIES.len())];
    let business = rng.chance(12);
    CustomerFields {
        shop_id: shop_ids[rng.below(shop_ids.len())],
        business_name: if business { rng.pick(&BUSINESSES).to_owned() } else { String::new() },
        first_name: first.to_owned(),
        last_name: last.to_owned(),
        address: format!("{} {} {}", 1 + rng.below(9_999), rng.pick(&STREETS), rng.pick(&SUFFIXES)),
        city: city.to_owned(),
        state: state.to_owned(),
        zip: zip.to_owned(),
        home_phone: if rng.chance(50) { phone(rng) } else { String::new() },
        work_phone: if rng.chance(25) { phone(rng) } else { String::new() },
        cell_phone: if rng.chance(90) { phone(rng) } else { String::new() },
        fax: if business && rng.chance(30) { phone(rng) } else { String::new() },
        email: rng.chance(75).then(|| format!("{}.{}{}@example.com", first.to_lowercase(), last.to_lowercase(), i)),
        comments: if rng.chance(10) { "Prefers morning appointments.".into() } else { String::new() },
        cell_provider: String::new(),
        active: !rng.chance(5),
        tax_exempt: rng.chance(5),
        allow_marketing: rng.chance(50),
        credit_limit: rng.chance(30).then(|| (1 + rng.below(50)) as i64 * 10_000),
        extension: String::new(),
        customer_type: if business { "Fleet".into() } else { "Retail".into() },
        terms: rng.pick(&TERMS).to_owned(),
        // Most customers have a number (unique in the company).
        customer_number: if rng.chance(80) { format!("C{:07}", i + 1) } else { String::new() },
    }
}

type ShipTo = (i64, usize, String, String, String, String, String, String);

/// Ship-tos as the API writes them (`name_key` is the lower-cased name).
async fn insert_ship_tos(tx: &mut autoshop::db::Tx, company_id: i64, rows: &mut Vec<ShipTo>, now: i64) -> anyhow::Result<usize> {
    if rows.is_empty() {
        return Ok(0);
    }
    let mut q = Query::new(
        "INSERT INTO ship_tos (company_id, customer_id, created_at, updated_at, number, name, name_key, address, city, \
         state, zip, email, work_phone, fax, home_phone, cell_phone) VALUES ",
    )
    .bind(company_id)
    .bind(now);
    for (i, (customer_id, number, name, address, city, state, zip, work_phone)) in rows.iter().enumerate() {
        q.push(if i == 0 { "($1, " } else { ", ($1, " }).push_bind(*customer_id).push(", $2, $2, ");
        q.push_bind(number.to_string()).push(", ").push_bind(name.as_str()).push(", ").push_bind(autoshop::db::fold_case(&name));
        for v in [address, city, state, zip] {
            q.push(", ").push_bind(v.as_str());
        }
        q.push(", NULL, ").push_bind(work_phone.as_str()).push(", '', '', '')");
    }
    tx.execute(&q).await?;
    let n = rows.len();
    rows.clear();
    Ok(n)
}

type Entry = (i64, i64, String, String, String, i64, i64, Option<String>);

/// Receivables and their payments as a payment leaves them: `balance` lowered, `payment_date`
/// set, one `account_payments` row.
async fn insert_receivables(tx: &mut autoshop::db::Tx, company_id: i64, rows: &mut Vec<Entry>, now: i64) -> anyhow::Result<usize> {
    if rows.is_empty() {
        return Ok(0);
    }
    let mut q = Query::new(
        "INSERT INTO accounts_receivable (company_id, customer_id, shop_id, reference, repair_order_id, date, due_date, \
         actual_date, amount, balance, payment_date, created_at, updated_at) VALUES ",
    )
    .bind(company_id)
    .bind(now);
    for (i, (customer_id, shop_id, reference, date, due, amount, paid, paid_on)) in rows.iter().enumerate() {
        q.push(if i == 0 { "($1, " } else { ", ($1, " }).push_bind(*customer_id).push(", ").push_bind(*shop_id);
        q.push(", ").push_bind(reference.as_str()).push(", NULL, ").push_bind(date.as_str()).push(", ").push_bind(due.as_str());
        q.push(", ").push_bind(date.as_str()).push(", ").push_bind(*amount).push(", ").push_bind(amount - paid);
        q.push(", ").push_bind(paid_on.clone()).push(", $2, $2)");
    }
    q.push(" RETURNING id, customer_id, amount, balance, payment_date");
    let created: Vec<(i64, i64, i64, i64, Option<String>)> = tx.fetch_all(&q).await?;
    let paid: Vec<_> = created.into_iter().filter(|r| r.3 < r.2).collect();
    let mut n = rows.len();
    if !paid.is_empty() {
        let mut q = Query::new("INSERT INTO account_payments (company_id, customer_id, accounts_receivable_id, amount, date, created_at) VALUES ")
            .bind(company_id)
            .bind(now);
        for (i, (id, customer_id, amount, balance, date)) in paid.iter().enumerate() {
            q.push(if i == 0 { "($1, " } else { ", ($1, " }).push_bind(*customer_id).push(", ").push_bind(*id);
            q.push(", ").push_bind(amount - balance).push(", ").push_bind(date.clone()).push(", $2)");
        }
        tx.execute(&q).await?;
        n += paid.len();
    }
    rows.clear();
    Ok(n)
}

/// The statements of one list request, from the app's own builder, as a pgbench script: every
/// placeholder becomes a pgbench variable, so `-M prepared` runs them as the app's prepared
/// statements do. In the `range` case the shop and the week vary like the wrk script's.
async fn pgbench_script(
    db: &Db,
    company_id: i64,
    case: &str,
    first_shop: i64,
    shop_count: i64,
    first_day: &str,
    days: i64,
) -> anyhow::Result<String> {
    let spec = ListSpec { sorts: &[("date", "start_at")], filters: &autoshop::appointments::filters::FILTERS };
    let (query, vary) = match case {
        "default" => (String::new(), false),
        "range" => (
            format!("filter[shop_id]={first_shop}&start_date={first_day}&end_date={first_day}&filter_by=appointment_start&sort=-date"),
            true,
        ),
        other => anyhow::bail!("unknown case {other}: default or range"),
    };
    let params = QueryParams::parse(&query);
    let list = ListQuery::parse(&params, &spec).map_err(|e| anyhow::anyhow!("{e}"))?;
    let (mut filters, range) = ListFilters::parse(&params, &list).map_err(|e| anyhow::anyhow!("{e}"))?;
    let shops = if vary { ShopFilter::Only(vec![first_shop]) } else { ShopFilter::All };
    if let Some(range) = range {
        filters.resolve_range(db, company_id, &shops, None, range).await?;
    }
    let (page, count) = list_statements(company_id, &shops, &filters, &list.request);
    // The sample request's bounds: the first day's start and end in the first shop's zone.
    let (lo, hi) = filters
        .range
        .as_ref()
        .and_then(|r| r.zones.first())
        .map(|z| (z.1.unwrap_or_default(), z.2.unwrap_or_default()))
        .unwrap_or_default();
    let mut out = String::new();
    if vary {
        // A random shop and a random 7-day window, as bench/wrk/autoshop.lua asks for.
        out.push_str(&format!("\\set shop random({first_shop}, {})\n", first_shop + shop_count - 1));
        out.push_str(&format!("\\set day random(0, {})\n", (days - 7).max(0)));
        out.push_str(&format!("\\set lo {lo} + :day * 86400000000\n"));
        out.push_str(&format!("\\set hi {hi} + (:day + 6) * 86400000000\n"));
    }
    for q in [&page, &count] {
        // `$1` is the company (whose id may equal the first shop's: both are 1 on a fresh
        // database), never a shop.
        out.push_str(&render(q, |i, arg| match arg {
            Arg::I64(Some(v)) if vary && i > 0 && *v == first_shop && shop_count > 0 => Some(":shop".into()),
            Arg::I64(Some(v)) if vary && *v == lo => Some(":lo".into()),
            Arg::I64(Some(v)) if vary && *v == hi => Some(":hi".into()),
            _ => None,
        })?);
        out.push_str(";\n");
    }
    Ok(out)
}

/// A statement with its `$n` placeholders replaced by pgbench variables (`:an`, set from the
/// bound value) or by what `special` says.
fn render(q: &Query, special: impl Fn(usize, &Arg) -> Option<String>) -> anyhow::Result<String> {
    let mut sets = String::new();
    let mut sql = q.sql().to_owned();
    // Highest numbers first, so `$1` does not eat the start of `$10`.
    for (i, arg) in q.args().iter().enumerate().rev() {
        let var = match special(i, arg) {
            Some(v) => v,
            None => {
                let Arg::I64(Some(v)) = arg else { anyhow::bail!("pgbench variables are integers; argument {} is {arg:?}", i + 1) };
                sets.push_str(&format!("\\set a{} {v}\n", i + 1));
                format!(":a{}", i + 1)
            }
        };
        sql = sql.replace(&format!("${}", i + 1), &var);
    }
    Ok(format!("{sets}{sql}"))
}

/// Inserts appointments from `concurrency` tasks for `length`, each in its own transaction,
/// with (`with_event`) or without the event and webhook fan-out a real create records.
async fn insert_rate(db: &Db, company_id: i64, shop_id: i64, concurrency: usize, length: Duration, with_event: bool) -> anyhow::Result<f64> {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..concurrency {
        let db = db.clone();
        tasks.push(tokio::spawn(async move {
            let mut done = 0u64;
            while started.elapsed() < length {
                let mut f = bench_fields(shop_id, t as i64 * 1_000_000 + done as i64);
                f.localize(chrono_tz::UTC);
                // As `POST /api/v1/appointments` writes (one hand-off to SQLite's writer; the
                // insert and its event in one statement on PostgreSQL), with the event or not.
                let change = Change::begin(&db, company_id).await?;
                let insert = |id| autoshop::appointments::store::insert_new(company_id, id, &f, autoshop::db::now_micros());
                change
                    .finish_insert("appointments", insert, move |row, outbox| {
                        let row: autoshop::appointments::store::AppointmentRow = row?.ok_or(autoshop::db::DbError::NoRow)?;
                        let appointment = autoshop::appointments::model::Appointment::from(row);
                        if with_event {
                            outbox.record("appointment.created", Some(shop_id), &appointment)?;
                        }
                        // The same serialisation a handler does for its response.
                        std::hint::black_box(serde_json::to_string(&appointment).map_err(|e| autoshop::error::ApiError::Internal(e.to_string()))?);
                        Ok(())
                    })
                    .await?;
                done += 1;
            }
            anyhow::Ok(done)
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await??;
    }
    Ok(total as f64 / started.elapsed().as_secs_f64())
}

fn bench_fields(shop_id: i64, n: i64) -> AppointmentFields {
    let start_at = 1_900_000_000_000_000 + n * 3_600_000_000;
    AppointmentFields {
        shop_id,
        customer_id: None,
        vehicle_id: None,
        repair_order_id: None,
        employee_id: None,
        first_name: "Outbox".into(),
        last_name: format!("Bench{n}"),
        email: None,
        year: "2020".into(),
        make: "Toyota".into(),
        model: "Camry".into(),
        reason: Some("Oil change".into()),
        home_phone: String::new(),
        work_phone: String::new(),
        cell_phone: String::new(),
        bay_id: None,
        hours: 1.0,
        done: false,
        source: "API".into(),
        status: None,
        start_at,
        end_at: start_at + 3_600_000_000,
        local_date: String::new(),
        local_time: String::new(),
    }
}

async fn outbox_cost(db: &Db, concurrency: usize, length: Duration, rounds: usize) -> anyhow::Result<()> {
    let (company_id, _) = create_company(db, "Outbox bench").await?;
    let mut change = Change::begin(db, company_id).await?;
    let fields = ShopFields { name: "Outbox".into(), timezone: "UTC".into(), ..ShopFields::default() };
    let shop = shops::create(&mut change, &fields).await.map_err(|e| anyhow::anyhow!("creating a shop: {e}"))?;
    change.commit().await?;
    let (mut without, mut with) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        without.push(insert_rate(db, company_id, shop.id, concurrency, length, false).await?);
        with.push(insert_rate(db, company_id, shop.id, concurrency, length, true).await?);
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (a, b) = (mean(&without), mean(&with));
    println!(
        "outbox {}: {concurrency} writers, {rounds} x {}s each: without events {a:.0}/s, with events {b:.0}/s, ratio {:.2} ({:+.1}%)",
        db.backend(),
        length.as_secs(),
        b / a,
        (b / a - 1.0) * 100.0
    );
    Ok(())
}
