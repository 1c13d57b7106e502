//! The decoded shapes: records, headers, batches.

use std::ops::Range;

use bytes::Bytes;

use super::codec::Codec;
use super::cursor::Cursor;
pub use super::cursor::Header;

/// Whether a timestamp was set by the producer or by the broker on append.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TimestampType {
    Create,
    LogAppend,
}

impl TimestampType {
    pub fn from_attributes(attributes: u16) -> TimestampType {
        if attributes & 0x08 != 0 { TimestampType::LogAppend } else { TimestampType::Create }
    }

    pub fn name(self) -> &'static str {
        match self {
            TimestampType::Create => "create",
            TimestampType::LogAppend => "log_append",
        }
    }
}

/// A record's headers, read from the batch's bytes as they are iterated (they were
/// checked when the batch was decoded).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Headers<'a> {
    raw: &'a [u8],
    count: usize,
}

impl<'a> Headers<'a> {
    /// `count` headers in `raw` as a v2 record holds them (key length, key, value length
    /// or -1 for null, value; zig-zag varint lengths); `raw` must hold exactly those.
    pub fn parse(raw: &'a [u8], count: usize) -> Result<Headers<'a>, String> {
        let mut cur = Cursor::new(raw);
        cur.skip_headers(count)?;
        match cur.remaining() {
            0 => Ok(Headers { raw, count }),
            left => Err(format!("{left} bytes after {count} headers")),
        }
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = Header<'a>> + use<'a> {
        let mut cur = Cursor::new(self.raw);
        // Checked by `parse` (or the batch's decoding): every header reads.
        (0..self.count).map_while(move |_| cur.header().ok())
    }

    /// The bytes of the headers' keys and values.
    pub fn payload_bytes(&self) -> usize {
        self.iter().map(|h| h.key.len() + h.value.map_or(0, <[u8]>::len)).sum()
    }
}

/// One data record, borrowed from its batch: key, value and headers are slices of the
/// batch's decoded bytes (no copy and no reference count per record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    pub offset: i64,
    /// Milliseconds since the epoch; -1 for magic v0 messages, which carry none.
    pub timestamp: i64,
    pub timestamp_type: TimestampType,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: Headers<'a>,
}

/// Where one record's parts lie in its batch's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    pub offset: i64,
    pub timestamp: i64,
    pub timestamp_type: TimestampType,
    pub key: Option<Range<usize>>,
    pub value: Option<Range<usize>>,
    pub headers: Range<usize>,
    pub header_count: usize,
}

/// The data records of a batch: its decoded bytes, and where each record lies in them.
#[derive(Debug, Clone, Default)]
pub struct Records {
    data: Bytes,
    entries: Vec<Entry>,
}

impl Records {
    /// Records whose parts lie in `data` (every range within it, as the decoders make them).
    pub(super) fn new(data: Bytes, entries: Vec<Entry>) -> Records {
        Records { data, entries }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn first(&self) -> Option<Record<'_>> {
        self.entries.first().map(|e| self.record(e))
    }

    pub fn iter(&self) -> RecordIter<'_> {
        RecordIter { records: self, entries: self.entries.iter() }
    }

    #[inline]
    fn record<'a>(&'a self, e: &Entry) -> Record<'a> {
        let part = |range: &Option<Range<usize>>| range.clone().map(|r| &self.data[r]);
        Record {
            offset: e.offset,
            timestamp: e.timestamp,
            timestamp_type: e.timestamp_type,
            key: part(&e.key),
            value: part(&e.value),
            headers: Headers { raw: &self.data[e.headers.clone()], count: e.header_count },
        }
    }
}

/// The records of a batch, in order.
pub struct RecordIter<'a> {
    records: &'a Records,
    entries: std::slice::Iter<'a, Entry>,
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Record<'a>;

    #[inline]
    fn next(&mut self) -> Option<Record<'a>> {
        self.entries.next().map(|e| self.records.record(e))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.entries.size_hint()
    }
}

