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

/// The magic bytes a Puffin file starts and ends with.
const PUFFIN_MAGIC: &[u8; 4] = b"PFA1";
/// Field id of `_pos`, the row position a deletion vector's blob names (the spec's reserved id).
const ROW_POSITION_ID: i32 = 2_147_483_645;

/// Writes deletion vectors (format v3) deleting `doomed`: one Puffin file in `data_dir`
/// holding a `deletion-vector-v1` blob per data file, each blob every position of its
/// file (the caller merges a file's earlier vector in: a data file has one vector at
/// most); returns them as manifest entries name them, each with its spec's id.
///
/// ```text
///  PFA1 │ blob … │ PFA1 │ footer JSON │ footer length (i32 LE) │ flags (4 × 0) │ PFA1
///  blob: length (u32 BE: magic + bitmap) │ D1 D3 39 64 │ 64-bit roaring, portable │ CRC-32 (BE)
/// ```
pub async fn write_vectors(file_io: &FileIO, data_dir: &str, doomed: Vec<Doomed>) -> Result<Vec<(i32, DataFile)>> {
    let error = |e: &dyn std::fmt::Display| Error::new(ErrorKind::Unexpected, format!("a deletion vector: {e}"));
    let location = format!("{data_dir}/delete-{}.puffin", uuid::Uuid::new_v4());
    let mut bytes = PUFFIN_MAGIC.to_vec();
    let (mut blobs, mut placed) = (Vec::new(), Vec::new());
    for file in doomed.into_iter().filter(|d| !d.positions.is_empty()) {
        let bitmap: roaring::RoaringTreemap = file.positions.iter().map(|&p| p as u64).collect();
        let mut body = super::read::VECTOR_MAGIC.to_vec();
        bitmap.serialize_into(&mut body).map_err(|e| error(&e))?;
        let offset = bytes.len();
        bytes.extend_from_slice(&(body.len() as u32).to_be_bytes());
        bytes.extend_from_slice(&body);
        bytes.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
        let length = bytes.len() - offset;
        blobs.push(serde_json::json!({
            "type": "deletion-vector-v1", "fields": [ROW_POSITION_ID], "snapshot-id": -1, "sequence-number": -1,
            "offset": offset, "length": length,
            "properties": {"referenced-data-file": file.path, "cardinality": bitmap.len().to_string()},
        }));
        placed.push((file, offset, length, bitmap.len()));
    }
    if placed.is_empty() {
        return Ok(Vec::new());
    }
    let footer = serde_json::to_vec(&serde_json::json!({"blobs": blobs, "properties": {"created-by": "floe"}}))
        .map_err(|e| error(&e))?;
    bytes.extend_from_slice(PUFFIN_MAGIC);
    bytes.extend_from_slice(&footer);
    bytes.extend_from_slice(&(footer.len() as i32).to_le_bytes());
    bytes.extend_from_slice(&[0; 4]);
    bytes.extend_from_slice(PUFFIN_MAGIC);
    let size = bytes.len() as u64;
    file_io.new_output(&location)?.write(Bytes::from(bytes)).await?;
    let mut written = Vec::with_capacity(placed.len());
    for (file, offset, length, cardinality) in placed {
        let data_file = DataFileBuilder::default()
            .content(DataContentType::PositionDeletes)
            .file_path(location.clone())
            .file_format(DataFileFormat::Puffin)
            .partition(file.partition)
            .partition_spec_id(file.spec_id)
            .record_count(cardinality)
            .file_size_in_bytes(size)
            .referenced_data_file(Some(file.path))
            .content_offset(Some(offset as i64))
            .content_size_in_bytes(Some(length as i64))
            .build()
            .map_err(|e| error(&e))?;
        written.push((file.spec_id, data_file));
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
    use crate::table::deletes::read::{positions, vector};

    #[tokio::test]
    async fn deletion_vectors_are_one_puffin_file_each_blob_read_back_by_its_offset() {
        let dir = tempfile::tempdir().unwrap();
        let file_io = crate::storage::local_file_io();
        let far = (1i64 << 32) + 7;
        let doomed = vec![
            Doomed {
                path: "/w/a.parquet".into(),
                spec_id: 0,
                partition: Struct::empty(),
                positions: vec![3, 1, 3, far],
            },
            Doomed { path: "/w/b.parquet".into(), spec_id: 0, partition: Struct::empty(), positions: vec![0] },
            Doomed { path: "/w/c.parquet".into(), spec_id: 0, partition: Struct::empty(), positions: vec![] },
        ];
        let written = write_vectors(&file_io, &dir.path().display().to_string(), doomed).await.unwrap();
        assert_eq!(written.len(), 2, "none for a file without positions");
        let (a, b) = (&written[0].1, &written[1].1);
        assert_eq!(a.file_path(), b.file_path(), "one Puffin file");
        assert_eq!((a.file_format(), a.record_count()), (DataFileFormat::Puffin, 3));
        let read = vector(&file_io, a).await.unwrap();
        assert_eq!(read, HashMap::from([("/w/a.parquet".to_string(), vec![1, 3, far])]));
        assert_eq!(vector(&file_io, b).await.unwrap()["/w/b.parquet"], [0]);
        let bytes = std::fs::read(a.file_path()).unwrap();
        assert_eq!((&bytes[..4], &bytes[bytes.len() - 4..]), (&b"PFA1"[..], &b"PFA1"[..]));
        assert_eq!(a.file_size_in_bytes(), bytes.len() as u64);
        let footer_len = i32::from_le_bytes(bytes[bytes.len() - 12..bytes.len() - 8].try_into().unwrap()) as usize;
        let footer: serde_json::Value =
            serde_json::from_slice(&bytes[bytes.len() - 12 - footer_len..bytes.len() - 12]).unwrap();
        assert_eq!(footer["blobs"][0]["properties"]["referenced-data-file"], "/w/a.parquet");
        assert_eq!(footer["blobs"][1]["offset"], b.content_offset().unwrap());
    }

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
