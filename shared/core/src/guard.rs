//! Panics in the libraries we call, caught and turned into errors.
//!
//! Our own code returns errors; a dependency may still panic on data it does not expect
//! (iceberg-rust 0.10.1 has `unreachable!()`s that a file's values can reach). Where a
//! panic would leave shared state behind — the committer holds a table's lease — the
//! work runs guarded: a panic becomes an error naming what it said, and the caller
//! cleans up and reports it like any other failure.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;

/// Runs `work`; `Err` with the panic's message if it panicked.
pub async fn guarded<F: Future>(work: F) -> Result<F::Output, String> {
    // Unwind safety: the caller drops whatever `work` borrowed mutably or treats it as
    // suspect (the committer releases its lease and retries nothing).
    AssertUnwindSafe(work).catch_unwind().await.map_err(|panic| message(panic.as_ref()))
}

/// What a panic payload says (`panic!` with a literal or with formatting).
fn message(panic: &(dyn Any + Send)) -> String {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(s), _) => (*s).to_string(),
        (_, Some(s)) => s.clone(),
        _ => "a panic without a message".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_becomes_its_message_and_a_value_passes_through() {
        assert_eq!(guarded(async { 7 }).await, Ok(7));
        let n = 3;
        let formatted = guarded(async move {
            if n > 2 {
                panic!("too many: {n}");
            }
        });
        assert_eq!(formatted.await, Err("too many: 3".to_string()));
        assert_eq!(
            guarded(async { unreachable!() }).await,
            Err("internal error: entered unreachable code".to_string())
        );
        let boxed = guarded(async { std::panic::panic_any(42u8) });
        assert_eq!(boxed.await, Err("a panic without a message".to_string()));
    }
}
