//! The decoded shapes: records, headers, batches.

use bytes::Bytes;

use super::codec::Codec;

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

/// A record header. Kafka header keys are strings; the value may be null.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub key: Bytes,
    pub value: Option<Bytes>,
}

/// One data record. Key and value share the batch's buffer (no copy per record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub offset: i64,
    /// Milliseconds since the epoch; -1 for magic v0 messages, which carry none.
    pub timestamp: i64,
    pub timestamp_type: TimestampType,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<Header>,
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
    /// Data records; empty for control batches.
    pub records: Vec<Record>,
    /// For control batches: the control type of each control record.
    pub control: Vec<ControlType>,
    pub txn: BatchTxn,
}
