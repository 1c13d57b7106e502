//! The materializer's core: one segment → Parquet data files of its table (and of its
//! dead-letter table), with the bad-record mode applied and open transactions kept apart.
//!
//! ```text
//!  SegmentReader ──batches──▶ RecordConverter ──RecordBatch──▶ TableWriter ──▶ files
//!        │                        │ bad record: suspend → error naming it     (one per partition
//!        │                        │             skip    → counted               value when the
//!        │                        │             dlq     → dead-letter writer    table is partitioned)
//!        └─ open-transaction batches → a writer per producer (pending files)
//! ```
//!
//! The table's files (committed and pending) are laid out by `options.partition_spec`;
//! dead-letter tables are never partitioned.

use std::collections::BTreeMap;
use std::sync::Arc;

use iceberg::io::FileIO;
use iceberg::spec::{PartitionSpec, Schema, StructType};

use crate::columns::{DecodeError, PayloadDecoder, RecordConverter, SchemaLoadError};
use crate::config::{BadRecordMode, Envelope, Format, Mode, TopicConfig};
use crate::datafile::{Pages, TableWriter, WriterOptions, WrittenFile};
use crate::retry::Retryable;
use crate::schema::layout::dead_letter_struct;
use crate::segment::{BatchTxn, Record, SegmentError, SegmentReader, SegmentSummary};
use crate::table::compaction::CompactionPolicy;

/// A record batch goes to the Parquet writer at this many rows, or at a sixteenth of the
/// target file size (so files roll close to the target).
pub const BATCH_ROWS: usize = 8192;
pub const BATCHES_PER_FILE: u64 = 16;

/// What stopped a conversion.
#[derive(Debug, thiserror::Error)]
pub enum MaterializeError {
    #[error(transparent)]
    Segment(#[from] SegmentError),
    /// The table's mode is `suspend` and a record could not be decoded.
    #[error("table suspended: {file}: partition {partition} offset {offset}: {error}")]
    Suspended { file: String, partition: i32, offset: i64, error: String },
    /// Writing the segment's files failed: the warehouse's storage (a 5xx, a full disk, a
    /// permission), never the segment's records, whose partition values make bounded
    /// paths. Retryable: the same segment succeeds once the storage does.
    #[error("{file}: writing data files: {source}")]
    Write { file: String, source: Box<iceberg::Error> },
    /// The Schema Registry could not be reached.
    #[error(transparent)]
    Schema(SchemaLoadError),
    /// A panic while converting (a bug, or data beyond what Arrow can hold): the same
    /// input would fail again.
    #[error("internal error while converting {file} (the segment is not written): {panic}")]
    Internal { file: String, panic: String },
}

impl From<iceberg::Error> for MaterializeError {
    /// Located by `MaterializeError::at`.
    fn from(source: iceberg::Error) -> Self {
        MaterializeError::Write { file: String::new(), source: Box::new(source) }
    }
}

impl MaterializeError {
    /// A write failure located at the segment `file`.
    fn at(self, file: &str) -> Self {
        match self {
            MaterializeError::Write { source, .. } => MaterializeError::Write { file: file.to_string(), source },
            other => other,
        }
    }
}

impl Retryable for MaterializeError {
    fn retryable(&self) -> bool {
        match self {
            MaterializeError::Segment(e) => e.retryable(),
            MaterializeError::Suspended { .. } => false,
            MaterializeError::Write { source, .. } => {
                source.retryable() || source.kind() == iceberg::ErrorKind::Unexpected
            }
            MaterializeError::Schema(e) => e.retryable(),
            MaterializeError::Internal { .. } => false,
        }
    }
}

/// Where and how to write one segment's files.
pub struct MaterializeOptions {
    pub topic: TopicConfig,
    pub partition: i32,
    /// Directory (path or URI) of the table's data files.
    pub data_dir: String,
    /// Directory of the dead-letter table's data files.
    pub dead_letter_dir: String,
    /// Stable identity of the input, part of every file name.
    pub source_id: String,
    /// How the table's files are partitioned (bound to the schema the files are written with).
    pub partition_spec: Arc<PartitionSpec>,
    /// How the table's files are compressed ([`table_pages`]).
    pub pages: Pages,
}

/// The pages of a table's new files: fresh when Floe compacts the table, which then
/// rewrites them with zstd; zstd when the catalog compacts it (S3 Tables, unless told
/// otherwise), whose rewrite Floe does not control.
pub fn table_pages(topic: &TopicConfig, floe_compacts: bool) -> Pages {
    match floe_compacts {
        true => Pages::Fresh { small: CompactionPolicy::from(topic).small() },
        false => Pages::Zstd,
    }
}

/// Files written for one segment.
#[derive(Debug)]
pub struct Materialized {
    pub files: Vec<WrittenFile>,
    pub dead_letter_files: Vec<WrittenFile>,
    /// Transactions still open at the end of the segment, by producer id.
    pub open_parts: BTreeMap<i64, OpenPart>,
    pub schema: Arc<Schema>,
    /// The spec `files` and the open parts' files are laid out by, and the type of their partition values.
    pub partition_spec: Arc<PartitionSpec>,
    pub partition_type: StructType,
    pub records: u64,
    pub skipped: u64,
    pub dead_letters: u64,
    pub summary: SegmentSummary,
}

/// What a segment wrote of a transaction it leaves open: its records' files, and its bad
/// records written as dead letters (mode `dlq`) in the table's data directory. None of it
/// counts until a COMMIT marker resolves the transaction: a transaction that aborts never
/// had those records, bad ones included.
#[derive(Debug, Default)]
pub struct OpenPart {
    pub files: Vec<WrittenFile>,
    pub dead_letter_files: Vec<WrittenFile>,
    /// Mode `suspend`: its first bad record (written nowhere), which suspends the table
    /// once the transaction commits.
    pub suspends_at: Option<BadRecordAt>,
}

/// A record that could not be decoded: its offset, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct BadRecordAt {
    pub offset: i64,
    pub error: String,
}

