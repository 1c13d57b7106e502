//! Magic v2 record batches: the 61-byte header, CRC-32C, and varint-encoded records.
//!
//! ```text
//! baseOffset i64 | length i32 | partitionLeaderEpoch i32 | magic i8 | crc u32 |
//! attributes i16 | lastOffsetDelta i32 | firstTimestamp i64 | maxTimestamp i64 |
//! producerId i64 | producerEpoch i16 | baseSequence i32 | recordCount i32 | records…
//! ```
//! The CRC-32C covers everything from `attributes` to the end of the batch.

use bytes::Bytes;

use super::codec::Codec;
use super::cursor::Cursor;
use super::error::{OffsetError, SegmentErrorKind, check_offset};
use super::record::{Entry, Records, TimestampType};

pub const HEADER_LEN: usize = 61;
const CRC_OFFSET: usize = 17;
const ATTRIBUTES_OFFSET: usize = 21;

/// Attribute bits beyond the codec and timestamp type.
const TRANSACTIONAL: u16 = 0x10;
const CONTROL: u16 = 0x20;

/// The fixed header of a v2 batch.
#[derive(Debug, Clone, Copy)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub attributes: u16,
    pub last_offset_delta: i32,
    pub first_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub record_count: i32,
}

impl BatchHeader {
    /// Parses and validates the header of a whole v2 batch (prefix included); checks the
    /// CRC when `verify_crc`.
    pub fn parse(batch: &[u8], verify_crc: bool) -> Result<BatchHeader, SegmentErrorKind> {
        if batch.len() < HEADER_LEN {
            return Err(SegmentErrorKind::InvalidLength {
                length: batch.len() as i32 - 12,
                minimum: (HEADER_LEN - 12) as u32,
            });
        }
        let be = Be(batch);
        if verify_crc {
            let stored = be.u32(CRC_OFFSET);
            let computed = crc32c::crc32c(&batch[ATTRIBUTES_OFFSET..]);
            if stored != computed {
                return Err(SegmentErrorKind::Checksum { algorithm: "CRC-32C", stored, computed });
            }
        }
        let header = BatchHeader {
            base_offset: be.i64(0),
            attributes: be.u16(21),
            last_offset_delta: be.i32(23),
            first_timestamp: be.i64(27),
            max_timestamp: be.i64(35),
            producer_id: be.i64(43),
            producer_epoch: be.u16(51) as i16,
            record_count: be.i32(57),
        };
        if header.record_count < 0 || header.last_offset_delta < 0 {
            return Err(SegmentErrorKind::Malformed(format!(
                "record count {} / last offset delta {}",
                header.record_count, header.last_offset_delta
            )));
        }
        check_offset(header.base_offset, None)?;
        let last = header
            .base_offset
            .checked_add(header.last_offset_delta as i64)
            .ok_or(OffsetError::DeltaOverflow { base: header.base_offset, delta: header.last_offset_delta })?;
        check_offset(last, None)?;
        Ok(header)
    }

    pub fn codec(&self) -> Result<Codec, SegmentErrorKind> {
        Codec::from_attributes(self.attributes)
    }

    pub fn timestamp_type(&self) -> TimestampType {
        TimestampType::from_attributes(self.attributes)
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL != 0
    }

    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }
}

/// Decodes the records of a batch whose (decompressed) record bytes are `data`.
pub fn decode_records(header: &BatchHeader, data: Bytes) -> Result<Records, SegmentErrorKind> {
    let count = header.record_count as usize;
    // Every record takes at least 7 bytes: never reserve more than the data can hold.
    let mut entries: Vec<Entry> = Vec::with_capacity(count.min(data.len() / 7));
    let ts_type = header.timestamp_type();
    let mut cur = Cursor::new(&data);
    for index in 0..count {
        let entry = decode_record(header, ts_type, &mut cur).map_err(|detail| SegmentErrorKind::Record {
            index,
            offset: None,
            detail,
        })?;
        if entry.offset > header.last_offset() {
            return Err(SegmentErrorKind::Record {
                index,
                offset: Some(entry.offset),
                detail: format!("offset beyond the batch's last offset {}", header.last_offset()),
            });
        }
        if let Err(e) = check_offset(entry.offset, entries.last().map(|e| e.offset)) {
            return Err(SegmentErrorKind::Record { index, offset: Some(entry.offset), detail: e.to_string() });
        }
        entries.push(entry);
    }
    if cur.remaining() != 0 {
        return Err(SegmentErrorKind::Malformed(format!("{} bytes left after {count} records", cur.remaining())));
    }
    Ok(Records::new(data, entries))
}

