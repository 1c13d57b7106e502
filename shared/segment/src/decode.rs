//! One frame → one batch: checks its CRC, decompresses, parses its records (v2 batches
//! and legacy message sets). Pure CPU work on bytes already in memory; the reader and the
//! transaction lookahead both build on it.

use bytes::Bytes;

use super::Limits;
use super::codec::Codec;
use super::error::SegmentErrorKind;
use super::frame::Frame;
use super::legacy;
use super::record::{Batch, BatchKind, BatchTxn, ControlType, Records};
use super::v2::{self, BatchHeader};

/// Decodes one frame: checks its CRC, decompresses, parses its records. Pure CPU work on
/// bytes already in memory; errors carry no location (the caller adds it).
pub fn decode_frame(frame: &Frame, limits: &Limits) -> Result<Batch, SegmentErrorKind> {
    match frame.magic() {
        2 => decode_v2(frame, limits),
        0 | 1 => {
            let (codec, records) = legacy::decode_entry(frame.bytes.clone(), limits)?;
            Ok(Batch {
                position: frame.position,
                size: frame.bytes.len() as u32,
                magic: frame.magic(),
                base_offset: legacy::first_offset(&records, frame.base_offset),
                last_offset: frame.base_offset,
                kind: BatchKind::Legacy,
                codec,
                producer_id: -1,
                producer_epoch: -1,
                max_timestamp: -1,
                records,
                control: Vec::new(),
                txn: BatchTxn::Committed,
            })
        }
        other => Err(SegmentErrorKind::UnsupportedMagic(other)),
    }
}

fn decode_v2(frame: &Frame, limits: &Limits) -> Result<Batch, SegmentErrorKind> {
    let header = BatchHeader::parse(&frame.bytes, true)?;
    let codec = header.codec()?;
    let payload = frame.bytes.slice(v2::HEADER_LEN..);
    let data = match codec {
        Codec::None => payload,
        _ => Bytes::from(codec.decompress(&payload, limits.max_decompressed_bytes)?),
    };
    let kind = match (header.is_control(), header.is_transactional()) {
        (true, _) => BatchKind::Control,
        (false, true) => BatchKind::Transactional,
        (false, false) => BatchKind::Data,
    };
    let (records, control) = if header.is_control() {
        let types = v2::decode_control(&header, data)?;
        (Records::default(), types.into_iter().map(ControlType::from_code).collect())
    } else {
        (v2::decode_records(&header, data)?, Vec::new())
    };
    Ok(Batch {
        position: frame.position,
        size: frame.bytes.len() as u32,
        magic: 2,
        base_offset: header.base_offset,
        last_offset: header.last_offset(),
        kind,
        codec,
        producer_id: header.producer_id,
        producer_epoch: header.producer_epoch,
        max_timestamp: header.max_timestamp,
        records,
        control,
        txn: BatchTxn::Committed,
    })
}
