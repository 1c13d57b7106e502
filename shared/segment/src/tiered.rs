//! Segments as Aiven's tiered-storage plugin stores them: a `.rsm-manifest` (uploaded
//! last) describing a `.log` that may be cut into zstd-compressed chunks, and an
//! `.indexes` blob holding the broker's indexes back to back.
//!
//! ```text
//!  .rsm-manifest ─┬─ chunkIndex ──▶ chunk i: original bytes [i·size, …) ⇐ stored bytes [pos_i, pos_i + len_i)
//!                 ├─ compression      (each stored chunk one zstd frame when true)
//!                 ├─ encryption       (present ⇒ AES-GCM chunks: not supported yet)
//!                 ├─ segmentIndexes ─▶ transaction: {position, size} in .indexes
//!                 └─ remoteLogSegmentMetadata: startOffset, endOffset, segmentLeaderEpochs
//! ```
//!
//! [`ChunkedSource`] serves the original segment bytes from any position by fetching the
//! stored chunks in groups (one ranged GET per group of about [`GROUP_BYTES`]) and
//! decompressing them one by one, [`READ_AHEAD`](super::source::READ_AHEAD) groups in flight ahead of the decoder,
//! so memory holds those groups, never the segment.

use std::collections::BTreeMap;
use std::io;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine;
use bytes::{Buf, Bytes};
use futures::TryStreamExt;
use serde::Deserialize;
use tokio::io::AsyncRead;
use tokio_util::io::StreamReader;

use super::retryable::{Retryable, StorageError};
use super::source::{RangeRead, SegmentSource, read_ahead};

/// Stored bytes fetched per GET when reading chunks ([`READ_AHEAD`](super::source::READ_AHEAD) groups in flight).
pub const GROUP_BYTES: u64 = 4 * 1024 * 1024;

/// Largest decoded chunk accepted (the plugin's chunks are a few MiB at most).
const MAX_CHUNK_BYTES: usize = 256 * 1024 * 1024;

/// Why a manifest or its objects cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TieredError {
    #[error("{manifest}: not a tiered-storage manifest: {detail}")]
    Manifest { manifest: String, detail: String },
    #[error(
        "{manifest}: the segment is encrypted (AES-GCM chunks); encrypted tiered-storage segments are not supported yet"
    )]
    Encrypted { manifest: String },
}

impl Retryable for TieredError {
    /// Never: the manifest itself is the problem (reading its objects fails as their
    /// `io::Error`, and a corrupt chunk as a [`StorageError::Corrupt`] in it).
    fn retryable(&self) -> bool {
        false
    }
}

/// The parts of an `.rsm-manifest` Floe uses.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub version: String,
    pub chunk_index: ChunkIndex,
    #[serde(default)]
    pub segment_indexes: Option<SegmentIndexes>,
    pub compression: bool,
    #[serde(default)]
    pub encryption: Option<serde_json::Value>,
    #[serde(default)]
    pub remote_log_segment_metadata: Option<RemoteSegmentMetadata>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoteSegmentMetadata {
    pub start_offset: i64,
    pub end_offset: i64,
    #[serde(default)]
    pub segment_leader_epochs: BTreeMap<String, i64>,
    #[serde(default)]
    pub remote_log_segment_id: Option<serde_json::Value>,
}

/// Position and size of one index in the `.indexes` blob.
#[derive(Debug, Clone, Copy, Deserialize)]
pub struct IndexSlice {
    pub position: u64,
    pub size: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SegmentIndexes {
    #[serde(default)]
    pub transaction: Option<IndexSlice>,
}

/// The chunk index, as the plugin serialises it.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ChunkIndex {
    #[serde(rename_all = "camelCase")]
    Fixed {
        original_chunk_size: u32,
        original_file_size: u32,
        transformed_chunk_size: u32,
        final_transformed_chunk_size: u32,
    },
    #[serde(rename_all = "camelCase")]
    Variable { original_chunk_size: u32, original_file_size: u32, transformed_chunks: String },
}

