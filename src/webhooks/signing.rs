//! Standard Webhooks signatures: `v1,` and the base64 HMAC-SHA256 of `{id}.{timestamp}.{body}`,
//! keyed with the secret's decoded bytes (the part after `whsec_`).

use base64::{Engine, engine::general_purpose::STANDARD};
use hmac::{Hmac, Mac};
use sha2::Sha256;

const PREFIX: &str = "whsec_";

/// A new secret: `whsec_` and the base64 of 32 random bytes.
pub fn new_secret() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    format!("{PREFIX}{}", STANDARD.encode(bytes))
}

/// The `webhook-signature` header value for one message.
pub fn sign(secret: &str, msg_id: &str, timestamp: i64, body: &str) -> String {
    let key = STANDARD.decode(secret.strip_prefix(PREFIX).unwrap_or(secret)).unwrap_or_else(|_| secret.as_bytes().to_vec());
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("HMAC takes keys of any length");
    mac.update(format!("{msg_id}.{timestamp}.{body}").as_bytes());
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification (and its reference libraries' tests).
    #[test]
    fn matches_the_standard_webhooks_example() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let body = r#"{"test": 2432232314}"#;
        assert_eq!(sign(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body), "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn secrets_are_random_and_decode_to_32_bytes() {
        let (a, b) = (new_secret(), new_secret());
        assert_ne!(a, b);
        assert_eq!(STANDARD.decode(a.strip_prefix(PREFIX).unwrap()).unwrap().len(), 32);
    }
}
