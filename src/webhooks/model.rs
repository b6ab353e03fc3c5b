//! Webhook wire types and the rules a webhook's settings follow.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{
    ssrf,
    store::{DeliveryRow, WebhookFields, WebhookRow},
};
use crate::{
    auth::{Caller, parse_shop_list},
    error::{ApiError, FieldErrors},
    events::TYPES,
    time::format_micros,
    validate,
};

pub const MAX_EVENT_PATTERNS: usize = 50;
pub const MAX_SHOPS: usize = 100;
const MAX_URL_LEN: usize = 2048;

/// A webhook: where and which events are sent.
#[derive(Debug, Serialize, ToSchema)]
pub struct Webhook {
    pub id: i64,
    /// Where events are `POST`ed (`https://` or `http://`).
    pub url: String,
    /// Event types (`appointment.created`), resource wildcards (`appointment.*`) or `*`.
    pub events: Vec<String>,
    pub description: String,
    /// Only events of these shops; null: every shop's events and company-wide ones (API keys).
    pub shop_ids: Option<Vec<i64>>,
    /// False after a 410 answer, after three days of failed deliveries, or when set so.
    pub enabled: bool,
    pub created_at: String,
    pub updated_at: String,
    /// The signing secret (`whsec_...`): only in the response to the create call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

impl From<WebhookRow> for Webhook {
    fn from(r: WebhookRow) -> Self {
        Webhook {
            id: r.id,
            url: r.url,
            events: serde_json::from_str(&r.events).unwrap_or_default(),
            description: r.description,
            shop_ids: parse_shop_list(r.shop_ids.as_deref()),
            enabled: r.enabled,
            created_at: format_micros(r.created_at),
            updated_at: format_micros(r.updated_at),
            secret: None,
        }
    }
}

/// The body of `POST /api/v1/webhooks` and `PUT /api/v1/webhooks/{id}`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct WebhookInput {
    /// An `https://` (or `http://`) URL with a host name or an IPv4 address, an optional port
    /// and an ASCII path; private and internal addresses are refused unless the server allows
    /// them (`--webhook-allow-private`).
    #[schema(required, schema_with = url_schema)]
    pub url: Option<String>,
    /// 1 to 50 distinct event types (`appointment.created`), resource wildcards
    /// (`appointment.*`) or `*`.
    #[schema(required, nullable = false, schema_with = event_patterns_schema)]
    pub events: Option<Vec<String>>,
    #[schema(max_length = 255)]
    pub description: Option<String>,
    /// Limit to these shops, 1 to 100 (a key limited to shops must give a subset of its own).
    #[schema(min_items = 1, max_items = 100)]
    pub shop_ids: Option<Vec<i64>>,
    /// Default true on create; on update, omitted keeps the current value. Setting it back to
    /// true restarts the failure clock.
    pub enabled: Option<bool>,
}

/// The syntax a webhook `url` must have when it is saved, as the document states it: `http` or
/// `https` (any case), a host name whose labels are letters, digits and single inner hyphens
/// (the last one starting with a letter) or a dotted IPv4 address, an optional port up to 65535,
/// and printable ASCII after the host. [`url_syntax_ok`] is the same rule in code.
pub const URL_PATTERN: &str = concat!(
    r"^[Hh][Tt][Tt][Pp][Ss]?://",
    r"(((25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])",
    r"|([A-Za-z0-9]+(-[A-Za-z0-9]+)*\.)*[A-Za-z][A-Za-z0-9]*(-[A-Za-z0-9]+)*)",
    r"(:(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4}))?",
    r"([/?#][!-~]*)?$",
);

fn url_schema() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    ObjectBuilder::new()
        .schema_type(Type::String)
        .max_length(Some(MAX_URL_LEN))
        .pattern(Some(URL_PATTERN))
        .examples(["https://hooks.example.com/autoshop"])
        .build()
}

/// Whether `raw` matches [`URL_PATTERN`] (checked when a webhook is saved, so the document and
/// the server accept the same URLs; deliveries re-check only the address).
pub fn url_syntax_ok(raw: &str) -> bool {
    let Some((scheme, rest)) = raw.split_once("://") else { return false };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return false;
    }
    let (authority, tail) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
    if !tail.bytes().all(|b| (b'!'..=b'~').contains(&b)) {
        return false;
    }
    let (host, port) = match authority.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    };
    let port_ok = port.is_none_or(|p| {
        (1..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()) && !(p.len() == 5 && p.starts_with('0')) && p.parse::<u32>().is_ok_and(|n| n <= 65535)
    });
    port_ok && (is_dotted_ipv4(host) || is_host_name(host))
}

