//! Bearer API keys: generation, hashing, and the `Caller` every resource handler receives.

mod cache;
mod store;

pub use cache::{KeyCache, REVOCATION_CHANNEL, forget_key, revocations};

use std::time::Instant;

use axum::{
    extract::{FromRequestParts, Request},
    http::{HeaderName, HeaderValue, request::Parts},
    response::{IntoResponse, Response},
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use crate::{
    db::{Db, now_micros},
    error::ApiError,
    state::AppState,
};

/// What a key may do. Ordered: each role includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Read,
    Write,
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Write => "write",
            Role::Admin => "admin",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "read" => Some(Role::Read),
            "write" => Some(Role::Write),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }
}

/// The authenticated caller: a key of one company, with a role and an optional shop list.
#[derive(Debug, Clone)]
pub struct Caller {
    pub key_id: i64,
    pub company_id: i64,
    pub role: Role,
    /// `None`: every shop of the company.
    pub shops: Option<Vec<i64>>,
}

impl Caller {
    pub fn require(&self, role: Role) -> Result<(), ApiError> {
        if self.role >= role {
            Ok(())
        } else {
            Err(ApiError::Forbidden(format!(
                "This operation needs a key with the {} role; this key has the {} role.",
                role.as_str(),
                self.role.as_str()
            )))
        }
    }

    /// Company-wide administration (shops, API keys) needs an admin key without a shop list.
    pub fn require_company_admin(&self) -> Result<(), ApiError> {
        self.require(Role::Admin)?;
        if self.shops.is_some() {
            return Err(ApiError::Forbidden(
                "This operation needs an admin key that is not limited to a list of shops.".into(),
            ));
        }
        Ok(())
    }

    pub fn can_see_shop(&self, shop_id: i64) -> bool {
        self.shops.as_ref().is_none_or(|shops| shops.contains(&shop_id))
    }
}

pub const KEY_PREFIX: &str = "ask_";

/// A new random key (256 bits of entropy) and the hash we store for it.
pub fn generate_key() -> (String, String) {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the operating system's random source failed");
    let key = format!("{KEY_PREFIX}{}", crate::hex::encode(&bytes));
    let hash = hash_key(&key);
    (key, hash)
}

pub fn hash_key(key: &str) -> String {
    crate::hex::encode(&Sha256::digest(key.as_bytes()))
}

/// Compares two byte strings in time that depends only on their lengths.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub fn parse_shop_list(stored: Option<&str>) -> Option<Vec<i64>> {
    stored.map(|s| s.split(',').filter_map(|id| id.trim().parse().ok()).collect())
}

/// How stale `last_used_at` may get before a request refreshes it: bounds the writes that
/// key bookkeeping costs to one per key per minute.
const LAST_USED_RESOLUTION_MICROS: i64 = 60_000_000;

/// The key of an `Authorization: Bearer <key>` header (scheme case-insensitive).
pub fn bearer_key(header: Option<&str>) -> Result<&str, ApiError> {
    let header = header.ok_or_else(|| ApiError::Unauthorized("Missing Authorization header with a Bearer API key.".into()))?;
    let (scheme, key) = header.trim().split_once(' ').unwrap_or((header, ""));
    let key = key.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || key.is_empty() || key.contains(' ') {
        return Err(ApiError::Unauthorized("The Authorization header must be `Bearer <API key>`.".into()));
    }
    Ok(key)
}

/// Looks up an unrevoked key by the hash of its text.
pub async fn authenticate(db: &Db, hash: &str) -> Result<Caller, ApiError> {
    let row = store::find_unrevoked(db, hash)
        .await?
        .filter(|r| constant_time_eq(r.key_hash.as_bytes(), hash.as_bytes()))
        .ok_or_else(|| ApiError::Unauthorized("The API key is not valid or has been revoked.".into()))?;
    let now = now_micros();
    if row.last_used_at.is_none_or(|t| now - t > LAST_USED_RESOLUTION_MICROS) {
        let db = db.clone();
        let (id, company_id) = (row.id, row.company_id);
        // Bookkeeping must not slow down or fail the request itself.
        tokio::spawn(async move {
            if let Err(e) = store::record_use(&db, company_id, id, now).await {
                tracing::debug!(error = %e, "could not record key use");
            }
        });
    }
    Ok(Caller {
        key_id: row.id,
        company_id: row.company_id,
        role: Role::parse(&row.role).ok_or_else(|| ApiError::Internal(format!("key {} has role {}", row.id, row.role)))?,
        shops: parse_shop_list(row.shop_ids.as_deref()),
    })
}

