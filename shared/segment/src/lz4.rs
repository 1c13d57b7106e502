//! LZ4 frames (the format Kafka's lz4 codec uses) decoded block by block straight into
//! one output buffer.
//!
//! ```text
//! magic 04 22 4D 18 | FLG | BD | [content size u64] | HC |
//!   ( block size u32 (high bit: stored) | data | [block checksum u32] )* | 0u32 |
//!   [content checksum u32]
//! ```
//! Checksums are XXH32 (seed 0); HC is the second byte of the descriptor's
//! (FLG..content size) XXH32 — or, in the magic v0 frames of Kafka 0.8–0.9
//! (KAFKA-3160), of the magic number's and the descriptor's, which legacy messages accept. Blocks decompress with lz4_flex's block decoder; a block
//! of a linked frame may refer back into the 64 KiB before it, which is simply the output
//! already written. Compared with a streaming reader, no window buffer is allocated per
//! frame and nothing is copied a second time.

use twox_hash::XxHash32;

use super::error::SegmentErrorKind;

const MAGIC: [u8; 4] = [0x04, 0x22, 0x4d, 0x18];
/// How far back a linked block's matches reach.
const WINDOW: usize = 64 << 10;

fn error(detail: impl Into<String>) -> SegmentErrorKind {
    SegmentErrorKind::Decompress { codec: "lz4", detail: detail.into() }
}

/// Which header checksum a frame may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderChecksum {
    /// The frame format's: over the descriptor.
    Standard,
    /// That, or Kafka 0.8–0.9's for magic v0 messages: over the magic number too.
    OrKafkaV0,
}

/// Reads the frame(s) in `input`, failing once the output exceeds `limit` bytes.
pub fn decompress(input: &[u8], limit: usize, checksum: HeaderChecksum) -> Result<Vec<u8>, SegmentErrorKind> {
    // LZ4 rarely more than doubles Kafka's records; the content size, when stated, or
    // the blocks grow it beyond that.
    let mut out = Vec::with_capacity(input.len().saturating_mul(2).min(limit));
    let mut r = Input { buf: input, pos: 0 };
    while r.pos < input.len() {
        frame(&mut r, &mut out, limit, checksum)?;
    }
    Ok(out)
}

/// The frame at `r`'s position, appended to `out`.
fn frame(r: &mut Input<'_>, out: &mut Vec<u8>, limit: usize, checksum: HeaderChecksum) -> Result<(), SegmentErrorKind> {
    let too_large = || SegmentErrorKind::DecompressedTooLarge { codec: "lz4", limit };
    if r.take(4)? != MAGIC {
        return Err(error(format!("no frame magic number at byte {}", r.pos - 4)));
    }
    let descriptor_start = r.pos;
    let [flg, bd] = r.array()?;
    if flg >> 6 != 1 {
        return Err(error(format!("frame version {}", flg >> 6)));
    }
    if flg & 0x01 != 0 {
        return Err(error("frames with a dictionary id are not supported"));
    }
    let (linked, block_checksums, content_checksum) = (flg & 0x20 == 0, flg & 0x10 != 0, flg & 0x04 != 0);
    let max_block = match (bd >> 4) & 0x07 {
        4 => 64 << 10,
        5 => 256 << 10,
        6 => 1 << 20,
        7 => 4 << 20,
        other => return Err(error(format!("block size code {other}"))),
    };
    let content_size = if flg & 0x08 != 0 { Some(u64::from_le_bytes(r.array()?)) } else { None };
    let hash = |bytes: &[u8]| (XxHash32::oneshot(0, bytes) >> 8) as u8;
    let (with_magic, descriptor) = (&r.buf[descriptor_start - MAGIC.len()..r.pos], &r.buf[descriptor_start..r.pos]);
    let [hc] = r.array()?;
    if hc != hash(descriptor) && !(checksum == HeaderChecksum::OrKafkaV0 && hc == hash(with_magic)) {
        return Err(error("frame header checksum mismatch"));
    }
    if let Some(size) = content_size {
        if usize::try_from(size).map_or(true, |s| s > limit.saturating_sub(out.len())) {
            return Err(too_large());
        }
        out.reserve(size as usize);
    }
    let frame_start = out.len();
    loop {
        let word = u32::from_le_bytes(r.array()?);
        if word == 0 {
            break;
        }
        let len = (word & 0x7fff_ffff) as usize;
        if len > max_block {
            return Err(error(format!("block of {len} bytes in a frame of {max_block}-byte blocks")));
        }
        let data = r.take(len)?;
        if block_checksums && u32::from_le_bytes(r.array()?) != XxHash32::oneshot(0, data) {
            return Err(error("block checksum mismatch"));
        }
        let start = out.len();
        if word & 0x8000_0000 != 0 {
            out.extend_from_slice(data);
        } else {
            out.resize(start + max_block, 0);
            let (before, window) = out.split_at_mut(start);
            let written = if linked {
                let dict = &before[before.len().saturating_sub(WINDOW).max(frame_start)..];
                lz4_flex::block::decompress_into_with_dict(data, window, dict)
            } else {
                lz4_flex::block::decompress_into(data, window)
            }
            .map_err(|e| error(format!("block at byte {}: {e}", r.pos - len)))?;
            out.truncate(start + written);
        }
        if out.len() > limit {
            return Err(too_large());
        }
    }
    let frame_out = &out[frame_start..];
    if content_checksum && u32::from_le_bytes(r.array()?) != XxHash32::oneshot(0, frame_out) {
        return Err(error("content checksum mismatch"));
    }
    if let Some(size) = content_size
        && size != frame_out.len() as u64
    {
        return Err(error(format!("frame states {size} bytes, holds {}", frame_out.len())));
    }
    Ok(())
}

