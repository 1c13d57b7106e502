//! Whether trying again may help: the one question every error of Floe answers
//! ([`Retryable`]), and the one place an `io::Error` gets its answer.
//!
//! The ports that speak `io::Error` (segment sources, the materializer's objects, the
//! warehouse's files) carry a remote store's failure as a [`StorageError`] inside the
//! `io::Error`: the store's client decided, by type, whether it may pass (throttled, a
//! 5xx, a timeout, a dropped connection) or not (access denied, no such bucket), and
//! bytes that arrived and are bad are [`StorageError::Corrupt`]. Any other `io::Error`
//! comes from the operating system (local files) and is answered by its kind:
//!
//! ```text
//!  io::Error carrying a StorageError ─▶ Transient: retryable; Refused, Corrupt: not
//!  any other io::Error (the OS's)     ─▶ NotFound, PermissionDenied, InvalidInput,
//!                                        InvalidData, Unsupported: not; the rest: retryable
//! ```
//!
//! The floe crates above re-export the trait (`floe_core::retry::Retryable`); it lives
//! here, in the bottom crate, because the segment's own errors answer it too.

use std::io;

/// An error that says whether trying the same thing again may succeed.
pub trait Retryable {
    /// True when the same call may succeed later (a throttle, a 5xx, a timeout, a lost
    /// race); false when it would fail the same way (corrupt input, a refused request,
    /// an incompatible schema, a bug).
    fn retryable(&self) -> bool;
}

/// A remote store's failure behind a port that speaks `io::Error`, typed by whether a
/// retry may help. It travels inside the `io::Error` (`io::Error::from`), where
/// [`Retryable`] for `io::Error` finds it.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The store may answer next time: throttled, a 5xx, a timeout, a dropped connection.
    #[error("{0}")]
    Transient(String),
    /// The store refused and will again: access denied, no such bucket, a bad request.
    #[error("{0}")]
    Refused(String),
    /// The bytes arrived and are not what they should be (a corrupt chunk): reading them
    /// again gives the same bytes.
    #[error("{0}")]
    Corrupt(String),
}

impl StorageError {
    /// A store's failure, transient or refused as its client judged.
    pub fn judged(message: String, retryable: bool) -> StorageError {
        if retryable { StorageError::Transient(message) } else { StorageError::Refused(message) }
    }
}

impl Retryable for StorageError {
    fn retryable(&self) -> bool {
        matches!(self, StorageError::Transient(_))
    }
}

impl From<StorageError> for io::Error {
    /// Kind `Other` for a transient failure, `InvalidData` for the others: the kinds the
    /// operating system's mapping below gives the same answer, so code that re-wraps the
    /// error keeping only its kind still classifies it the same.
    fn from(e: StorageError) -> io::Error {
        let kind = if e.retryable() { io::ErrorKind::Other } else { io::ErrorKind::InvalidData };
        io::Error::new(kind, e)
    }
}

impl Retryable for io::Error {
    /// A [`StorageError`] inside answers by its type. Otherwise the error is the operating
    /// system's, and may pass on its own unless the object is missing (`NotFound`), access
    /// is refused (`PermissionDenied`), the request itself is wrong (`InvalidInput`,
    /// `Unsupported`) or the bytes are bad (`InvalidData`).
    fn retryable(&self) -> bool {
        use io::ErrorKind::*;
        match self.get_ref().and_then(|e| e.downcast_ref::<StorageError>()) {
            Some(storage) => storage.retryable(),
            None => !matches!(self.kind(), NotFound | PermissionDenied | InvalidInput | InvalidData | Unsupported),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_storage_error_answers_by_its_type_whatever_the_kind() {
        for (error, retryable) in [
            (StorageError::Transient("GET s3://b/k: SlowDown".into()), true),
            (StorageError::judged("GET s3://b/k: 503".into(), true), true),
            (StorageError::Refused("GET s3://b/k: AccessDenied".into()), false),
            (StorageError::judged("LIST s3://nowhere/: NoSuchBucket".into(), false), false),
            (StorageError::Corrupt("seg.log: chunk 1: not a zstd frame".into()), false),
        ] {
            assert_eq!(error.retryable(), retryable, "{error}");
            let message = error.to_string();
            let io = io::Error::from(error);
            assert_eq!(io.retryable(), retryable, "{io}");
            assert_eq!(io.to_string(), message);
            // Re-wrapped keeping only the kind and message: still the same answer.
            assert_eq!(io::Error::new(io.kind(), io.to_string()).retryable(), retryable, "{io}");
        }
    }

    #[test]
    fn an_error_of_the_operating_system_answers_by_its_kind() {
        use io::ErrorKind::*;
        for kind in [NotFound, PermissionDenied, InvalidInput, InvalidData, Unsupported] {
            assert!(!io::Error::from(kind).retryable(), "{kind:?}");
        }
        for kind in [Other, TimedOut, ConnectionReset, Interrupted, UnexpectedEof] {
            assert!(io::Error::from(kind).retryable(), "{kind:?}");
        }
    }
}
