//! The Confluent wire format: `[0][schema id: u32 BE][payload]`; Protobuf payloads then
//! start with the message-index array (zig-zag varints: count, then indexes; the common
//! `[0]` is the single byte 0).

use crate::convert::DecodeError;

pub const HEADER_LEN: usize = 5;

/// Splits a framed payload into its schema id and body.
pub fn split<'a>(payload: &'a [u8], part: &'static str) -> Result<(u32, &'a [u8]), DecodeError> {
    match payload {
        [0, a, b, c, d, rest @ ..] => Ok((u32::from_be_bytes([*a, *b, *c, *d]), rest)),
        [] => Err(error(part, 0, "empty payload: no Confluent wire-format header")),
        [m, ..] if *m != 0 => Err(error(part, 0, &format!("magic byte {m}, expected 0 (Confluent wire format)"))),
        _ => Err(error(part, payload.len(), "payload shorter than the 5-byte wire-format header")),
    }
}

fn error(part: &'static str, position: usize, detail: &str) -> DecodeError {
    DecodeError { part, position, detail: detail.to_string(), missing_schema: None }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_errors() {
        assert_eq!(split(&[0, 0, 0, 1, 2, 9, 9], "value").unwrap(), (258, &[9u8, 9][..]));
        assert!(split(&[], "value").unwrap_err().detail.contains("empty"));
        assert!(split(&[1, 0, 0, 0, 1], "value").unwrap_err().detail.contains("magic byte 1"));
        assert_eq!(split(&[0, 0, 1], "key").unwrap_err().position, 3);
    }
}
