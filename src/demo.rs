//! `serve --demo`: a realistic demo company for a first look at the API.

use crate::{
    api_keys::{self, store as keys},
    bays::{
        model::Bay,
        store::{self as bays, BayFields},
    },
    change::Change,
    db::Db,
    shop_hours,
    shops::{self, model::ShopFields},
};

pub struct Demo {
    pub company_id: i64,
    pub api_key: String,
}

fn shop(name: &str, city: &str, state: &str, zip: &str, timezone: &str) -> ShopFields {
    let slug = name.to_lowercase().replace(' ', "-");
    ShopFields {
        name: name.into(),
        address: "100 Main Street".into(),
        city: city.into(),
        state: state.into(),
        zip: zip.into(),
        phone: "(555) 010-2030".into(),
        email: format!("service@{slug}.example.com"),
        website: format!("https://{slug}.example.com"),
        timezone: timezone.into(),
    }
}

/// Loads the demo company when the database has no company yet; `None` otherwise.
pub async fn load_if_empty(db: &Db) -> anyhow::Result<Option<Demo>> {
    if keys::company_count(db).await? > 0 {
        return Ok(None);
    }
    let (company_id, api_key) = api_keys::create_company(db, "Demo Auto Group").await?;
    let shops = [
        shop("Downtown Auto Care", "Chicago", "IL", "60601", "America/Chicago"),
        shop("Westside Service Center", "Los Angeles", "CA", "90025", "America/Los_Angeles"),
        shop("Harbour Motors", "Sydney", "NSW", "2000", "Australia/Sydney"),
    ];
    let mut shop_ids = Vec::new();
    // Like any other change, the demo data records its events.
    let mut change = Change::begin(db, company_id).await?;
    for (n, fields) in shops.iter().enumerate() {
        let shop = shops::create(&mut change, fields).await?;
        shop_ids.push(shop.id);
        for (order, title) in ["Bay 1", "Bay 2", "Bay 3", "Alignment", "Express Lube"].iter().enumerate().take(3 + n) {
            let bay = BayFields { shop_id: shop.id, title: (*title).into(), order: order as i64, active: true };
            let row = bays::insert(change.tx(), company_id, &bay).await?;
            change.record("bay.created", Some(shop.id), &Bay::from(row))?;
        }
        // Monday to Friday 8:00-17:00 (Wednesday with a lunch break), Saturday morning.
        let mut week = Vec::new();
        for day in 1..=5 {
            if day == 3 {
                week.push((day, 8 * 60, 12 * 60));
                week.push((day, 13 * 60, 17 * 60));
            } else {
                week.push((day, 8 * 60, 17 * 60));
            }
        }
        week.push((6, 9 * 60, 13 * 60));
        shop_hours::replace_week(&mut change, &shop, &week).await?;
    }
    change.commit().await?;
    crate::customers::demo::load_demo(db, company_id, &shop_ids).await?;
    crate::appointments::load_demo(db, company_id).await?;
    Ok(Some(Demo { company_id, api_key }))
}
