//! Iceberg's row-level deletes as Delta deletion vectors: for each live data file, the
//! positions its live position delete files, deletion vectors and equality delete files
//! remove ([`deleted_positions`]), written as a Delta deletion vector file ([`write()`])
//! named on the file's `add` ([`DeletionVector`]).
//!
//! ```text
//!  <root>/data/deletion_vector_<uuid>.bin     (`storageType` "u", `pathOrInlineDv` "data" + Z85 of the UUID)
//!  0x01 │ size (u32 BE: magic + bitmap) │ D1 D3 39 64 │ 64-bit roaring, portable │ CRC-32 (BE)
//!        ▲ offset 1
//! ```
//!
//! The bytes after the version byte are an Iceberg deletion vector blob's, as the two
//! formats share them. The UUID is a digest of the data file's path and the positions,
//! so racing mirrors write the same file under the same name, and a file whose deletes
//! did not change keeps its vector.
//!
//! Equality deletes name rows by value, not position: the files one applies to have its
//! columns read, and the rows it matches are their positions. While one is live, each
//! mirror reads them again (the vectors it makes are the same, and nothing is written);
//! compaction applies it into new files, which ends that.

use std::collections::BTreeMap;

use bytes::Bytes;
use iceberg::io::FileIO;
use std::sync::Arc;

use iceberg::spec::TableMetadata;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::DeltaError;
use crate::table::deletes::read::{EqualityDeletes, FileDeletes, VECTOR_MAGIC, read_columns};
use crate::table::deletes::{DeleteSource, LiveDelete, ScopedFile, TableDeletes};

/// Where a table's deletion vector files go, under its root; their `pathOrInlineDv` prefix.
const PREFIX: &str = "data";

/// A data file's deletion vector, as an `add` (or `remove`) names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeletionVector {
    /// `u`: a file under the table's root, named by a UUID (the only kind Floe writes).
    pub storage_type: String,
    pub path_or_inline_dv: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<i32>,
    pub size_in_bytes: i32,
    /// How many rows it deletes.
    pub cardinality: i64,
}

impl DeletionVector {
    /// Its file under the table at `root`; `None` for a vector stored otherwise (inline,
    /// or by absolute path).
    pub fn file(&self, root: &str) -> Option<String> {
        let encoded = &self.path_or_inline_dv;
        if self.storage_type != "u" || encoded.len() < 20 || !encoded.is_char_boundary(encoded.len() - 20) {
            return None;
        }
        let (prefix, id) = encoded.split_at(encoded.len() - 20);
        let uuid = uuid::Uuid::from_slice(&z85_decode(id)?).ok()?;
        let prefix = if prefix.is_empty() { String::new() } else { format!("{prefix}/") };
        Some(format!("{}/{prefix}deletion_vector_{uuid}.bin", root.trim_end_matches('/')))
    }

    /// What tells one vector of a file from another (the protocol's unique id).
    pub fn id(&self) -> String {
        let offset = self.offset.map(|o| format!("@{o}")).unwrap_or_default();
        format!("{}{}{offset}", self.storage_type, self.path_or_inline_dv)
    }
}

/// The rows removed from each of `data` (by its Iceberg path, ascending positions) by the
/// live delete files `deletes` of `metadata`'s current snapshot (the rows of position
/// deletes taken from `source`); a file none applies to is absent.
pub async fn deleted_positions(
    file_io: &FileIO,
    metadata: &TableMetadata,
    data: &[ScopedFile],
    deletes: Vec<LiveDelete>,
    source: &dyn DeleteSource,
) -> Result<BTreeMap<String, Vec<i64>>, DeltaError> {
    if deletes.is_empty() {
        return Ok(BTreeMap::new());
    }
    let mut scoped = TableDeletes::scope_from(file_io, metadata, deletes, source).await?;
    scoped.read_for_from(file_io, metadata, &data.iter().collect::<Vec<_>>(), source).await?;
    let mut out = BTreeMap::new();
    for file in data {
        let FileDeletes { mut positions, equality } = scoped.of(file).deletes;
        if !equality.is_empty() {
            positions.extend(matched(file_io, file.path(), equality).await?);
            positions.sort_unstable();
            positions.dedup();
        }
        if !positions.is_empty() {
            out.insert(file.path().to_string(), positions);
        }
    }
    Ok(out)
}

/// The positions of the rows of the data file at `path` that the equality delete files
/// `equality` match: their columns read, by field id.
async fn matched(file_io: &FileIO, path: &str, equality: Vec<Arc<EqualityDeletes>>) -> Result<Vec<i64>, DeltaError> {
    let mut ids: Vec<i32> = equality.iter().flat_map(|e| e.ids().iter().copied()).collect();
    ids.sort_unstable();
    ids.dedup();
    let deletes = FileDeletes { positions: Vec::new(), equality };
    let (mut positions, mut first_row) = (Vec::new(), 0i64);
    for batch in read_columns(file_io, path, &ids).await? {
        let keep = deletes.keep(&batch, first_row).map_err(|e| DeltaError::Iceberg(format!("{path}: {e}")))?;
        let gone = keep.iter().flat_map(|k| k.iter()).enumerate().filter(|(_, k)| *k == Some(false));
        positions.extend(gone.map(|(i, _)| first_row + i as i64));
        first_row += batch.num_rows() as i64;
    }
    Ok(positions)
}

