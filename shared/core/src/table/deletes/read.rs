//! Other engines' delete files read, so that a rewrite can leave their rows out: a
//! position delete file's `(file_path, pos)` rows grouped by the data file they name, an
//! equality delete file's rows as the set of deleted values of its equality columns.
//!
//! Columns are found by Iceberg field id (the Parquet `field_id` every Iceberg writer
//! sets), nested ones too; an equality delete's values are cast to the table's current
//! type of each column, so a delete written before a promotion (int → long) still
//! matches. Rows are compared as Arrow's row format encodes them, where two nulls are
//! equal, as the spec wants for equality deletes.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::row::{RowConverter, SortField};
use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch};
use arrow_schema::{DataType, Field, Fields};
use futures::TryStreamExt;
use iceberg::arrow::ArrowFileReader;
use iceberg::io::FileIO;
use iceberg::spec::DataFile;
use iceberg::{Error, ErrorKind, Result};
use parquet::arrow::{ParquetRecordBatchStreamBuilder, ProjectionMask};

use super::DELETE_FILE_PATH_ID;

/// Field id of the `pos` column of position delete files (Iceberg's reserved id).
pub const DELETE_FILE_POS_ID: i32 = 2_147_483_545;

fn invalid(path: &str, detail: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::DataInvalid, format!("reading delete file {path}: {detail}"))
}

fn unreadable(path: &str, detail: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::DataInvalid, format!("reading {path}: {detail}"))
}

/// The Iceberg field id of an Arrow field (its `PARQUET:field_id`).
fn field_id(field: &Field) -> Option<i32> {
    field.metadata().get(parquet::arrow::PARQUET_FIELD_ID_META_KEY)?.parse().ok()
}

/// The column of field id `id` among `fields` / `columns`, in a struct column too.
pub fn column_by_id(fields: &Fields, columns: &[ArrayRef], id: i32) -> Option<ArrayRef> {
    for (field, column) in fields.iter().zip(columns) {
        if field_id(field) == Some(id) {
            return Some(column.clone());
        }
        if let (DataType::Struct(children), Some(array)) = (field.data_type(), column.as_struct_opt())
            && let Some(found) = column_by_id(children, array.columns(), id)
        {
            return Some(found);
        }
    }
    None
}

/// The type of field id `id` among `fields`, in a struct too.
pub fn type_by_id(fields: &Fields, id: i32) -> Option<DataType> {
    fields.iter().find_map(|field| match field.data_type() {
        _ if field_id(field) == Some(id) => Some(field.data_type().clone()),
        DataType::Struct(children) => type_by_id(children, id),
        _ => None,
    })
}

/// Every record batch of the Parquet file at `path` (delete files are small: read whole).
async fn read_all(file_io: &FileIO, path: &str) -> Result<Vec<RecordBatch>> {
    let input = file_io.new_input(path)?;
    let reader = ArrowFileReader::new(input.metadata().await?, input.reader().await?);
    let stream =
        ParquetRecordBatchStreamBuilder::new(reader).await.and_then(|b| b.build()).map_err(|e| invalid(path, e))?;
    stream.try_collect().await.map_err(|e| invalid(path, e))
}

