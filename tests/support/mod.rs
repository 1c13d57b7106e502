//! What the integration tests and the benchmarks share, included by path in both
//! (`tests/integration/main.rs`, `tests/benches/common/mod.rs`): a catalog with a hook
//! at each call, and the committer `floe local` runs.

pub mod catalog;
pub mod committer;