/// The frames' bytes, read front to back.
struct Input<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Input<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], SegmentErrorKind> {
        let bytes = self
            .buf
            .get(self.pos..self.pos.saturating_add(n))
            .ok_or_else(|| error(format!("frame cut short: {n} bytes wanted at byte {}", self.pos)))?;
        self.pos += n;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], SegmentErrorKind> {
        Ok(self.take(N)?.try_into().expect("N bytes taken"))
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use lz4_flex::frame::{BlockMode, BlockSize, FrameEncoder, FrameInfo};

    use super::*;

    /// `lines` lines, compressible across blocks (a linked frame's matches reach into
    /// earlier blocks).
    fn data(lines: u32) -> Vec<u8> {
        let line = |i: u32| format!("{{\"order\": {}, \"note\": \"item {} of the batch\"}}\n", i, i % 97);
        (0..lines).flat_map(|i| line(i).into_bytes()).collect()
    }

    fn encode(data: &[u8], info: FrameInfo) -> Vec<u8> {
        let mut enc = FrameEncoder::with_frame_info(info, Vec::new());
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn every_frame_layout_decodes() {
        let data = data(40_000);
        for mode in [BlockMode::Independent, BlockMode::Linked] {
            for size in [BlockSize::Max64KB, BlockSize::Max256KB] {
                for checksums in [false, true] {
                    let info = FrameInfo::new()
                        .block_mode(mode)
                        .block_size(size)
                        .block_checksums(checksums)
                        .content_checksum(checksums)
                        .content_size(checksums.then_some(data.len() as u64));
                    let frame = encode(&data, info);
                    assert_eq!(
                        decompress(&frame, 1 << 30, HeaderChecksum::Standard).unwrap(),
                        data,
                        "{mode:?} {size:?} {checksums}"
                    );
                    assert_eq!(decompress(&frame, usize::MAX, HeaderChecksum::Standard).unwrap(), data, "no limit");
                    let two = [frame.clone(), frame].concat();
                    assert_eq!(
                        decompress(&two, 1 << 30, HeaderChecksum::Standard).unwrap(),
                        [data.clone(), data.clone()].concat()
                    );
                }
            }
        }
    }

    #[test]
    fn a_frame_past_the_limit_or_damaged_is_an_error() {
        // Four 64 KiB blocks.
        let data = data(5_000);
        let info = FrameInfo::new().block_mode(BlockMode::Linked).content_checksum(true);
        let frame = encode(&data, info);
        let err = decompress(&frame, data.len() - 1, HeaderChecksum::Standard).unwrap_err();
        assert!(matches!(err, SegmentErrorKind::DecompressedTooLarge { .. }), "{err}");
        assert_eq!(decompress(&frame, data.len(), HeaderChecksum::Standard).unwrap().len(), data.len());
        let sized = encode(&data, FrameInfo::new().content_size(Some(data.len() as u64)));
        let err = decompress(&sized, 1000, HeaderChecksum::Standard).unwrap_err();
        assert!(matches!(err, SegmentErrorKind::DecompressedTooLarge { .. }), "{err}");
        // Cut anywhere, or a byte changed anywhere: an error, never a panic.
        for cut in (0..frame.len()).step_by(61) {
            assert!(decompress(&frame[..cut.max(1)], 1 << 30, HeaderChecksum::Standard).is_err(), "cut at {cut}");
        }
        for at in (0..frame.len()).step_by(37) {
            let mut bad = frame.clone();
            bad[at] ^= 0x5a;
            let _ = decompress(&bad, 1 << 30, HeaderChecksum::Standard);
        }
        let mut bad = frame.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(
            decompress(&bad, 1 << 30, HeaderChecksum::Standard).unwrap_err().to_string().contains("content checksum")
        );
    }

    /// Kafka 0.8–0.9's magic v0 frames hash the magic number into the header checksum
    /// (KAFKA-3160): read where legacy messages allow it, refused elsewhere.
    #[test]
    fn kafka_v0_header_checksums_only_where_allowed() {
        let data = data(100);
        let mut frame = encode(&data, FrameInfo::new());
        // FLG, BD, then HC at byte 6 (no content size, no dictionary id).
        frame[6] = (XxHash32::oneshot(0, &frame[..6]) >> 8) as u8;
        assert_eq!(decompress(&frame, 1 << 30, HeaderChecksum::OrKafkaV0).unwrap(), data);
        let err = decompress(&frame, 1 << 30, HeaderChecksum::Standard).unwrap_err();
        assert!(err.to_string().contains("header checksum"), "{err}");
        frame[6] ^= 1;
        assert!(decompress(&frame, 1 << 30, HeaderChecksum::OrKafkaV0).is_err(), "neither checksum");
    }
}
