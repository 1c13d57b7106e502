//! Position delete files Floe writes (format v2, the spec's "Position Delete Files"): the
//! rows an upsert supersedes, as `(file_path, pos)` rows ordered by path and position.
//!
//! A position delete file applies to data files of its own partition spec and partition
//! value, so one is written per spec and partition value of the data files it names. Its
//! `file_path` bounds are the lowest and highest path it names: a file naming one data
//! file is scoped to that file by every reader (as Iceberg's Java writer does), and its
//! `referenced_data_file` says so too.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow_array::{Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use bytes::Bytes;
use iceberg::io::FileIO;
use iceberg::spec::{DataContentType, DataFile, DataFileBuilder, DataFileFormat, Datum, Struct};
use iceberg::{Error, ErrorKind, Result};
use parquet::arrow::{ArrowWriter, PARQUET_FIELD_ID_META_KEY};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use super::DELETE_FILE_PATH_ID;
use super::read::DELETE_FILE_POS_ID;

/// Rows of one data file to delete.
#[derive(Debug, Clone)]
pub struct Doomed {
    pub path: String,
    pub spec_id: i32,
    pub partition: Struct,
    /// Positions (0-based rows of the file), in any order, repeats allowed.
    pub positions: Vec<i64>,
}

fn field(name: &str, data_type: DataType, id: i32) -> Field {
    Field::new(name, data_type, false)
        .with_metadata(std::collections::HashMap::from([(PARQUET_FIELD_ID_META_KEY.to_string(), id.to_string())]))
}

/// Writes the position delete files deleting `doomed` into `data_dir` (one per partition
/// spec and value); returns them as manifest entries name them, each with its spec's id.
pub async fn write_position_deletes(
    file_io: &FileIO,
    data_dir: &str,
    doomed: Vec<Doomed>,
) -> Result<Vec<(i32, DataFile)>> {
    let mut groups: BTreeMap<(i32, String), Vec<Doomed>> = BTreeMap::new();
    for d in doomed.into_iter().filter(|d| !d.positions.is_empty()) {
        groups.entry((d.spec_id, format!("{:?}", d.partition))).or_default().push(d);
    }
    let mut written = Vec::with_capacity(groups.len());
    for ((spec_id, _), mut files) in groups {
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let partition = files[0].partition.clone();
        let (mut paths, mut positions) = (Vec::new(), Vec::new());
        for file in &mut files {
            file.positions.sort_unstable();
            file.positions.dedup();
            paths.extend(std::iter::repeat_n(file.path.as_str(), file.positions.len()));
            positions.extend_from_slice(&file.positions);
        }
        let location = format!("{data_dir}/delete-{}.parquet", uuid::Uuid::new_v4());
        let size = write_file(file_io, &location, paths.clone(), positions.clone()).await?;
        let (first, last) = (&files[0].path, &files[files.len() - 1].path);
        let mut builder = DataFileBuilder::default();
        builder
            .content(DataContentType::PositionDeletes)
            .file_path(location)
            .file_format(DataFileFormat::Parquet)
            .partition(partition)
            .partition_spec_id(spec_id)
            .record_count(positions.len() as u64)
            .file_size_in_bytes(size)
            .lower_bounds(HashMap::from([
                (DELETE_FILE_PATH_ID, Datum::string(first)),
                (DELETE_FILE_POS_ID, Datum::long(*positions.iter().min().expect("positions"))),
            ]))
            .upper_bounds(HashMap::from([
                (DELETE_FILE_PATH_ID, Datum::string(last)),
                (DELETE_FILE_POS_ID, Datum::long(*positions.iter().max().expect("positions"))),
            ]));
        if files.len() == 1 {
            builder.referenced_data_file(Some(first.clone()));
        }
        written.push((spec_id, builder.build().map_err(|e| Error::new(ErrorKind::Unexpected, e.to_string()))?));
    }
    Ok(written)
}

async fn write_file(file_io: &FileIO, location: &str, paths: Vec<&str>, positions: Vec<i64>) -> Result<u64> {
    let error = |e: &dyn std::fmt::Display| Error::new(ErrorKind::Unexpected, format!("writing {location}: {e}"));
    let schema = Arc::new(Schema::new(vec![
        field("file_path", DataType::Utf8, DELETE_FILE_PATH_ID),
        field("pos", DataType::Int64, DELETE_FILE_POS_ID),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(StringArray::from(paths)), Arc::new(Int64Array::from(positions))],
    )
    .map_err(|e| error(&e))?;
    let zstd = ZstdLevel::try_new(1).map_err(|e| error(&e))?;
    let properties = WriterProperties::builder().set_compression(Compression::ZSTD(zstd)).build();
    let mut bytes = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut bytes, schema, Some(properties)).map_err(|e| error(&e))?;
    writer.write(&batch).map_err(|e| error(&e))?;
    writer.close().map_err(|e| error(&e))?;
    let size = bytes.len() as u64;
    file_io.new_output(location)?.write(Bytes::from(bytes)).await?;
    Ok(size)
}

#[cfg(test)]
mod tests {
    use iceberg::spec::Literal;

    use super::*;
    use crate::table::deletes::read::positions;

    #[tokio::test]
    async fn position_deletes_are_written_per_partition_and_read_back_by_the_spec_reader() {
        let dir = tempfile::tempdir().unwrap();
        let data_dir = dir.path().display().to_string();
        let file_io = crate::storage::local_file_io();
        let day = |d: i32| Struct::from_iter([Some(Literal::int(d))]);
        let doomed = vec![
            Doomed { path: "/w/b.parquet".into(), spec_id: 0, partition: day(1), positions: vec![9, 2, 2] },
            Doomed { path: "/w/a.parquet".into(), spec_id: 0, partition: day(1), positions: vec![5] },
            Doomed { path: "/w/c.parquet".into(), spec_id: 0, partition: day(2), positions: vec![0] },
            Doomed { path: "/w/d.parquet".into(), spec_id: 0, partition: day(3), positions: vec![] },
        ];
        let written = write_position_deletes(&file_io, &data_dir, doomed).await.unwrap();
        assert!(written.iter().all(|(spec_id, _)| *spec_id == 0));
        let mut files: Vec<DataFile> = written.into_iter().map(|(_, f)| f).collect();
        files.sort_by_key(|f| f.record_count());
        assert_eq!(files.len(), 2, "one per partition value that has rows to delete");
        let (one, two) = (&files[0], &files[1]);
        assert_eq!((one.partition(), one.record_count()), (&day(2), 1));
        assert_eq!(one.referenced_data_file().as_deref(), Some("/w/c.parquet"));
        assert_eq!((two.partition(), two.record_count(), two.referenced_data_file()), (&day(1), 3, None));
        assert_eq!(two.lower_bounds()[&DELETE_FILE_PATH_ID], Datum::string("/w/a.parquet"));
        assert_eq!(two.upper_bounds()[&DELETE_FILE_PATH_ID], Datum::string("/w/b.parquet"));
        assert_eq!(two.content_type(), DataContentType::PositionDeletes);
        let read = positions(&file_io, two).await.unwrap();
        let expected = HashMap::from([("/w/a.parquet".to_string(), vec![5]), ("/w/b.parquet".to_string(), vec![2, 9])]);
        assert_eq!(read, expected);
        let size = std::fs::metadata(two.file_path()).unwrap().len();
        assert_eq!(two.file_size_in_bytes(), size);
    }
}
