//! The payload decoders' harness (feature `fuzzing`), shared by the fuzz target
//! `decode_payload` (`fuzz/`) and the integration test that replays its seeds and corpus.
//! Any bytes become the values of records of an Avro, a Protobuf and a JSON Schema topic
//! (schemas in `fuzz/schemas`) and of a plain JSON one (its types inferred from
//! [`JSON_SAMPLE`]), converted by the [`RecordConverter`] the materializer uses.
//!
//! ```text
//!  byte 0: the format (Avro, Protobuf, JSON Schema, plain JSON: its value mod 4)
//!  byte 1: bit 0 set → each value gets a valid schema id (magic 0, id 1, and for
//!          Protobuf the first message's index; none for plain JSON), so the fuzzer
//!          reaches the decoders without first finding it; bit 1 set → that id goes in
//!          the record header `__value_schema_id` instead of before the value
//!  rest:   the values, separated by RECORD_SEPARATOR
//! ```
//!
//! Each input is decoded by a converter of its own, as each segment is in the
//! materializer: an input's outcome does not depend on the inputs before it (the
//! Protobuf decoder adapts to the payloads it has seen).
//!
//! What must hold, or [`PayloadHarness::feed`] panics: no decoder panics; an error
//! points within its payload; the batch finished after the records holds exactly the
//! records that decoded and is a valid Arrow array (checked on the rows kept here, and
//! on every row, dropped ones too, by the converter itself in builds with debug
//! assertions, as `cargo fuzz` makes them).

use std::path::Path;

use arrow_array::StructArray;

use crate::columns::{RecordConverter, assert_valid};
use crate::config::{FloeConfig, TopicConfig};
use crate::formats::Formats;
use crate::formats::json::Inferred;
use crate::registry::wire::header_name;
use crate::segment::{Headers, Record, TimestampType, encode_headers};

/// Separates the values of one input.
pub const RECORD_SEPARATOR: &[u8] = b"\xff\x00\xff\x00";

/// The topics, in the order byte 0 picks them, and their schema files in `fuzz/schemas`.
const TOPICS: [(&str, &str, Option<&str>); 4] = [
    ("avro", "avro", Some("order.avsc")),
    ("protobuf", "protobuf", Some("order.proto")),
    ("json_schema", "json-schema", Some("event.schema.json")),
    ("json", "json", None),
];

/// The value the plain JSON topic's types are inferred from: every kind of JSON value.
pub const JSON_SAMPLE: &[u8] =
    br#"{"id": 1, "ok": true, "score": 1.5, "label": "x", "tags": ["a"], "place": {"city": "c", "zip": null}, "any": 2}"#;

pub struct PayloadHarness {
    config: FloeConfig,
    topics: Vec<TopicConfig>,
    inferred: (Inferred, Inferred),
    runtime: tokio::runtime::Runtime,
}

impl PayloadHarness {
    /// The topics, with the schemas in `schemas` (`fuzz/schemas`).
    pub fn new(schemas: &Path) -> Result<PayloadHarness, String> {
        let mut text = String::new();
        for (topic, format, file) in TOPICS {
            text += &format!("[[topics]]\ntopic = \"{topic}\"\nvalue_format = \"{format}\"\n");
            if let Some(file) = file {
                text += &format!("value_schema = {{ file = {:?} }}\n", schemas.join(file).display().to_string());
            }
        }
        let config = FloeConfig::parse(&text).map_err(|e| e.to_string())?;
        let topics = TOPICS
            .iter()
            .map(|(topic, ..)| config.resolve(topic).ok_or_else(|| format!("{topic}: not in the config")))
            .collect::<Result<_, String>>()?;
        let mut inferred = (Inferred::default(), Inferred::default());
        inferred.1.observe(JSON_SAMPLE);
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
        let harness = PayloadHarness { config, topics, inferred, runtime };
        for format in 0..TOPICS.len() {
            harness.converter(format)?;
        }
        Ok(harness)
    }

    /// A new converter for the topic `format` picks.
    fn converter(&self, format: usize) -> Result<RecordConverter, String> {
        let topic = &self.topics[format];
        let load = Formats::load_for_table(&self.config, topic, None, Some(&self.inferred), None);
        let formats = self.runtime.block_on(load).map_err(|e| format!("{}: {e}", topic.topic))?;
        RecordConverter::new(formats.schema, 0, formats.key, formats.value).map_err(|e| e.to_string())
    }