fn is_dotted_ipv4(host: &str) -> bool {
    let parts: Vec<&str> = host.split('.').collect();
    parts.len() == 4
        && parts.iter().all(|p| {
            (1..=3).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()) && !(p.len() > 1 && p.starts_with('0')) && p.parse::<u16>().is_ok_and(|n| n <= 255)
        })
}

fn is_host_name(host: &str) -> bool {
    let label_ok = |l: &str| !l.is_empty() && l.split('-').all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_alphanumeric()));
    let labels: Vec<&str> = host.split('.').collect();
    labels.iter().all(|l| label_ok(l)) && labels.last().is_some_and(|l| l.as_bytes()[0].is_ascii_alphabetic())
}

/// `events` of a webhook body: distinct selectors among the event types, their resource
/// wildcards and `*`.
fn event_patterns_schema() -> utoipa::openapi::schema::Array {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
    let selectors = std::iter::once("*".to_owned()).chain(crate::events::type_selectors());
    ArrayBuilder::new()
        .items(ObjectBuilder::new().schema_type(Type::String).enum_values(Some(selectors)))
        .min_items(Some(1))
        .max_items(Some(MAX_EVENT_PATTERNS))
        .unique_items(true)
        .examples([serde_json::json!(["appointment.*"])])
        .build()
}

/// One delivery of an event to a webhook, with the outcome of its latest attempt.
#[derive(Debug, Serialize, ToSchema)]
pub struct Delivery {
    pub id: i64,
    /// The `webhook-id` header: the same on every attempt.
    pub event_id: String,
    pub event_type: String,
    /// Attempts made so far (0: not tried yet).
    pub attempt: i64,
    /// `pending`, `succeeded` or `failed` (no retry left, or the webhook is gone or disabled).
    pub state: String,
    /// The receiver's HTTP status on the latest attempt; null when none came.
    pub status_code: Option<i64>,
    /// Why the latest attempt failed, when it did without a status (timeout, refused address...).
    pub error: Option<String>,
    pub duration_ms: Option<i64>,
    /// When the next attempt is due; null once the delivery is over.
    pub next_retry_at: Option<String>,
    pub created_at: String,
}

impl From<DeliveryRow> for Delivery {
    fn from(r: DeliveryRow) -> Self {
        Delivery {
            id: r.id,
            event_id: r.event_id,
            event_type: r.event_type,
            attempt: r.attempt,
            next_retry_at: (r.state == "pending").then_some(r.next_attempt_at).flatten().map(format_micros),
            state: r.state,
            status_code: r.status_code,
            error: r.error,
            duration_ms: r.duration_ms,
            created_at: format_micros(r.created_at),
        }
    }
}

/// Whether a webhook listening to `patterns` takes an event of type `kind`.
pub fn pattern_matches(patterns: &[String], kind: &str) -> bool {
    patterns.iter().any(|p| p == "*" || p == kind || p.strip_suffix('*').is_some_and(|prefix| prefix.ends_with('.') && kind.starts_with(prefix)))
}

fn valid_pattern(p: &str) -> bool {
    p == "*"
        || TYPES.contains(&p)
        || p.strip_suffix(".*").is_some_and(|resource| TYPES.iter().any(|t| t.split('.').next() == Some(resource)))
}

/// Checks a URL for delivery: scheme, host, and (unless private addresses are allowed) that it
/// does not name this machine or an internal network. Names are resolved at delivery time.
pub fn check_url(raw: &str, allow_private: bool) -> Result<url::Url, String> {
    if raw.len() > MAX_URL_LEN {
        return Err(format!("The url may not be longer than {MAX_URL_LEN} characters."));
    }
    let url = url::Url::parse(raw).map_err(|_| "The url must be a valid URL.".to_owned())?;
    if !matches!(url.scheme(), "https" | "http") {
        return Err("The url must start with https:// or http://.".into());
    }
    let public = match url.host() {
        None => return Err("The url must have a host.".into()),
        Some(url::Host::Ipv4(ip)) => ssrf::is_public(ip.into()),
        Some(url::Host::Ipv6(ip)) => ssrf::is_public(ip.into()),
        Some(url::Host::Domain(name)) => !ssrf::is_internal_name(name),
    };
    if !public && !allow_private {
        return Err("The url points to a private, loopback, link-local or internal address.".into());
    }
    Ok(url)
}

