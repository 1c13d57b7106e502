//! Parquet data files: record batches → zstd Parquet files with `PARQUET:field_id` on
//! every column, bounded row groups, a new file at the target size, each described as
//! an Iceberg `DataFile` (record count, size, column sizes, value/null counts, bounds).
//!
//! Files land within a few percent of the target, from 1 MiB up, whatever the rows'
//! compression: the open file's size is projected from the bytes of its closed row
//! groups (exact) and the open one's rows at the bytes per row measured as the last
//! one closed (or on a sample of the first rows), never from the Parquet writer's
//! estimate, which counts open pages before compression ([`DataFileWriter::write`]).
//!
//! Pages are zstd level 1 (pyarrow's default), but in fresh files ([`Pages::Fresh`]):
//! a file that compaction will rewrite within its window is written with a fast codec
//! ([`FRESH_CODEC`]) and rewritten with zstd, so the rows are zstd-compressed once, by
//! compaction, not twice. The sample of a writer's first rows also picks the leaf
//! columns that go without a dictionary: those whose dictionary would hold most of
//! their bytes (values that hardly repeat: offsets, ids, free text).
//!
//! Files are named `{dir}/{partition:05}-{first offset:020}-{attempt}-{source id}.parquet`
//! (`….snappy.parquet` for a fresh file, as Spark names files by codec),
//! `attempt` being random per writer: a path a snapshot may reference is never written
//! twice — a retry, a late duplicate event or a second run writes new files (duplicates
//! are decided by offsets, never by names; the files no snapshot takes are orphans for
//! maintenance), and two uploads of the same offsets (leader change) never collide.
//!
//! [`TableWriter`] is what writes a table's rows: one rolling writer for an unpartitioned
//! table (batches go straight through), or one per partition value (fanout) under
//! `{dir}/{partition path}/` (`timestamp_day=2026-11-30/`, bounded by
//! [`crate::partition::partition_path`]), each file carrying its partition value so that
//! the manifests record it.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Int64Array, RecordBatch};
use iceberg::io::FileIO;
use iceberg::spec::{
    DataFile, DataFileFormat, Datum, FormatVersion, PartitionSpec, PrimitiveLiteral, PrimitiveType, Schema, Struct,
    StructType,
};
use iceberg::writer::CurrentFileStatus;
use iceberg::writer::file_writer::{FileWriter, FileWriterBuilder, ParquetWriter, ParquetWriterBuilder};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::ParquetMetaData;
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;

use crate::partition::Partitioner;
use crate::schema::layout::{KAFKA_COLUMN, OFFSET_FIELD};

/// What a writer's open row group may hold, at most (its in-memory estimate), so that
/// a writer's memory stays bounded; row groups aim at a quarter of it.
const ROW_GROUP_BYTES: usize = 32 << 20;
/// The same for each writer of a partitioned table, several of which are open at once
/// (at most [`MAX_OPEN_PARTITIONS`]: 256 MiB of open row groups at the very most).
const FANOUT_ROW_GROUP_BYTES: usize = 8 << 20;
/// Row groups aim at no more than this fraction of the target (an eighth), so that the
/// open one, whose size is projected, is a small part of the file.
const GROUPS_PER_FILE: u64 = 8;
/// Batches are written in slices of at most this fraction of the target (1/32): the
/// file's size is checked after each, so a file overshoots by a slice at most.
const SLICES_PER_FILE: u64 = 32;
/// The first rows a writer sees are encoded once aside, up to this many bytes in
/// memory, to learn what a row takes once compressed.
const SAMPLE_BYTES: usize = 1 << 20;
/// zstd's level for every page: 1, as pyarrow and Arrow C++ write by default; level 3
/// makes files about a tenth smaller for about 1.8× the compression time, which is a
/// quarter to a third of what the materializer spends on a segment.
const ZSTD_LEVEL: i32 = 1;

/// The codec of fresh files: Snappy, which every Parquet reader reads (LZ4_RAW needs
/// parquet-mr 1.13 or later: Spark 3.4, Athena's engine 3). Measured, it is hardly
/// cheaper than zstd level 1 per byte (the `snap` crate: docs/performance.md), so the
/// saving is smaller than hoped.
pub const FRESH_CODEC: Compression = Compression::SNAPPY;
/// How a fresh file's name ends: the codec before the extension, as Spark names files.
pub const FRESH_SUFFIX: &str = ".snappy.parquet";

/// Whether `path` is a fresh file of Floe's (written with [`FRESH_CODEC`], for
/// compaction to rewrite with zstd).
pub fn is_fresh(path: &str) -> bool {
    path.ends_with(FRESH_SUFFIX)
}

/// How a writer compresses its files' pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pages {
    /// zstd: files that stay as they are written (compaction's outputs, dead letters).
    #[default]
    Zstd,
    /// A materializer's files, which compaction takes when they are small: the writer's
    /// first file is [`FRESH_CODEC`], closed under `small` bytes (compaction's
    /// small-file size) so that compaction rewrites it, when the rows the writer expects
    /// ([`DataFileWriter::expect_rows`]) fit in it at the fresh codec's bytes per row (of
    /// a sample). Rows that do not fit go into zstd files of the target from the start:
    /// those compaction leaves as they are (but the last), so writing them fresh would
    /// have them compressed twice.
    Fresh { small: u64 },
}

impl Pages {
    /// A fresh file's size limit, under compaction's small-file size by more than a
    /// writer's overshoot (a slice of the target).
    pub fn fresh_limit(small: u64) -> u64 {
        small - small / 8
    }
}

/// A finished data file and the Kafka offsets it holds.
#[derive(Debug, Clone)]
pub struct WrittenFile {
    pub data_file: DataFile,
    pub first_offset: i64,
    pub last_offset: i64,
}

impl WrittenFile {
    pub fn path(&self) -> &str {
        self.data_file.file_path()
    }

    pub fn record_count(&self) -> u64 {
        self.data_file.record_count()
    }

    /// The `DataFile` as Iceberg's JSON; `partition_type`: the type of its partition
    /// value (empty for an unpartitioned table).
    pub fn data_file_json(&self, partition_type: &StructType) -> Result<serde_json::Value, iceberg::Error> {
        let json =
            iceberg::spec::serialize_data_file_to_json(self.data_file.clone(), partition_type, FormatVersion::V2)?;
        serde_json::from_str(&json).map_err(|e| iceberg::Error::new(iceberg::ErrorKind::Unexpected, e.to_string()))
    }
}

struct OpenFile {
    writer: ParquetWriter,
    /// What the file rolls at: the writer's target, or less for a fresh file.
    limit: u64,
    first_offset: i64,
    last_offset: i64,
    /// The file's rows per row group: its Parquet writer closes a row group at exactly
    /// this many rows, and at no other time.
    group_rows: usize,
    /// Rows in the open row group.
    group_open: usize,
    /// Bytes of the file's closed row groups (exact: read as each one closes).
    flushed: u64,
    /// How many have closed.
    groups: usize,
}

