//! Compression codecs of Kafka batches, decompressed with an output limit.

use std::io::Read;

use super::error::SegmentErrorKind;

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
            Codec::Lz4 => read_limited(self, lz4_flex::frame::FrameDecoder::new(input), input.len(), limit),
            Codec::Zstd => {
                // A frame that states its size is decompressed in one call into a buffer
                // of exactly that size (when within the limit).
                if let Ok(Some(size)) = zstd::zstd_safe::get_frame_content_size(input) {
                    let size = usize::try_from(size).unwrap_or(usize::MAX);
                    if size > limit {
                        return Err(SegmentErrorKind::DecompressedTooLarge { codec: self.name(), limit });
                    }
                    let mut out = Vec::with_capacity(size);
                    if zstd_one_shot(input, &mut out).is_ok_and(|n| n == size) {
                        return Ok(out);
                    }
                }
                let decoder = zstd::stream::read::Decoder::with_buffer(input).map_err(|e| self.error(e.to_string()))?;
                read_limited(self, decoder, input.len(), limit)
            }
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
    /// number (KAFKA-3160); those are repaired before decoding.
    pub fn decompress_legacy(self, magic: i8, input: &[u8], limit: usize) -> Result<Vec<u8>, SegmentErrorKind> {
        if self == Codec::Lz4
            && magic == 0
            && let Some(fixed) = fix_kafka_lz4_header_checksum(input)
        {
            return self.decompress(&fixed, limit);
        }
        self.decompress(input, limit)
    }

    fn error(self, detail: impl Into<String>) -> SegmentErrorKind {
        SegmentErrorKind::Decompress { codec: self.name(), detail: detail.into() }
    }
}

/// Xerial's snappy stream framing, used by Kafka's Java clients: a 16-byte header
/// (magic, version, compatible version), then blocks of `[length: i32 BE][raw snappy]`.
const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_LEN: usize = 16;

/// Returns `frame` with the header checksum computed as the LZ4 frame format defines it
/// (over the descriptor only), or `None` when it is already right or not a frame.
fn fix_kafka_lz4_header_checksum(frame: &[u8]) -> Option<Vec<u8>> {
    const MAGIC: [u8; 4] = [0x04, 0x22, 0x4d, 0x18];
    if frame.get(..4)? != MAGIC {
        return None;
    }
    let flags = *frame.get(4)?;
    let descriptor_end = 6 + if flags & 0x08 != 0 { 8 } else { 0 } + if flags & 0x01 != 0 { 4 } else { 0 };
    let stored = *frame.get(descriptor_end)?;
    let hash = |bytes: &[u8]| ((twox_hash::XxHash32::oneshot(0, bytes) >> 8) & 0xff) as u8;
    let correct = hash(&frame[4..descriptor_end]);
    if stored == correct || stored != hash(&frame[..descriptor_end]) {
        return None;
    }
    let mut fixed = frame.to_vec();
    fixed[descriptor_end] = correct;
    Some(fixed)
}

thread_local! {
    /// One zstd decompression context per thread, reused for every batch.
    static ZSTD: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { std::cell::RefCell::new(None) };
}

fn zstd_one_shot(input: &[u8], out: &mut Vec<u8>) -> std::io::Result<usize> {
    ZSTD.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(zstd::bulk::Decompressor::new()?);
        }
        slot.as_mut().expect("set above").decompress_to_buffer(input, out)
    })
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

    #[test]
    fn garbage_is_an_error_for_every_codec() {
        for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
            assert!(codec.decompress(b"\x01\x02garbage", 1 << 20).is_err(), "{codec:?}");
        }
    }
}
