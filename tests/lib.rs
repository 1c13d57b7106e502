//! Helpers live in the integration test binary and in tests/support/ (included by path
//! there and in the benchmarks); this library is intentionally empty.
