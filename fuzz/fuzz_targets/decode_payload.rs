//! Any bytes as the values of Avro, Protobuf, JSON Schema and plain JSON records, through the
//! converter the materializer uses: errors located within the payload, never a panic,
//! and every batch a valid Arrow array (`floe_core::fuzz`). Run from the repository root
//! with `cargo +nightly fuzz run decode_payload fuzz/corpus/decode_payload
//! fuzz/seeds/decode_payload`; the seeds and the corpus are replayed by the integration tests.
#![no_main]

use std::path::Path;
use std::sync::OnceLock;

use floe_core::fuzz::PayloadHarness;
use libfuzzer_sys::fuzz_target;

fn harness() -> &'static PayloadHarness {
    static HARNESS: OnceLock<PayloadHarness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let schemas = Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas");
        PayloadHarness::new(&schemas).unwrap_or_else(|e| panic!("{}: {e}", schemas.display()))
    })
}

fuzz_target!(|data: &[u8]| {
    harness().feed(data);
});
