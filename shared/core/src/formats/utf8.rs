//! UTF-8 checks of the strings in payloads, shared by the decoders. Most strings in
//! practice are short and ASCII: a word-at-a-time check settles those inline, before
//! the general (SIMD) validation.

/// `bytes` as a string if they are UTF-8.
#[inline(always)]
pub fn utf8(bytes: &[u8]) -> Option<&str> {
    if is_ascii(bytes) {
        // SAFETY: every ASCII byte sequence is valid UTF-8.
        Some(unsafe { std::str::from_utf8_unchecked(bytes) })
    } else {
        simdutf8::basic::from_utf8(bytes).ok()
    }
}

/// Whether every byte is below 0x80, eight bytes at a time (inline: the standard
/// library's check is a call per string). The bytes after the last whole word are
/// checked as the last eight bytes (overlapping), and shorter values as two overlapping
/// halves, so no loop runs a varying number of times over single bytes.
#[inline(always)]
fn is_ascii(bytes: &[u8]) -> bool {
    let high = match bytes.len() {
        0 => 0,
        // Positions 0, len / 2 and len - 1 cover every byte of one to three.
        n @ 1..=3 => u64::from(bytes[0] | bytes[n / 2] | bytes[n - 1]),
        4..=7 => match (bytes.first_chunk::<4>(), bytes.last_chunk::<4>()) {
            (Some(first), Some(last)) => u64::from(u32::from_ne_bytes(*first) | u32::from_ne_bytes(*last)),
            _ => unreachable!("four bytes or more"),
        },
        _ => {
            let (words, _) = bytes.as_chunks::<8>();
            let last = bytes.last_chunk::<8>().map_or(0, |w| u64::from_ne_bytes(*w));
            words.iter().fold(last, |acc, w| acc | u64::from_ne_bytes(*w))
        }
    };
    high & 0x8080_8080_8080_8080 == 0
}

/// `bytes` as a string, or the position (from the start of `bytes`) of the first byte
/// that is not UTF-8.
#[inline(always)]
pub fn utf8_at(bytes: &[u8]) -> Result<&str, usize> {
    utf8(bytes).ok_or_else(|| invalid_at(bytes))
}

#[cold]
#[inline(never)]
fn invalid_at(bytes: &[u8]) -> usize {
    std::str::from_utf8(bytes).err().map_or(0, |e| e.valid_up_to())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_checked_a_word_at_a_time_and_in_the_tail() {
        for len in 0..40 {
            let mut bytes = vec![b'a'; len];
            assert!(is_ascii(&bytes));
            for i in 0..len {
                bytes[i] = 0x80;
                assert!(!is_ascii(&bytes), "high byte at {i} of {len}");
                bytes[i] = b'a';
            }
        }
    }

    #[test]
    fn strings_ascii_and_not() {
        assert_eq!(utf8(b"plain ascii"), Some("plain ascii"));
        assert_eq!(utf8("grüße, 東京".as_bytes()), Some("grüße, 東京"));
        assert_eq!(utf8(&[b'a', 0xc3]), None);
        assert_eq!(utf8(b""), Some(""));
    }

    #[test]
    fn invalid_bytes_are_located() {
        assert_eq!(utf8_at(b"ok"), Ok("ok"));
        assert_eq!(utf8_at(&[b'a', b'b', 0xc3]), Err(2));
        assert_eq!(utf8_at(&[0xe2, 0x82, 0xac, 0xff]), Err(3));
    }
}
