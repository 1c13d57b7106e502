//! Legacy message sets, magic v0 and v1 (topics upgraded from old brokers still have
//! them). One entry is one message, or a compressed wrapper whose value is a whole inner
//! message set.
//!
//! ```text
//! offset i64 | size i32 | crc u32 | magic i8 | attributes i8 | [timestamp i64, v1 only] |
//! key (i32 length, -1 null) | value (i32 length, -1 null)
//! ```
//! The CRC-32 covers everything from `magic` on. In a v1 wrapper the inner offsets are
//! relative and the wrapper carries the offset of the last inner message; in a v0
//! wrapper they are absolute.

use std::ops::Range;

use bytes::Bytes;

use super::Limits;
use super::codec::Codec;
use super::error::{SegmentErrorKind, check_offset};
use super::record::{Entry, Records, TimestampType};

/// One parsed legacy message; key and value as positions in the buffer it was read from.
struct Message {
    offset: i64,
    magic: i8,
    attributes: u16,
    timestamp: i64,
    key: Option<Range<usize>>,
    value: Option<Range<usize>>,
}

/// Decodes one legacy entry (prefix included) into its records: one for a plain
/// message, the inner messages for a compressed wrapper. Returns the codec too.
pub fn decode_entry(entry: Bytes, limits: &Limits) -> Result<(Codec, Records), SegmentErrorKind> {
    let outer = parse_message(&entry, 0)?;
    check_offset(outer.offset, None)?;
    let codec = Codec::from_attributes(outer.attributes)?;
    if codec == Codec::None {
        return Ok((codec, Records::new(entry, vec![plain_record(outer, None)])));
    }
    let compressed = outer
        .value
        .clone()
        .map(|span| &entry[span])
        .ok_or_else(|| SegmentErrorKind::Malformed("compressed wrapper message with null value".into()))?;
    let inner = Bytes::from(codec.decompress_legacy(outer.magic, compressed, limits.max_decompressed_bytes)?);
    let mut messages = Vec::new();
    let mut pos = 0;
    while pos < inner.len() {
        let index = messages.len();
        let inner_err = |detail: String| SegmentErrorKind::Record {
            index,
            offset: None,
            detail: format!("inner message: {detail}"),
        };
        let size = inner
            .get(pos + 8..pos + 12)
            .map(|b| i32::from_be_bytes(b.try_into().expect("4 bytes")))
            .ok_or_else(|| inner_err("truncated entry header".into()))?;
        let end = usize::try_from(size)
            .ok()
            .and_then(|s| (pos + 12).checked_add(s))
            .filter(|&end| end <= inner.len())
            .ok_or_else(|| inner_err(format!("size {size} with {} bytes left", inner.len() - pos - 12)))?;
        let message = parse_message(&inner[pos..end], pos).map_err(|e| inner_err(e.to_string()))?;
        if Codec::from_attributes(message.attributes)? != Codec::None {
            return Err(inner_err("nested compression".into()));
        }
        messages.push(message);
        pos = end;
    }
    let last_inner = messages
        .last()
        .map(|m| m.offset)
        .ok_or_else(|| SegmentErrorKind::Malformed("compressed wrapper with no inner messages".into()))?;
    // v1: relative inner offsets, the last one is the wrapper's; v0: absolute.
    let rebase = match outer.magic {
        0 => 0,
        _ => outer.offset.checked_sub(last_inner).ok_or_else(|| {
            SegmentErrorKind::Malformed(format!(
                "relative inner offset {last_inner} does not fit the wrapper's offset {}",
                outer.offset
            ))
        })?,
    };
    let log_append = (outer.magic >= 1 && TimestampType::from_attributes(outer.attributes) == TimestampType::LogAppend)
        .then_some(outer.timestamp);
    let mut records: Vec<Entry> = Vec::with_capacity(messages.len());
    for (index, mut m) in messages.into_iter().enumerate() {
        let stored = m.offset;
        // Only below i64::MIN can this overflow: every inner offset is below the last.
        m.offset = stored.saturating_add(rebase);
        let problem = match check_offset(m.offset, records.last().map(|r| r.offset)) {
            Err(e) => Some(e.to_string()),
            Ok(()) if m.offset > outer.offset => Some(format!("beyond the wrapper's offset {}", outer.offset)),
            Ok(()) => None,
        };
        if let Some(problem) = problem {
            return Err(SegmentErrorKind::Record {
                index,
                offset: Some(m.offset),
                detail: format!("inner message (stored offset {stored}): {problem}"),
            });
        }
        records.push(plain_record(m, log_append));
    }
    Ok((codec, Records::new(inner, records)))
}

