//! Lower-case hexadecimal text of bytes (key hashes, ETags, fingerprints, ids): on the path of
//! every request, so written without a formatter call per byte.

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Appends the hexadecimal text of `bytes` to `out`.
pub fn push(out: &mut String, bytes: &[u8]) {
    out.reserve(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 0x0f) as usize] as char);
    }
}

/// The hexadecimal text of `bytes`.
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    push(&mut out, bytes);
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_byte_is_two_lower_case_digits() {
        let all: Vec<u8> = (0..=255).collect();
        let expected: String = all.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(super::encode(&all), expected);
    }
}