/// A caller with at least the `write` role. Declared before the body extractor, it makes a
/// role failure a 403 even when the body is also wrong.
pub struct Writer(pub Caller);

/// A caller with the `admin` role (see [`Writer`]).
pub struct Admin(pub Caller);

/// An admin key without a shop list: company-wide administration (shops, API keys).
pub struct CompanyAdmin(pub Caller);

/// The role extractors: the caller, refused by `check` before any body is read.
macro_rules! role_extractor {
    ($name:ident, $check:expr) => {
        impl FromRequestParts<AppState> for $name {
            type Rejection = ApiError;

            async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
                let caller = Caller::from_request_parts(parts, state).await?;
                let check: fn(&Caller) -> Result<(), ApiError> = $check;
                check(&caller)?;
                Ok($name(caller))
            }
        }
    };
}

role_extractor!(Writer, |caller| caller.require(Role::Write));
role_extractor!(Admin, |caller| caller.require(Role::Admin));
role_extractor!(CompanyAdmin, Caller::require_company_admin);

/// Authenticates a request's header, through the replica's key cache when it may be trusted.
async fn authenticate_request(state: &AppState, header: Option<&str>) -> Result<Caller, ApiError> {
    let hash = hash_key(bearer_key(header)?);
    if let Some(caller) = state.keys.get(&hash) {
        return Ok(caller);
    }
    let generation = state.keys.generation();
    let caller = authenticate(&state.db, &hash).await?;
    state.keys.put(hash, caller.clone(), generation);
    Ok(caller)
}

/// What every `/api/v1` resource route checks first: authenticates the key (401), applies its
/// rate limit (429), runs `next` with the [`Caller`] in the request's extensions, and reports
/// the limit on the response.
pub async fn require_key<F: Future<Output = Response>>(state: &AppState, mut request: Request, next: impl FnOnce(Request) -> F) -> Response {
    let header = request.headers().get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let caller = match authenticate_request(state, header).await {
        Ok(caller) => caller,
        Err(e) => return e.into_response(),
    };
    let decision = state.limiter.enabled().then(|| state.limiter.check(caller.key_id, Instant::now()));
    let mut response = match decision {
        Some(d) if !d.allowed => ApiError::RateLimited { retry_after_secs: d.retry_after_secs }.into_response(),
        _ => {
            request.extensions_mut().insert(caller);
            next(request).await
        }
    };
    if let Some(d) = decision {
        let headers = response.headers_mut();
        for (name, value) in [("ratelimit-limit", d.limit), ("ratelimit-remaining", d.remaining), ("ratelimit-reset", d.reset_secs)] {
            headers.insert(HeaderName::from_static(name), HeaderValue::from(value));
        }
    }
    response
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if let Some(caller) = parts.extensions.get::<Caller>() {
            return Ok(caller.clone());
        }
        let header = parts.headers.get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        let caller = authenticate_request(state, header).await?;
        parts.extensions.insert(caller.clone());
        Ok(caller)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_are_distinct_and_hash_to_what_is_stored() {
        let (a, hash_a) = generate_key();
        let (b, _) = generate_key();
        assert_ne!(a, b);
        assert!(a.starts_with(KEY_PREFIX));
        assert_eq!(a.len(), KEY_PREFIX.len() + 64);
        assert_eq!(hash_key(&a), hash_a);
    }

    #[test]
    fn constant_time_eq_compares_content_and_length() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }

    #[test]
    fn roles_are_ordered() {
        assert!(Role::Admin > Role::Write && Role::Write > Role::Read);
    }

    #[test]
    fn shop_lists_round_trip() {
        assert_eq!(parse_shop_list(Some("1,2,3")), Some(vec![1, 2, 3]));
        assert_eq!(parse_shop_list(None), None);
    }
}
