//! UUIDs written as text (Avro's `uuid` logical type, JSON Schema's `uuid` format) → their
//! 16 bytes.
//!
//! The hyphenated form (`8-4-4-4-12` hex digits, the one producers write) is decoded
//! eight digits at a time in a 64-bit word; the other forms the `uuid` crate knows
//! (32 digits, braced, URN) go to it, and so does the error message of a bad one.

/// The 16 bytes of the UUID `s`, or why it is not one.
#[inline]
pub fn parse(s: &str) -> Result<[u8; 16], uuid::Error> {
    match hyphenated(s.as_bytes()) {
        Some(bytes) => Ok(bytes),
        None => slow(s),
    }
}

#[cold]
#[inline(never)]
fn slow(s: &str) -> Result<[u8; 16], uuid::Error> {
    uuid::Uuid::try_parse(s).map(uuid::Uuid::into_bytes)
}

/// The hyphenated form; `None` for anything else (other forms, bad digits).
#[inline]
fn hyphenated(s: &[u8]) -> Option<[u8; 16]> {
    let s: &[u8; 36] = s.try_into().ok()?;
    if [s[8], s[13], s[18], s[23]] != [b'-'; 4] {
        return None;
    }
    let word = |a: usize, b: usize| {
        let mut w = [0u8; 8];
        w[..4].copy_from_slice(&s[a..a + 4]);
        w[4..].copy_from_slice(&s[b..b + 4]);
        u64::from_le_bytes(w)
    };
    let words = [word(0, 4), word(9, 14), word(19, 24), word(28, 32)];
    let mut out = [0u8; 16];
    for (chunk, w) in out.chunks_exact_mut(4).zip(words) {
        chunk.copy_from_slice(&hex8(w)?.to_le_bytes());
    }
    Some(out)
}

const fn lanes(b: u8) -> u64 {
    u64::from_ne_bytes([b; 8])
}

/// Per byte of `x` (all below 0x80): 0x80 where `lo <= byte <= hi`, else 0. No byte's
/// sum carries into the next, so the bytes are independent.
#[inline(always)]
fn in_range(x: u64, lo: u8, hi: u8) -> u64 {
    x.wrapping_add(lanes(0x80 - lo)) & !x.wrapping_add(lanes(0x7f - hi)) & lanes(0x80)
}

/// Eight hex digits (ASCII, first digit in the lowest byte) → their four bytes (first
/// byte in the lowest byte); `None` if any is not a hex digit.
#[inline(always)]
fn hex8(x: u64) -> Option<u32> {
    if x & lanes(0x80) != 0 {
        return None;
    }
    let digit = in_range(x, b'0', b'9');
    let letter = in_range(x | lanes(0x20), b'a', b'f');
    if digit | letter != lanes(0x80) {
        return None;
    }
    // '0'..'9' are 0x30..0x39, 'A'..'F' 0x41..0x46 and 'a'..'f' 0x61..0x66: the low
    // nibble, plus 9 where bit 6 (a letter) is set.
    let nibbles = (x & lanes(0x0f)) + ((x >> 6) & lanes(0x01)) * 9;
    // Each pair of digits (a 16-bit lane: high nibble first, in the lower byte) → a byte.
    let pairs = ((nibbles & 0x00ff_00ff_00ff_00ff) << 4) | ((nibbles >> 8) & 0x00ff_00ff_00ff_00ff);
    let packed = (pairs | (pairs >> 8)) & 0x0000_ffff_0000_ffff;
    Some((packed | (packed >> 16)) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(s: &str) -> Option<[u8; 16]> {
        uuid::Uuid::try_parse(s).ok().map(uuid::Uuid::into_bytes)
    }

    #[test]
    fn hyphenated_uuids_decode_as_the_uuid_crate_does() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let u = uuid::Uuid::from_u64_pair(state, state.rotate_left(29) ^ 0xdead_beef);
            for text in [u.hyphenated().to_string(), u.hyphenated().to_string().to_uppercase()] {
                assert_eq!(hyphenated(text.as_bytes()), Some(u.into_bytes()), "{text}");
            }
        }
        assert_eq!(parse("00000000-0000-0000-0000-000000000000").unwrap(), [0; 16]);
        assert_eq!(parse("ffffffff-FFFF-ffff-FFFF-ffffffffffff").unwrap(), [0xff; 16]);
    }

    #[test]
    fn every_byte_value_at_every_digit_is_judged_as_the_uuid_crate_does() {
        let base = *b"0123abcd-ef45-6789-ABCD-ef0123456789";
        for at in 0..36 {
            for b in 0..=255u8 {
                let mut s = base;
                s[at] = b;
                let Ok(text) = std::str::from_utf8(&s) else {
                    continue;
                };
                assert_eq!(parse(text).ok(), reference(text), "{text:?}");
            }
        }
        // Non-ASCII text of the right length in bytes.
        let text = "0123abcd-ef45-6789-ABCD-ef01234567é";
        assert_eq!(text.len(), 36);
        assert!(parse(text).is_err());
    }

    #[test]
    fn other_forms_and_bad_ones_go_to_the_uuid_crate() {
        let u = uuid::Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
        for text in [u.simple().to_string(), u.braced().to_string(), u.urn().to_string()] {
            assert_eq!(parse(&text).unwrap(), u.into_bytes(), "{text}");
        }
        for bad in ["", "0123", "0123abcd+ef45-6789-ABCD-ef0123456789", "0123abcd-ef45-6789-ABCD-ef012345678g"] {
            let e = parse(bad).unwrap_err();
            assert_eq!(e.to_string(), uuid::Uuid::try_parse(bad).unwrap_err().to_string());
        }
    }
}