/// The base offset of an entry's records: the first inner offset for wrappers.
pub fn first_offset(records: &Records, entry_offset: i64) -> i64 {
    records.first().map_or(entry_offset, |r| r.offset)
}

fn plain_record(m: Message, log_append_timestamp: Option<i64>) -> Entry {
    let (timestamp, timestamp_type) = match (m.magic, log_append_timestamp) {
        (0, _) => (-1, TimestampType::Create),
        (_, Some(ts)) => (ts, TimestampType::LogAppend),
        (_, None) => (m.timestamp, TimestampType::from_attributes(m.attributes)),
    };
    Entry { offset: m.offset, timestamp, timestamp_type, key: m.key, value: m.value, headers: 0..0, header_count: 0 }
}

/// Parses the message `entry`, which starts at `base` in its buffer.
fn parse_message(entry: &[u8], base: usize) -> Result<Message, SegmentErrorKind> {
    let short = || SegmentErrorKind::Malformed(format!("legacy message of {} bytes is too short", entry.len()));
    if entry.len() < 26 {
        return Err(short());
    }
    let offset = i64::from_be_bytes(entry[0..8].try_into().expect("8 bytes"));
    let stored = u32::from_be_bytes(entry[12..16].try_into().expect("4 bytes"));
    let computed = crc32fast::hash(&entry[16..]);
    if stored != computed {
        return Err(SegmentErrorKind::Checksum { algorithm: "CRC-32", stored, computed });
    }
    let magic = entry[16] as i8;
    let attributes = entry[17] as u16;
    let mut pos = 18;
    let timestamp = match magic {
        0 => -1,
        1 => {
            let ts = entry.get(18..26).ok_or_else(short)?;
            pos = 26;
            i64::from_be_bytes(ts.try_into().expect("8 bytes"))
        }
        other => return Err(SegmentErrorKind::UnsupportedMagic(other)),
    };
    let key = nullable(entry, &mut pos)?.map(|r| base + r.start..base + r.end);
    let value = nullable(entry, &mut pos)?.map(|r| base + r.start..base + r.end);
    if pos != entry.len() {
        return Err(SegmentErrorKind::Malformed(format!(
            "{} bytes after the value of a legacy message",
            entry.len() - pos
        )));
    }
    Ok(Message { offset, magic, attributes, timestamp, key, value })
}

fn nullable(entry: &[u8], pos: &mut usize) -> Result<Option<Range<usize>>, SegmentErrorKind> {
    let len = entry
        .get(*pos..*pos + 4)
        .map(|b| i32::from_be_bytes(b.try_into().expect("4 bytes")))
        .ok_or_else(|| SegmentErrorKind::Malformed("legacy message length field truncated".into()))?;
    *pos += 4;
    if len == -1 {
        return Ok(None);
    }
    let end = usize::try_from(len).ok().map(|l| *pos + l).filter(|&end| end <= entry.len()).ok_or_else(|| {
        SegmentErrorKind::Malformed(format!("legacy message field length {len} with {} bytes left", entry.len() - *pos))
    })?;
    let span = *pos..end;
    *pos = end;
    Ok(Some(span))
}
