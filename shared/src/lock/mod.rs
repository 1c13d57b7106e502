//! One committer per table at a time: a lease per table, and the table's status.
//!
//! ```text
//!  acquire(table, owner, ttl): free, expired, or already ours ─▶ Lease { owner, expires, fencing+1 }
//!                              held by another, unexpired     ─▶ None
//!  renew(lease): still ours (same fencing) ─▶ new expiry; else Lost — the commit aborts
//!  release(lease): expiry set to now, fencing kept (it only grows)
//! ```
//!
//! The lease keeps two committers from doing the same work; it is not what makes commits
//! safe: the catalog's compare-and-swap and the offsets recorded in the table do that, so
//! a committer that lost its lease mid-commit can only fail its swap, never duplicate.
//! The same store keeps each table's status: a table suspended (incompatible schema)
//! stays suspended, its tasks kept in the queue, until an operator resumes it.

#[cfg(feature = "aws")]
pub mod dynamodb;
pub mod sqlite;

use std::time::Duration;

use async_trait::async_trait;

/// A held lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub table: String,
    pub owner: String,
    /// Grows by one at every acquisition: a later holder always has a larger one.
    pub fencing: u64,
    pub expires_at_ms: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("lease on {table} lost (fencing {fencing}): another committer holds it")]
    Lost { table: String, fencing: u64 },
    #[error("lock store: {detail}")]
    Store { detail: String, retryable: bool },
}

impl LockError {
    pub fn retryable(&self) -> bool {
        match self {
            LockError::Lost { .. } => true,
            LockError::Store { retryable, .. } => *retryable,
        }
    }
}

/// Leases and statuses of tables.
#[async_trait]
pub trait TableLocks: Send + Sync {
    async fn acquire(&self, table: &str, owner: &str, ttl: Duration) -> Result<Option<Lease>, LockError>;
    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LockError>;
    async fn release(&self, lease: &Lease) -> Result<(), LockError>;
    /// The reason the table is suspended, if it is.
    async fn suspended(&self, table: &str) -> Result<Option<String>, LockError>;
    /// Suspends (`Some(reason)`) or resumes (`None`) the table.
    async fn set_suspended(&self, table: &str, reason: Option<&str>) -> Result<(), LockError>;
}

pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}