    /// Converts the records of one input (see the module docs), then finishes and checks
    /// their batch; returns how many records decoded. Panics when something that must
    /// hold does not.
    pub fn feed(&self, input: &[u8]) -> usize {
        let [pick, flags, rest @ ..] = input else { return 0 };
        let format = usize::from(*pick) % TOPICS.len();
        let id: &[u8] = match (flags & 1, format) {
            (0, _) | (_, 3) => &[],
            (_, 1) => &[0, 0, 0, 0, 1, 0],
            _ => &[0, 0, 0, 0, 1],
        };
        let (prefix, headers) = match flags & 2 {
            0 => (id, Vec::new()),
            _ => (&[][..], encode_headers(&[(header_name("value").as_bytes(), Some(id))])),
        };
        let header_count = usize::from(!headers.is_empty());
        let mut converter = self.converter(format).unwrap_or_else(|e| panic!("the harness's topics: {e}"));
        let mut decoded = 0;
        for (offset, payload) in (0..).zip(split(rest, RECORD_SEPARATOR)) {
            let value = [prefix, payload].concat();
            let record = Record {
                offset,
                timestamp: 0,
                timestamp_type: TimestampType::Create,
                key: None,
                value: Some(&value),
                headers: Headers::parse(&headers, header_count).expect("headers encoded above"),
            };
            match converter.append(&record) {
                Ok(()) => decoded += 1,
                Err(e) => assert!(e.position <= value.len(), "{e}: the position is past the {} bytes", value.len()),
            }
        }
        let batch = converter.finish();
        assert_eq!(batch.num_rows(), decoded, "the batch holds other rows than the records decoded");
        assert_valid(&StructArray::from(batch), "the converter's batch");
        decoded
    }
}

/// `bytes` cut at each `separator`.
fn split<'a>(bytes: &'a [u8], separator: &'a [u8]) -> impl Iterator<Item = &'a [u8]> {
    let mut rest = Some(bytes);
    std::iter::from_fn(move || {
        let b = rest?;
        match b.windows(separator.len()).position(|w| w == separator) {
            Some(i) => {
                rest = Some(&b[i + separator.len()..]);
                Some(&b[..i])
            }
            None => rest.take(),
        }
    })
}

/// Feeds every file of a fuzz corpus directory to the harness; returns how many inputs
/// there were and how many records decoded.
pub fn replay(harness: &PayloadHarness, corpus: &Path) -> std::io::Result<(usize, usize)> {
    let (mut inputs, mut decoded) = (0, 0);
    for entry in std::fs::read_dir(corpus)? {
        decoded += harness.feed(&std::fs::read(entry?.path())?);
        inputs += 1;
    }
    Ok((inputs, decoded))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An input of `format` (0 Avro, 1 Protobuf, 2 JSON Schema, 3 plain JSON)
    /// with `flags` (byte 1) holding `values`.
    fn input(format: u8, flags: u8, values: &[&[u8]]) -> Vec<u8> {
        let mut out = vec![format, flags];
        out.extend(values.join(RECORD_SEPARATOR));
        out
    }

    #[test]
    fn values_are_cut_at_each_separator() {
        let parts: Vec<&[u8]> = split(b"a\xff\x00\xff\x00bc\xff\x00\xff\x00", RECORD_SEPARATOR).collect();
        assert_eq!(parts, [&b"a"[..], b"bc", b""]);
        assert_eq!(split(b"", RECORD_SEPARATOR).count(), 1);
    }

    fn harness() -> PayloadHarness {
        PayloadHarness::new(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/schemas")).unwrap()
    }

    #[test]
    fn good_and_bad_values_of_each_format_give_a_valid_batch() {
        let h = harness();
        // Avro: an Order is not a few bytes, so these fail.
        assert_eq!(h.feed(&input(0, 1, &[b"", b"\x02"])), 0);
        // Protobuf: an empty message and one with `qty` set decode; a lone 0xff does not.
        assert_eq!(h.feed(&input(1, 1, &[b"", b"\x10\x01", b"\xff"])), 2);
        assert_eq!(h.feed(&input(2, 1, &[b"{}", b"{\"id\": 1}", b"[", b"{\"id\": \"x\"}"])), 2);
        // Without the schema id, the first byte is not the magic number.
        assert_eq!(h.feed(&input(2, 0, &[b"{}"])), 0);
        // Plain JSON: `id` was inferred a number, and the value must be an object.
        assert_eq!(h.feed(&input(3, 1, &[JSON_SAMPLE, b"{}", b"{\"id\": \"x\"}", b"[1]", b"{"])), 2);
        assert_eq!(h.feed(&[7]), 0);
    }

    #[test]
    fn a_schema_id_in_the_record_header_reaches_the_decoders() {
        let h = harness();
        // Bit 1: the id in `__value_schema_id`, the value alone.
        assert_eq!(h.feed(&input(1, 3, &[b"", b"\x10\x01"])), 2);
        assert_eq!(h.feed(&input(2, 3, &[b"{}", b"{\"id\": 1}"])), 2);
        // A header without a valid id: every value fails, at byte 0.
        assert_eq!(h.feed(&input(2, 2, &[b"{}"])), 0);
    }
}
