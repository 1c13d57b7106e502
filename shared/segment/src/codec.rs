//! Compression codecs of Kafka batches, decompressed with an output limit.

use std::io::Read;

use zstd::zstd_safe::{DCtx, InBuffer, OutBuffer, ResetDirective};

use super::error::SegmentErrorKind;
use super::lz4::{self, HeaderChecksum};

/// The compression codec of a batch (attributes bits 0..2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Codec {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Codec {
    pub fn from_attributes(attributes: u16) -> Result<Codec, SegmentErrorKind> {
        match attributes & 0x07 {
            0 => Ok(Codec::None),
            1 => Ok(Codec::Gzip),
            2 => Ok(Codec::Snappy),
            3 => Ok(Codec::Lz4),
            4 => Ok(Codec::Zstd),
            other => Err(SegmentErrorKind::UnsupportedCodec(other as u8)),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Codec::None => "none",
            Codec::Gzip => "gzip",
            Codec::Snappy => "snappy",
            Codec::Lz4 => "lz4",
            Codec::Zstd => "zstd",
        }
    }

    /// Decompresses `input`, failing once the output would exceed `limit` bytes.
    pub fn decompress(self, input: &[u8], limit: usize) -> Result<Vec<u8>, SegmentErrorKind> {
        match self {
            Codec::None => Ok(input.to_vec()),
            Codec::Gzip => read_limited(self, flate2::read::MultiGzDecoder::new(input), input.len(), limit),
            Codec::Lz4 => lz4::decompress(input, limit, HeaderChecksum::Standard),
            Codec::Zstd => with_zstd_context(|dctx| zstd_decompress(dctx, input, limit)),
            Codec::Snappy => {
                if input.starts_with(XERIAL_MAGIC) {
                    xerial_decompress(input, limit)
                } else {
                    snappy_block(input, limit, 0)
                }
            }
        }
    }

    /// Decompresses the value of a legacy (magic v0/v1) wrapper message. Kafka 0.8–0.9
    /// wrote magic v0 lz4 frames whose header checksum also covers the frame's magic
    /// number (KAFKA-3160); those are accepted there.
    pub fn decompress_legacy(self, magic: i8, input: &[u8], limit: usize) -> Result<Vec<u8>, SegmentErrorKind> {
        match (self, magic) {
            (Codec::Lz4, 0) => lz4::decompress(input, limit, HeaderChecksum::OrKafkaV0),
            _ => self.decompress(input, limit),
        }
    }

    fn error(self, detail: impl Into<String>) -> SegmentErrorKind {
        SegmentErrorKind::Decompress { codec: self.name(), detail: detail.into() }
    }
}

/// Xerial's snappy stream framing, used by Kafka's Java clients: a 16-byte header
/// (magic, version, compatible version), then blocks of `[length: i32 BE][raw snappy]`.
const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_LEN: usize = 16;

thread_local! {
    /// One zstd decompression context per thread, reused for every batch.
    static ZSTD: std::cell::RefCell<Option<DCtx<'static>>> = const { std::cell::RefCell::new(None) };
}