/// The rows a position delete file deletes: per data file path it names, the positions,
/// ascending, each once.
pub async fn positions(file_io: &FileIO, delete: &DataFile) -> Result<HashMap<String, Vec<i64>>> {
    let path = delete.file_path();
    let mut named: HashMap<String, Vec<i64>> = HashMap::new();
    for batch in read_all(file_io, path).await? {
        let fields = batch.schema().fields().clone();
        let column = |id: i32, name: &str| {
            column_by_id(&fields, batch.columns(), id)
                .or_else(|| batch.column_by_name(name).cloned())
                .ok_or_else(|| invalid(path, format!("no `{name}` column")))
        };
        let (paths, positions) = (column(DELETE_FILE_PATH_ID, "file_path")?, column(DELETE_FILE_POS_ID, "pos")?);
        let paths = arrow::compute::cast(&paths, &DataType::Utf8).map_err(|e| invalid(path, e))?;
        let (paths, positions) = (paths.as_string::<i32>(), positions.as_primitive_opt::<Int64Type>());
        let positions = positions.ok_or_else(|| invalid(path, "`pos` is not a long column"))?;
        for (file, pos) in paths.iter().zip(positions.iter()) {
            let (Some(file), Some(pos)) = (file, pos) else {
                return Err(invalid(path, "a null file_path or pos"));
            };
            named.entry(file.to_string()).or_default().push(pos);
        }
    }
    for positions in named.values_mut() {
        positions.sort_unstable();
        positions.dedup();
    }
    Ok(named)
}

/// The magic bytes a `deletion-vector-v1` blob's bitmap starts with.
pub(crate) const VECTOR_MAGIC: [u8; 4] = [0xD1, 0xD3, 0x39, 0x64];

/// The rows a deletion vector deletes, as [`positions`] gives them: the one data file it
/// names (`referenced_data_file`) and its positions. The vector is the Puffin blob at
/// `content_offset`, `content_size_in_bytes` long (read alone, the footer is not needed),
/// of type `deletion-vector-v1`:
///
/// ```text
///  length (u32, big-endian: magic + bitmap) │ magic D1 D3 39 64 │ bitmap │ CRC-32 (big-endian) of magic + bitmap
///  bitmap: 64-bit roaring, portable: count (u64 LE), then per key (u32 LE) a 32-bit roaring bitmap
/// ```
///
/// Its cardinality must be the entry's `record_count`.
pub async fn vector(file_io: &FileIO, delete: &DataFile) -> Result<HashMap<String, Vec<i64>>> {
    let path = delete.file_path();
    let referenced =
        delete.referenced_data_file().ok_or_else(|| invalid(path, "a deletion vector names no data file"))?;
    let (Some(offset), Some(size)) = (delete.content_offset(), delete.content_size_in_bytes()) else {
        return Err(invalid(path, "a deletion vector without content_offset and content_size_in_bytes"));
    };
    let range = u64::try_from(offset).ok().zip(u64::try_from(size).ok()).filter(|&(_, s)| s >= 12);
    let (offset, size) = range.ok_or_else(|| invalid(path, format!("no deletion vector at {offset}, {size} bytes")))?;
    let blob = file_io.new_input(path)?.reader().await?.read(offset..offset + size).await?;
    let positions = parse_vector(&blob)
        .map_err(|detail| invalid(path, format!("the deletion vector at byte {offset}: {detail}")))?;
    if positions.len() as u64 != delete.record_count() {
        return Err(invalid(
            path,
            format!(
                "the deletion vector at byte {offset} holds {} positions, its entry says {}",
                positions.len(),
                delete.record_count()
            ),
        ));
    }
    Ok(HashMap::from([(referenced, positions)]))
}

/// The positions of a `deletion-vector-v1` blob, ascending ([`vector`]).
fn parse_vector(blob: &[u8]) -> std::result::Result<Vec<i64>, String> {
    if blob.len() < 12 {
        return Err(format!("{} bytes, shorter than a blob's framing (12)", blob.len()));
    }
    let length = u32::from_be_bytes(blob[..4].try_into().expect("4 bytes")) as usize;
    if length + 8 != blob.len() {
        return Err(format!("its length says {length} bytes, the blob has {} for it", blob.len().saturating_sub(8)));
    }
    let (body, crc) = blob[4..].split_at(length);
    if body[..4] != VECTOR_MAGIC {
        return Err(format!("magic {:02X?}, not {:02X?}", &body[..4], VECTOR_MAGIC));
    }
    let expected = u32::from_be_bytes(crc.try_into().expect("4 bytes"));
    if crc32fast::hash(body) != expected {
        return Err(format!("CRC-32 {:08x}, the blob says {expected:08x}", crc32fast::hash(body)));
    }
    let bitmap = roaring::RoaringTreemap::deserialize_from(&body[4..]).map_err(|e| format!("its bitmap: {e}"))?;
    bitmap.iter().map(|p| i64::try_from(p).map_err(|_| format!("position {p} out of range"))).collect()
}