/// Writes one table's record batches of one Kafka partition into rolling Parquet files.
pub struct DataFileWriter {
    file_io: FileIO,
    dir: String,
    partition: i32,
    source_id: String,
    /// Random per writer: part of every file name, so that no path is written twice.
    attempt: String,
    schema: Arc<Schema>,
    target_size: u64,
    /// The partition value of every file (empty: unpartitioned) and the spec's id.
    partition_value: Struct,
    spec_id: i32,
    row_group_bytes: usize,
    pages: Pages,
    /// The rows it expects to write in all, when told ([`Self::expect_rows`]).
    expected_rows: Option<u64>,
    /// What rows take in its files, once it has seen rows.
    rates: Option<Rates>,
    current: Option<OpenFile>,
    written: Vec<WrittenFile>,
}

impl DataFileWriter {
    /// `dir`: where the files go (a path or URI `file_io` understands); `source_id`: a
    /// short stable identity of the input (segment object and version).
    pub fn new(
        file_io: FileIO,
        dir: impl Into<String>,
        partition: i32,
        source_id: impl Into<String>,
        schema: Arc<Schema>,
        target_size: u64,
    ) -> Self {
        DataFileWriter {
            file_io,
            dir: dir.into().trim_end_matches('/').to_string(),
            partition,
            source_id: source_id.into(),
            attempt: format!("{:08x}", uuid::Uuid::new_v4().as_u128() as u32),
            schema,
            target_size,
            partition_value: Struct::empty(),
            spec_id: 0,
            row_group_bytes: ROW_GROUP_BYTES,
            pages: Pages::Zstd,
            expected_rows: None,
            rates: None,
            current: None,
            written: Vec::new(),
        }
    }

    /// Every file this writer writes holds rows of `value`, a partition of spec `spec_id`;
    /// row groups are smaller, as other partitions' writers are open beside this one.
    pub fn with_partition(mut self, spec_id: i32, value: Struct) -> Self {
        self.spec_id = spec_id;
        self.partition_value = value;
        self.row_group_bytes = FANOUT_ROW_GROUP_BYTES;
        self
    }

    /// Compresses its files' pages as `pages` says (zstd unless told).
    pub fn with_pages(mut self, pages: Pages) -> Self {
        self.pages = pages;
        self
    }

    /// Expects `rows` rows in all (an estimate): what decides whether its first file is
    /// fresh ([`Pages::Fresh`]).
    pub fn expect_rows(&mut self, rows: u64) {
        self.expected_rows = Some(rows);
    }

    /// Whether its next file is fresh: its first, when the rows it expects fit in a
    /// fresh file (or it was told none).
    fn fresh_next(&self, small: u64) -> bool {
        let limit = self.target_size.min(Pages::fresh_limit(small)) as f64;
        let per_row = self.rates.as_ref().and_then(|r| r.fresh_bytes_per_row);
        self.written.is_empty()
            && match (self.expected_rows, per_row) {
                (Some(rows), Some(per_row)) => rows as f64 * per_row <= limit,
                _ => true,
            }
    }

    pub fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }

    /// Starts from `rates` rather than from a sample of the first rows: what another
    /// writer of the same table has learned.
    fn with_rates(mut self, rates: Option<Rates>) -> Self {
        self.rates = rates.or(self.rates);
        self
    }

    /// Writes `batch` (rows with offsets `first..=last`), rolling to a new file once the
    /// current one reaches the target size.
    ///
    /// The size of the open file is projected, not estimated by the Parquet writer (whose
    /// estimate counts the open row group before compression: up to a page and a
    /// dictionary per column, more than a whole file at small targets). Row groups close
    /// at a fixed row count, chosen per file for about an eighth of the target (or a
    /// quarter of the memory bound); at each close the bytes written are exact, and
    /// give the bytes per row that project the open row group. Batches are written in
    /// slices of a 32nd of the target, the projection checked after each: files land
    /// within a few percent of the target whatever the rows' compression.
    pub async fn write(
        &mut self,
        batch: &RecordBatch,
        first_offset: i64,
        last_offset: i64,
    ) -> Result<(), iceberg::Error> {
        let n = batch.num_rows();
        let mut start = 0;
        while start < n {
            if self.rates.is_none() {
                let fresh = matches!(self.pages, Pages::Fresh { .. });
                self.rates = Some(Rates::sampled(&batch.slice(start, n - start), fresh)?);
            }
            let slice = batch.slice(start, self.slice_rows(n - start));
            let bounds = offsets(&slice);
            let first = if start == 0 { first_offset } else { bounds.map_or(first_offset, |b| b.0) };
            start += slice.num_rows();
            let last = if start == n { last_offset } else { bounds.map_or(last_offset, |b| b.1) };
            self.write_slice(&slice, first, last).await?;
            if self.is_full() {
                self.roll().await?;
            }
        }
        Ok(())
    }

    /// Compressed bytes per row (1 before any row is seen).
    fn bytes_per_row(&self) -> f64 {
        self.rates.as_ref().map_or(1.0, |r| r.bytes_per_row).max(f64::MIN_POSITIVE)
    }

    /// Rows per row group of the next file: about an eighth of the target, or a quarter
    /// of the memory bound, at the current bytes per row.
    fn group_rows(&self) -> usize {
        let bytes = (self.row_group_bytes as u64 / 4).min(self.target_size / GROUPS_PER_FILE).max(1);
        ((bytes as f64 / self.bytes_per_row()) as usize).max(1)
    }

    /// Rows of the next slice, out of `rest`: a 32nd of the target at most, and never
    /// past the end of the open row group.
    fn slice_rows(&self, rest: usize) -> usize {
        let most = (((self.target_size / SLICES_PER_FILE) as f64 / self.bytes_per_row()) as usize).max(1);
        let group_left = self.current.as_ref().map_or_else(|| self.group_rows(), |o| o.group_rows - o.group_open);
        rest.min(most).min(group_left)
    }

    /// The Parquet settings of every file: `codec` pages, row groups of `group_rows`,
    /// exact statistics, and a dictionary for every leaf column but those in `plain`.
    fn properties(codec: Compression, group_rows: Option<usize>, plain: &[ColumnPath]) -> WriterProperties {
        let builder = plain
            .iter()
            .fold(WriterProperties::builder(), |b, column| b.set_column_dictionary_enabled(column.clone(), false));
        builder
            .set_compression(codec)
            // Row groups close at a row count only (see `write`).
            .set_max_row_group_row_count(group_rows)
            .set_max_row_group_bytes(None)
            // Exact statistics in every row group: iceberg-rust leaves a row group's
            // inexact (truncated) value out of the file's bounds, which then would
            // not cover it. The bounds are truncated afterwards, as Iceberg does.
            .set_statistics_truncate_length(None)
            .build()
    }

    async fn open(&mut self, first_offset: i64) -> Result<(), iceberg::Error> {
        let group_rows = self.group_rows();
        let (codec, suffix, limit) = match self.pages {
            Pages::Fresh { small } if self.fresh_next(small) => {
                (FRESH_CODEC, FRESH_SUFFIX, self.target_size.min(Pages::fresh_limit(small)))
            }
            _ => (zstd(), ".parquet", self.target_size),
        };
        let path = format!(
            "{}/{:05}-{first_offset:020}-{}-{}{suffix}",
            self.dir, self.partition, self.attempt, self.source_id
        );
        let output = self.file_io.new_output(&path)?;
        let plain = self.rates.as_ref().map_or(&[][..], |r| &r.plain);
        let writer = ParquetWriterBuilder::new(Self::properties(codec, Some(group_rows), plain), self.schema.clone())
            .build(output)
            .await?;
        self.current = Some(OpenFile {
            writer,
            limit,
            first_offset,
            last_offset: first_offset,
            group_rows,
            group_open: 0,
            flushed: 0,
            groups: 0,
        });
        Ok(())
    }

    /// Writes `slice` (within the open row group) into the open file, opening one first.
    async fn write_slice(&mut self, slice: &RecordBatch, first: i64, last: i64) -> Result<(), iceberg::Error> {
        if self.current.is_none() {
            self.open(first).await?;
        }
        let open = self.current.as_mut().expect("opened above");
        open.writer.write(slice).await?;
        open.last_offset = last;
        open.group_open += slice.num_rows();
        if open.group_open == open.group_rows {
            // The row group closed on this slice's last row: nothing is buffered, what
            // the writer reports is what it has written.
            let flushed = open.writer.current_written_size() as u64;
            if let Some(rates) = &mut self.rates {
                rates.bytes_per_row = flushed.saturating_sub(open.flushed) as f64 / open.group_rows as f64;
            }
            (open.flushed, open.group_open, open.groups) = (flushed, 0, open.groups + 1);
        }
        Ok(())
    }

    /// Whether the open file has reached the target: its closed row groups, the open one
    /// at the current bytes per row, and the footer. Also when the open row group holds
    /// more than twice the memory bound (rows far larger than those it was sized by).
    fn is_full(&self) -> bool {
        let Some(open) = &self.current else {
            return false;
        };
        let footer = (open.groups + 1) as f64 * self.rates.as_ref().map_or(0.0, |r| r.footer_per_group);
        let projected = open.flushed as f64 + open.group_open as f64 * self.bytes_per_row() + footer;
        let buffered = (open.writer.current_written_size() as u64).saturating_sub(open.flushed);
        projected >= open.limit as f64 || buffered > 2 * self.row_group_bytes as u64
    }

    async fn roll(&mut self) -> Result<(), iceberg::Error> {
        let Some(open) = self.current.take() else {
            return Ok(());
        };
        for mut builder in open.writer.close().await? {
            builder.partition(self.partition_value.clone()).partition_spec_id(self.spec_id);
            let build = |b: &iceberg::spec::DataFileBuilder| {
                b.build().map_err(|e| iceberg::Error::new(iceberg::ErrorKind::Unexpected, e.to_string()))
            };
            let exact = build(&builder)?;
            builder
                .lower_bounds(truncated(exact.lower_bounds(), Bound::Lower))
                .upper_bounds(truncated(exact.upper_bounds(), Bound::Upper));
            let data_file = build(&builder)?;
            tracing::debug!(path = data_file.file_path(), records = data_file.record_count(), "data file written");
            self.written.push(WrittenFile {
                data_file,
                first_offset: open.first_offset,
                last_offset: open.last_offset,
            });
        }
        Ok(())
    }

    /// How many files are closed.
    #[cfg(test)]
    pub(crate) fn closed(&self) -> usize {
        self.written.len()
    }

    /// Closes the open file; returns every file written.
    pub async fn close(mut self) -> Result<Vec<WrittenFile>, iceberg::Error> {
        self.roll().await?;
        Ok(self.written)
    }
}

