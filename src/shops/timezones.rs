//! `GET /api/v1/settings/timezones`: the zone names a shop's `timezone` accepts. The document
//! types `timezone` as a string (an enum of ~600 names breaks client generators, several names
//! differing only in `+`/`-`/`0`), so the valid names are published here instead.

use axum::Json;

use crate::{auth::Caller, listing::DataList};

/// Every IANA time zone name the server accepts (canonical names and their aliases), sorted.
pub fn names() -> impl Iterator<Item = &'static str> {
    chrono_tz::TZ_VARIANTS.iter().map(|tz| tz.name())
}

/// The time zone names a shop's `timezone` accepts (IANA names, aliases included), sorted.
#[utoipa::path(get, path = "/api/v1/settings/timezones", tag = "settings",
    responses((status = 200, body = DataList<String>, description = "Every accepted name, sorted")))]
pub async fn list_timezones(_caller: Caller) -> Json<DataList<&'static str>> {
    Json(DataList { data: names().collect() })
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_listed_name_is_accepted_and_the_list_is_sorted() {
        let names: Vec<&str> = super::names().collect();
        assert!(names.len() > 500 && names.contains(&"America/Chicago") && names.contains(&"UTC"));
        assert!(names.windows(2).all(|w| w[0] < w[1]), "sorted");
        assert!(names.iter().all(|n| crate::time::parse_timezone(n).is_some()));
    }
}
