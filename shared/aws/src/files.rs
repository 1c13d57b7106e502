//! The warehouse's files in S3, listed and deleted for the orphan sweep
//! ([`WarehouseFiles`]): what Iceberg's `FileIO` cannot do. Each path through the client
//! [`S3Clients`] picks for it (a table's vended credentials); [`AnyFiles`] adds local paths.
//!
//! ```text
//!  list("s3://b/wh/kafka.db/t")  ─ ListObjectsV2 prefix "wh/kafka.db/t/", page by page
//!                                 ─▶ [s3://b/wh/kafka.db/t/…, size, LastModified ms]
//!  delete([s3://b/k1, s3://c/k2, …]) ─ by bucket, DeleteObjects of ≤ 1000 keys (quiet)
//!                                 ─▶ the keys S3 refused, reported together
//! ```
//!
//! Errors are `io::Error`s carrying a `StorageError`: transient when a retry may help
//! (throttling, 5xx, a connection), refused when it will not (access denied, no such
//! bucket); kind `InvalidInput` (not retryable) for a path that is not `s3://bucket/key`.

use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_s3::Client;
use aws_sdk_s3::types::{Delete, ObjectIdentifier};
use floe_core::retry::StorageError;
use floe_core::storage::{LocalFiles, StoredFile, WarehouseFiles, split_s3_uri};

use crate::retry::sdk_io_error;
use crate::vended::S3Clients;

/// Keys in one DeleteObjects request (S3's limit).
pub const DELETE_BATCH: usize = 1000;

/// Per-key error codes of DeleteObjects that a later try may get past.
const RETRYABLE_KEY_ERRORS: [&str; 4] = ["InternalError", "SlowDown", "ServiceUnavailable", "RequestTimeout"];

/// The warehouse's objects, through the function's S3 client, or the one a REST catalog
/// vended for the table the path is under ([`S3Clients`]).
#[derive(Clone)]
pub struct S3Files {
    clients: Arc<S3Clients>,
}

impl S3Files {
    pub fn new(client: Client) -> Self {
        S3Files { clients: S3Clients::new(client) }
    }

    /// Paths read and deleted with the client `clients` picks for each.
    pub fn routed(clients: Arc<S3Clients>) -> Self {
        S3Files { clients }
    }
}

/// `s3://` paths through [`S3Files`], any other on the local file system ([`LocalFiles`]):
/// the files of `floe local` with a REST catalog, whose tables may be in either.
#[derive(Clone)]
pub struct AnyFiles {
    s3: S3Files,
}

impl AnyFiles {
    pub fn new(clients: Arc<S3Clients>) -> Self {
        AnyFiles { s3: S3Files::routed(clients) }
    }
}

#[async_trait]
impl WarehouseFiles for AnyFiles {
    async fn list(&self, prefix: &str) -> io::Result<Vec<StoredFile>> {
        match split_s3_uri(prefix) {
            Some(_) => self.s3.list(prefix).await,
            None => LocalFiles.list(prefix).await,
        }
    }

    async fn delete(&self, paths: &[String]) -> io::Result<()> {
        let (s3, local): (Vec<String>, Vec<String>) = paths.iter().cloned().partition(|p| split_s3_uri(p).is_some());
        self.s3.delete(&s3).await?;
        LocalFiles.delete(&local).await
    }
}

fn not_s3(path: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("{path:?} is not an s3://bucket/key location"))
}

#[async_trait]
impl WarehouseFiles for S3Files {
    async fn list(&self, prefix: &str) -> io::Result<Vec<StoredFile>> {
        // A directory: `…/t` must not list `…/t2`; `s3://bucket` is the whole bucket.
        let dir = format!("{}/", prefix.trim_end_matches('/'));
        let (bucket, key_prefix) = split_s3_uri(&dir).ok_or_else(|| not_s3(prefix))?;
        let client = self.clients.client(&dir).await;
        let mut pages = client.list_objects_v2().bucket(bucket).prefix(key_prefix).into_paginator().send();
        let mut out = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| sdk_io_error(format!("LIST {dir}"), &e))?;
            for object in page.contents() {
                let Some(key) = object.key() else { continue };
                out.push(StoredFile {
                    path: format!("s3://{bucket}/{key}"),
                    size: object.size().unwrap_or(0).max(0) as u64,
                    modified_ms: object.last_modified().and_then(|t| t.to_millis().ok()).unwrap_or(0),
                });
            }
        }
        Ok(out)
    }

    async fn delete(&self, paths: &[String]) -> io::Result<()> {
        // By the client that deletes them (their table's vended one, or the own), and bucket.
        let mut by_bucket: BTreeMap<(Option<String>, &str), (&str, Vec<&str>)> = BTreeMap::new();
        for path in paths {
            let (bucket, key) = split_s3_uri(path).ok_or_else(|| not_s3(path))?;
            by_bucket.entry((self.clients.prefix_of(path), bucket)).or_insert((path, Vec::new())).1.push(key);
        }
        let mut refused = Vec::new();
        let mut retryable = false;
        for ((_, bucket), (first, keys)) in by_bucket {
            let client = self.clients.client(first).await;
            for batch in keys.chunks(DELETE_BATCH) {
                let objects = batch
                    .iter()
                    .map(|key| ObjectIdentifier::builder().key(*key).build())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
                let delete = Delete::builder()
                    .set_objects(Some(objects))
                    .quiet(true)
                    .build()
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
                let out = client
                    .delete_objects()
                    .bucket(bucket)
                    .delete(delete)
                    .send()
                    .await
                    .map_err(|e| sdk_io_error(format!("DeleteObjects in s3://{bucket}"), &e))?;
                for error in out.errors() {
                    let code = error.code().unwrap_or("unknown");
                    retryable |= RETRYABLE_KEY_ERRORS.contains(&code);
                    refused.push(format!(
                        "s3://{bucket}/{}: {code} {}",
                        error.key().unwrap_or_default(),
                        error.message().unwrap_or_default()
                    ));
                }
                tracing::debug!(bucket, files = batch.len(), "deleted");
            }
        }
        if refused.is_empty() {
            return Ok(());
        }
        let shown = refused.iter().take(10).cloned().collect::<Vec<_>>().join("; ");
        Err(StorageError::judged(format!("{} file(s) not deleted: {shown}", refused.len()), retryable).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> S3Files {
        let config = aws_sdk_s3::Config::builder().behavior_version(aws_config::BehaviorVersion::latest()).build();
        S3Files::new(Client::from_conf(config))
    }

    #[tokio::test]
    async fn paths_that_are_not_s3_are_refused_before_any_request() {
        let err = files().delete(&["s3://b/k".into(), "/tmp/x".into()]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
        assert!(err.to_string().contains("/tmp/x"), "{err}");
        let err = files().list("/tmp/warehouse").await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
        assert!(!floe_core::retry::Retryable::retryable(&err), "{err}");
    }
}
