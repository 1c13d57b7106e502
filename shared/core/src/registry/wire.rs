//! How a key or value names the registered schema it was written with.
//!
//! Two framings exist, and a record may use either:
//!
//! - **In the payload** (the classic Confluent wire format): `[0][schema id: u32 BE]`, then
//!   the body.
//! - **In a record header** (newer Confluent serializers, `__key_schema_id` /
//!   `__value_schema_id`): the header holds `[0][schema id: u32 BE]` or
//!   `[1][schema GUID: 16 bytes]`, and the payload is the body alone. When the header is
//!   there it decides, as in Confluent's deserializers.
//!
//! A Protobuf body starts with the message-index array (zig-zag varints: count, then
//! indexes; the common `[0]` is the single byte 0); with header framing that array follows
//! the id in the header instead.

use std::fmt;

/// Why one record's key or value could not be decoded.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{part} at byte {position}: {detail}")]
pub struct DecodeError {
    /// `key` or `value`.
    pub part: &'static str,
    /// Byte position in the payload (0 for a schema id in a record header).
    pub position: usize,
    pub detail: String,
    /// Set when the payload names a schema the decoder has not loaded yet: the caller
    /// loads it (`PayloadDecoder::load_schema`) and tries again.
    pub missing_schema: Option<SchemaId>,
    /// Set when the payload is no row but deletes its key (a Debezium delete): not a bad
    /// record; the caller takes the record as its key's tombstone.
    pub deletes_key: bool,
}

/// A schema a payload named could not be loaded.
#[derive(Debug, Clone, thiserror::Error)]
#[error("schema {id}: {message}")]
pub struct SchemaLoadError {
    pub id: SchemaId,
    /// Why, without the id (shown before it).
    pub message: String,
    /// The registry could not be reached: try the segment again later. Otherwise the
    /// record is a bad record (unknown id, schema that does not fit the table).
    pub retryable: bool,
}

impl crate::retry::Retryable for SchemaLoadError {
    fn retryable(&self) -> bool {
        self.retryable
    }
}

/// Length of the in-payload framing: magic byte 0 and a 4-byte id.
const HEADER_LEN: usize = 5;

/// The registered schema a payload names: by numeric id, or by GUID (header framing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SchemaId {
    Id(u32),
    Guid(uuid::Uuid),
}

impl fmt::Display for SchemaId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchemaId::Id(id) => write!(f, "id {id}"),
            SchemaId::Guid(guid) => write!(f, "guid {guid}"),
        }
    }
}

/// A key or value as the record holds it, with its record's schema-id header if any.
#[derive(Clone, Copy, Debug, Default)]
pub struct Payload<'a> {
    pub bytes: &'a [u8],
    /// The value of the last `__key_schema_id` / `__value_schema_id` header.
    pub schema_header: Option<&'a [u8]>,
}

impl<'a> From<&'a [u8]> for Payload<'a> {
    /// A payload whose record has no schema-id header.
    fn from(bytes: &'a [u8]) -> Self {
        Payload { bytes, schema_header: None }
    }
}

impl<'a> From<&'a Vec<u8>> for Payload<'a> {
    fn from(bytes: &'a Vec<u8>) -> Self {
        Payload::from(bytes.as_slice())
    }
}

/// A payload with its schema id located.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Framed<'a> {
    pub schema: SchemaId,
    /// What the schema decodes (for Protobuf: still led by the message indexes when the
    /// id was in the payload).
    pub body: &'a [u8],
    /// The body's position in the payload, for error positions.
    pub offset: usize,
    /// What followed the id in the header (Protobuf's message indexes; empty for the other
    /// formats), or `None` when the id was in the payload.
    pub header_rest: Option<&'a [u8]>,
}

/// Locates the schema id of `payload`: in its record's header if there is one, else in
/// the payload's first five bytes. Inlined: returned through memory, the framing was
/// read back wider than it was written, and the CPU waited for the stores (3% of
/// decoding an Avro segment).
#[inline(always)]
pub fn frame<'a>(payload: Payload<'a>, part: &'static str) -> Result<Framed<'a>, DecodeError> {
    match payload.schema_header {
        Some(header) => from_header(header, part).map(|(schema, rest)| Framed {
            schema,
            body: payload.bytes,
            offset: 0,
            header_rest: Some(rest),
        }),
        None => split(payload.bytes, part).map(|(id, body)| Framed {
            schema: SchemaId::Id(id),
            body,
            offset: HEADER_LEN,
            header_rest: None,
        }),
    }
}

/// The record header that carries `part`'s (`key` or `value`) schema id.
pub fn header_name(part: &str) -> &'static str {
    if part == "key" { "__key_schema_id" } else { "__value_schema_id" }
}