/// What rows take in a writer's files, and which of their columns go without a dictionary.
#[derive(Debug, Clone)]
struct Rates {
    /// Compressed bytes per row: of the row group closed last, or of the sample.
    bytes_per_row: f64,
    /// Bytes of the footer (metadata, page indexes) per row group, from the sample.
    footer_per_group: f64,
    /// Bytes per row of the sample with [`FRESH_CODEC`] pages, when asked for.
    fresh_bytes_per_row: Option<f64>,
    /// Leaf columns whose dictionary, in the sample, held most of their bytes: values
    /// that hardly repeat (offsets, ids, UUIDs, free text, whole raw values). Interning
    /// them costs a hash and a probe per value and saves nothing, so they are written
    /// plain (zstd still compresses them).
    plain: Arc<[ColumnPath]>,
}

impl Rates {
    /// The first rows of `rows` (up to [`SAMPLE_BYTES`] in memory) encoded aside as a
    /// file of one row group with the writer's settings: once with a dictionary for
    /// every column, to find those it does not pay for, then, if there are any, again
    /// without theirs, for the bytes per row; and with `fresh`, once more with
    /// [`FRESH_CODEC`] pages.
    fn sampled(rows: &RecordBatch, fresh: bool) -> Result<Rates, iceberg::Error> {
        let per_row = (rows.get_array_memory_size() / rows.num_rows().max(1)).max(1);
        let n = (SAMPLE_BYTES / per_row).clamp(1, rows.num_rows().max(1)).min(rows.num_rows());
        let sample = rows.slice(0, n);
        let (rates, metadata) = Rates::encoded(&sample, Arc::from([]), zstd())?;
        let plain: Arc<[ColumnPath]> = dictionary_unpaid(&metadata).into();
        let mut rates = if plain.is_empty() { rates } else { Rates::encoded(&sample, plain, zstd())?.0 };
        if fresh {
            let fresh = Rates::encoded(&sample, rates.plain.clone(), FRESH_CODEC)?.0;
            rates.fresh_bytes_per_row = Some(fresh.bytes_per_row);
        }
        Ok(rates)
    }

    /// The rates of `sample` written with the writer's settings and `codec` pages,
    /// `plain` without a dictionary; and the sample file's metadata.
    fn encoded(
        sample: &RecordBatch,
        plain: Arc<[ColumnPath]>,
        codec: Compression,
    ) -> Result<(Rates, ParquetMetaData), iceberg::Error> {
        let err = |e: parquet::errors::ParquetError| {
            iceberg::Error::new(iceberg::ErrorKind::Unexpected, format!("sampling rows: {e}"))
        };
        let properties = DataFileWriter::properties(codec, None, &plain);
        let mut sink = ArrowWriter::try_new(std::io::sink(), sample.schema(), Some(properties)).map_err(err)?;
        sink.write(sample).map_err(err)?;
        sink.flush().map_err(err)?;
        // Less the four bytes of the leading magic.
        let group = sink.bytes_written().saturating_sub(4);
        let metadata = sink.finish().map_err(err)?;
        let footer = sink.bytes_written().saturating_sub(group + 4);
        let rows = sample.num_rows().max(1) as f64;
        let rates = Rates {
            bytes_per_row: group as f64 / rows,
            footer_per_group: footer as f64,
            fresh_bytes_per_row: None,
            plain,
        };
        Ok((rates, metadata))
    }
}