/// Validates a create or update body; `shops_exist` are the ids among `shop_ids` that are shops
/// of the company.
pub fn read(
    input: WebhookInput,
    caller: &Caller,
    shops_exist: &[i64],
    allow_private: bool,
) -> Result<WebhookFields, ApiError> {
    let mut errors = FieldErrors::default();
    let url = match input.url.as_deref() {
        None | Some("") => {
            errors.add("url", "The url field is required.");
            String::new()
        }
        Some(raw) if raw.len() <= MAX_URL_LEN && !url_syntax_ok(raw) => {
            errors.add("url", "The url must be an http:// or https:// URL with a host name or an IPv4 address (see the schema's pattern).");
            String::new()
        }
        Some(raw) => check_url(raw, allow_private).map(|u| u.to_string()).unwrap_or_else(|message| {
            errors.add("url", message);
            String::new()
        }),
    };
    let patterns = input.events.unwrap_or_default();
    if patterns.is_empty() || patterns.len() > MAX_EVENT_PATTERNS {
        errors.add("events", format!("The events field must list 1 to {MAX_EVENT_PATTERNS} event types."));
    }
    for (i, p) in patterns.iter().enumerate() {
        if !valid_pattern(p) {
            errors.add(format!("events.{i}"), format!("`{p}` is not an event type, a `resource.*` wildcard or `*`."));
        } else if patterns[..i].contains(p) {
            errors.add(format!("events.{i}"), format!("`{p}` is listed more than once."));
        }
    }
    // Counted as sent, as the document's `maxLength` counts it; stored trimmed.
    let description = input.description.unwrap_or_default();
    validate::max_len(&mut errors, "description", &description, 255);
    let description = description.trim().to_owned();
    let shop_ids = match input.shop_ids {
        None if caller.shops.is_some() => {
            errors.add("shop_ids", "A key limited to shops must list the webhook's shops (a subset of its own).");
            None
        }
        None => None,
        Some(mut ids) => {
            if ids.is_empty() || ids.len() > MAX_SHOPS {
                errors.add("shop_ids", format!("The shop_ids field must list 1 to {MAX_SHOPS} shops, or be omitted for every shop."));
            }
            for (i, id) in ids.iter().enumerate() {
                if !shops_exist.contains(id) || !caller.can_see_shop(*id) {
                    errors.add(format!("shop_ids.{i}"), "The selected shop is invalid.");
                }
            }
            ids.sort_unstable();
            ids.dedup();
            Some(ids.iter().map(i64::to_string).collect::<Vec<_>>().join(","))
        }
    };
    errors.into_result()?;
    Ok(WebhookFields {
        url,
        events: serde_json::to_string(&patterns).unwrap_or_else(|_| "[]".into()),
        description,
        shop_ids,
        enabled: input.enabled,
    })
}

/// Whether a caller may see and manage a webhook: an unlimited key sees all of them; a key
/// limited to shops sees those limited to some of its shops.
pub fn visible_to(caller: &Caller, row: &WebhookRow) -> bool {
    match (&caller.shops, parse_shop_list(row.shop_ids.as_deref())) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(_), Some(ids)) => ids.iter().all(|id| caller.can_see_shop(*id)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_exact_types_wildcards_and_everything() {
        let p = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(pattern_matches(&p(&["appointment.*"]), "appointment.created"));
        assert!(!pattern_matches(&p(&["appointment.*"]), "appointments.created"));
        assert!(pattern_matches(&p(&["customer.updated"]), "customer.updated"));
        assert!(!pattern_matches(&p(&["customer.updated"]), "customer.created"));
        assert!(pattern_matches(&p(&["*"]), "api_key.revoked"));
        assert!(valid_pattern("ship_to.*") && valid_pattern("*") && valid_pattern("payment.created"));
        assert!(!valid_pattern("ship_to.") && !valid_pattern("nope.*") && !valid_pattern("appointment.exploded") && !valid_pattern("webhook.test"));
    }

    #[test]
    fn urls_must_be_public_http() {
        assert!(check_url("https://hooks.example.com/x?y=1", false).is_ok());
        for bad in ["ftp://example.com", "https://", "not a url", "http://127.0.0.1:9000/", "http://localhost/", "http://[::1]/",
            "http://169.254.169.254/latest/meta-data", "http://10.0.0.5/", "http://metadata.google.internal/"] {
            assert!(check_url(bad, false).is_err(), "{bad}");
        }
        assert!(check_url("http://127.0.0.1:9000/", true).is_ok());
    }
}
