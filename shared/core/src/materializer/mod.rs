//! The materializer: a segment object's arrival → Parquet in the warehouse → one
//! CommitTask on the queue.
//!
//! ```text
//!  event ─▶ objects_in_event ─▶ ObjectRef ─▶ SegmentLocation::parse(key)
//!                                              │ index file, tiered .log, topic not enabled → Ignored
//!                                              ▼
//!        tiered storage: .rsm-manifest ─▶ chunk index ─▶ ChunkedSource(.log), txn index from .indexes
//!        broker log dir / LocalTieredStorage: .log ─▶ the object itself, sibling .txnindex
//!                                              ▼
//!                     spec: the table's current one, or partition_by bound to the schema (new table)
//!                     materialize_segment ─▶ Parquet (multipart upload) under
//!                     <table location>/data/[<partition path>/]<partition>-<first offset>-<attempt>-<source id>.parquet
//!                                              ▼
//!                     CommitTask ─▶ TaskQueue (group = table, dedup id = task id)
//! ```
//!
//! A segment that fails on its topic's configuration (a bad schema reference, see
//! [`MaterializerError::is_config_issue`]) still fails, and is also recorded against its
//! table in the table registry, which status shows as `config issue`.
//!
//! The same object gives the same task id (a retried or duplicated event queues the same
//! task) but never the same file names: each attempt writes files of its own, so no file
//! a snapshot may reference is written over. The same offsets
//! uploaded twice under two segment ids give two tasks; the committer keeps one copy of
//! each offset.

pub mod objects;
pub mod segment;

use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;

use iceberg::io::FileIO;
use iceberg::spec::FormatVersion;

use crate::config::{FloeConfig, Format, TopicConfig};
use crate::datafile::WrittenFile;
use crate::formats::json::infer;
use crate::formats::{FormatError, Formats};
use crate::lock::registry::{Activity, Failure, MaintenanceEvent, TableRegistry};
use crate::materializer::segment::{
    MaterializeError, MaterializeOptions, Materialized, materialize_segment, source_id, table_pages,
};
use crate::partition::{PartitionError, spec_for_table};
use crate::queue::{QueueError, TaskQueue};
use crate::registry::SchemaRegistry;
use crate::retry::Retryable;
use crate::segment::tiered::{ChunkedSource, Manifest, TieredError, transaction_index};
use crate::segment::{
    Limits, ObjectKind, SegmentLayout, SegmentLocation, SegmentReader, SegmentSource, parse_txn_index,
};
use crate::table::TableError;
use crate::task::{
    CommitTask, OffsetRange, PendingTransaction, SourceObject, SuspendTask, TableName, Task, TaskFile, TaskSchema,
    partitioned, task_version,
};
pub use objects::{LocalObjects, ObjectRef, ObjectStore, Opened};