/// The leaf columns of a one-row-group file whose dictionary page takes more than half
/// of their compressed bytes, and more than 1 KiB: most of their values are distinct
/// (a column of one value has a tiny dictionary, which is all its bytes, and keeps it).
fn dictionary_unpaid(metadata: &ParquetMetaData) -> Vec<ColumnPath> {
    let Some(group) = metadata.row_groups().first() else {
        return Vec::new();
    };
    group
        .columns()
        .iter()
        .filter(|c| {
            c.dictionary_page_offset()
                .map(|dictionary| c.data_page_offset() - dictionary)
                .is_some_and(|bytes| bytes > 1024 && 2 * bytes > c.compressed_size())
        })
        .map(|c| c.column_path().clone())
        .collect()
}

/// The least and greatest Kafka offsets of `rows`, when they have the column.
fn offsets(rows: &RecordBatch) -> Option<(i64, i64)> {
    let column = offset_column(rows)?;
    arrow::compute::min(column).zip(arrow::compute::max(column))
}

/// How long a string or binary bound may be (Iceberg's default metrics mode,
/// `truncate(16)`): longer values would swell every manifest that lists the file.
pub const BOUND_LENGTH: usize = 16;

#[derive(Clone, Copy)]
enum Bound {
    Lower,
    Upper,
}

/// `bounds` with string and binary values cut to [`BOUND_LENGTH`] characters or bytes,
/// still bounds: a lower bound becomes its prefix; an upper bound its prefix with the
/// last character (byte) that can be incremented incremented, or no bound when none
/// can (all `U+10FFFF`, all `0xFF`).
fn truncated(bounds: &HashMap<i32, Datum>, bound: Bound) -> HashMap<i32, Datum> {
    bounds
        .iter()
        .filter_map(|(&id, datum)| {
            let cut = match (datum.data_type(), datum.literal()) {
                (PrimitiveType::String, PrimitiveLiteral::String(s)) => truncate_str(s, bound).map(Datum::string),
                (PrimitiveType::Binary, PrimitiveLiteral::Binary(b)) => truncate_bytes(b, bound).map(Datum::binary),
                _ => Some(datum.clone()),
            };
            cut.map(|d| (id, d))
        })
        .collect()
}

fn truncate_str(s: &str, bound: Bound) -> Option<String> {
    let Some((end, _)) = s.char_indices().nth(BOUND_LENGTH) else {
        return Some(s.to_string());
    };
    let mut prefix: Vec<char> = s[..end].chars().collect();
    if let Bound::Upper = bound {
        loop {
            let last = prefix.pop()?;
            // The next scalar value (surrogates are not characters).
            let next = match last as u32 + 1 {
                0xD800 => Some('\u{E000}'),
                n => char::from_u32(n),
            };
            if let Some(next) = next {
                prefix.push(next);
                break;
            }
        }
    }
    Some(prefix.into_iter().collect())
}

fn truncate_bytes(b: &[u8], bound: Bound) -> Option<Vec<u8>> {
    if b.len() <= BOUND_LENGTH {
        return Some(b.to_vec());
    }
    let mut prefix = b[..BOUND_LENGTH].to_vec();
    if let Bound::Upper = bound {
        let i = prefix.iter().rposition(|&x| x != 0xff)?;
        prefix.truncate(i + 1);
        prefix[i] += 1;
    }
    Some(prefix)
}

/// The `_kafka.offset` column of a table's batch.
pub fn offset_column(batch: &RecordBatch) -> Option<&Int64Array> {
    batch
        .column_by_name(KAFKA_COLUMN)
        .and_then(|k| k.as_struct_opt())
        .and_then(|k| k.column_by_name(OFFSET_FIELD))
        .and_then(|o| o.as_primitive_opt::<Int64Type>())
}

/// Partition writers open at once, at most: past it, the least recently written one
/// closes its file (a later row of its partition starts a new one), so memory stays
/// bounded (each open file buffers up to a row group of `FANOUT_ROW_GROUP_BYTES`)
/// however many partitions a segment spans.
pub const MAX_OPEN_PARTITIONS: usize = 32;

/// Where and how a table's files are written.
#[derive(Clone)]
pub struct WriterOptions {
    pub file_io: FileIO,
    /// The table's data directory.
    pub dir: String,
    /// The Kafka partition, part of every file name.
    pub partition: i32,
    pub source_id: String,
    pub schema: Arc<Schema>,
    pub target_size: u64,
    pub pages: Pages,
}

/// A table's rows into rolling Parquet files: one writer when the table is
/// unpartitioned, one per partition value otherwise.
pub enum TableWriter {
    Unpartitioned(Box<DataFileWriter>),
    Partitioned(Box<FanoutWriter>),
}

impl TableWriter {
    /// Files laid out by `spec` (bound to `options.schema`).
    pub fn new(options: WriterOptions, spec: Arc<PartitionSpec>) -> Result<TableWriter, iceberg::Error> {
        let WriterOptions { file_io, dir, partition, source_id, schema, target_size, pages } = options.clone();
        match Partitioner::new(spec, schema.clone())? {
            None => Ok(TableWriter::Unpartitioned(Box::new(
                DataFileWriter::new(file_io, dir, partition, source_id, schema, target_size).with_pages(pages),
            ))),
            Some(partitioner) => Ok(TableWriter::Partitioned(Box::new(FanoutWriter {
                options,
                partitioner,
                open: HashMap::new(),
                tick: 0,
                rates: None,
                expected_rows: None,
                written: Vec::new(),
            }))),
        }
    }

    /// The type of the files' partition values (empty when unpartitioned).
    pub fn partition_type(&self) -> StructType {
        match self {
            TableWriter::Unpartitioned(_) => StructType::new(vec![]),
            TableWriter::Partitioned(f) => f.partitioner.partition_type().clone(),
        }
    }

    /// Writes `batch`, rows with offsets `first..=last` (an unpartitioned table's writer
    /// takes them as they are; partitions compute their own).
    pub async fn write(
        &mut self,
        batch: &RecordBatch,
        first_offset: i64,
        last_offset: i64,
    ) -> Result<(), iceberg::Error> {
        match self {
            TableWriter::Unpartitioned(w) => w.write(batch, first_offset, last_offset).await,
            TableWriter::Partitioned(f) => f.write(batch).await,
        }
    }

    /// Expects `rows` rows in all ([`DataFileWriter::expect_rows`]); each partition's
    /// writer takes it as its own, not knowing its share.
    pub fn expect_rows(&mut self, rows: u64) {
        match self {
            TableWriter::Unpartitioned(w) => w.expect_rows(rows),
            TableWriter::Partitioned(f) => {
                f.expected_rows = Some(rows);
                f.open.values_mut().for_each(|(w, _)| w.expect_rows(rows));
            }
        }
    }

    /// Closes every open file; returns every file written, in offset order.
    pub async fn close(self) -> Result<Vec<WrittenFile>, iceberg::Error> {
        match self {
            TableWriter::Unpartitioned(w) => (*w).close().await,
            TableWriter::Partitioned(f) => (*f).close().await,
        }
    }
}

