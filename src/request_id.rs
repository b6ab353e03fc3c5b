//! Request ids for requests that arrive without `x-request-id`: UUID-shaped (version 4 bits
//! set), unique within the process by a counter and across processes by 64 random bits drawn
//! once at start. A fresh random UUID per request cost a `getrandom` system call each time.

use std::sync::{
    OnceLock,
    atomic::{AtomicU64, Ordering},
};

use axum::http::{HeaderValue, Request};
use tower_http::request_id::{MakeRequestId, RequestId};

#[derive(Clone, Copy, Default)]
pub struct MakeProcessRequestId;

impl MakeRequestId for MakeProcessRequestId {
    fn make_request_id<B>(&mut self, _request: &Request<B>) -> Option<RequestId> {
        HeaderValue::from_str(&next()).ok().map(RequestId::new)
    }
}

fn process_bits() -> u64 {
    static BITS: OnceLock<u64> = OnceLock::new();
    *BITS.get_or_init(|| {
        let mut bytes = [0u8; 8];
        getrandom::fill(&mut bytes).expect("the operating system's random source failed");
        u64::from_le_bytes(bytes)
    })
}

/// The next id: `xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx`, the process's bits then the counter's.
pub fn next() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&process_bits().to_be_bytes());
    bytes[8..].copy_from_slice(&count.to_be_bytes());
    bytes[6] = (bytes[6] & 0x0f) | 0x40; // version 4
    bytes[8] = (bytes[8] & 0x3f) | 0x80; // RFC 4122 variant
    let hex = crate::hex::encode(&bytes);
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_distinct_uuids() {
        let (a, b) = (next(), next());
        assert_ne!(a, b);
        for id in [&a, &b] {
            let groups: Vec<&str> = id.split('-').collect();
            assert_eq!(groups.iter().map(|g| g.len()).collect::<Vec<_>>(), [8, 4, 4, 4, 12], "{id}");
            assert!(groups[2].starts_with('4') && "89ab".contains(&groups[3][..1]), "{id}");
        }
    }
}