/// One chunk: where its bytes are in the segment and in the stored object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub original: Range<u64>,
    pub stored: Range<u64>,
}

impl Manifest {
    pub fn parse(name: &str, bytes: &[u8]) -> Result<Manifest, TieredError> {
        let manifest: Manifest = serde_json::from_slice(bytes)
            .map_err(|e| TieredError::Manifest { manifest: name.to_string(), detail: e.to_string() })?;
        if manifest.version != "1" {
            return Err(TieredError::Manifest {
                manifest: name.to_string(),
                detail: format!("manifest version {:?} (Floe reads version \"1\")", manifest.version),
            });
        }
        if manifest.encryption.is_some() {
            return Err(TieredError::Encrypted { manifest: name.to_string() });
        }
        Ok(manifest)
    }

    /// The chunks of the `.log`, in order.
    pub fn chunks(&self, name: &str) -> Result<Vec<Chunk>, TieredError> {
        let bad = |detail: String| TieredError::Manifest { manifest: name.to_string(), detail };
        let (original_chunk, original_size, stored_sizes) = match &self.chunk_index {
            ChunkIndex::Fixed {
                original_chunk_size,
                original_file_size,
                transformed_chunk_size,
                final_transformed_chunk_size,
            } => {
                if *original_chunk_size == 0 && *original_file_size > 0 {
                    return Err(bad("chunk index with originalChunkSize 0".into()));
                }
                let n = original_file_size.div_ceil((*original_chunk_size).max(1)) as usize;
                let mut sizes = vec![*transformed_chunk_size; n];
                if let Some(last) = sizes.last_mut() {
                    *last = *final_transformed_chunk_size;
                }
                (*original_chunk_size, *original_file_size, sizes)
            }
            ChunkIndex::Variable { original_chunk_size, original_file_size, transformed_chunks } => {
                (*original_chunk_size, *original_file_size, decode_chunk_sizes(transformed_chunks).map_err(bad)?)
            }
        };
        let (original_chunk, original_size) = (u64::from(original_chunk), u64::from(original_size));
        let n = stored_sizes.len() as u64;
        if n.saturating_mul(original_chunk) < original_size || (n > 0 && (n - 1) * original_chunk >= original_size) {
            return Err(bad(format!(
                "{n} chunks of {original_chunk} bytes do not make a segment of {original_size} bytes"
            )));
        }
        let mut stored = 0u64;
        let chunks = stored_sizes
            .iter()
            .enumerate()
            .map(|(i, &size)| {
                let start = i as u64 * original_chunk;
                let chunk = Chunk {
                    original: start..(start + original_chunk).min(original_size),
                    stored: stored..stored + u64::from(size),
                };
                stored += u64::from(size);
                chunk
            })
            .collect();
        Ok(chunks)
    }

    /// The segment's size in bytes (before chunk compression).
    pub fn segment_size(&self) -> u64 {
        match self.chunk_index {
            ChunkIndex::Fixed { original_file_size, .. } | ChunkIndex::Variable { original_file_size, .. } => {
                u64::from(original_file_size)
            }
        }
    }
}

