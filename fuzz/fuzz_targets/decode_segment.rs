//! Any bytes as a segment: the decoder must return records or an error, never panic,
//! hang, or allocate beyond its limits. Run with `cargo +nightly fuzz run decode_segment`;
//! the corpus in `fuzz/corpus/decode_segment` is replayed by the integration tests.
#![no_main]

use floe_segment::{Limits, decode_bytes};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limits = Limits { max_batch_bytes: 1 << 20, max_decompressed_bytes: 1 << 22 };
    let _ = decode_bytes("fuzz.log", bytes::Bytes::copy_from_slice(data), limits);
});