/// The sinks of a transaction left open, as [`OpenPart`] once closed.
struct OpenSinks {
    data: Sink,
    dead_letters: Option<Sink>,
    suspends_at: Option<BadRecordAt>,
}

/// A converter and its writer, flushed every `BATCH_ROWS` rows (or sooner: at a share
/// of the target file size, or when a column's offsets fill up).
struct Sink {
    converter: RecordConverter,
    writer: TableWriter,
    batch_bytes: usize,
}

impl Sink {
    async fn flush_if_full(&mut self) -> Result<(), iceberg::Error> {
        let c = &self.converter;
        if c.rows() >= BATCH_ROWS || c.payload_bytes() >= self.batch_bytes || c.offsets_full() {
            self.flush().await
        } else {
            Ok(())
        }
    }

    async fn flush(&mut self) -> Result<(), iceberg::Error> {
        if let Some((first, last)) = self.converter.offsets() {
            let batch = self.converter.finish();
            self.writer.write(&batch, first, last).await?;
        }
        Ok(())
    }

    async fn close(mut self) -> Result<Vec<WrittenFile>, iceberg::Error> {
        self.flush().await?;
        self.writer.close().await
    }
}

/// Decodes every batch of `reader` into data files under `options.data_dir`. A panic on
/// the way (in a library, or `Arrow`'s offsets overflowing) becomes
/// [`MaterializeError::Internal`] naming the segment, not a crash.
pub async fn materialize_segment(
    mut reader: SegmentReader,
    schema: Arc<Schema>,
    key: Arc<dyn PayloadDecoder>,
    value: Arc<dyn PayloadDecoder>,
    options: &MaterializeOptions,
    file_io: &FileIO,
) -> Result<Materialized, MaterializeError> {
    let file = reader.summary().file.clone();
    let work = async move {
        let target = options.topic.target_file_size;
        let unpartitioned = Arc::new(PartitionSpec::unpartition_spec());
        let sink = |dir: &str,
                    source_id: String,
                    schema: Arc<Schema>,
                    spec: &Arc<PartitionSpec>,
                    pages: Pages|
         -> Result<Sink, iceberg::Error> {
            let writer_options = WriterOptions {
                file_io: file_io.clone(),
                dir: dir.to_string(),
                partition: options.partition,
                source_id,
                schema: schema.clone(),
                target_size: target,
                pages,
            };
            Ok(Sink {
                converter: RecordConverter::new(schema, options.partition, key.clone(), value.clone())?,
                writer: TableWriter::new(writer_options, spec.clone())?,
                batch_bytes: (target / BATCHES_PER_FILE) as usize,
            })
        };
        let spec = &options.partition_spec;
        // The table's files as the options say; dead letters, rare and never compacted
        // early, are zstd.
        let pages = options.pages;
        let mut main = sink(&options.data_dir, options.source_id.clone(), schema.clone(), spec, pages)?;
        let partition_type = main.writer.partition_type();
        let mut dead_letters: Option<Sink> = None;
        let mut open: BTreeMap<i64, OpenSinks> = BTreeMap::new();
        let (mut records, mut skipped, mut dead) = (0u64, 0u64, 0u64);
        let dead_letter_schema = || -> Result<Arc<Schema>, iceberg::Error> {
            crate::schema::plan(None, &dead_letter_struct())
                .map(|planned| Arc::new(planned.schema))
                .map_err(|e| iceberg::Error::new(iceberg::ErrorKind::Unexpected, e.to_string()))
        };

        // The segment's rows, estimated from those read so far and the bytes they took:
        // what decides whether the table's first file is fresh (`Pages::Fresh`).
        let size = reader.size();
        let mut rows_read = 0u64;
        while let Some(batch) = reader.next_batch().await? {
            rows_read += batch.records.len() as u64;
            if let Some(size) = size {
                let read = (batch.position + u64::from(batch.size)).max(1);
                main.writer.expect_rows((rows_read as f64 * size as f64 / read as f64) as u64);
            }
            // Where the batch's rows and dead letters go: the segment's own sinks, or
            // (a transaction left open) its producer's, in the table's data directory.
            let (target, dlq_sink, mut suspends_at, dlq_dir, dlq_source) = match batch.txn {
                BatchTxn::Committed => {
                    (&mut main, &mut dead_letters, None, &options.dead_letter_dir, options.source_id.clone())
                }
                BatchTxn::Open { producer_id } => {
                    let part = match open.entry(producer_id) {
                        std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                        std::collections::btree_map::Entry::Vacant(e) => e.insert(OpenSinks {
                            data: sink(
                                &options.data_dir,
                                format!("{}-txn{producer_id}", options.source_id),
                                schema.clone(),
                                spec,
                                pages,
                            )?,
                            dead_letters: None,
                            suspends_at: None,
                        }),
                    };
                    let source = format!("{}-txn{producer_id}-dlq", options.source_id);
                    (&mut part.data, &mut part.dead_letters, Some(&mut part.suspends_at), &options.data_dir, source)
                }
            };
            for record in &batch.records {
                let (record, unwrapped) = unwrap_envelope(&options.topic, record);
                let mut outcome = match unwrapped.and_then(|()| keyless(&options.topic, &record).map_or(Ok(()), Err)) {
                    Err(error) => Err(error),
                    Ok(()) => target.converter.append(&record),
                };
                // A record may name two schemas not loaded yet: its key's and its value's.
                let mut loads = 0;
                while let Err(DecodeError { missing_schema: Some(id), part, position, .. }) = &outcome
                    && loads < 2
                {
                    loads += 1;
                    outcome = match target.converter.load_schema(part, *id).await {
                        Ok(()) => target.converter.append(&record),
                        Err(e) if e.retryable => return Err(MaterializeError::Schema(e)),
                        // Located where the id is: the payload's byte 1, or 0 when a record
                        // header holds it.
                        Err(e) => Err(DecodeError {
                            part,
                            position: *position,
                            detail: e.to_string(),
                            missing_schema: None,
                            deletes_key: false,
                        }),
                    };
                }
                // A change event deleting its key (an Avro Debezium delete): its tombstone.
                if let Err(DecodeError { deletes_key: true, .. }) = &outcome {
                    outcome = target.converter.append(&Record { value: None, ..record });
                }
                let error = match outcome {
                    Ok(()) => {
                        records += 1;
                        target.flush_if_full().await?;
                        continue;
                    }
                    Err(error) => error,
                };
                match (options.topic.bad_records, suspends_at.as_deref_mut()) {
                    (BadRecordMode::Suspend, None) => {
                        return Err(MaterializeError::Suspended {
                            file: reader.summary().file.clone(),
                            partition: options.partition,
                            offset: record.offset,
                            error: error.to_string(),
                        });
                    }
                    // A record of an open transaction suspends the table only once the
                    // transaction commits (none if it aborts): remembered with its part,
                    // written nowhere.
                    (BadRecordMode::Suspend, Some(first)) => {
                        tracing::warn!(topic = %options.topic.topic, partition = options.partition,
                            offset = record.offset, %error,
                            "bad record in an open transaction: the table is suspended if the transaction commits");
                        first.get_or_insert(BadRecordAt { offset: record.offset, error: error.to_string() });
                    }
                    (BadRecordMode::Skip, _) => {
                        skipped += 1;
                        tracing::warn!(
                            topic = %options.topic.topic,
                            partition = options.partition,
                            offset = record.offset,
                            %error,
                            "bad record skipped"
                        );
                    }
                    (BadRecordMode::Dlq, open) => {
                        let dlq = match dlq_sink {
                            Some(d) => d,
                            None => dlq_sink.insert(sink(
                                dlq_dir,
                                dlq_source.clone(),
                                dead_letter_schema()?,
                                &unpartitioned,
                                Pages::Zstd,
                            )?),
                        };
                        dlq.converter.append_dead_letter(&record, &error.to_string());
                        dlq.flush_if_full().await?;
                        if open.is_none() {
                            dead += 1;
                        }
                    }
                }
            }
        }
        let mut open_parts = BTreeMap::new();
        for (pid, part) in open {
            let dead_letter_files = match part.dead_letters {
                Some(d) => d.close().await?,
                None => Vec::new(),
            };
            let files = part.data.close().await?;
            open_parts.insert(pid, OpenPart { files, dead_letter_files, suspends_at: part.suspends_at });
        }
        Ok(Materialized {
            files: main.close().await?,
            dead_letter_files: match dead_letters {
                Some(d) => d.close().await?,
                None => Vec::new(),
            },
            open_parts,
            schema,
            partition_spec: options.partition_spec.clone(),
            partition_type,
            records,
            skipped,
            dead_letters: dead,
            summary: reader.into_summary(),
        })
    };
    match crate::guard::guarded(work).await {
        Ok(done) => done.map_err(|e| e.at(&file)),
        Err(panic) => Err(MaterializeError::Internal { file, panic }),
    }
}