/// One rolling writer per partition value.
pub struct FanoutWriter {
    options: WriterOptions,
    partitioner: Partitioner,
    /// Open writers and when each last wrote.
    open: HashMap<Struct, (DataFileWriter, u64)>,
    tick: u64,
    /// What a partition's writer learned last: where a new one starts (partitions of
    /// one table compress alike), rather than sampling its first rows.
    rates: Option<Rates>,
    /// What [`TableWriter::expect_rows`] was told last.
    expected_rows: Option<u64>,
    written: Vec<WrittenFile>,
}

impl FanoutWriter {
    async fn write(&mut self, batch: &RecordBatch) -> Result<(), iceberg::Error> {
        for (value, rows) in self.partitioner.split(batch)? {
            let offsets = offset_column(&rows).ok_or_else(|| {
                iceberg::Error::new(iceberg::ErrorKind::DataInvalid, "partitioned rows without _kafka.offset")
            })?;
            let (Some(first), Some(last)) = (arrow::compute::min(offsets), arrow::compute::max(offsets)) else {
                continue;
            };
            if !self.open.contains_key(&value) && self.open.len() >= MAX_OPEN_PARTITIONS {
                self.close_least_recent().await?;
            }
            self.tick += 1;
            let entry = match self.open.entry(value) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    let o = &self.options;
                    let dir = format!("{}/{}", o.dir.trim_end_matches('/'), self.partitioner.path(e.key()));
                    let mut writer = DataFileWriter::new(
                        o.file_io.clone(),
                        dir,
                        o.partition,
                        &o.source_id,
                        o.schema.clone(),
                        o.target_size,
                    )
                    .with_partition(self.partitioner.spec().spec_id(), e.key().clone())
                    .with_pages(o.pages)
                    .with_rates(self.rates.clone());
                    if let Some(rows) = self.expected_rows {
                        writer.expect_rows(rows);
                    }
                    e.insert((writer, 0))
                }
            };
            entry.1 = self.tick;
            entry.0.write(&rows, first, last).await?;
            self.rates = entry.0.rates.clone();
        }
        Ok(())
    }

    async fn close_least_recent(&mut self) -> Result<(), iceberg::Error> {
        let Some(value) = self.open.iter().min_by_key(|(_, (_, tick))| *tick).map(|(v, _)| v.clone()) else {
            return Ok(());
        };
        if let Some((writer, _)) = self.open.remove(&value) {
            tracing::debug!(partition = %self.partitioner.path(&value), "too many open partitions: file closed early");
            self.written.extend(writer.close().await?);
        }
        Ok(())
    }

    async fn close(mut self) -> Result<Vec<WrittenFile>, iceberg::Error> {
        for (_, (writer, _)) in self.open.drain() {
            self.written.extend(writer.close().await?);
        }
        self.written.sort_by_key(|f| f.first_offset);
        Ok(self.written)
    }
}

/// zstd pages at [`ZSTD_LEVEL`].
fn zstd() -> Compression {
    Compression::ZSTD(ZstdLevel::try_new(ZSTD_LEVEL).expect("valid level"))
}

/// Format of the files this module writes.
pub const FILE_FORMAT: DataFileFormat = DataFileFormat::Parquet;

#[cfg(test)]
pub(crate) mod tests {
    /// A file's path with its attempt token left out.
    fn without_attempt(path: &str) -> String {
        let (dir, name) = path.rsplit_once('/').map_or(("", path), |(d, n)| (d, n));
        let parts: Vec<&str> = name.splitn(4, '-').collect();
        assert_eq!(parts.len(), 4, "{name}");
        assert!(parts[2].len() == 8 && parts[2].bytes().all(|b| b.is_ascii_hexdigit()), "{name}");
        let name = format!("{}-{}-{}", parts[0], parts[1], parts[3]);
        if dir.is_empty() { name } else { format!("{dir}/{name}") }
    }