/// The rows of one equality delete file: the values of its equality columns, each
/// deleting every row of a data file in its scope with the same values.
pub struct EqualityDeletes {
    ids: Vec<i32>,
    converter: RowConverter,
    rows: HashSet<Box<[u8]>>,
}

impl std::fmt::Debug for EqualityDeletes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EqualityDeletes").field("ids", &self.ids).field("rows", &self.rows.len()).finish()
    }
}

impl EqualityDeletes {
    /// Reads `delete`, its columns cast to their types among `table` (the table's current
    /// columns as Arrow fields, with field ids).
    pub async fn read(file_io: &FileIO, delete: &DataFile, table: &Fields) -> Result<EqualityDeletes> {
        let path = delete.file_path();
        let ids = delete.equality_ids().unwrap_or_default();
        if ids.is_empty() {
            return Err(invalid(path, "an equality delete file without equality ids"));
        }
        let types = ids
            .iter()
            .map(|&id| type_by_id(table, id).ok_or_else(|| invalid(path, format!("field id {id} is not a column"))))
            .collect::<Result<Vec<_>>>()?;
        let converter = RowConverter::new(types.iter().map(|t| SortField::new(t.clone())).collect())
            .map_err(|e| invalid(path, e))?;
        let mut deletes = EqualityDeletes { ids, converter, rows: HashSet::new() };
        for batch in read_all(file_io, path).await? {
            let fields = batch.schema().fields().clone();
            let mut columns = Vec::with_capacity(types.len());
            for (&id, ty) in deletes.ids.iter().zip(&types) {
                let column = column_by_id(&fields, batch.columns(), id)
                    .ok_or_else(|| invalid(path, format!("no column of field id {id}")))?;
                columns.push(arrow::compute::cast(&column, ty).map_err(|e| invalid(path, e))?);
            }
            let rows = deletes.converter.convert_columns(&columns).map_err(|e| invalid(path, e))?;
            deletes.rows.extend(rows.iter().map(|r| Box::<[u8]>::from(r.as_ref())));
        }
        Ok(deletes)
    }

    /// Per row of `batch` (the table's columns, with field ids), whether this file
    /// deletes it.
    pub fn matches(&self, batch: &RecordBatch) -> std::result::Result<BooleanArray, String> {
        let fields = batch.schema().fields().clone();
        let columns = self
            .ids
            .iter()
            .map(|&id| column_by_id(&fields, batch.columns(), id).ok_or(format!("no column of field id {id}")))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let rows = self.converter.convert_columns(&columns).map_err(|e| e.to_string())?;
        Ok(rows.iter().map(|r| Some(self.rows.contains(r.as_ref()))).collect())
    }

