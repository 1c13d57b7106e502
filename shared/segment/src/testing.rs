//! Small segments built by hand for the decoder's unit tests: v2 batches and legacy v0/v1
//! messages with whatever offsets a test needs (valid checksums, hostile offsets).

use std::io::Write;

use crate::varint::put_zigzag as zigzag;

/// An uncompressed v2 batch at `base`: one record per offset delta (value `v<delta>`,
/// null key, no headers), with the header's `last_offset_delta`.
pub fn v2_batch(base: i64, deltas: &[i32], last_offset_delta: i32) -> Vec<u8> {
    let mut records = Vec::new();
    for &delta in deltas {
        let value = format!("v{delta}");
        let mut body = vec![0u8]; // attributes
        zigzag(&mut body, 0); // timestamp delta
        zigzag(&mut body, delta as i64);
        zigzag(&mut body, -1); // null key
        zigzag(&mut body, value.len() as i64);
        body.extend_from_slice(value.as_bytes());
        zigzag(&mut body, 0); // headers
        zigzag(&mut records, body.len() as i64);
        records.extend_from_slice(&body);
    }
    // From attributes on: what the CRC-32C covers.
    let mut covered = Vec::new();
    covered.extend_from_slice(&0u16.to_be_bytes()); // attributes
    covered.extend_from_slice(&last_offset_delta.to_be_bytes());
    covered.extend_from_slice(&1_764_489_600_000i64.to_be_bytes()); // first timestamp
    covered.extend_from_slice(&1_764_489_600_000i64.to_be_bytes()); // max timestamp
    covered.extend_from_slice(&(-1i64).to_be_bytes()); // producer id
    covered.extend_from_slice(&(-1i16).to_be_bytes()); // producer epoch
    covered.extend_from_slice(&(-1i32).to_be_bytes()); // base sequence
    covered.extend_from_slice(&(deltas.len() as i32).to_be_bytes());
    covered.extend_from_slice(&records);
    let mut batch = base.to_be_bytes().to_vec();
    batch.extend_from_slice(&((covered.len() + 9) as i32).to_be_bytes()); // length
    batch.extend_from_slice(&0i32.to_be_bytes()); // partition leader epoch
    batch.push(2); // magic
    batch.extend_from_slice(&crc32c::crc32c(&covered).to_be_bytes());
    batch.extend_from_slice(&covered);
    batch
}

/// A legacy message of `magic` (0 or 1) at `offset`, with `attributes` (codec bits) and `value`.
pub fn legacy_message(magic: i8, offset: i64, attributes: u8, value: &[u8]) -> Vec<u8> {
    let mut covered = vec![magic as u8, attributes];
    if magic == 1 {
        covered.extend_from_slice(&1_764_489_600_000i64.to_be_bytes());
    }
    covered.extend_from_slice(&(-1i32).to_be_bytes()); // null key
    covered.extend_from_slice(&(value.len() as i32).to_be_bytes());
    covered.extend_from_slice(value);
    let mut message = offset.to_be_bytes().to_vec();
    message.extend_from_slice(&((covered.len() + 4) as i32).to_be_bytes());
    message.extend_from_slice(&crc32fast::hash(&covered).to_be_bytes());
    message.extend_from_slice(&covered);
    message
}

/// A gzip wrapper message at `offset` whose inner messages carry `inner` offsets as
/// stored (relative for v1, absolute for v0).
pub fn legacy_wrapper(magic: i8, offset: i64, inner: &[i64]) -> Vec<u8> {
    let set: Vec<u8> = inner.iter().flat_map(|&o| legacy_message(magic, o, 0, format!("v{o}").as_bytes())).collect();
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gzip.write_all(&set).expect("in memory");
    legacy_message(magic, offset, 1, &gzip.finish().expect("in memory"))
}
