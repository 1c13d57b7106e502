//! Bounded retries with exponential backoff, and which AWS errors are worth retrying.
//!
//! Every error type in the core answers `retryable()`; [`with_retries`] retries only
//! those, a bounded number of times, waiting `base`, 2×, 4×… (capped) in between.

use std::future::Future;
use std::time::Duration;

/// How often and how patiently to retry.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Tries in all, the first included.
    pub attempts: u32,
    pub base: Duration,
    pub max_wait: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { attempts: 4, base: Duration::from_millis(100), max_wait: Duration::from_secs(5) }
    }
}

impl RetryPolicy {
    /// The wait before try number `attempt + 1` (`attempt` ≥ 1).
    pub fn wait(&self, attempt: u32) -> Duration {
        self.base.saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1))).min(self.max_wait)
    }
}

/// Runs `op` until it succeeds, fails with an error `retryable` rejects, or the tries run out.
pub async fn with_retries<T, E, F, Fut>(
    policy: RetryPolicy,
    what: &str,
    retryable: impl Fn(&E) -> bool,
    mut op: F,
) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: std::fmt::Display,
{
    let mut attempt = 1;
    loop {
        match op().await {
            Ok(v) => return Ok(v),
            Err(e) if attempt < policy.attempts && retryable(&e) => {
                let wait = policy.wait(attempt);
                tracing::warn!(what, attempt, wait_ms = wait.as_millis() as u64, error = %e, "retrying");
                tokio::time::sleep(wait).await;
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[derive(Debug)]
    struct Flaky(bool);
    impl std::fmt::Display for Flaky {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "flaky (retryable: {})", self.0)
        }
    }

    #[tokio::test(start_paused = true)]
    async fn retries_retryable_errors_with_growing_waits_then_gives_up() {
        let policy =
            RetryPolicy { attempts: 4, base: Duration::from_millis(100), max_wait: Duration::from_millis(250) };
        let calls = AtomicU32::new(0);
        let start = tokio::time::Instant::now();
        let result: Result<(), Flaky> = with_retries(
            policy,
            "test",
            |e: &Flaky| e.0,
            || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(Flaky(true))
            },
        )
        .await;
        assert!(result.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 4);
        // 100 + 200 + 250 (capped)
        assert_eq!(start.elapsed(), Duration::from_millis(550));
    }

    #[tokio::test(start_paused = true)]
    async fn stops_at_the_first_permanent_error_and_returns_a_later_success() {
        let calls = AtomicU32::new(0);
        let result: Result<(), Flaky> = with_retries(
            RetryPolicy::default(),
            "test",
            |e: &Flaky| e.0,
            || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(Flaky(false))
            },
        )
        .await;
        assert!(result.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 1);

        let calls = AtomicU32::new(0);
        let result = with_retries(
            RetryPolicy::default(),
            "test",
            |e: &Flaky| e.0,
            || async {
                match calls.fetch_add(1, Ordering::SeqCst) {
                    0 | 1 => Err(Flaky(true)),
                    n => Ok(n),
                }
            },
        )
        .await;
        assert_eq!(result.unwrap(), 2);
    }
}