    /// The field ids of its equality columns.
    pub fn ids(&self) -> &[i32] {
        &self.ids
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

/// What a rewrite leaves out of one data file: positions (ascending) and the equality
/// delete files that apply to it.
#[derive(Debug, Clone, Default)]
pub struct FileDeletes {
    pub positions: Vec<i64>,
    pub equality: Vec<Arc<EqualityDeletes>>,
}

impl FileDeletes {
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty() && self.equality.is_empty()
    }

    /// Which rows of `batch` — rows `first_row..` of the file, the table's columns — to
    /// keep; `None`: all of them.
    pub fn keep(&self, batch: &RecordBatch, first_row: i64) -> std::result::Result<Option<BooleanArray>, String> {
        if self.is_empty() {
            return Ok(None);
        }
        let rows = batch.num_rows() as i64;
        let mut keep = vec![true; batch.num_rows()];
        let start = self.positions.partition_point(|&p| p < first_row);
        for &p in self.positions[start..].iter().take_while(|&&p| p < first_row + rows) {
            keep[(p - first_row) as usize] = false;
        }
        for equality in &self.equality {
            let deleted = equality.matches(batch)?;
            for (k, d) in keep.iter_mut().zip(deleted.iter()) {
                *k &= d != Some(true);
            }
        }
        Ok(Some(BooleanArray::from(keep)))
    }
}

/// The Kafka partition and offset of every row of the Parquet file at `path`, in row
/// order (`None` where either is null): two columns read, by their field ids.
pub async fn kafka_rows(
    file_io: &FileIO,
    path: &str,
    partition_id: i32,
    offset_id: i32,
) -> Result<Vec<Option<(i32, i64)>>> {
    let mut rows = Vec::new();
    for batch in read_columns(file_io, path, &[partition_id, offset_id]).await? {
        let column = |id: i32| column_by_id(batch.schema().fields(), batch.columns(), id);
        let (Some(p), Some(o)) = (column(partition_id), column(offset_id)) else {
            return Err(unreadable(path, "no _kafka.partition or _kafka.offset column"));
        };
        let (Some(p), Some(o)) = (p.as_primitive_opt::<Int32Type>(), o.as_primitive_opt::<Int64Type>()) else {
            return Err(unreadable(path, "_kafka.partition or _kafka.offset of another type"));
        };
        rows.extend((0..batch.num_rows()).map(|i| (p.is_valid(i) && o.is_valid(i)).then(|| (p.value(i), o.value(i)))));
    }
    Ok(rows)
}

/// The record batches of the Parquet file at `path` with only the columns of field ids
/// `ids` (a struct's id reads its every leaf), ids kept in the Arrow fields' metadata.
pub async fn read_columns(file_io: &FileIO, path: &str, ids: &[i32]) -> Result<Vec<RecordBatch>> {
    let error = |e: &dyn std::fmt::Display| unreadable(path, e);
    let input = file_io.new_input(path)?;
    let reader = ArrowFileReader::new(input.metadata().await?, input.reader().await?);
    let builder = ParquetRecordBatchStreamBuilder::new(reader).await.map_err(|e| error(&e))?;
    let descriptor = builder.parquet_schema();
    let mut leaves = Vec::new();
    let mut next = 0;
    for field in descriptor.root_schema().get_fields() {
        collect_leaves(field, ids, false, &mut next, &mut leaves);
    }
    let mask = ProjectionMask::leaves(descriptor, leaves);
    let stream = builder.with_projection(mask).build().map_err(|e| error(&e))?;
    stream.try_collect().await.map_err(|e| error(&e))
}

/// The leaf indexes (depth first) under `node` that lie under a field of `ids`.
fn collect_leaves(
    node: &parquet::schema::types::TypePtr,
    ids: &[i32],
    under: bool,
    next: &mut usize,
    out: &mut Vec<usize>,
) {
    let info = node.get_basic_info();
    let under = under || (info.has_id() && ids.contains(&info.id()));
    if node.is_primitive() {
        if under {
            out.push(*next);
        }
        *next += 1;
        return;
    }
    for child in node.get_fields() {
        collect_leaves(child, ids, under, next, out);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap as Map;

    use crate::table::deletes::DELETE_FILE_PATH_ID;

    use arrow_array::{Int32Array, Int64Array, StructArray};
    use arrow_schema::Schema as ArrowSchema;

    use super::*;

    /// A `deletion-vector-v1` blob of `positions`, written as the spec draws it.
    fn vector_blob(positions: &[u64]) -> Vec<u8> {
        let mut body = VECTOR_MAGIC.to_vec();
        positions.iter().copied().collect::<roaring::RoaringTreemap>().serialize_into(&mut body).unwrap();
        let mut blob = (body.len() as u32).to_be_bytes().to_vec();
        blob.extend(&body);
        blob.extend(crc32fast::hash(&body).to_be_bytes());
        blob
    }

    #[test]
    fn a_deletion_vector_gives_its_positions_across_the_32_bit_boundary() {
        let positions = [0, 9, 70_000, (1 << 32) + 5];
        let expected: Vec<i64> = positions.iter().map(|&p| p as i64).collect();
        assert_eq!(parse_vector(&vector_blob(&positions)).unwrap(), expected);
    }

    #[test]
    fn a_damaged_deletion_vector_is_an_error_naming_what_is_wrong() {
        let good = vector_blob(&[1, 2, 3]);
        let mut magic = good.clone();
        magic[4] = 0;
        assert!(parse_vector(&magic).unwrap_err().contains("magic"));
        let mut flipped = good.clone();
        flipped[10] ^= 1;
        assert!(parse_vector(&flipped).unwrap_err().contains("CRC-32"));
        let short = &good[..good.len() - 1];
        assert!(parse_vector(short).unwrap_err().contains("length"));
        let framing_only = [0u8, 0, 0, 0, 0, 0, 0, 0];
        assert!(parse_vector(&framing_only).unwrap_err().contains("shorter"), "an error, never a panic");
        let mut garbage = good.clone();
        let n = garbage.len();
        garbage.truncate(12);
        garbage[..4].copy_from_slice(&4u32.to_be_bytes());
        let crc = crc32fast::hash(&VECTOR_MAGIC);
        garbage[8..12].copy_from_slice(&crc.to_be_bytes());
        assert!(n > 12);
        assert!(parse_vector(&garbage).unwrap_err().contains("bitmap"));
    }

    fn with_id(name: &str, ty: DataType, id: i32) -> Field {
        Field::new(name, ty, true)
            .with_metadata(Map::from([(parquet::arrow::PARQUET_FIELD_ID_META_KEY.to_string(), id.to_string())]))
    }

    /// Rows (_kafka.offset: 10..15, id: 0..5 with a null at 3).
    fn table_batch() -> RecordBatch {
        let kafka_fields = Fields::from(vec![with_id("offset", DataType::Int64, 2)]);
        let kafka = StructArray::new(kafka_fields.clone(), vec![Arc::new(Int64Array::from_iter_values(10..15))], None);
        let schema = ArrowSchema::new(vec![
            with_id("_kafka", DataType::Struct(kafka_fields), 1),
            with_id("id", DataType::Int64, 3),
        ]);
        let ids = Int64Array::from(vec![Some(0), Some(1), Some(2), None, Some(4)]);
        RecordBatch::try_new(Arc::new(schema), vec![Arc::new(kafka), Arc::new(ids)]).unwrap()
    }

    fn equality(ids: Vec<i32>, columns: Vec<ArrayRef>) -> EqualityDeletes {
        let types: Vec<_> = columns.iter().map(|c| SortField::new(c.data_type().clone())).collect();
        let converter = RowConverter::new(types).unwrap();
        let rows = converter.convert_columns(&columns).unwrap().iter().map(|r| r.as_ref().into()).collect();
        EqualityDeletes { ids, converter, rows }
    }

    fn kept(deletes: &FileDeletes, first_row: i64) -> Vec<i64> {
        let batch = table_batch();
        let Some(mask) = deletes.keep(&batch, first_row).unwrap() else { return (10..15).collect() };
        let kept = arrow::compute::filter_record_batch(&batch, &mask).unwrap();
        let kafka = kept.column(0).as_struct().column(0).as_primitive::<Int64Type>().clone();
        kafka.values().to_vec()
    }

    #[test]
    fn positions_count_from_the_batch_s_first_row_in_the_file() {
        let deletes = FileDeletes { positions: vec![1, 8192, 8194, 9000], equality: vec![] };
        assert_eq!(kept(&deletes, 0), [10, 12, 13, 14]);
        assert_eq!(kept(&deletes, 8192), [11, 13, 14]);
        assert_eq!(kept(&FileDeletes::default(), 0), [10, 11, 12, 13, 14]);
    }

    #[test]
    fn equality_deletes_match_by_field_id_nested_too_and_nulls_are_equal() {
        let ids: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), None, Some(7)]));
        let by_id = Arc::new(equality(vec![3], vec![ids]));
        let deletes = FileDeletes { positions: vec![], equality: vec![by_id] };
        assert_eq!(kept(&deletes, 0), [10, 12, 14], "id 1 and the null id");
        let offsets: ArrayRef = Arc::new(Int64Array::from(vec![14]));
        let nested = Arc::new(equality(vec![2], vec![offsets]));
        let deletes = FileDeletes { positions: vec![0], equality: vec![nested] };
        assert_eq!(kept(&deletes, 0), [11, 12, 13], "_kafka.offset 14 and position 0");
        let two: Vec<ArrayRef> =
            vec![Arc::new(Int64Array::from(vec![13, 11])), Arc::new(Int64Array::from(vec![Some(4), Some(1)]))];
        let both = Arc::new(equality(vec![2, 3], two));
        assert_eq!(kept(&FileDeletes { positions: vec![], equality: vec![both] }, 0), [10, 12, 13, 14]);
        let missing = equality(vec![99], vec![Arc::new(Int32Array::from(vec![1]))]);
        assert!(missing.matches(&table_batch()).unwrap_err().contains("field id 99"));
    }

    /// A position delete file at `path` of `columns` (name, field id, values) as a
    /// manifest names it.
    fn delete_file(path: &std::path::Path, columns: Vec<(&str, i32, ArrayRef)>) -> DataFile {
        let fields: Vec<Field> = columns.iter().map(|(n, id, a)| with_id(n, a.data_type().clone(), *id)).collect();
        let batch =
            RecordBatch::try_new(Arc::new(ArrowSchema::new(fields)), columns.into_iter().map(|c| c.2).collect())
                .unwrap();
        let mut writer =
            parquet::arrow::ArrowWriter::try_new(std::fs::File::create(path).unwrap(), batch.schema(), None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        iceberg::spec::DataFileBuilder::default()
            .content(iceberg::spec::DataContentType::PositionDeletes)
            .file_path(path.display().to_string())
            .file_format(iceberg::spec::DataFileFormat::Parquet)
            .partition(iceberg::spec::Struct::empty())
            .record_count(1)
            .file_size_in_bytes(1)
            .build()
            .unwrap()
    }

    #[tokio::test]
    async fn a_position_delete_file_is_read_by_data_file_and_a_bad_one_named() {
        let dir = tempfile::tempdir().unwrap();
        let file_io = crate::storage::local_file_io();
        let paths: ArrayRef = Arc::new(arrow_array::StringArray::from(vec!["a", "b", "a", "a"]));
        let pos: ArrayRef = Arc::new(Int64Array::from(vec![7, 1, 2, 7]));
        let good = delete_file(
            &dir.path().join("good.parquet"),
            vec![("file_path", DELETE_FILE_PATH_ID, paths.clone()), ("pos", DELETE_FILE_POS_ID, pos)],
        );
        let named = positions(&file_io, &good).await.unwrap();
        assert_eq!(named, HashMap::from([("a".to_string(), vec![2, 7]), ("b".to_string(), vec![1])]));
        // No `pos` column: refused, naming the file (the table's compaction fails; nothing is removed).
        let bad_path = dir.path().join("bad.parquet");
        let bad = delete_file(&bad_path, vec![("file_path", DELETE_FILE_PATH_ID, paths)]);
        let e = positions(&file_io, &bad).await.unwrap_err().to_string();
        assert!(e.contains(&bad_path.display().to_string()) && e.contains("no `pos` column"), "{e}");
    }
}
