//! UUIDs written as text (Avro's `uuid` logical type, JSON Schema's `uuid` format) → their
//! 16 bytes.
//!
//! The hyphenated form (`8-4-4-4-12` hex digits, the one producers write) is decoded
//! eight digits at a time in a 64-bit word; the other forms the `uuid` crate knows
//! (32 digits, braced, URN) go to it, and so does the error message of a bad one.

/// The UUID `s` as a number (its 16 bytes big-endian, as `uuid::Uuid::as_u128`), or why
/// it is not one. A number, not a byte array: a `Result` holding `[u8; 16]` puts the
/// bytes at an odd offset, and copying them into a column from there (wider loads over
/// narrower stores) stalled the CPU for more than the parse itself took.
#[inline]
pub fn parse(s: &str) -> Result<u128, uuid::Error> {
    match hyphenated(s.as_bytes()) {
        Some(value) => Ok(value),
        None => slow(s),
    }
}

#[cold]
#[inline(never)]
fn slow(s: &str) -> Result<u128, uuid::Error> {
    uuid::Uuid::try_parse(s).map(|u| u.as_u128())
}

/// The hyphenated form; `None` for anything else (other forms, bad digits).
#[inline]
fn hyphenated(s: &[u8]) -> Option<u128> {
    let s: &[u8; 36] = s.try_into().ok()?;
    if [s[8], s[13], s[18], s[23]] != [b'-'; 4] {
        return None;
    }
    // Digits `a..a + 4` then `b..b + 4`, read straight from the text.
    let four = |at: usize| u64::from(u32::from_le_bytes([s[at], s[at + 1], s[at + 2], s[at + 3]]));
    let word = |a: usize, b: usize| four(a) | four(b) << 32;
    // Each group of eight digits → four bytes, the first in the lowest byte: the bytes
    // in order, little-endian, turned into the big-endian number.
    let first = u64::from(hex8(word(0, 4))?) | u64::from(hex8(word(9, 14))?) << 32;
    let last = u64::from(hex8(word(19, 24))?) | u64::from(hex8(word(28, 32))?) << 32;
    Some(u128::from(first.swap_bytes()) << 64 | u128::from(last.swap_bytes()))
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

    fn reference(s: &str) -> Option<u128> {
        uuid::Uuid::try_parse(s).ok().map(|u| u.as_u128())
    }

    #[test]
    fn hyphenated_uuids_decode_as_the_uuid_crate_does() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let u = uuid::Uuid::from_u64_pair(state, state.rotate_left(29) ^ 0xdead_beef);
            for text in [u.hyphenated().to_string(), u.hyphenated().to_string().to_uppercase()] {
                assert_eq!(hyphenated(text.as_bytes()), Some(u.as_u128()), "{text}");
            }
        }
        assert_eq!(parse("00000000-0000-0000-0000-000000000000").unwrap(), 0);
        assert_eq!(parse("ffffffff-FFFF-ffff-FFFF-ffffffffffff").unwrap(), u128::MAX);
        assert_eq!(parse("01234567-89ab-cdef-0011-2233445566ff").unwrap(), 0x0123_4567_89ab_cdef_0011_2233_4455_66ff);
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
            assert_eq!(parse(&text).unwrap(), u.as_u128(), "{text}");
        }
        for bad in ["", "0123", "0123abcd+ef45-6789-ABCD-ef0123456789", "0123abcd-ef45-6789-ABCD-ef012345678g"] {
            let e = parse(bad).unwrap_err();
            assert_eq!(e.to_string(), uuid::Uuid::try_parse(bad).unwrap_err().to_string());
        }
    }
}