fn with_zstd_context(
    f: impl FnOnce(&mut DCtx<'static>) -> Result<Vec<u8>, SegmentErrorKind>,
) -> Result<Vec<u8>, SegmentErrorKind> {
    ZSTD.with(|cell| {
        let mut slot = cell.borrow_mut();
        let dctx = match &mut *slot {
            Some(dctx) => dctx,
            None => slot.insert(DCtx::try_create().ok_or_else(|| Codec::Zstd.error("no memory for a context"))?),
        };
        f(dctx)
    })
}

fn zstd_error(code: usize) -> SegmentErrorKind {
    Codec::Zstd.error(zstd::zstd_safe::get_error_name(code))
}

/// Decompresses zstd `input`: one frame that states its size (as librdkafka and Python
/// clients write) in one call into a buffer of exactly that size; otherwise (Java
/// clients stream their frames, which then state no size; or several frames) streamed
/// straight into a growing buffer. Fails once the output would exceed `limit` bytes.
fn zstd_decompress(dctx: &mut DCtx<'_>, input: &[u8], limit: usize) -> Result<Vec<u8>, SegmentErrorKind> {
    let too_large = || SegmentErrorKind::DecompressedTooLarge { codec: "zstd", limit };
    if input.is_empty() {
        return Ok(Vec::new());
    }
    if let Ok(Some(size)) = zstd::zstd_safe::get_frame_content_size(input)
        && zstd::zstd_safe::find_frame_compressed_size(input) == Ok(input.len())
    {
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        if size > limit {
            return Err(too_large());
        }
        let mut out = Vec::with_capacity(size);
        dctx.decompress(&mut out, input).map_err(zstd_error)?;
        return Ok(out);
    }
    dctx.reset(ResetDirective::SessionOnly).map_err(zstd_error)?;
    let mut out = Vec::with_capacity(input.len().saturating_mul(4).min(limit).clamp(1, 64 << 20));
    let mut src = InBuffer::around(input);
    loop {
        if out.len() == out.capacity() {
            // One byte past the limit tells an output of exactly `limit` bytes from more.
            let room = limit.saturating_add(1).saturating_sub(out.len());
            if room == 0 {
                return Err(too_large());
            }
            out.reserve_exact(out.len().max(64 << 10).min(room));
        }
        let pos = out.len();
        let frame_done =
            dctx.decompress_stream(&mut OutBuffer::around_pos(&mut out, pos), &mut src).map_err(zstd_error)? == 0;
        if out.len() > limit {
            return Err(too_large());
        }
        if src.pos() == input.len() {
            if frame_done {
                return Ok(out);
            }
            if out.len() < out.capacity() {
                return Err(Codec::Zstd.error("the data ends inside a frame"));
            }
        }
    }
}

/// Reads a decompressing reader to its end, failing past `limit` bytes. The buffer starts
/// at a few times the compressed size (never beyond the limit) to spare regrowth.
fn read_limited(codec: Codec, reader: impl Read, compressed: usize, limit: usize) -> Result<Vec<u8>, SegmentErrorKind> {
    let mut out = Vec::with_capacity(compressed.saturating_mul(4).min(limit).min(64 << 20));
    reader.take(limit as u64 + 1).read_to_end(&mut out).map_err(|e| codec.error(e.to_string()))?;
    if out.len() > limit {
        return Err(SegmentErrorKind::DecompressedTooLarge { codec: codec.name(), limit });
    }
    Ok(out)
}

fn snappy_block(input: &[u8], limit: usize, already: usize) -> Result<Vec<u8>, SegmentErrorKind> {
    let len = snap::raw::decompress_len(input).map_err(|e| Codec::Snappy.error(e.to_string()))?;
    if already.saturating_add(len) > limit {
        return Err(SegmentErrorKind::DecompressedTooLarge { codec: "snappy", limit });
    }
    snap::raw::Decoder::new().decompress_vec(input).map_err(|e| Codec::Snappy.error(e.to_string()))
}

fn xerial_decompress(input: &[u8], limit: usize) -> Result<Vec<u8>, SegmentErrorKind> {
    if input.len() < XERIAL_HEADER_LEN {
        return Err(Codec::Snappy.error("xerial header truncated"));
    }
    let mut out = Vec::new();
    let mut rest = &input[XERIAL_HEADER_LEN..];
    while !rest.is_empty() {
        let Some((len, tail)) = rest.split_first_chunk::<4>() else {
            return Err(Codec::Snappy.error("xerial block length truncated"));
        };
        let len = i32::from_be_bytes(*len);
        let Some(block) = usize::try_from(len).ok().and_then(|l| tail.get(..l)) else {
            return Err(Codec::Snappy.error(format!("xerial block of {len} bytes with {} bytes left", tail.len())));
        };
        out.extend_from_slice(&snappy_block(block, limit, out.len())?);
        rest = &tail[block.len()..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn gzip_bomb_is_stopped_at_the_limit() {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        enc.write_all(&vec![0u8; 10 << 20]).unwrap();
        let bomb = enc.finish().unwrap();
        assert!(bomb.len() < 64 * 1024);
        let err = Codec::Gzip.decompress(&bomb, 1 << 20).unwrap_err();
        assert!(matches!(err, SegmentErrorKind::DecompressedTooLarge { .. }), "{err}");
        assert_eq!(Codec::Gzip.decompress(&bomb, 10 << 20).unwrap().len(), 10 << 20);
    }

    #[test]
    fn snappy_raw_and_xerial_roundtrip() {
        let data = b"hello hello hello hello kafka".repeat(100);
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(Codec::Snappy.decompress(&raw, 1 << 20).unwrap(), data);
        let mut xerial = XERIAL_MAGIC.to_vec();
        xerial.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
        for chunk in data.chunks(1000) {
            let block = snap::raw::Encoder::new().compress_vec(chunk).unwrap();
            xerial.extend_from_slice(&(block.len() as i32).to_be_bytes());
            xerial.extend_from_slice(&block);
        }
        assert_eq!(Codec::Snappy.decompress(&xerial, 1 << 20).unwrap(), data);
        let err = Codec::Snappy.decompress(&xerial, 100).unwrap_err();
        assert!(matches!(err, SegmentErrorKind::DecompressedTooLarge { .. }));
    }

    #[test]
    fn xerial_block_length_past_the_end_is_an_error() {
        let mut xerial = XERIAL_MAGIC.to_vec();
        xerial.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
        xerial.extend_from_slice(&i32::MAX.to_be_bytes());
        xerial.extend_from_slice(b"abc");
        assert!(Codec::Snappy.decompress(&xerial, 1 << 20).is_err());
    }

    /// Frames as Java clients stream them (no content size), several frames, and frames
    /// that state their size: all read, with the limit and truncation caught.
    #[test]
    fn zstd_frames_with_and_without_their_size() {
        let data: Vec<u8> = (0..300_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        let streamed = {
            let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
            enc.include_contentsize(false).unwrap();
            enc.write_all(&data).unwrap();
            enc.finish().unwrap()
        };
        assert!(matches!(zstd::zstd_safe::get_frame_content_size(&streamed), Ok(None)));
        let sized = zstd::bulk::compress(&data, 3).unwrap();
        assert!(matches!(zstd::zstd_safe::get_frame_content_size(&sized), Ok(Some(_))));
        let two = [sized.clone(), streamed.clone()].concat();
        let both = [data.clone(), data.clone()].concat();
        for (input, expected) in [(&streamed, &data), (&sized, &data), (&two, &both)] {
            assert_eq!(Codec::Zstd.decompress(input, 1 << 30).unwrap(), *expected);
            assert_eq!(Codec::Zstd.decompress(input, usize::MAX).unwrap(), *expected, "no limit");
            // Exactly at the limit is fine; a byte less is not.
            assert_eq!(Codec::Zstd.decompress(input, expected.len()).unwrap().len(), expected.len());
            let err = Codec::Zstd.decompress(input, expected.len() - 1).unwrap_err();
            assert!(matches!(err, SegmentErrorKind::DecompressedTooLarge { .. }), "{err}");
        }
        for cut in [&streamed[..streamed.len() - 3], &sized[..sized.len() / 2], &two[..sized.len() + 10]] {
            assert!(Codec::Zstd.decompress(cut, 1 << 30).is_err());
        }
        assert_eq!(Codec::Zstd.decompress(&[], 10).unwrap(), b"");
    }

    #[test]
    fn garbage_is_an_error_for_every_codec() {
        for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
            assert!(codec.decompress(b"\x01\x02garbage", 1 << 20).is_err(), "{codec:?}");
        }
    }
}
