//! Varints: zig-zag ones, as Kafka record fields, Avro ints and longs and Confluent's
//! Protobuf message indexes encode them, and the plain ones of Protobuf's wire format.
//! One decoder for all, with fast paths for the common one-byte varint and for a varint
//! with ten bytes at hand (no bounds check per byte).

/// Why no varint could be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarintError {
    /// The data ends inside the varint.
    End,
    /// More than ten bytes with the continuation bit set.
    TooLong,
}

impl std::fmt::Display for VarintError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            VarintError::End => "unexpected end of data",
            VarintError::TooLong => "varint longer than 10 bytes",
        })
    }
}

/// The zig-zag varint at the start of `buf`: its value and how many bytes it took.
#[inline(always)]
pub fn zigzag(buf: &[u8]) -> Result<(i64, usize), VarintError> {
    unsigned(buf).map(|(raw, n)| (decode(raw), n))
}

/// The plain (not zig-zag) varint at the start of `buf`, as Protobuf encodes tags,
/// lengths and most integers: its value and how many bytes it took. Bits past the
/// 64th (a tenth byte above 1) are dropped.
#[inline(always)]
pub fn unsigned(buf: &[u8]) -> Result<(u64, usize), VarintError> {
    if let Some(&b) = buf.first()
        && b < 0x80
    {
        return Ok((u64::from(b), 1));
    }
    match buf.first_chunk::<10>() {
        Some(chunk) => from_bytes(chunk),
        None => from_bytes(buf),
    }
}

#[inline(always)]
fn from_bytes(bytes: &[u8]) -> Result<(u64, usize), VarintError> {
    let mut raw = 0u64;
    for (i, &b) in bytes.iter().take(10).enumerate() {
        raw |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Ok((raw, i + 1));
        }
    }
    Err(if bytes.len() >= 10 { VarintError::TooLong } else { VarintError::End })
}

#[inline(always)]
fn decode(raw: u64) -> i64 {
    (raw >> 1) as i64 ^ -((raw & 1) as i64)
}

/// Appends `v` as a zig-zag varint, as v2 records hold their fields (tests and the fuzz
/// harness build records with it).
#[cfg(any(test, feature = "fuzzing"))]
pub fn put_zigzag(out: &mut Vec<u8>, v: i64) {
    let mut raw = ((v << 1) ^ (v >> 63)) as u64;
    while raw >= 0x80 {
        out.push(raw as u8 | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(v: i64) -> Vec<u8> {
        let mut raw = ((v << 1) ^ (v >> 63)) as u64;
        let mut out = Vec::new();
        loop {
            let b = (raw & 0x7f) as u8;
            raw >>= 7;
            if raw == 0 {
                out.push(b);
                return out;
            }
            out.push(b | 0x80);
        }
    }

    #[test]
    fn every_length_decodes_alone_and_with_bytes_after_it() {
        for v in [0i64, -1, 1, 63, -64, 64, 150, -150, i32::MAX.into(), i32::MIN.into(), i64::MAX, i64::MIN] {
            let mut bytes = encode(v);
            let len = bytes.len();
            assert_eq!(zigzag(&bytes), Ok((v, len)), "{v} near the end");
            bytes.extend_from_slice(&[0xff; 10]);
            assert_eq!(zigzag(&bytes), Ok((v, len)), "{v} with ten bytes at hand");
        }
        assert_eq!(zigzag(&[0xac, 0x02]), Ok((150, 2)));
        assert_eq!(unsigned(&[0xac, 0x02]), Ok((300, 2)));
        assert_eq!(unsigned(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]), Ok((u64::MAX, 10)));
    }

    #[test]
    fn cut_short_and_overlong_varints_are_errors() {
        assert_eq!(zigzag(&[]), Err(VarintError::End));
        assert_eq!(zigzag(&[0x80, 0x80]), Err(VarintError::End));
        assert_eq!(zigzag(&[0x80; 9]), Err(VarintError::End));
        assert_eq!(zigzag(&[0x80; 10]), Err(VarintError::TooLong));
        assert_eq!(zigzag(&[0x80; 11]), Err(VarintError::TooLong));
    }
}