    #[tokio::test]
    async fn writing_the_same_input_again_never_writes_over_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let schema = schema();
        let mut paths = Vec::new();
        for _ in 0..2 {
            let mut writer =
                TableWriter::new(options(dir.path()), Arc::new(PartitionSpec::unpartition_spec())).unwrap();
            writer.write(&batch(&schema, &[(5, None, None), (6, None, Some("eu"))]), 5, 6).await.unwrap();
            paths.extend(writer.close().await.unwrap().into_iter().map(|f| f.path().to_string()));
        }
        assert_eq!(paths.len(), 2);
        assert_ne!(paths[0], paths[1], "a second writer of the same input reuses a path");
        assert_eq!(without_attempt(&paths[0]), without_attempt(&paths[1]));
        assert!(std::fs::metadata(&paths[0]).unwrap().len() > 0, "the first file is intact");
    }

    use iceberg::spec::{Literal, PartitionSpec};

    use super::*;
    use crate::config::Transform;
    use crate::partition::tests::{batch, field, schema};

    fn options(dir: &std::path::Path) -> WriterOptions {
        WriterOptions {
            file_io: FileIO::new_with_fs(),
            dir: dir.display().to_string(),
            partition: 3,
            source_id: "src".into(),
            schema: Arc::new(schema()),
            target_size: 1 << 20,
            pages: Pages::Zstd,
        }
    }

    /// A writer into `dir` with a 1 GiB target: one file.
    fn local_writer(dir: &std::path::Path, schema: Schema) -> DataFileWriter {
        DataFileWriter::new(FileIO::new_with_fs(), dir.display().to_string(), 0, "t", Arc::new(schema), 1 << 30)
    }

    #[tokio::test]
    async fn bounds_cover_every_row_group_and_are_cut_to_sixteen() {
        use arrow_array::{LargeBinaryArray, StringArray};
        use iceberg::spec::{NestedField, Type};
        let schema = Schema::builder()
            .with_fields(vec![
                NestedField::optional(1, "s", Type::Primitive(PrimitiveType::String)).into(),
                NestedField::optional(2, "b", Type::Primitive(PrimitiveType::Binary)).into(),
            ])
            .build()
            .unwrap();
        let arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(&schema).unwrap());
        let (long_a, long_z) = ("a".repeat(300), "z".repeat(300));
        let rows = |s: [&str; 2], b: [&[u8]; 2]| {
            RecordBatch::try_new(
                arrow.clone(),
                vec![Arc::new(StringArray::from(s.to_vec())), Arc::new(LargeBinaryArray::from(b.to_vec()))],
            )
            .unwrap()
        };
        let dir = tempfile::tempdir().unwrap();
        let mut writer = local_writer(dir.path(), schema);
        // A row group per batch: the long values are the first group's minimum and the
        // second's maximum.
        writer.row_group_bytes = 1;
        writer.write(&rows([&long_a, "m"], [&[0xff; 20], b"\x01"]), 0, 1).await.unwrap();
        writer.write(&rows(["b", &long_z], [b"\x02", b"\x03"]), 2, 3).await.unwrap();
        let files = writer.close().await.unwrap();
        let file = &files[0].data_file;
        let string = |d: &Datum| match d.literal() {
            PrimitiveLiteral::String(s) => s.clone(),
            other => panic!("{other:?}"),
        };
        let (lower, upper) = (string(&file.lower_bounds()[&1]), string(&file.upper_bounds()[&1]));
        assert_eq!(lower, "a".repeat(16));
        assert_eq!(upper, format!("{}{{", "z".repeat(15)));
        for v in [long_a.as_str(), "m", "b", long_z.as_str()] {
            assert!(lower.as_str() <= v && v <= upper.as_str(), "{v:.20} outside [{lower}, {upper}]");
        }
        // Binary: the lower bound cut, no upper bound above twenty 0xff bytes in sixteen.
        assert_eq!(file.lower_bounds()[&2].literal(), &PrimitiveLiteral::Binary(vec![1]));
        assert!(!file.upper_bounds().contains_key(&2));
    }

    #[tokio::test]
    async fn columns_of_distinct_values_go_without_a_dictionary() {
        use arrow_array::StringArray;
        use iceberg::spec::{NestedField, Type};
        use parquet::file::reader::{FileReader, SerializedFileReader};
        let schema = Schema::builder()
            .with_fields(vec![
                NestedField::optional(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
                NestedField::optional(2, "status", Type::Primitive(PrimitiveType::String)).into(),
                NestedField::optional(3, "note", Type::Primitive(PrimitiveType::String)).into(),
            ])
            .build()
            .unwrap();
        let arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(&schema).unwrap());
        let dir = tempfile::tempdir().unwrap();
        let mut writer = local_writer(dir.path(), schema);
        let mut rng = Rng(3);
        let rows = 8192;
        let ids: Vec<i64> = (0..rows).map(|i| i * 7919 % 100_003).collect();
        let status: Vec<&str> = (0..rows).map(|i| ["NEW", "PAID", "SHIPPED"][i as usize % 3]).collect();
        let notes: Vec<String> = (0..rows).map(|_| text(&mut rng, 40)).collect();
        let batch = RecordBatch::try_new(
            arrow.clone(),
            vec![
                Arc::new(Int64Array::from(ids.clone())),
                Arc::new(StringArray::from(status.clone())),
                Arc::new(StringArray::from(notes.clone())),
            ],
        )
        .unwrap();
        writer.write(&batch, 0, rows - 1).await.unwrap();
        let files = writer.close().await.unwrap();
        let reader = SerializedFileReader::new(std::fs::File::open(files[0].path()).unwrap()).unwrap();
        for group in reader.metadata().row_groups() {
            let dictionary = |i: usize| group.column(i).dictionary_page_offset().is_some();
            assert!(!dictionary(0), "unique ids get a dictionary");
            assert!(dictionary(1), "three statuses get no dictionary");
            assert!(!dictionary(2), "random text gets a dictionary");
        }
        // And the values read back as written.
        let file = std::fs::File::open(files[0].path()).unwrap();
        let read = parquet::arrow::arrow_reader::ParquetRecordBatchReader::try_new(file, rows as usize)
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        assert_eq!(read.column(0).as_primitive::<Int64Type>().values().to_vec(), ids);
        assert_eq!(read.column(1).as_string::<i32>().iter().map(Option::unwrap).collect::<Vec<_>>(), status);
        assert_eq!(read.column(2).as_string::<i32>().iter().map(|s| s.unwrap().to_string()).collect::<Vec<_>>(), notes);
    }

    #[tokio::test]
    async fn row_groups_close_at_their_size_and_pages_are_zstd() {
        use arrow_array::StringArray;
        use iceberg::spec::{NestedField, Type};
        use parquet::file::reader::{FileReader, SerializedFileReader};
        let schema = Schema::builder()
            .with_fields(vec![NestedField::optional(1, "s", Type::Primitive(PrimitiveType::String)).into()])
            .build()
            .unwrap();
        let arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(&schema).unwrap());
        let dir = tempfile::tempdir().unwrap();
        let mut writer = local_writer(dir.path(), schema);
        // Row groups of about 16 KiB (a quarter of the bound) once compressed.
        writer.row_group_bytes = 64 << 10;
        // 20 batches of 100 random 160-byte values: 16 KB each, 320 KB in all, about
        // 240 KB compressed.
        let mut rng = Rng(7);
        for b in 0..20 {
            let values: Vec<String> = (0..100).map(|_| text(&mut rng, 160)).collect();
            let batch = RecordBatch::try_new(arrow.clone(), vec![Arc::new(StringArray::from(values))]).unwrap();
            writer.write(&batch, b * 100, b * 100 + 99).await.unwrap();
        }
        let files = writer.close().await.unwrap();
        let reader = SerializedFileReader::new(std::fs::File::open(files[0].path()).unwrap()).unwrap();
        let groups = reader.metadata().row_groups();
        assert!(groups.len() >= 10, "{} row groups", groups.len());
        for g in groups {
            assert!(g.compressed_size() <= 20 << 10, "{} bytes", g.compressed_size());
            assert!(g.columns().iter().all(|c| matches!(c.compression(), Compression::ZSTD(_))));
        }
        let (first, rest) = groups.split_first().unwrap();
        assert!(rest.iter().all(|g| g.num_rows() == first.num_rows() || std::ptr::eq(g, groups.last().unwrap())));
        assert_eq!(groups.iter().map(|g| g.num_rows()).sum::<i64>(), 2000);
    }

    #[tokio::test]
    async fn decimal_and_timestamp_bounds_span_the_row_groups() {
        use arrow_array::{Decimal128Array, TimestampMicrosecondArray};
        use iceberg::spec::{NestedField, Type};
        let schema = Schema::builder()
            .with_fields(vec![
                NestedField::optional(1, "price", Type::Primitive(PrimitiveType::Decimal { precision: 9, scale: 2 }))
                    .into(),
                NestedField::optional(2, "at", Type::Primitive(PrimitiveType::Timestamptz)).into(),
            ])
            .build()
            .unwrap();
        let arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(&schema).unwrap());
        let rows = |price: [Option<i128>; 2], at: [i64; 2]| {
            let price = Decimal128Array::from(price.to_vec()).with_precision_and_scale(9, 2).unwrap();
            let at = TimestampMicrosecondArray::from(at.to_vec()).with_timezone("+00:00");
            RecordBatch::try_new(arrow.clone(), vec![Arc::new(price), Arc::new(at)]).unwrap()
        };
        let dir = tempfile::tempdir().unwrap();
        let mut writer = local_writer(dir.path(), schema);
        writer.row_group_bytes = 1;
        writer.write(&rows([Some(-12_345), None], [1_700_000_000_000_000, 5]), 0, 1).await.unwrap();
        writer.write(&rows([Some(99_999_999), Some(0)], [-86_400_000_000, 2]), 2, 3).await.unwrap();
        let files = writer.close().await.unwrap();
        let f = &files[0].data_file;
        let lit = |d: &Datum| d.literal().clone();
        assert_eq!(lit(&f.lower_bounds()[&1]), PrimitiveLiteral::Int128(-12_345));
        assert_eq!(lit(&f.upper_bounds()[&1]), PrimitiveLiteral::Int128(99_999_999));
        assert_eq!(lit(&f.lower_bounds()[&2]), PrimitiveLiteral::Long(-86_400_000_000));
        assert_eq!(lit(&f.upper_bounds()[&2]), PrimitiveLiteral::Long(1_700_000_000_000_000));
        assert_eq!(f.null_value_counts()[&1], 1);
    }

    #[test]
    fn bounds_cut_to_a_prefix_and_an_incremented_prefix() {
        let sixteen = "0123456789abcdef";
        assert_eq!(truncate_str(sixteen, Bound::Upper).as_deref(), Some(sixteen));
        let long = format!("{sixteen}ghi");
        assert_eq!(truncate_str(&long, Bound::Lower).as_deref(), Some(sixteen));
        assert_eq!(truncate_str(&long, Bound::Upper).as_deref(), Some("0123456789abcdeg"));
        let tail = format!("{}{}x", "é".repeat(14), "\u{10FFFF}\u{D7FF}");
        assert_eq!(truncate_str(&tail, Bound::Upper), Some(format!("{}\u{10FFFF}\u{E000}", "é".repeat(14))));
        let top = "\u{10FFFF}".repeat(17);
        assert_eq!(truncate_str(&top, Bound::Upper), None);
        let mut bytes = vec![7u8; 15];
        bytes.extend([0xff, 0xff, 0]);
        assert_eq!(truncate_bytes(&bytes, Bound::Upper), Some(vec![7; 14].into_iter().chain([8]).collect()));
        assert_eq!(truncate_bytes(&bytes, Bound::Lower).map(|b| b.len()), Some(16));
    }

    #[tokio::test]
    async fn fanout_writes_a_file_per_partition_value_carrying_it() {
        let dir = tempfile::tempdir().unwrap();
        let schema = schema();
        let spec = crate::partition::bind(&schema, &[field("_kafka.timestamp", Transform::Day)], "p").unwrap();
        let mut writer = TableWriter::new(options(dir.path()), Arc::new(spec)).unwrap();
        let day = 86_400_000_000i64;
        let (d0, d1) = (Some(20_000 * day), Some(20_001 * day));
        writer.write(&batch(&schema, &[(5, d0, None), (6, d1, None), (7, None, None)]), 5, 7).await.unwrap();
        writer.write(&batch(&schema, &[(8, d1, None), (9, d0, None)]), 8, 9).await.unwrap();
        let files = writer.close().await.unwrap();
        let got: Vec<(String, i64, i64, u64, Option<Literal>)> = files
            .iter()
            .map(|f| {
                let rel = without_attempt(f.path().strip_prefix(&format!("{}/", dir.path().display())).unwrap());
                (rel, f.first_offset, f.last_offset, f.record_count(), f.data_file.partition()[0].clone())
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "timestamp_day=2024-10-04/00003-00000000000000000005-src.parquet".into(),
                    5,
                    9,
                    2,
                    Some(Literal::date(20_000))
                ),
                (
                    "timestamp_day=2024-10-05/00003-00000000000000000006-src.parquet".into(),
                    6,
                    8,
                    2,
                    Some(Literal::date(20_001))
                ),
                ("timestamp_day=null/00003-00000000000000000007-src.parquet".into(), 7, 7, 1, None),
            ]
        );
        // The JSON the task carries holds the value.
        let ty = crate::partition::bind(&schema, &[field("_kafka.timestamp", Transform::Day)], "p")
            .unwrap()
            .partition_type(&schema)
            .unwrap();
        assert_eq!(files[0].data_file_json(&ty).unwrap()["partition"], serde_json::json!({"timestamp_day": 20_000}));
    }

    #[tokio::test]
    async fn unpartitioned_tables_get_one_writer_and_the_caller_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let schema = schema();
        let mut writer = TableWriter::new(options(dir.path()), Arc::new(PartitionSpec::unpartition_spec())).unwrap();
        assert!(matches!(writer, TableWriter::Unpartitioned(_)));
        assert!(writer.partition_type().fields().is_empty());
        writer.write(&batch(&schema, &[(5, None, None), (6, None, Some("eu"))]), 5, 6).await.unwrap();
        let files = writer.close().await.unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(
            without_attempt(files[0].path()),
            format!("{}/00003-00000000000000000005-src.parquet", dir.path().display())
        );
        assert!(files[0].data_file.partition().fields().is_empty());
    }

    /// How compressible the `region` values of [`payload_rows`] are.
    #[derive(Debug, Clone, Copy)]
    pub(crate) enum Payload {
        /// 200 random characters of a 64-letter alphabet: zstd takes off about a fifth.
        Random,
        /// Half random, half a repeated template: about 2x.
        Mixed,
        /// A JSON event of which little varies: about 20x.
        Json,
    }

    pub(crate) use crate::testing::Rng;

    /// `len` random characters of a 64-letter alphabet.
    fn text(rng: &mut Rng, len: usize) -> String {
        const LETTERS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        (0..len).map(|_| LETTERS[rng.below(64) as usize] as char).collect()
    }

    /// `n` rows of the test schema from offset `first`, their `region` a `payload`.
    pub(crate) fn payload_rows(schema: &Schema, first: i64, n: usize, payload: Payload, rng: &mut Rng) -> RecordBatch {
        let values: Vec<String> = (first..first + n as i64)
            .map(|o| match payload {
                Payload::Random => text(rng, 200),
                Payload::Mixed => format!("{}{}", text(rng, 100), "{\"kind\":\"mixed\",\"pad\":\"".repeat(3)),
                Payload::Json => format!(
                    "{{\"type\":\"page_view\",\"app\":\"shop\",\"version\":\"2.4.1\",\"country\":\"DE\",\
                     \"device\":{{\"os\":\"android\",\"model\":\"pixel\"}},\"user\":{},\"seq\":{o}}}",
                    rng.below(100)
                ),
            })
            .collect();
        let rows: Vec<(i64, Option<i64>, Option<&str>)> = (first..)
            .zip(&values)
            .map(|(o, v)| (o, Some(1_700_000_000_000_000 + o * 1000), Some(v.as_str())))
            .collect();
        batch(schema, &rows)
    }

    /// Writes `payload` rows through a [`TableWriter`] rolling at `target` until `files`
    /// files are full, in batches of `batch_rows`; the sizes of the files written.
    async fn sizes_written(target: u64, payload: Payload, files: u64, batch_rows: usize) -> Vec<u64> {
        let dir = tempfile::tempdir().unwrap();
        let schema = schema();
        let options = WriterOptions { target_size: target, ..options(dir.path()) };
        let mut writer = TableWriter::new(options, Arc::new(PartitionSpec::unpartition_spec())).unwrap();
        let (mut rng, mut offset) = (Rng(0x9e37_79b9_7f4a_7c15), 0i64);
        let closed = |w: &TableWriter| match w {
            TableWriter::Unpartitioned(w) => w.closed() as u64,
            TableWriter::Partitioned(_) => unreachable!(),
        };
        // Until `files` are closed, then a batch more: the tail.
        let mut more = 1;
        while more > 0 {
            if closed(&writer) >= files {
                more -= 1;
            }
            let rows = payload_rows(&schema, offset, batch_rows, payload, &mut rng);
            writer.write(&rows, offset, offset + batch_rows as i64 - 1).await.unwrap();
            offset += batch_rows as i64;
        }
        let written = writer.close().await.unwrap();
        let on_disk: Vec<u64> = written.iter().map(|f| std::fs::metadata(f.path()).unwrap().len()).collect();
        assert_eq!(on_disk, written.iter().map(|f| f.data_file.file_size_in_bytes()).collect::<Vec<_>>());
        assert_eq!(written.iter().map(|f| f.record_count()).sum::<u64>(), offset as u64, "every row once");
        on_disk
    }

    /// The codecs of `path`'s column chunks.
    fn codecs(path: &str) -> std::collections::BTreeSet<String> {
        use parquet::file::reader::{FileReader, SerializedFileReader};
        let reader = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
        let groups = reader.metadata().row_groups();
        groups.iter().flat_map(|g| g.columns().iter().map(|c| format!("{:?}", c.compression()))).collect()
    }

    /// A fresh writer's rows that fit in one small file go in one Snappy file, named as
    /// one; past compaction's small size, its first file closes under that size (so that
    /// compaction takes it), and the rest are zstd files of the target. A writer told to
    /// expect more rows than fit writes zstd files from the start. A writer for files
    /// that stay as written is zstd throughout.
    #[tokio::test]
    async fn a_fresh_writer_s_first_file_is_snappy_and_small_and_the_rest_zstd() {
        let schema = schema();
        let (target, small) = (256 << 10, 192 << 10);
        let fresh_then_zstd = vec![true, false, false, false, false];
        for (pages, rows, expect, expected) in [
            (Pages::Fresh { small }, 500, None, vec![true]),
            (Pages::Fresh { small }, 500, Some(500), vec![true]),
            (Pages::Fresh { small }, 6_000, None, fresh_then_zstd),
            (Pages::Fresh { small }, 6_000, Some(6_000), vec![false; 5]),
            (Pages::Zstd, 500, None, vec![false]),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let options = WriterOptions { target_size: target, pages, ..options(dir.path()) };
            let mut writer = TableWriter::new(options, Arc::new(PartitionSpec::unpartition_spec())).unwrap();
            if let Some(rows) = expect {
                writer.expect_rows(rows);
            }
            let mut rng = Rng(11);
            for first in (0..rows).step_by(250) {
                let batch = payload_rows(&schema, first, 250, Payload::Random, &mut rng);
                writer.write(&batch, first, first + 249).await.unwrap();
            }
            let written = writer.close().await.unwrap();
            let fresh: Vec<bool> = written.iter().map(|f| is_fresh(f.path())).collect();
            assert_eq!(fresh, expected, "{pages:?}, {rows} rows, {expect:?} expected");
            assert_eq!(written.iter().map(|f| f.record_count()).sum::<u64>(), rows as u64);
            for (i, file) in written.iter().enumerate() {
                let size = file.data_file.file_size_in_bytes();
                if fresh[i] {
                    assert!(file.path().ends_with(".snappy.parquet"), "{}", file.path());
                    assert_eq!(codecs(file.path()), ["SNAPPY".to_string()].into());
                    assert!(size < small, "a fresh file of {size} bytes: compaction would leave it");
                } else {
                    assert!(!file.path().ends_with(".snappy.parquet"), "{}", file.path());
                    assert_eq!(codecs(file.path()), ["ZSTD(ZstdLevel(1))".to_string()].into());
                    if i + 1 < written.len() {
                        assert!(size > target * 9 / 10, "a zstd file of {size} bytes under the target {target}");
                    }
                }
            }
        }
    }

    /// Writes `payload` at each target in batches of each size: every file but the last
    /// within 10% of the target.
    async fn assert_within_tolerance(targets: &[u64], batches: &[usize]) {
        let mut wrong = Vec::new();
        for &target in targets {
            for payload in [Payload::Random, Payload::Mixed, Payload::Json] {
                for &batch_rows in batches {
                    let sizes = sizes_written(target, payload, 2, batch_rows).await;
                    let full = &sizes[..sizes.len() - 1];
                    let off = |s: u64| (s as f64 / target as f64 - 1.0) * 100.0;
                    if full.len() < 2 || full.iter().any(|&s| off(s).abs() > 10.0) {
                        let offs: Vec<String> = sizes.iter().map(|&s| format!("{:+.1}%", off(s))).collect();
                        wrong.push(format!("{payload:?} at {} KiB, batches of {batch_rows}: {offs:?}", target >> 10));
                    }
                }
            }
        }
        assert!(wrong.is_empty(), "files off the target:\n{}", wrong.join("\n"));
    }

    #[tokio::test]
    async fn files_land_within_ten_percent_of_small_targets_at_any_compression() {
        const MIB: u64 = 1 << 20;
        // Batches as the materializer writes them, and smaller ones.
        assert_within_tolerance(&[MIB, 2 * MIB, 4 * MIB], &[8192, 1000]).await;
    }

    #[tokio::test]
    async fn files_land_within_ten_percent_of_a_16_mib_target_at_any_compression() {
        assert_within_tolerance(&[16 << 20], &[8192]).await;
    }

    /// The same at the default target, 128 MiB: several minutes unoptimized, so left to
    /// `--ignored` runs; the compaction benchmark (release) measures outputs at 128 MiB.
    #[tokio::test]
    #[ignore = "minutes in a debug build; the compaction benchmark measures 128 MiB outputs"]
    async fn files_land_within_ten_percent_of_the_default_target_at_any_compression() {
        assert_within_tolerance(&[128 << 20], &[8192]).await;
    }

    #[tokio::test]
    async fn too_many_open_partitions_close_the_least_recent_file() {
        let dir = tempfile::tempdir().unwrap();
        let schema = schema();
        let spec = crate::partition::bind(&schema, &[field("_kafka.offset", Transform::Identity)], "p").unwrap();
        let mut writer = TableWriter::new(options(dir.path()), Arc::new(spec)).unwrap();
        let n = MAX_OPEN_PARTITIONS as i64 + 3;
        let rows: Vec<(i64, Option<i64>, Option<&str>)> = (0..n).map(|o| (o, None, None)).collect();
        writer.write(&batch(&schema, &rows), 0, n - 1).await.unwrap();
        if let TableWriter::Partitioned(f) = &writer {
            assert_eq!(f.open.len(), MAX_OPEN_PARTITIONS);
            assert_eq!(f.written.len(), 3, "the three least recent closed");
        }
        let files = writer.close().await.unwrap();
        let offsets: Vec<i64> = files.iter().map(|f| f.first_offset).collect();
        assert_eq!(offsets, (0..n).collect::<Vec<_>>());
    }
}