fn from_header<'a>(header: &'a [u8], part: &'static str) -> Result<(SchemaId, &'a [u8]), DecodeError> {
    let fail = |detail: String| error(part, 0, &format!("header {}: {detail}", header_name(part)));
    match header {
        [0, a, b, c, d, rest @ ..] => Ok((SchemaId::Id(u32::from_be_bytes([*a, *b, *c, *d])), rest)),
        [1, rest @ ..] if rest.len() >= 16 => {
            let (guid, rest) = rest.split_at(16);
            let guid = uuid::Uuid::from_slice(guid).map_err(|e| fail(e.to_string()))?;
            Ok((SchemaId::Guid(guid), rest))
        }
        [] => Err(fail("empty".into())),
        [0 | 1, ..] => Err(fail(format!("{} bytes, too short for its schema id", header.len()))),
        [m, ..] => Err(fail(format!("magic byte {m}, expected 0 (schema id) or 1 (schema GUID)"))),
    }
}

/// For formats without message indexes: a schema header must hold the id and nothing more.
#[inline]
pub fn no_header_rest(framed: &Framed<'_>, part: &'static str) -> Result<(), DecodeError> {
    match framed.header_rest {
        Some(rest) if !rest.is_empty() => {
            Err(error(part, 0, &format!("header {}: {} bytes after the schema id", header_name(part), rest.len())))
        }
        _ => Ok(()),
    }
}

/// Splits an in-payload framed payload into its schema id and body.
#[inline]
fn split<'a>(payload: &'a [u8], part: &'static str) -> Result<(u32, &'a [u8]), DecodeError> {
    match payload {
        [0, a, b, c, d, rest @ ..] => Ok((u32::from_be_bytes([*a, *b, *c, *d]), rest)),
        [] => Err(error(part, 0, "empty payload: no Confluent wire-format header")),
        [m, ..] if *m != 0 => Err(error(part, 0, &format!("magic byte {m}, expected 0 (Confluent wire format)"))),
        _ => Err(error(part, payload.len(), "payload shorter than the 5-byte wire-format header")),
    }
}

fn error(part: &'static str, position: usize, detail: &str) -> DecodeError {
    DecodeError { part, position, detail: detail.to_string(), missing_schema: None, deletes_key: false }
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

    #[test]
    fn a_schema_header_decides_and_leaves_the_payload_whole() {
        let body = [0u8, 0, 0, 0, 7, 42];
        // Without a header the payload's own framing is read.
        let framed = frame(Payload::from(&body[..]), "value").unwrap();
        assert_eq!((framed.schema, framed.body, framed.offset), (SchemaId::Id(7), &[42u8][..], 5));
        // A numeric id in the header: the payload is all body, even if it starts with 0.
        let header = [0u8, 0, 0, 1, 0];
        let framed = frame(Payload { bytes: &body, schema_header: Some(&header) }, "value").unwrap();
        assert_eq!((framed.schema, framed.body, framed.offset), (SchemaId::Id(256), &body[..], 0));
        assert_eq!(framed.header_rest, Some(&[][..]));
        // A GUID, then Protobuf message indexes.
        let guid = uuid::Uuid::parse_str("00112233-4455-6677-8899-aabbccddeeff").unwrap();
        let mut header = vec![1u8];
        header.extend_from_slice(guid.as_bytes());
        header.extend_from_slice(&[2, 4]);
        let framed = frame(Payload { bytes: b"x", schema_header: Some(&header) }, "key").unwrap();
        assert_eq!(framed.schema, SchemaId::Guid(guid));
        assert_eq!(framed.header_rest, Some(&[2u8, 4][..]));
        assert_eq!(framed.schema.to_string(), "guid 00112233-4455-6677-8899-aabbccddeeff");
    }

    #[test]
    fn bad_schema_headers_name_the_header() {
        let bad = |header: &[u8], part| frame(Payload { bytes: b"", schema_header: Some(header) }, part).unwrap_err();
        assert_eq!(bad(&[], "value").detail, "header __value_schema_id: empty");
        assert!(bad(&[1, 2, 3], "key").detail.starts_with("header __key_schema_id: 3 bytes, too short"));
        assert!(bad(&[0, 1], "value").detail.contains("too short"));
        assert!(bad(&[2, 0, 0, 0, 1], "value").detail.contains("magic byte 2"));
        // Formats without message indexes take the id alone.
        let header = [0u8, 0, 0, 0, 1, 0];
        let framed = frame(Payload { bytes: b"", schema_header: Some(&header) }, "value").unwrap();
        assert_eq!(
            no_header_rest(&framed, "value").unwrap_err().detail,
            "header __value_schema_id: 1 bytes after the schema id"
        );
        assert!(no_header_rest(&frame(Payload::from(&header[..]), "value").unwrap(), "value").is_ok());
    }
}
