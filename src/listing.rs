//! The HTTP side of every list endpoint: `page`, `pageSize`, `sort`, `filter[...]` allow-lists,
//! and Laravel's paginator envelope with absolute links. The store side (order, window, total)
//! is [`crate::db::page`].

use axum::{extract::FromRequestParts, http::request::Parts};
use serde::Serialize;
use utoipa::ToSchema;

use crate::{
    db::page::{PageRequest, Sort},
    error::ApiError,
    extract::QueryParams,
    state::AppState,
};

pub const DEFAULT_PAGE_SIZE: i64 = 10;
pub const MAX_PAGE_SIZE: i64 = 100;

/// What one list endpoint accepts.
pub struct ListSpec {
    /// The sortable fields (the feature's store names their columns).
    pub sorts: &'static [Sort],
    /// Allowed `filter[...]` keys.
    pub filters: &'static [&'static str],
}

/// A parsed, validated list request.
#[derive(Debug, Clone)]
pub struct ListQuery {
    pub page: i64,
    pub per_page: i64,
    filters: Vec<(&'static str, String)>,
    /// What the store returns: order and window.
    pub request: PageRequest,
}

impl ListQuery {
    pub fn parse(params: &QueryParams, spec: &ListSpec) -> Result<ListQuery, ApiError> {
        let mut errors = crate::error::FieldErrors::default();
        let page = match params.get("page") {
            None => 1,
            Some(raw) => match crate::extract::parse_integer(raw) {
                Some(p) if p >= 1 => p,
                _ => {
                    errors.add("page", "The page parameter must be an integer of at least 1.");
                    1
                }
            },
        };
        let per_page = match params.get("pageSize") {
            None => DEFAULT_PAGE_SIZE,
            Some(raw) => match crate::extract::parse_integer(raw) {
                Some(n) if (1..=MAX_PAGE_SIZE).contains(&n) => n,
                _ => {
                    errors.add("pageSize", format!("The pageSize parameter must be an integer from 1 to {MAX_PAGE_SIZE}."));
                    DEFAULT_PAGE_SIZE
                }
            },
        };

        let filters = parse_filters(params, spec.filters)?;

        let mut order: Vec<(&'static str, bool)> = Vec::new();
        // `sort=a,-b`: exactly the documented pattern (no blanks, no empty items); an empty value
        // means the default order.
        if let Some(sort) = params.get("sort").filter(|s| !s.is_empty()) {
            for item in sort.split(',') {
                let (name, descending) = match item.strip_prefix('-') {
                    Some(name) => (name, true),
                    None => (item.strip_prefix('+').unwrap_or(item), false),
                };
                let Some((_, column)) = spec.sorts.iter().find(|(field, _)| *field == name) else {
                    return Err(ApiError::BadRequest(format!(
                        "Unknown sort field `{name}`. Sortable fields: {}.",
                        list_or_none(spec.sorts.iter().map(|(f, _)| f.to_string()))
                    )));
                };
                if !order.iter().any(|(c, _)| c == column) {
                    order.push((column, descending));
                }
            }
        }
        errors.into_result()?;
        let request = PageRequest { order, limit: per_page, offset: (page - 1).saturating_mul(per_page) };
        Ok(ListQuery { page, per_page, filters, request })
    }

    /// The raw value of `filter[name]` (`filter[active]=` on bays means something of its own).
    pub fn filter(&self, name: &str) -> Option<&str> {
        self.filters.iter().find(|(f, _)| *f == name).map(|(_, v)| v.as_str())
    }

    /// `filter[name]` trimmed; empty counts as absent (docs/api.md: empty query values).
    pub fn given(&self, name: &str) -> Option<&str> {
        self.filter(name).map(str::trim).filter(|v| !v.is_empty())
    }

    pub fn offset(&self) -> i64 {
        self.request.offset
    }

    pub fn into_page<T>(&self, url: &RequestUrl, data: Vec<T>, total: i64) -> Page<T> {
        let last_page = ((total + self.per_page - 1) / self.per_page).max(1);
        let (from, to) = if data.is_empty() {
            (None, None)
        } else {
            let from = self.offset() + 1;
            (Some(from), Some(from + data.len() as i64 - 1))
        };
        let link = |page: i64| url.with_page(page);
        Page {
            links: PageLinks {
                first: link(1),
                last: link(last_page),
                prev: (self.page > 1).then(|| link(self.page - 1)),
                next: (self.page < last_page).then(|| link(self.page + 1)),
            },
            meta: PageMeta {
                current_page: self.page,
                from,
                last_page,
                path: url.path_url.clone(),
                per_page: self.per_page,
                to,
                total,
            },
            data,
        }
    }
}

/// The `filter[...]` parameters, checked against an allow-list (unknown key: 400). The last
/// occurrence of a key wins, as with every other parameter.
pub fn parse_filters(params: &QueryParams, allowed: &[&'static str]) -> Result<Vec<(&'static str, String)>, ApiError> {
    let mut filters: Vec<(&'static str, String)> = Vec::new();
    for (key, value) in &params.0 {
        let Some(name) = key.strip_prefix("filter[").and_then(|k| k.strip_suffix(']')) else {
            continue;
        };
        let Some(known) = allowed.iter().find(|f| **f == name) else {
            return Err(ApiError::BadRequest(format!(
                "Unknown filter `filter[{name}]`. Allowed filters: {}.",
                list_or_none(allowed.iter().map(|f| format!("filter[{f}]")))
            )));
        };
        filters.retain(|(f, _)| f != known);
        filters.push((*known, value.clone()));
    }
    Ok(filters)
}

/// A non-paginated settings response: `{"data": [...]}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct DataList<T> {
    pub data: Vec<T>,
}

fn list_or_none(items: impl Iterator<Item = String>) -> String {
    let items: Vec<String> = items.collect();
    if items.is_empty() { "none".into() } else { items.join(", ") }
}

/// Laravel's length-aware paginator envelope.
#[derive(Debug, Serialize, ToSchema)]
pub struct Page<T> {
    pub data: Vec<T>,
    pub links: PageLinks,
    pub meta: PageMeta,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PageLinks {
    /// Absolute URL of page 1, keeping the request's other query parameters.
    pub first: String,
    pub last: String,
    /// Null on the first page.
    pub prev: Option<String>,
    /// Null on the last page.
    pub next: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PageMeta {
    pub current_page: i64,
    /// Position of the first item of this page (1-based); null on an empty page.
    pub from: Option<i64>,
    pub last_page: i64,
    /// The list's absolute URL without query string.
    pub path: String,
    pub per_page: i64,
    pub to: Option<i64>,
    pub total: i64,
}

/// What one item of a page usually takes as JSON, to size the response buffer once.
const ITEM_BYTES_HINT: usize = 1024;

impl<T: Serialize> axum::response::IntoResponse for Page<T> {
    fn into_response(self) -> axum::response::Response {
        crate::respond::json_ok(&self, 1024 + self.data.len() * ITEM_BYTES_HINT)
    }
}

/// The absolute URL of the current request, for pagination links.
#[derive(Debug, Clone)]
pub struct RequestUrl {
    pub path_url: String,
    pub params: QueryParams,
}

impl RequestUrl {
    pub fn with_page(&self, page: i64) -> String {
        let mut query = form_urlencoded::Serializer::new(String::new());
        for (k, v) in self.params.0.iter().filter(|(k, _)| k != "page") {
            query.append_pair(k, v);
        }
        query.append_pair("page", &page.to_string());
        format!("{}?{}", self.path_url, query.finish())
    }
}

impl FromRequestParts<AppState> for RequestUrl {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let base = match &state.config.public_url {
            Some(base) => base.clone(),
            None => {
                let host = parts
                    .headers
                    .get(axum::http::header::HOST)
                    .and_then(|h| h.to_str().ok())
                    .unwrap_or("localhost");
                format!("http://{host}")
            }
        };
        Ok(RequestUrl {
            path_url: format!("{base}{}", parts.uri.path()),
            params: QueryParams::from_request_query(parts.uri.query().unwrap_or(""))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: ListSpec = ListSpec { sorts: &[("title", "title_key"), ("order", "sort_order")], filters: &["shop_id", "active"] };

    fn parse(q: &str) -> Result<ListQuery, ApiError> {
        ListQuery::parse(&QueryParams::parse(q), &SPEC)
    }

    #[test]
    fn defaults_are_page_one_of_ten_by_id() {
        let l = parse("").unwrap();
        assert_eq!((l.page, l.per_page, l.offset()), (1, 10, 0));
        assert_eq!(l.request, PageRequest { order: vec![], limit: 10, offset: 0 });
    }

    #[test]
    fn sort_accepts_several_fields_once_each() {
        let l = parse("sort=-order,title,order&page=3&pageSize=5").unwrap();
        assert_eq!(l.request, PageRequest { order: vec![("sort_order", true), ("title_key", false)], limit: 5, offset: 10 });
    }

    #[test]
    fn unknown_sort_and_filter_are_400_naming_the_allowed_ones() {
        let e = parse("sort=nope").unwrap_err().to_string();
        assert!(e.contains("title, order"), "{e}");
        assert!(parse("sort=title,").is_err() && parse("sort=%20title").is_err());
        assert!(parse("sort=").is_ok());
        let e = parse("filter[nope]=1").unwrap_err().to_string();
        assert!(e.contains("filter[shop_id], filter[active]"), "{e}");
    }

    #[test]
    fn page_and_page_size_bounds_are_422_keyed_by_parameter() {
        for bad in ["page=0", "page=x", "pageSize=0", "pageSize=101", "pageSize=1.5"] {
            match parse(bad) {
                Err(ApiError::Validation(errors)) => {
                    let key = bad.split('=').next().unwrap();
                    assert!(errors.has(key), "{bad}");
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn envelope_counts_and_links() {
        let url = RequestUrl { path_url: "http://h/api/v1/bays".into(), params: QueryParams::parse("pageSize=2&page=2&sort=title") };
        let l = parse("pageSize=2&page=2").unwrap();
        let page = l.into_page(&url, vec![1, 2], 5);
        assert_eq!((page.meta.from, page.meta.to, page.meta.last_page), (Some(3), Some(4), 3));
        assert_eq!(page.links.next.as_deref(), Some("http://h/api/v1/bays?pageSize=2&sort=title&page=3"));
        assert_eq!(page.links.prev.as_deref(), Some("http://h/api/v1/bays?pageSize=2&sort=title&page=1"));
        let past = parse("pageSize=2&page=9").unwrap().into_page::<i32>(&url, vec![], 5);
        assert_eq!((past.meta.current_page, past.meta.last_page, past.meta.from), (9, 3, None));
        assert!(past.links.next.is_none());
    }
}