impl ExactSizeIterator for RecordIter<'_> {}

impl<'a> IntoIterator for &'a Records {
    type Item = Record<'a>;
    type IntoIter = RecordIter<'a>;

    fn into_iter(self) -> RecordIter<'a> {
        self.iter()
    }
}

/// What a batch carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchKind {
    /// Ordinary records (magic v2, not transactional).
    Data,
    /// Records written inside a transaction.
    Transactional,
    /// Transaction markers (COMMIT / ABORT) or other broker control records.
    Control,
    /// A legacy (magic v0/v1) message, possibly a compressed wrapper.
    Legacy,
}

/// The type of a control record (the key's second int16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ControlType {
    Abort,
    Commit,
    /// KRaft and other broker-internal control records; never transaction markers.
    Other(i16),
}

impl ControlType {
    pub fn from_code(code: i16) -> ControlType {
        match code {
            0 => ControlType::Abort,
            1 => ControlType::Commit,
            other => ControlType::Other(other),
        }
    }
}

/// Where a batch stands in read_committed terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchTxn {
    /// Not transactional, or its transaction committed within this segment.
    Committed,
    /// Its transaction's marker is not in this segment: it must not be guessed. The
    /// committer resolves it when the marker's segment arrives.
    Open { producer_id: i64 },
}

/// One decoded record batch (or legacy message set entry).
#[derive(Debug, Clone)]
pub struct Batch {
    /// Byte position of the batch in the file.
    pub position: u64,
    /// Bytes the batch occupies in the file.
    pub size: u32,
    pub magic: i8,
    pub base_offset: i64,
    pub last_offset: i64,
    pub kind: BatchKind,
    pub codec: Codec,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// The batch header's max timestamp (v2; -1 for legacy entries): the broker's clock
    /// for a control batch and for a batch of a `LogAppendTime` topic.
    pub max_timestamp: i64,
    /// Data records; empty for control batches.
    pub records: Records,
    /// For control batches: the control type of each control record.
    pub control: Vec<ControlType>,
    pub txn: BatchTxn,
}

/// Headers encoded as a v2 record holds them, for tests (and the fuzz harness) to build records from.
#[cfg(any(test, feature = "fuzzing"))]
pub fn encode_headers(headers: &[(&[u8], Option<&[u8]>)]) -> Vec<u8> {
    use crate::varint::put_zigzag as zigzag;
    let mut out = Vec::new();
    for (key, value) in headers {
        for part in [Some(*key), *value] {
            match part {
                Some(b) => {
                    zigzag(&mut out, b.len() as i64);
                    out.extend_from_slice(b);
                }
                None => zigzag(&mut out, -1),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_read_back_as_written_and_bad_ones_are_refused() {
        let long = vec![b'v'; 300];
        let written: [(&[u8], Option<&[u8]>); 3] = [(b"trace", Some(b"abc")), (b"empty", None), (b"long", Some(&long))];
        let raw = encode_headers(&written);
        let headers = Headers::parse(&raw, 3).unwrap();
        let read: Vec<_> = headers.iter().map(|h| (h.key, h.value)).collect();
        assert_eq!(read, written);
        assert_eq!((headers.len(), headers.payload_bytes()), (3, 5 + 3 + 5 + 4 + 300));
        assert!(Headers::default().is_empty());

        let e = Headers::parse(&raw, 2).unwrap_err();
        assert!(e.contains("bytes after 2 headers"), "{e}");
        let e = Headers::parse(&raw, 4).unwrap_err();
        assert!(e.contains("unexpected end of data"), "{e}");
        let e = Headers::parse(&encode_headers(&[(b"k", None)])[..1], 1).unwrap_err();
        assert!(e.contains("length 1 with 0 bytes left"), "{e}");
        // A null key: length -1 (zig-zag 0x01).
        let e = Headers::parse(&[0x01, 0x01], 1).unwrap_err();
        assert!(e.contains("null header key"), "{e}");
    }
}