/// Reads the control record types of a control batch.
pub fn decode_control(header: &BatchHeader, data: Bytes) -> Result<Vec<i16>, SegmentErrorKind> {
    let records = decode_records(header, data)?;
    records
        .iter()
        .enumerate()
        .map(|(index, r)| match r.key {
            Some([_, _, hi, lo, ..]) => Ok(i16::from_be_bytes([*hi, *lo])),
            _ => Err(SegmentErrorKind::Record {
                index,
                offset: Some(r.offset),
                detail: "control record key shorter than 4 bytes".into(),
            }),
        })
        .collect()
}

fn decode_record(header: &BatchHeader, ts_type: TimestampType, cur: &mut Cursor) -> Result<Entry, String> {
    let length = cur.varint()?;
    let length = usize::try_from(length).map_err(|_| format!("negative record length {length}"))?;
    if length > cur.remaining() {
        return Err(format!("record length {length} with {} bytes left", cur.remaining()));
    }
    let end = cur.pos + length;
    let _attributes = cur.byte()?;
    let timestamp_delta = cur.varlong()?;
    let offset_delta = cur.varint()?;
    let key = cur.nullable_span()?;
    let value = cur.nullable_span()?;
    let header_count = cur.varint()?;
    let header_count = usize::try_from(header_count).map_err(|_| format!("negative header count {header_count}"))?;
    // Each header takes at least 2 bytes.
    if header_count > (end.saturating_sub(cur.pos)) / 2 {
        return Err(format!("header count {header_count} exceeds the record's length"));
    }
    let headers_start = cur.pos;
    cur.skip_headers(header_count)?;
    if cur.pos != end {
        return Err(format!("record length {length} does not match its fields"));
    }
    let timestamp = match ts_type {
        TimestampType::LogAppend => header.max_timestamp,
        TimestampType::Create => header.first_timestamp.wrapping_add(timestamp_delta),
    };
    if offset_delta < 0 {
        return Err(format!("negative offset delta {offset_delta}"));
    }
    Ok(Entry {
        offset: header.base_offset + offset_delta as i64,
        timestamp,
        timestamp_type: ts_type,
        key,
        value,
        headers: headers_start..end,
        header_count,
    })
}

/// Big-endian fixed-width reads at known-valid positions.
struct Be<'a>(&'a [u8]);

impl Be<'_> {
    fn u16(&self, at: usize) -> u16 {
        u16::from_be_bytes([self.0[at], self.0[at + 1]])
    }
    fn u32(&self, at: usize) -> u32 {
        u32::from_be_bytes(self.0[at..at + 4].try_into().expect("4 bytes"))
    }
    fn i32(&self, at: usize) -> i32 {
        self.u32(at) as i32
    }
    fn i64(&self, at: usize) -> i64 {
        i64::from_be_bytes(self.0[at..at + 8].try_into().expect("8 bytes"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cursor(bytes: &[u8]) -> Cursor<'_> {
        Cursor::new(bytes)
    }

    #[test]
    fn zigzag_varints() {
        assert_eq!(cursor(&[0x00]).varint().unwrap(), 0);
        assert_eq!(cursor(&[0x01]).varint().unwrap(), -1);
        assert_eq!(cursor(&[0x02]).varint().unwrap(), 1);
        assert_eq!(cursor(&[0xac, 0x02]).varint().unwrap(), 150);
        assert_eq!(cursor(&[0xfe, 0xff, 0xff, 0xff, 0x0f]).varint().unwrap(), i32::MAX);
        assert_eq!(cursor(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]).varlong().unwrap(), i64::MIN);
    }

    #[test]
    fn overlong_and_truncated_varints_fail() {
        assert!(cursor(&[0x80; 11]).varlong().is_err());
        assert!(cursor(&[0x80]).varint().is_err());
        assert!(cursor(&[0xfe, 0xff, 0xff, 0xff, 0x1f]).varint().is_err());
    }

    #[test]
    fn lengths_beyond_the_data_fail_without_allocating() {
        // length 2^30 announced, 1 byte present
        assert!(cursor(&[0x80, 0x80, 0x80, 0x80, 0x08, 0x00]).nullable_bytes().is_err());
        assert_eq!(cursor(&[0x01]).nullable_bytes().unwrap(), None);
    }
}
