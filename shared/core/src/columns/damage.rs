//! Test support for the payload decoders: damaged payloads must be errors, never panics,
//! and a failed row must leave columns the converter can repair.

use super::{Column, DecodeError, StructColumn};

/// Decodes `count` damaged copies of `payloads` (bytes replaced, cut, inserted or
/// flipped; the same ones for the same `seed`) into `root` with `decode`, repairing a
/// failed row as the converter does. Checks that no error points past its payload and,
/// by finishing the columns every 4,096 rows and at the end (which fails on children of
/// another length than the struct), that they stay consistent: each finished array is
/// validated in full (offsets, UTF-8, child lengths), as the builders make string and
/// binary arrays without Arrow's checks. Returns how many decoded and how many failed.
pub fn decode_damaged(
    root: &mut StructColumn,
    payloads: &[Vec<u8>],
    seed: u64,
    count: usize,
    mut decode: impl FnMut(&[u8], &mut [Column]) -> Result<(), DecodeError>,
) -> (usize, usize) {
    let mut state = seed;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut ok, mut failed) = (0, 0);
    for _ in 0..count {
        let mut p = payloads[(next() % payloads.len() as u64) as usize].clone();
        for _ in 0..1 + next() % 3 {
            let at = (next() as usize) % p.len();
            match next() % 4 {
                0 => p[at] = next() as u8,
                1 => p.truncate(at),
                2 => p.insert(at, next() as u8),
                _ => p[at] ^= 0x80,
            }
            if p.is_empty() {
                p.push(0);
            }
        }
        root.append_valid();
        match decode(&p, &mut root.children) {
            Ok(()) => ok += 1,
            Err(e) => {
                assert!(e.position <= p.len(), "{e}: position past the payload's {} bytes", p.len());
                root.repair();
                failed += 1;
            }
        }
        if root.len() >= 4096 {
            validated(root);
        }
    }
    validated(root);
    (ok, failed)
}

fn validated(root: &mut StructColumn) {
    super::assert_valid(&root.finish(), "a finished batch");
}