/// Writes the deletion vector of `positions` (ascending) of the data file at `data_path`
/// under the table at `root`, unless a file of that name is there; its descriptor.
pub async fn write(
    file_io: &FileIO,
    root: &str,
    data_path: &str,
    positions: &[i64],
) -> Result<DeletionVector, DeltaError> {
    let failed = |e: &dyn std::fmt::Display| DeltaError::Iceberg(format!("a deletion vector of {data_path}: {e}"));
    let bitmap: roaring::RoaringTreemap = positions.iter().map(|&p| p as u64).collect();
    let mut body = VECTOR_MAGIC.to_vec();
    bitmap.serialize_into(&mut body).map_err(|e| failed(&e))?;
    let mut digest = Sha256::new();
    digest.update(data_path.as_bytes());
    digest.update(&body);
    let bytes: [u8; 16] = digest.finalize()[..16].try_into().map_err(|e| failed(&e))?;
    let uuid = uuid::Builder::from_random_bytes(bytes).into_uuid();
    let vector = DeletionVector {
        storage_type: "u".into(),
        path_or_inline_dv: format!("{PREFIX}{}", z85_encode(uuid.as_bytes())),
        offset: Some(1),
        size_in_bytes: body.len() as i32,
        cardinality: bitmap.len() as i64,
    };
    let path = vector.file(root).ok_or_else(|| failed(&"its own name does not decode"))?;
    if !file_io.exists(&path).await.map_err(|e| failed(&e))? {
        let mut bytes = Vec::with_capacity(body.len() + 9);
        bytes.push(1);
        bytes.extend_from_slice(&(body.len() as u32).to_be_bytes());
        bytes.extend_from_slice(&body);
        bytes.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
        file_io.new_output(&path).map_err(|e| failed(&e))?.write(Bytes::from(bytes)).await.map_err(|e| failed(&e))?;
    }
    Ok(vector)
}

/// ZeroMQ's Base85 alphabet, which the protocol encodes a vector's UUID in.
const Z85: &[u8; 85] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

/// Z85 of `bytes` (a multiple of 4 long): 5 characters per 4 bytes, big-endian.
fn z85_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() / 4 * 5);
    for chunk in bytes.chunks(4) {
        let mut value = u32::from_be_bytes(chunk.try_into().unwrap_or([0; 4]));
        let mut digits = [0u8; 5];
        for digit in digits.iter_mut().rev() {
            *digit = Z85[(value % 85) as usize];
            value /= 85;
        }
        out.extend(digits.iter().map(|&d| d as char));
    }
    out
}

/// The bytes of Z85 `text` (a multiple of 5 long); `None` when it is not Z85.
fn z85_decode(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(5) {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() / 5 * 4);
    for chunk in text.as_bytes().chunks(5) {
        let mut value: u64 = 0;
        for &c in chunk {
            value = value * 85 + Z85.iter().position(|&z| z == c)? as u64;
        }
        out.extend_from_slice(&u32::try_from(value).ok()?.to_be_bytes());
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn z85_is_zeromq_s_encoding() {
        // The example of the Z85 specification (rfc.zeromq.org/spec/32).
        let hello = [0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B];
        assert_eq!(z85_encode(&hello), "HelloWorld");
        assert_eq!(z85_decode("HelloWorld").unwrap(), hello);
        assert_eq!(z85_decode("Hello"), Some(vec![0x86, 0x4F, 0xD2, 0x6F]));
        assert_eq!(z85_decode("Hell"), None);
        assert_eq!(z85_decode("~~~~~"), None);
    }

    #[tokio::test]
    async fn a_vector_is_written_once_under_a_name_of_its_content_and_read_back_by_its_descriptor() {
        let dir = tempfile::tempdir().unwrap();
        let (file_io, root) = (crate::storage::local_file_io(), dir.path().display().to_string());
        let far = (1i64 << 32) + 7;
        let vector = write(&file_io, &root, "/w/a.parquet", &[1, 3, far]).await.unwrap();
        assert_eq!((vector.cardinality, vector.offset, vector.path_or_inline_dv.len()), (3, Some(1), 24));
        assert_eq!(write(&file_io, &root, "/w/a.parquet", &[1, 3, far]).await.unwrap(), vector, "the same name");
        assert_ne!(write(&file_io, &root, "/w/a.parquet", &[1, 3]).await.unwrap().id(), vector.id());
        assert_ne!(write(&file_io, &root, "/w/b.parquet", &[1, 3, far]).await.unwrap().id(), vector.id());
        let path = vector.file(&root).unwrap();
        assert!(path.starts_with(&format!("{root}/data/deletion_vector_")) && path.ends_with(".bin"), "{path}");
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes[0], 1, "the format version");
        let size = u32::from_be_bytes(bytes[1..5].try_into().unwrap()) as usize;
        assert_eq!(size, vector.size_in_bytes as usize);
        let body = &bytes[5..5 + size];
        assert_eq!(&body[..4], VECTOR_MAGIC);
        assert_eq!(u32::from_be_bytes(bytes[5 + size..].try_into().unwrap()), crc32fast::hash(body));
        let read = roaring::RoaringTreemap::deserialize_from(&body[4..]).unwrap();
        assert_eq!(read.into_iter().collect::<Vec<_>>(), [1, 3, far as u64]);
    }
}
