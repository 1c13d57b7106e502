//! Bounded retries with exponential backoff, of the errors that say a retry may help.
//!
//! Every error type of Floe implements [`Retryable`] (`floe-segment`'s, re-exported
//! here with [`StorageError`], the typed failure of a remote store that the ports
//! speaking `io::Error` carry); [`with_retries`] retries only the errors that answer
//! true, a bounded number of times, waiting `base`, 2×, 4×… (capped) in between. This
//! module imports nothing of the crate: every layer's errors implement the trait.

use std::future::Future;
use std::time::Duration;

pub use floe_segment::{Retryable, StorageError};

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

/// Runs `op` until it succeeds, fails with an error that is not [`Retryable`], or the
/// tries run out; the last error is returned.
pub async fn with_retries<T, E, F, Fut>(policy: RetryPolicy, what: &str, mut op: F) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: Retryable + std::fmt::Display,
{
    let mut attempt = 1;
    loop {
        match op().await {
            Ok(v) => return Ok(v),
            Err(e) if attempt < policy.attempts && e.retryable() => {
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
    impl Retryable for Flaky {
        fn retryable(&self) -> bool {
            self.0
        }
    }

    #[tokio::test(start_paused = true)]
    async fn retries_retryable_errors_with_growing_waits_then_gives_up() {
        let policy =
            RetryPolicy { attempts: 4, base: Duration::from_millis(100), max_wait: Duration::from_millis(250) };
        let calls = AtomicU32::new(0);
        let start = tokio::time::Instant::now();
        let result: Result<(), Flaky> = with_retries(policy, "test", || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(Flaky(true))
        })
        .await;
        assert!(result.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 4);
        // 100 + 200 + 250 (capped)
        assert_eq!(start.elapsed(), Duration::from_millis(550));
    }

    #[tokio::test(start_paused = true)]
    async fn stops_at_the_first_permanent_error_and_returns_a_later_success() {
        let calls = AtomicU32::new(0);
        let result: Result<(), Flaky> = with_retries(RetryPolicy::default(), "test", || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(Flaky(false))
        })
        .await;
        assert!(result.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 1);

        let calls = AtomicU32::new(0);
        let result = with_retries(RetryPolicy::default(), "test", || async {
            match calls.fetch_add(1, Ordering::SeqCst) {
                0 | 1 => Err(Flaky(true)),
                n => Ok(n),
            }
        })
        .await;
        assert_eq!(result.unwrap(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_storage_error_is_retried_by_its_type_not_its_kind() {
        // A throttled read, then one whose bytes are corrupt: retried once, then given up.
        let calls = AtomicU32::new(0);
        let result: Result<(), std::io::Error> = with_retries(RetryPolicy::default(), "test", || async {
            Err(match calls.fetch_add(1, Ordering::SeqCst) {
                0 => StorageError::Transient("GET s3://b/k: SlowDown".into()).into(),
                _ => StorageError::Corrupt("s3://b/k: chunk 1: not a zstd frame".into()).into(),
            })
        })
        .await;
        assert!(result.unwrap_err().to_string().contains("chunk 1"));
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }
}

/// Every error family of the core answers as it did before the trait: a throttle, a 5xx,
/// a timeout or a lost race retryable; corrupt or refused input, a bad configuration and
/// a bug not. (A test may import any layer; the layering rules read only the code above.)
#[cfg(test)]
mod classification {
    use super::*;
    use crate::catalog::CatalogError;
    use crate::committer::CommitError;
    use crate::formats::FormatError;
    use crate::lock::LockError;
    use crate::maintenance::MaintenanceError;
    use crate::materializer::MaterializerError;
    use crate::materializer::segment::MaterializeError;
    use crate::partition::PartitionError;
    use crate::queue::QueueError;
    use crate::registry::RegistryError;
    use crate::registry::wire::{SchemaId, SchemaLoadError};
    use crate::segment::tiered::TieredError;
    use crate::segment::{SegmentError, SegmentErrorKind};
    use crate::table::TableError;
    use crate::table::audit::AuditError;

    fn conflict() -> CatalogError {
        CatalogError::Conflict { table: "t".into(), detail: "version moved".into() }
    }
    fn lost() -> LockError {
        LockError::Lost { table: "t".into(), fencing: 3 }
    }
    fn store(retryable: bool) -> LockError {
        LockError::Store { detail: "ProvisionedThroughputExceeded".into(), retryable }
    }
    fn unavailable() -> RegistryError {
        RegistryError::Unavailable { url: "http://registry".into(), message: "HTTP 503".into() }
    }
    fn iceberg(kind: iceberg::ErrorKind, retryable: bool) -> Box<iceberg::Error> {
        Box::new(iceberg::Error::new(kind, "PUT s3://b/k").with_retryable(retryable))
    }
    fn segment(source: std::io::Error) -> SegmentError {
        SegmentError::new("s3://b/seg.log", 0, None, SegmentErrorKind::Io(source))
    }
    fn object(source: std::io::Error) -> MaterializerError {
        MaterializerError::Object { uri: "s3://b/seg.log".into(), source }
    }
    fn transient() -> std::io::Error {
        StorageError::Transient("GET: SlowDown".into()).into()
    }
    fn corrupt() -> std::io::Error {
        StorageError::Corrupt("chunk 1: not a zstd frame".into()).into()
    }
    fn schema_load(retryable: bool) -> SchemaLoadError {
        SchemaLoadError { id: SchemaId::Id(7), message: "registry".into(), retryable }
    }

    #[test]
    fn each_error_family_answers_as_before() {
        use iceberg::ErrorKind::{DataInvalid, Unexpected};
        let queue =
            |retryable| QueueError { task_id: "t1".into(), table: "t".into(), message: "5xx".into(), retryable };
        let cases: Vec<(&str, Box<dyn Retryable>, bool)> = vec![
            ("catalog conflict", Box::new(conflict()), true),
            (
                "catalog throttled",
                Box::new(CatalogError::Other { table: "t".into(), detail: "x".into(), retryable: true }),
                true,
            ),
            (
                "catalog refused",
                Box::new(CatalogError::Other { table: "t".into(), detail: "x".into(), retryable: false }),
                false,
            ),
            (
                "catalog access denied",
                Box::new(CatalogError::AccessDenied { action: "a".into(), resource: "r".into(), detail: "d".into() }),
                false,
            ),
            ("lease lost", Box::new(lost()), true),
            ("lock store throttled", Box::new(store(true)), true),
            ("lock store refused", Box::new(store(false)), false),
            ("queue 5xx", Box::new(queue(true)), true),
            ("queue refused", Box::new(queue(false)), false),
            ("registry unavailable", Box::new(unavailable()), true),
            ("registry unknown id", Box::new(RegistryError::NotFound("id 7".into())), false),
            (
                "registry bad answer",
                Box::new(RegistryError::Invalid { url: "u".into(), message: "HTTP 401".into() }),
                false,
            ),
            (
                "format registry unavailable",
                Box::new(FormatError::Registry { topic: "t".into(), source: unavailable() }),
                true,
            ),
            ("format bad schema", Box::new(FormatError::Schema { topic: "t".into(), message: "m".into() }), false),
            ("partition_by", Box::new(PartitionError { field: "f".into(), message: "m".into() }), false),
            ("schema load unreachable", Box::new(schema_load(true)), true),
            ("schema load unknown", Box::new(schema_load(false)), false),
            ("table conflict", Box::new(TableError::Catalog(conflict())), true),
            (
                "table iceberg 5xx",
                Box::new(TableError::Iceberg { table: "t".into(), source: iceberg(Unexpected, true) }),
                true,
            ),
            (
                "table iceberg invalid",
                Box::new(TableError::Iceberg { table: "t".into(), source: iceberg(DataInvalid, false) }),
                false,
            ),
            (
                "table summary",
                Box::new(TableError::Summary { table: "t".into(), snapshot_id: 1, detail: "d".into() }),
                false,
            ),
            (
                "audit read 5xx",
                Box::new(AuditError::Read { table: "t".into(), source: iceberg(Unexpected, true) }),
                true,
            ),
            ("audit no table", Box::new(AuditError::NotFound("t".into())), false),
            ("commit lease lost", Box::new(CommitError::Lock(lost())), true),
            (
                "commit incompatible",
                Box::new(CommitError::Incompatible { table: "t".into(), reason: "r".into() }),
                false,
            ),
            ("commit internal", Box::new(CommitError::Internal { table: "t".into(), detail: "panic".into() }), false),
            ("segment read throttled", Box::new(segment(transient())), true),
            ("segment corrupt chunk", Box::new(segment(corrupt())), false),
            ("tiered encrypted", Box::new(TieredError::Encrypted { manifest: "m".into() }), false),
            (
                "write unexpected",
                Box::new(MaterializeError::Write { file: "f".into(), source: iceberg(Unexpected, false) }),
                true,
            ),
            (
                "write invalid",
                Box::new(MaterializeError::Write { file: "f".into(), source: iceberg(DataInvalid, false) }),
                false,
            ),
            ("materialize schema unreachable", Box::new(MaterializeError::Schema(schema_load(true))), true),
            (
                "materialize suspended",
                Box::new(MaterializeError::Suspended { file: "f".into(), partition: 0, offset: 1, error: "e".into() }),
                false,
            ),
            ("object throttled", Box::new(object(transient())), true),
            ("object refused", Box::new(object(StorageError::Refused("GET: AccessDenied".into()).into())), false),
            ("object missing", Box::new(object(std::io::ErrorKind::NotFound.into())), false),
            ("object reset", Box::new(object(std::io::ErrorKind::ConnectionReset.into())), true),
            ("materializer task", Box::new(MaterializerError::Task("no .log".into())), false),
            (
                "maintenance storage throttled",
                Box::new(MaintenanceError::Storage { table: "t".into(), detail: "d".into(), retryable: true }),
                true,
            ),
            ("maintenance registry refused", Box::new(MaintenanceError::Registry(store(false))), false),
            (
                "maintenance internal",
                Box::new(MaintenanceError::Internal { table: "t".into(), panic: "p".into() }),
                false,
            ),
        ];
        let wrong: Vec<&str> =
            cases.iter().filter(|(_, e, retryable)| e.retryable() != *retryable).map(|c| c.0).collect();
        assert!(wrong.is_empty(), "classified otherwise than before: {wrong:?}");
    }
}