/// The record as its table takes it: a Debezium change event of JSON
/// (`envelope = "debezium"`) becomes its `after` image, or a tombstone for a delete; an
/// event that is none of those is a bad record (the record, as it was, for the
/// dead-letter table). Avro events are unwrapped as they are decoded (formats/avro).
fn unwrap_envelope<'r>(topic: &TopicConfig, record: Record<'r>) -> (Record<'r>, Result<(), DecodeError>) {
    let (Some(Envelope::Debezium), Format::Json, Some(value)) = (topic.envelope, topic.value_format, record.value)
    else {
        return (record, Ok(()));
    };
    match crate::formats::debezium::unwrap(value) {
        Ok(after) => (Record { value: after, ..record }, Ok(())),
        Err(detail) => {
            (record, Err(DecodeError { part: "value", position: 0, detail, missing_schema: None, deletes_key: false }))
        }
    }
}

/// An upsert record that names no key, a bad record: a null message key when the table
/// is keyed on it, a tombstone (no value) when it is keyed on the value's columns.
fn keyless(topic: &TopicConfig, record: &Record) -> Option<DecodeError> {
    if topic.mode != Mode::Upsert {
        return None;
    }
    let (part, detail) = match (topic.key_columns.is_empty(), record.key, record.value) {
        (true, None, _) => ("key", "an upsert record needs a key: this one has none"),
        (false, _, None) => ("value", "a tombstone of a table keyed on value columns names no key"),
        _ => return None,
    };
    Some(DecodeError { part, position: 0, detail: detail.into(), missing_schema: None, deletes_key: false })
}