/// `transformedChunks`: base64 of one zstd frame holding big-endian
/// `count:i32`, then (count > 1) `base:i32 width:u8` and count−1 values of `width`
/// bytes (each + base), then the last value whole as `i32`.
fn decode_chunk_sizes(encoded: &str) -> Result<Vec<u32>, String> {
    let compressed = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|e| format!("transformedChunks is not base64: {e}"))?;
    let raw = zstd::bulk::decompress(&compressed, 16 * 1024 * 1024)
        .map_err(|e| format!("transformedChunks is not a zstd frame: {e}"))?;
    let mut buf = &raw[..];
    let need = |buf: &[u8], n: usize| {
        if buf.len() < n { Err(format!("transformedChunks ends early ({} bytes)", raw.len())) } else { Ok(()) }
    };
    need(buf, 4)?;
    let count = buf.get_i32();
    let count = usize::try_from(count).map_err(|_| format!("transformedChunks: negative count {count}"))?;
    if count == 0 {
        return Ok(Vec::new());
    }
    let mut sizes = Vec::with_capacity(count.min(1 << 20));
    if count > 1 {
        need(buf, 5)?;
        let base = buf.get_i32();
        let width = usize::from(buf.get_u8());
        if !(1..=4).contains(&width) {
            return Err(format!("transformedChunks: value width {width}"));
        }
        need(buf, (count - 1).saturating_mul(width))?;
        for _ in 0..count - 1 {
            let value = i64::from(base) + buf.get_uint(width) as i64;
            sizes.push(u32::try_from(value).map_err(|_| format!("transformedChunks: chunk size {value}"))?);
        }
    }
    need(buf, 4)?;
    let last = buf.get_i32();
    sizes.push(u32::try_from(last).map_err(|_| format!("transformedChunks: chunk size {last}"))?);
    Ok(sizes)
}

/// The original segment bytes of a chunked `.log`.
pub struct ChunkedSource {
    object: Arc<dyn RangeRead>,
    chunks: Arc<Vec<Chunk>>,
    compressed: bool,
    name: String,
}

impl ChunkedSource {
    pub fn new(object: Arc<dyn RangeRead>, manifest: &Manifest, manifest_name: &str) -> Result<Self, TieredError> {
        Ok(ChunkedSource {
            name: object.name().to_string(),
            chunks: Arc::new(manifest.chunks(manifest_name)?),
            compressed: manifest.compression,
            object,
        })
    }
}

/// Chunks `first..` in groups of consecutive chunks, each group about [`GROUP_BYTES`]
/// of stored bytes (one chunk at least): one ranged GET each.
fn groups(chunks: &[Chunk], first: usize) -> Vec<Range<u64>> {
    let mut out = Vec::new();
    let mut start = first;
    while start < chunks.len() {
        let mut end = start + 1;
        while end < chunks.len() && chunks[end].stored.end - chunks[start].stored.start <= GROUP_BYTES {
            end += 1;
        }
        out.push(start as u64..end as u64);
        start = end;
    }
    out
}

/// The original bytes of the chunks of `group` (indexes into `chunks`), read with one
/// ranged GET and decompressed one by one.
async fn read_group(
    object: &dyn RangeRead,
    chunks: &[Chunk],
    compressed: bool,
    group: Range<u64>,
) -> io::Result<Vec<Bytes>> {
    let (first, end) = (group.start as usize, group.end as usize);
    let start = chunks[first].stored.start;
    let stored = object.read_range(start..chunks[end - 1].stored.end).await?;
    let mut out = Vec::with_capacity(end - first);
    for (i, chunk) in chunks[first..end].iter().enumerate() {
        let bytes = stored.slice((chunk.stored.start - start) as usize..(chunk.stored.end - start) as usize);
        let expected = (chunk.original.end - chunk.original.start) as usize;
        let original = if compressed {
            let bad = |detail: String| {
                io::Error::from(StorageError::Corrupt(format!(
                    "{}: chunk {} (stored bytes {}..{}): {detail}",
                    object.name(),
                    first + i,
                    chunk.stored.start,
                    chunk.stored.end
                )))
            };
            let decoded = zstd::bulk::decompress(&bytes, expected.min(MAX_CHUNK_BYTES))
                .map_err(|e| bad(format!("not a zstd frame: {e}")))?;
            Bytes::from(decoded)
        } else {
            bytes
        };
        if original.len() != expected {
            return Err(io::Error::from(StorageError::Corrupt(format!(
                "{}: chunk {} holds {} bytes, the chunk index says {expected}",
                object.name(),
                first + i,
                original.len()
            ))));
        }
        out.push(original);
    }
    Ok(out)
}

#[async_trait]
impl SegmentSource for ChunkedSource {
    fn name(&self) -> &str {
        &self.name
    }

