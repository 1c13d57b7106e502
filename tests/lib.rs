//! Helpers live in the integration test binary; this library is intentionally empty.
