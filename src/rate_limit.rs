//! Per-key rate limits: a token bucket per API key, in this process.
//!
//! Every authenticated response carries `RateLimit-Limit` (the burst), `RateLimit-Remaining` and
//! `RateLimit-Reset` (seconds until the bucket is full again); a refused request gets 429 with
//! `Retry-After`. Buckets live in memory, so with N replicas a key may reach N times the rate.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::Instant,
};

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Tokens added per second; 0 turns limiting off.
    pub per_second: f64,
    pub burst: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    pub allowed: bool,
    pub limit: u64,
    pub remaining: u64,
    /// Seconds until the bucket is full again.
    pub reset_secs: u64,
    /// Seconds until one request will be allowed (only meaningful when refused).
    pub retry_after_secs: u64,
}

struct Bucket {
    tokens: f64,
    updated: Instant,
}

pub struct RateLimiter {
    limits: Limits,
    buckets: Mutex<HashMap<i64, Bucket>>,
}

impl RateLimiter {
    pub fn new(limits: Limits) -> Self {
        RateLimiter { limits, buckets: Mutex::new(HashMap::new()) }
    }

    pub fn enabled(&self) -> bool {
        self.limits.per_second > 0.0 && self.limits.burst >= 1.0
    }

    /// Takes one token from `key_id`'s bucket if it has one.
    pub fn check(&self, key_id: i64, now: Instant) -> Decision {
        let Limits { per_second, burst } = self.limits;
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let bucket = buckets.entry(key_id).or_insert(Bucket { tokens: burst, updated: now });
        let elapsed = now.saturating_duration_since(bucket.updated).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * per_second).min(burst);
        bucket.updated = now;
        let allowed = bucket.tokens >= 1.0;
        if allowed {
            bucket.tokens -= 1.0;
        }
        let tokens = bucket.tokens;
        Decision {
            allowed,
            limit: burst as u64,
            remaining: tokens.floor() as u64,
            reset_secs: ((burst - tokens) / per_second).ceil() as u64,
            retry_after_secs: ((1.0 - tokens).max(0.0) / per_second).ceil().max(1.0) as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_burst_is_allowed_then_refused_until_tokens_refill() {
        let limiter = RateLimiter::new(Limits { per_second: 2.0, burst: 3.0 });
        let t0 = Instant::now();
        let remaining: Vec<u64> = (0..3).map(|_| limiter.check(1, t0)).map(|d| { assert!(d.allowed); d.remaining }).collect();
        assert_eq!(remaining, vec![2, 1, 0]);
        let refused = limiter.check(1, t0);
        assert!(!refused.allowed);
        assert_eq!((refused.retry_after_secs, refused.reset_secs, refused.limit), (1, 2, 3));
        // Another key has its own bucket.
        assert!(limiter.check(2, t0).allowed);
        // Half a second later one token is back.
        assert!(limiter.check(1, t0 + Duration::from_millis(500)).allowed);
        assert!(!limiter.check(1, t0 + Duration::from_millis(500)).allowed);
    }

    #[test]
    fn zero_rate_disables_limiting() {
        assert!(!RateLimiter::new(Limits { per_second: 0.0, burst: 200.0 }).enabled());
    }
}