    /// The groups from the one holding `position` on, [`read_ahead`]: the next groups
    /// download and decompress while the decoder reads the current one.
    async fn open_at(&self, position: u64) -> io::Result<Box<dyn AsyncRead + Send + Unpin>> {
        let Some(first) = self.chunks.iter().position(|c| c.original.end > position) else {
            return Ok(Box::new(io::Cursor::new(Bytes::new())));
        };
        let skip = (position - self.chunks[first].original.start) as usize;
        let (object, chunks, compressed) = (self.object.clone(), self.chunks.clone(), self.compressed);
        let groups = read_ahead(groups(&chunks, first), move |group| {
            let (object, chunks) = (object.clone(), chunks.clone());
            async move { read_group(object.as_ref(), &chunks, compressed, group).await }
        });
        let mut skip = Some(skip);
        let parts = groups.map_ok(move |mut parts| {
            if let Some(skip) = skip.take() {
                parts[0].advance(skip);
            }
            futures::stream::iter(parts.into_iter().map(Ok::<_, io::Error>))
        });
        Ok(Box::new(StreamReader::new(Box::pin(parts.try_flatten()))))
    }

    fn size(&self) -> Option<u64> {
        Some(self.chunks.last().map_or(0, |c| c.original.end))
    }
}

/// The broker's `.txnindex` bytes from the `.indexes` blob; `None` when the segment has none.
pub async fn transaction_index(indexes: &dyn RangeRead, manifest: &Manifest) -> io::Result<Option<Bytes>> {
    let Some(slice) = manifest.segment_indexes.as_ref().and_then(|s| s.transaction) else { return Ok(None) };
    if slice.size == 0 {
        return Ok(Some(Bytes::new()));
    }
    indexes.read_range(slice.position..slice.position + slice.size).await.map(Some)
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;

    use super::*;
    use crate::MemorySource;

    #[test]
    fn decodes_the_plugins_variable_chunk_index() {
        // From the plugin's own serialisation test: sizes 10, 20, 30.
        assert_eq!(decode_chunk_sizes("KLUv/SAPeQAAAAAAAwAAAAoBAAoAAAAe").unwrap(), vec![10, 20, 30]);
        let manifest: Manifest = serde_json::from_str(
            r#"{"version":"1","chunkIndex":{"type":"variable","originalChunkSize":100,"originalFileSize":250,
                "transformedChunks":"KLUv/SAPeQAAAAAAAwAAAAoBAAoAAAAe"},"compression":true,
                "segmentIndexes":{"offset":{"position":0,"size":1},"transaction":null}}"#,
        )
        .unwrap();
        let chunks = manifest.chunks("m").unwrap();
        assert_eq!(
            chunks,
            vec![
                Chunk { original: 0..100, stored: 0..10 },
                Chunk { original: 100..200, stored: 10..30 },
                Chunk { original: 200..250, stored: 30..60 },
            ]
        );
    }

    #[test]
    fn fixed_index_and_inconsistent_indexes() {
        let fixed = |ofs: u32| {
            serde_json::from_value::<Manifest>(serde_json::json!({"version":"1","compression":false,
                "chunkIndex":{"type":"fixed","originalChunkSize":100,"originalFileSize":ofs,
                "transformedChunkSize":110,"finalTransformedChunkSize":30}}))
            .unwrap()
        };
        let chunks = fixed(250).chunks("m").unwrap();
        assert_eq!(chunks.len(), 3);
        assert_eq!(chunks[2], Chunk { original: 200..250, stored: 220..250 });
        assert!(fixed(0).chunks("m").unwrap().is_empty());
        let variable = serde_json::from_value::<Manifest>(serde_json::json!({"version":"1","compression":true,
            "chunkIndex":{"type":"variable","originalChunkSize":100,"originalFileSize":900,
            "transformedChunks":"KLUv/SAPeQAAAAAAAwAAAAoBAAoAAAAe"}}))
        .unwrap();
        let err = variable.chunks("m").unwrap_err().to_string();
        assert!(err.contains("3 chunks of 100 bytes do not make a segment of 900 bytes"), "{err}");
    }

    #[test]
    fn encrypted_and_unknown_manifests_are_clear_errors() {
        let err = Manifest::parse(
            "s3://b/t/0/x.rsm-manifest",
            br#"{"version":"1","compression":false,"chunkIndex":{"type":"fixed","originalChunkSize":1,
                "originalFileSize":1,"transformedChunkSize":29,"finalTransformedChunkSize":29},
                "encryption":{"dataKey":"k:AAAA","aad":"CgsMDQ=="}}"#,
        )
        .unwrap_err();
        assert!(matches!(err, TieredError::Encrypted { .. }));
        assert!(!err.retryable());
        assert!(err.to_string().contains("not supported yet"));
        let err = Manifest::parse("m", b"{\"version\":\"2\"}").unwrap_err().to_string();
        assert!(err.starts_with("m: not a tiered-storage manifest"), "{err}");
    }

    /// Builds a chunked object of `data` with `chunk` bytes per chunk, zstd or not.
    fn chunked(data: &[u8], chunk: usize, compress: bool) -> (Vec<u8>, Manifest) {
        let mut stored = Vec::new();
        let mut sizes = Vec::new();
        for piece in data.chunks(chunk) {
            let bytes = if compress { zstd::bulk::compress(piece, 3).unwrap() } else { piece.to_vec() };
            sizes.push(bytes.len() as u32);
            stored.extend_from_slice(&bytes);
        }
        let mut raw = (sizes.len() as i32).to_be_bytes().to_vec();
        if sizes.len() > 1 {
            raw.extend_from_slice(&0i32.to_be_bytes());
            raw.push(4);
            for s in &sizes[..sizes.len() - 1] {
                raw.extend_from_slice(&s.to_be_bytes());
            }
        }
        raw.extend_from_slice(&(*sizes.last().unwrap() as i32).to_be_bytes());
        let encoded = base64::engine::general_purpose::STANDARD.encode(zstd::bulk::compress(&raw, 3).unwrap());
        let manifest = serde_json::from_value(serde_json::json!({"version":"1","compression":compress,
            "chunkIndex":{"type":"variable","originalChunkSize":chunk,"originalFileSize":data.len(),
            "transformedChunks":encoded}}))
        .unwrap();
        (stored, manifest)
    }

    #[tokio::test]
    async fn chunked_source_reads_from_any_position() {
        let data: Vec<u8> = (0..100_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        for compress in [true, false] {
            let (stored, manifest) = chunked(&data, 4096, compress);
            let source =
                ChunkedSource::new(Arc::new(MemorySource::new("seg.log", stored)), &manifest, "seg.rsm-manifest")
                    .unwrap();
            for position in [0u64, 1, 4095, 4096, 123_457, data.len() as u64 - 1, data.len() as u64] {
                let mut out = Vec::new();
                source.open_at(position).await.unwrap().read_to_end(&mut out).await.unwrap();
                assert_eq!(out, &data[position as usize..], "compress {compress} position {position}");
            }
        }
    }

    #[tokio::test]
    async fn a_corrupt_chunk_names_the_chunk_and_is_not_retryable() {
        let data = vec![7u8; 10_000];
        let (mut stored, manifest) = chunked(&data, 4096, true);
        let second = manifest.chunks("m").unwrap()[1].stored.start as usize;
        stored[second] ^= 0xff; // the zstd magic
        let source = ChunkedSource::new(Arc::new(MemorySource::new("seg.log", stored)), &manifest, "m").unwrap();
        let mut out = Vec::new();
        let err = source.open_at(0).await.unwrap().read_to_end(&mut out).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(!err.retryable(), "{err}");
        assert!(err.to_string().contains("seg.log: chunk 1"), "{err}");
    }
}