/// A short stable identity of an input object: its name and version (ETag, size…).
pub fn source_id(name: &str, version: &str) -> String {
    let mut bytes = Vec::with_capacity(name.len() + version.len() + 1);
    bytes.extend_from_slice(name.as_bytes());
    bytes.push(0);
    bytes.extend_from_slice(version.as_bytes());
    format!("{:016x}", twox_hash::XxHash64::oneshot(0, &bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FloeConfig;
    use crate::segment::{Headers, TimestampType};

    fn record<'a>(key: Option<&'a [u8]>, value: Option<&'a [u8]>) -> Record<'a> {
        Record {
            offset: 9,
            timestamp: 0,
            timestamp_type: TimestampType::Create,
            key,
            value,
            headers: Headers::default(),
        }
    }

    fn topic(settings: &str) -> TopicConfig {
        FloeConfig::parse(&format!("[[topics]]\ntopic = \"t\"\nvalue_format = \"json\"\n{settings}"))
            .unwrap()
            .resolve("t")
            .unwrap()
    }

    #[test]
    fn an_upsert_record_without_its_key_is_a_bad_record() {
        let by_message_key = topic("mode = \"upsert\"");
        assert!(keyless(&by_message_key, &record(Some(b"k"), None)).is_none(), "a tombstone of its key");
        let e = keyless(&by_message_key, &record(None, Some(b"{}"))).unwrap();
        assert_eq!((e.part, e.detail.as_str()), ("key", "an upsert record needs a key: this one has none"));
        let by_columns = topic("mode = \"upsert\"\nkey_columns = [\"id\"]");
        assert!(keyless(&by_columns, &record(None, Some(b"{\"id\": 1}"))).is_none(), "the key is in the value");
        let e = keyless(&by_columns, &record(Some(b"k"), None)).unwrap();
        assert!(e.detail.contains("tombstone of a table keyed on value columns"), "{}", e.detail);
        assert!(keyless(&topic(""), &record(None, None)).is_none(), "append tables take any record");
    }

    #[test]
    fn a_debezium_event_becomes_its_after_image_or_a_tombstone_and_a_bad_one_keeps_its_bytes() {
        let debezium = topic("mode = \"upsert\"\nenvelope = \"debezium\"");
        let event = br#"{"after": {"id": 1}, "op": "c"}"#;
        let (unwrapped, ok) = unwrap_envelope(&debezium, record(Some(b"k"), Some(event)));
        assert_eq!((unwrapped.value, ok.is_ok()), (Some(&br#"{"id": 1}"#[..]), true));
        let (deleted, _) = unwrap_envelope(&debezium, record(Some(b"k"), Some(br#"{"after": null, "op": "d"}"#)));
        assert_eq!(deleted.value, None);
        let (tombstone, ok) = unwrap_envelope(&debezium, record(Some(b"k"), None));
        assert_eq!((tombstone.value, ok.is_ok()), (None, true));
        let (bad, error) = unwrap_envelope(&debezium, record(Some(b"k"), Some(b"{\"op\": \"t\"}")));
        assert_eq!(bad.value, Some(&b"{\"op\": \"t\"}"[..]), "a dead letter keeps the record as it was");
        assert!(error.unwrap_err().detail.contains("op \"t\""));
        let plain = topic("mode = \"upsert\"");
        assert_eq!(unwrap_envelope(&plain, record(None, Some(event))).0.value, Some(&event[..]));
    }
}