/// Why an object could not be materialized.
#[derive(Debug, thiserror::Error)]
pub enum MaterializerError {
    #[error("{uri}: {source}")]
    Object { uri: String, source: io::Error },
    #[error(transparent)]
    Tiered(#[from] TieredError),
    #[error("{uri}: transaction index: {detail}")]
    TxnIndex { uri: String, detail: String },
    #[error(transparent)]
    Format(#[from] FormatError),
    #[error(transparent)]
    Materialize(#[from] MaterializeError),
    #[error("{0}")]
    Task(String),
    /// Looking the table up failed (the catalog, the metadata files, Floe's summary).
    #[error(transparent)]
    Table(#[from] TableError),
    #[error(transparent)]
    Queue(#[from] QueueError),
    /// `partition_by` does not fit the table's schema.
    #[error(transparent)]
    Partition(#[from] PartitionError),
}

impl Retryable for MaterializerError {
    /// True when the same object may succeed later (throttling, 5xx, network); false when
    /// the object itself is the problem (corrupt, encrypted, undecodable).
    fn retryable(&self) -> bool {
        match self {
            MaterializerError::Object { source, .. } => source.retryable(),
            MaterializerError::Tiered(e) => e.retryable(),
            MaterializerError::TxnIndex { .. } | MaterializerError::Task(_) => false,
            MaterializerError::Format(e) => e.retryable(),
            MaterializerError::Materialize(e) => e.retryable(),
            MaterializerError::Queue(e) => e.retryable(),
            MaterializerError::Table(e) => e.retryable(),
            MaterializerError::Partition(e) => e.retryable(),
        }
    }
}

impl MaterializerError {
    /// True when the topic's configuration is what fails, and fixing it is what helps: a
    /// schema reference that cannot be resolved (a schema file that does not parse, a
    /// Protobuf message not in its descriptor, a subject or schema the registry does not
    /// have, credentials it refuses), a schema that cannot map to a table, a
    /// `partition_by` that does not fit it. Status shows these as the table's `config
    /// issue`. A registry that cannot be reached, or answers 5xx or 429, is not one: that
    /// is retried.
    pub fn is_config_issue(&self) -> bool {
        match self {
            MaterializerError::Format(e) => !e.retryable(),
            MaterializerError::Partition(_) => true,
            _ => false,
        }
    }
}

/// What became of one object.
#[derive(Debug)]
pub enum Outcome {
    /// Not a segment to materialize (an index, a topic not enabled, …).
    Ignored { uri: String, reason: String },
    /// Files written and the task queued.
    Queued(Box<CommitTask>),
}

pub use crate::table::{TableLookup, TableView, table_location};

/// Where one segment's files go: its table (for messages), Kafka partition, the data and
/// dead-letter directories, and the input's identity (part of every file name).
pub struct Destination {
    pub table: String,
    pub partition: i32,
    pub data_dir: String,
    /// Where mode `dlq` writes a segment's dead letters (unused by the other modes).
    pub dead_letter_dir: String,
    pub source_id: String,
}

/// What writing one segment needs: its formats and the writer's options.
pub struct Prepared {
    pub formats: Formats,
    pub options: MaterializeOptions,
}

/// Prepares one segment of `topic` for writing — the same for the materializer and
/// `floe convert`: plain JSON's types inferred from the segment first (a pass over what
/// `open` reads), the formats loaded (field ids of the `current` table's schema, when it
/// exists), the partition spec (the current table's, else `partition_by`), the options.
pub async fn prepare_segment(
    config: &FloeConfig,
    topic: &TopicConfig,
    registry: Option<Arc<dyn SchemaRegistry>>,
    current: Option<&TableView>,
    destination: Destination,
    open: impl AsyncFnOnce() -> Result<SegmentReader, MaterializerError>,
) -> Result<Prepared, MaterializerError> {
    let uses_json = [topic.key_format, topic.value_format].contains(&Format::Json);
    let inferred = match uses_json {
        true => Some(infer(open().await?, topic.envelope).await.map_err(MaterializeError::Segment)?),
        false => None,
    };
    let formats =
        Formats::load_for_table(config, topic, registry, inferred.as_ref(), current.map(|v| &v.schema)).await?;
    let spec = spec_for_table(
        &topic.partition_by,
        &topic.partition_by_field,
        &destination.table,
        &formats.schema,
        current.map(|v| &v.partition_spec),
    )?;
    let options = MaterializeOptions {
        topic: topic.clone(),
        partition: destination.partition,
        data_dir: destination.data_dir,
        dead_letter_dir: destination.dead_letter_dir,
        source_id: destination.source_id,
        partition_spec: Arc::new(spec),
        pages: table_pages(topic, config.own_maintenance().compaction),
    };
    Ok(Prepared { formats, options })
}

/// Turns segment objects into data files and tasks.
pub struct Materializer {
    pub config: Arc<FloeConfig>,
    pub registry: Option<Arc<dyn SchemaRegistry>>,
    pub objects: Arc<dyn ObjectStore>,
    /// Where the warehouse's files are written.
    pub file_io: FileIO,
    /// Warehouse root: `s3://bucket/prefix` or a local directory.
    pub warehouse: String,
    pub queue: Arc<dyn TaskQueue>,
    pub tables: Option<Arc<dyn TableLookup>>,
    /// Where a segment that fails on its topic's configuration is recorded against its
    /// table ([`MaterializerError::is_config_issue`]), for status to show; the committer's
    /// next commit to the table clears it.
    pub table_registry: Option<Arc<dyn TableRegistry>>,
    pub limits: Limits,
}

/// A segment ready to decode.
struct SegmentInput {
    location: SegmentLocation,
    source: Arc<dyn SegmentSource>,
    txn_index: Option<bytes::Bytes>,
    object: SourceObject,
    offsets: Option<OffsetRange>,
}

impl Materializer {
    /// Materializes one object, or says why it was ignored.
    pub async fn handle(&self, object: &ObjectRef) -> Result<Outcome, MaterializerError> {
        let uri = if object.bucket.is_empty() {
            object.key.clone()
        } else {
            format!("s3://{}/{}", object.bucket, object.key)
        };
        let ignored = |reason: String| {
            tracing::info!(object = %uri, %reason, "ignored");
            Ok(Outcome::Ignored { uri: uri.clone(), reason })
        };
        let Some(location) = SegmentLocation::parse(&object.key) else {
            return ignored("not a Kafka segment key".into());
        };
        match (&location.kind, location.layout) {
            (ObjectKind::Manifest, SegmentLayout::TieredStorage) | (ObjectKind::Log, SegmentLayout::BrokerLogDir) => {}
            (ObjectKind::Log, SegmentLayout::LocalTieredStorage) => {}
            (ObjectKind::Log, SegmentLayout::TieredStorage) => {
                return ignored("a tiered-storage .log is materialized when its .rsm-manifest arrives".into());
            }
            (kind, _) => return ignored(format!("an index file ({kind:?}), not a segment")),
        }
        let Some(topic) = self.config.resolve(&location.topic) else {
            return ignored(format!("topic {:?} is not enabled in the configuration", location.topic));
        };
        let input = match location.kind {
            ObjectKind::Manifest => self.open_tiered(object, location).await?,
            _ => self.open_plain(object, location).await?,
        };
        let table = TableName { namespace: topic.namespace.clone(), name: topic.table.clone() };
        let view = match &self.tables {
            Some(tables) => tables.view(&table).await?,
            None => None,
        };
        let held = |v: &TableView, r: OffsetRange| {
            let location = &input.location;
            let set = v.committed.of_incarnation(&topic.topic, location.topic_id.as_deref(), location.partition);
            set.is_some_and(|s| s.covers(r.first, r.last))
        };
        if let (Some(range), Some(view)) = (input.offsets, &view)
            && held(view, range)
        {
            return ignored(format!("offsets {}..={} are already in {table}", range.first, range.last));
        }
        let task = match self.materialize(&topic, input, view).await {
            Ok(task) => task,
            // The table stops: the committer marks it suspended, naming the record. The
            // object still fails (its event goes to the failure destination, to be sent
            // again once the table is resumed).
            Err(MaterializerError::Materialize(MaterializeError::Suspended { file, partition, offset, error })) => {
                let suspend = SuspendTask::new(table, &topic.topic, partition, offset, &file, &error);
                self.queue.send(&Task::Suspend(Box::new(suspend))).await?;
                return Err(MaterializeError::Suspended { file, partition, offset, error }.into());
            }
            Err(e) => {
                if e.is_config_issue() {
                    self.note_config_issue(&table, &e).await;
                }
                return Err(e);
            }
        };
        self.queue.send(&Task::Data(Box::new(task.clone()))).await?;
        Ok(Outcome::Queued(Box::new(task)))
    }

    /// Records `error` as the table's configuration issue. Best effort: the segment fails
    /// (and is retried) whether or not this is recorded; only what status shows is lost.
    async fn note_config_issue(&self, table: &TableName, error: &MaterializerError) {
        let Some(registry) = &self.table_registry else { return };
        let failure = Failure { activity: Activity::Config, at_ms: crate::lock::now_ms(), error: error.to_string() };
        if let Err(e) = registry.record(table, &MaintenanceEvent::Failed(failure)).await {
            tracing::warn!(table = %table, error = %e, "recording the table's configuration issue failed");
        }
    }

    async fn open_tiered(
        &self,
        object: &ObjectRef,
        location: SegmentLocation,
    ) -> Result<SegmentInput, MaterializerError> {
        let manifest_uri = format!("s3://{}/{}", object.bucket, object.key);
        let object_error = |uri: &str, source: io::Error| MaterializerError::Object { uri: uri.to_string(), source };
        let bytes = self.objects.get(object).await.map_err(|e| object_error(&manifest_uri, e))?.ok_or_else(|| {
            object_error(&manifest_uri, io::Error::new(io::ErrorKind::NotFound, "manifest not found"))
        })?;
        let manifest = Manifest::parse(&manifest_uri, &bytes)?;
        let sibling = |ext: &str| {
            object.sibling(ext).ok_or_else(|| MaterializerError::Task(format!("{manifest_uri}: no .{ext} beside it")))
        };
        let log = sibling("log")?;
        let opened = self.objects.open(&log).await.map_err(|e| object_error(&log.key, e))?;
        let source: Arc<dyn SegmentSource> = if manifest.compression {
            Arc::new(ChunkedSource::new(opened.object.clone(), &manifest, &manifest_uri)?)
        } else {
            opened.object.clone()
        };
        let indexes = sibling("indexes")?;
        let txn_index = match manifest.segment_indexes.as_ref().and_then(|s| s.transaction) {
            None => None,
            Some(_) => {
                let blob = self.objects.open(&indexes).await.map_err(|e| object_error(&indexes.key, e))?;
                transaction_index(blob.object.as_ref(), &manifest).await.map_err(|e| object_error(&indexes.key, e))?
            }
        };
        let metadata = manifest.remote_log_segment_metadata.as_ref();
        Ok(SegmentInput {
            offsets: metadata.map(|m| OffsetRange { first: m.start_offset, last: m.end_offset }),
            object: SourceObject {
                uri: manifest_uri,
                etag: opened.etag.clone(),
                size: manifest.segment_size(),
                layout: location.layout,
                segment_id: location.segment_id.clone(),
                topic_id: location.topic_id.clone(),
                leader_epochs: metadata.map(|m| m.segment_leader_epochs.clone()).unwrap_or_default(),
            },
            location,
            source,
            txn_index,
        })
    }

    async fn open_plain(
        &self,
        object: &ObjectRef,
        location: SegmentLocation,
    ) -> Result<SegmentInput, MaterializerError> {
        let opened = self
            .objects
            .open(object)
            .await
            .map_err(|source| MaterializerError::Object { uri: object.key.clone(), source })?;
        let txn = object
            .sibling("txnindex")
            .ok_or_else(|| MaterializerError::Task(format!("{}: no extension", object.key)))?;
        let txn_index = self
            .objects
            .get(&txn)
            .await
            .map_err(|source| MaterializerError::Object { uri: txn.key.clone(), source })?;
        Ok(SegmentInput {
            offsets: None,
            object: SourceObject {
                uri: opened.uri.clone(),
                etag: opened.etag.clone(),
                size: opened.size,
                layout: location.layout,
                segment_id: location.segment_id.clone(),
                topic_id: location.topic_id.clone(),
                leader_epochs: BTreeMap::new(),
            },
            location,
            source: opened.object,
            txn_index,
        })
    }

    /// Where a table's files go: where its catalog assigns them (S3 Tables), or under
    /// the warehouse.
    async fn table_files_location(&self, table: &TableName) -> Result<String, MaterializerError> {
        let assigned = match &self.tables {
            Some(tables) => tables.create_location(table).await?,
            None => None,
        };
        Ok(assigned.unwrap_or_else(|| table_location(&self.warehouse, table)))
    }

    async fn reader(&self, input: &SegmentInput) -> Result<SegmentReader, MaterializerError> {
        let mut reader =
            SegmentReader::open(input.source.clone(), self.limits).await.map_err(MaterializeError::Segment)?;
        if let Some(bytes) = &input.txn_index {
            let aborted = parse_txn_index(bytes)
                .map_err(|e| MaterializerError::TxnIndex { uri: input.object.uri.clone(), detail: e.to_string() })?;
            reader = reader.with_txn_index(aborted);
        }
        Ok(reader)
    }

    async fn materialize(
        &self,
        topic: &TopicConfig,
        input: SegmentInput,
        current: Option<TableView>,
    ) -> Result<CommitTask, MaterializerError> {
        let table = TableName { namespace: topic.namespace.clone(), name: topic.table.clone() };
        let dead_letter_table = table.dead_letters();
        let task_id = source_id(&input.object.uri, input.object.etag.as_deref().unwrap_or_default());
        // An existing table's files go under its own location, whoever made it.
        let data_location = match &current {
            Some(view) => view.location.clone(),
            None => self.table_files_location(&table).await?,
        };
        // Dead letters (mode `dlq`) are written beside the table's files; the committer
        // copies them into the dead-letter table, which it creates only then: a catalog
        // that makes a table to give its location (S3 Tables) gets no dead-letter table
        // until the first dead letter.
        let destination = Destination {
            table: table.to_string(),
            partition: input.location.partition,
            data_dir: format!("{data_location}/data"),
            dead_letter_dir: format!("{data_location}/data/dead-letters"),
            source_id: task_id.clone(),
        };
        let Prepared { formats, options } =
            prepare_segment(&self.config, topic, self.registry.clone(), current.as_ref(), destination, async || {
                self.reader(&input).await
            })
            .await?;
        tracing::info!(table = %table, topic = %topic.topic, partition = options.partition, object = %input.object.uri, "materializing");
        let reader = self.reader(&input).await?;
        let done =
            materialize_segment(reader, formats.schema.clone(), formats.key, formats.value, &options, &self.file_io)
                .await?;
        let task = build_task(topic, table, dead_letter_table, task_id, input, done, data_location)?;
        tracing::info!(
            table = %task.table, partition = task.partition, task_id = %task.task_id,
            first_offset = task.offsets.map(|o| o.first), last_offset = task.offsets.map(|o| o.last),
            records = task.record_count, files = task.data_files.len(), "segment materialized"
        );
        Ok(task)
    }
}

fn task_files(
    files: &[WrittenFile],
    partition_type: &iceberg::spec::StructType,
) -> Result<Vec<TaskFile>, MaterializerError> {
    files
        .iter()
        .map(|f| TaskFile::from_written(f, partition_type).map_err(|e| MaterializerError::Task(e.to_string())))
        .collect()
}

fn format_name(format: Format) -> String {
    serde_json::to_value(format).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

/// How many offsets of `range` get no row on purpose: all but the rows written, the
/// dead letters and the rows of transactions still open. `None` when that does not add
/// up (more rows than offsets): then the offsets stay uncounted rather than miscounted.
fn without_rows(range: OffsetRange, done: &Materialized) -> Option<u64> {
    let span = u64::try_from(range.last.checked_sub(range.first)?.checked_add(1)?).ok()?;
    let rows = |files: &[WrittenFile]| files.iter().map(WrittenFile::record_count).sum::<u64>();
    let pending: u64 = done.open_parts.values().map(|p| rows(&p.files) + rows(&p.dead_letter_files)).sum();
    span.checked_sub(rows(&done.files))?.checked_sub(rows(&done.dead_letter_files))?.checked_sub(pending)
}

fn build_task(
    topic: &TopicConfig,
    table: TableName,
    dead_letter_table: TableName,
    task_id: String,
    input: SegmentInput,
    done: Materialized,
    table_location: String,
) -> Result<CommitTask, MaterializerError> {
    let summary = &done.summary;
    let from_batches = summary.first_offset.zip(summary.last_offset).map(|(first, last)| OffsetRange { first, last });
    let offsets = match (input.offsets, from_batches) {
        // The manifest's range is authoritative; the batches must lie inside it.
        (Some(m), Some(b)) if b.first < m.first || b.last > m.last => {
            return Err(MaterializerError::Task(format!(
                "{}: batches cover offsets {}..={} outside the manifest's {}..={}",
                input.object.uri, b.first, b.last, m.first, m.last
            )));
        }
        (m, b) => m.or(b),
    };
    let no_partition = iceberg::spec::StructType::new(vec![]);
    let mut open_transactions = Vec::new();
    for txn in &summary.open_transactions {
        let part = done.open_parts.get(&txn.producer_id);
        let files = task_files(part.map_or(&[][..], |p| &p.files), &done.partition_type)?;
        let dead_letter_files = task_files(part.map_or(&[][..], |p| &p.dead_letter_files), &no_partition)?;
        let suspends_at = part.and_then(|p| p.suspends_at.as_ref()).map(|bad| crate::task::BadRecord {
            offset: bad.offset,
            file: summary.file.clone(),
            error: bad.error.clone(),
        });
        open_transactions.push(PendingTransaction {
            producer_id: txn.producer_id,
            producer_epoch: txn.producer_epoch,
            first_offset: txn.first_offset,
            last_offset: txn.last_offset,
            records: txn.records,
            files,
            first_timestamp: Some(txn.first_timestamp).filter(|&t| t >= 0),
            max_timestamp: Some(txn.max_timestamp).filter(|&t| t >= 0),
            log_append_time: txn.log_append_time,
            dead_letter_files,
            suspends_at,
        });
    }
    // Named when there are dead letters: the segment's, committed with it, or an open
    // transaction's, added once it commits.
    let any_dead_letters =
        !done.dead_letter_files.is_empty() || open_transactions.iter().any(|t| !t.dead_letter_files.is_empty());
    let dead_letter_table = any_dead_letters.then_some(dead_letter_table);
    let dead_letter_schema = match done.dead_letter_files.is_empty() {
        true => None,
        false => Some(
            crate::schema::plan(None, &crate::schema::layout::dead_letter_struct())
                .map_err(|e| MaterializerError::Task(e.to_string()))?
                .schema,
        ),
    };
    let without_rows = offsets.and_then(|range| without_rows(range, &done));
    let partition_spec = partitioned(&done.partition_spec);
    Ok(CommitTask {
        version: task_version(partition_spec.as_ref()),
        task_id,
        dead_letter_table,
        table,
        topic: topic.topic.clone(),
        partition: input.location.partition,
        offsets,
        record_count: done.files.iter().map(WrittenFile::record_count).sum(),
        skipped_records: done.skipped,
        max_timestamp: summary.max_timestamp,
        without_rows,
        table_location: Some(table_location),
        data_files: task_files(&done.files, &done.partition_type)?,
        dead_letter_files: task_files(&done.dead_letter_files, &no_partition)?,
        open_transactions,
        transaction_markers: summary.markers.clone(),
        transaction_timeout_ms: Some(topic.transaction_timeout_ms),
        schema: TaskSchema {
            key_format: format_name(topic.key_format),
            value_format: format_name(topic.value_format),
            iceberg: done.schema.as_ref().clone(),
            partition_spec,
            format_version: (topic.format_version != FormatVersion::V2).then_some(topic.format_version),
            upsert_key: crate::formats::upsert_key(topic, &done.schema),
        },
        dead_letter_schema,
        source: input.object,
        created_at_ms: chrono::Utc::now().timestamp_millis(),
        formats: topic.formats,
        dead_letters_of: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::RegistryError;

    fn registry(source: RegistryError) -> MaterializerError {
        MaterializerError::Format(FormatError::Registry { topic: "orders".into(), source })
    }

    #[test]
    fn a_bad_schema_reference_is_a_config_issue_and_an_unreachable_registry_is_not() {
        let url = || "https://sr/subjects/orders-value/versions/latest".to_string();
        let config_issues = [
            registry(RegistryError::File { path: "orders.avsc".into(), message: "expected a JSON value".into() }),
            registry(RegistryError::NotFound("subject orders-value".into())),
            registry(RegistryError::Invalid { url: url(), message: "HTTP 401 Unauthorized".into() }),
            MaterializerError::Format(FormatError::Schema {
                topic: "orders".into(),
                message: "value: no message shop.Nope in the schema".into(),
            }),
            MaterializerError::Format(FormatError::Incompatible(crate::schema::Incompatible {
                path: "value.id".into(),
                reason: "a union of int and string".into(),
            })),
            MaterializerError::Partition(PartitionError {
                field: "topics[0].partition_by[0]".into(),
                message: "no field shipped_at".into(),
            }),
        ];
        for error in &config_issues {
            assert!(error.is_config_issue(), "{error}");
            assert!(!error.retryable(), "{error}");
        }
        let not_config = [
            registry(RegistryError::Unavailable { url: url(), message: "HTTP 503 Service Unavailable".into() }),
            registry(RegistryError::Unavailable { url: url(), message: "timed out".into() }),
            MaterializerError::Object { uri: "s3://b/k".into(), source: io::Error::other("connection reset") },
            MaterializerError::Task("s3://b/k.rsm-manifest: no .log beside it".into()),
        ];
        for error in &not_config {
            assert!(!error.is_config_issue(), "{error}");
        }
    }
}
