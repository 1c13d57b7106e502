//! Parquet data files: record batches → zstd Parquet files with `PARQUET:field_id` on
//! every column, bounded row groups, a new file at the target size, each described as
//! an Iceberg `DataFile` (record count, size, column sizes, value/null counts, bounds).
//!
//! Files are named `{dir}/{partition:05}-{first offset:020}-{source id}.parquet`: the
//! same input (same source id) gives the same names, so a retry overwrites rather than
//! duplicates, and two uploads of the same offsets (leader change) never collide.

use std::sync::Arc;

use arrow_array::RecordBatch;
use iceberg::io::FileIO;
use iceberg::spec::{DataFile, DataFileFormat, FormatVersion, Schema, StructType};
use iceberg::writer::CurrentFileStatus;
use iceberg::writer::file_writer::{FileWriter, FileWriterBuilder, ParquetWriter, ParquetWriterBuilder};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

/// Row groups are closed at about this many bytes, so a writer's memory stays bounded.
const ROW_GROUP_BYTES: usize = 32 << 20;

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

    /// The `DataFile` as Iceberg's JSON (unpartitioned tables).
    pub fn data_file_json(&self) -> Result<serde_json::Value, iceberg::Error> {
        let json = iceberg::spec::serialize_data_file_to_json(
            self.data_file.clone(),
            &StructType::new(vec![]),
            FormatVersion::V2,
        )?;
        serde_json::from_str(&json).map_err(|e| iceberg::Error::new(iceberg::ErrorKind::Unexpected, e.to_string()))
    }
}

struct OpenFile {
    writer: ParquetWriter,
    first_offset: i64,
    last_offset: i64,
}

/// Writes one table's record batches of one Kafka partition into rolling Parquet files.
pub struct DataFileWriter {
    file_io: FileIO,
    dir: String,
    partition: i32,
    source_id: String,
    schema: Arc<Schema>,
    target_size: u64,
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
            schema,
            target_size,
            current: None,
            written: Vec::new(),
        }
    }

    pub fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }

    /// Writes `batch` (rows with offsets `first..=last`), rolling to a new file once the
    /// current one reaches the target size.
    pub async fn write(
        &mut self,
        batch: &RecordBatch,
        first_offset: i64,
        last_offset: i64,
    ) -> Result<(), iceberg::Error> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        if self.current.is_none() {
            let props = WriterProperties::builder()
                .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).expect("valid level")))
                .set_max_row_group_bytes(Some(ROW_GROUP_BYTES))
                .set_statistics_truncate_length(Some(256))
                .build();
            let path = format!("{}/{:05}-{first_offset:020}-{}.parquet", self.dir, self.partition, self.source_id);
            let output = self.file_io.new_output(&path)?;
            let writer = ParquetWriterBuilder::new(props, self.schema.clone()).build(output).await?;
            self.current = Some(OpenFile { writer, first_offset, last_offset });
        }
        let open = self.current.as_mut().expect("opened above");
        open.writer.write(batch).await?;
        open.last_offset = last_offset;
        if open.writer.current_written_size() as u64 >= self.target_size {
            self.roll().await?;
        }
        Ok(())
    }

    async fn roll(&mut self) -> Result<(), iceberg::Error> {
        let Some(open) = self.current.take() else {
            return Ok(());
        };
        for builder in open.writer.close().await? {
            let data_file =
                builder.build().map_err(|e| iceberg::Error::new(iceberg::ErrorKind::Unexpected, e.to_string()))?;
            tracing::debug!(path = data_file.file_path(), records = data_file.record_count(), "data file written");
            self.written.push(WrittenFile {
                data_file,
                first_offset: open.first_offset,
                last_offset: open.last_offset,
            });
        }
        Ok(())
    }

    /// Closes the open file; returns every file written.
    pub async fn close(mut self) -> Result<Vec<WrittenFile>, iceberg::Error> {
        self.roll().await?;
        Ok(self.written)
    }
}

/// Format of the files this module writes.
pub const FILE_FORMAT: DataFileFormat = DataFileFormat::Parquet;
