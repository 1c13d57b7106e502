//! Delta logs in S3 ([`LogStore`]): a commit is a conditional PUT, `If-None-Match: *`,
//! which S3 refuses with 412 when the object exists — the put-if-absent Delta's protocol
//! asks of its log, with no DynamoDB log store beside it. Paths that are not `s3://` go
//! to the local filesystem ([`LocalLogStore`]), as [`crate::files::AnyFiles`] does.
//!
//! ```text
//!  put_if_absent(s3://b/t/_delta_log/N.json) ─ PutObject If-None-Match: * ─ 200 ─▶ won
//!                                                                       └ 412 ─▶ taken
//!                                                                       └ 409 ─▶ a racing
//!                                   conditional write in flight: retryable, read again
//! ```

use std::io;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use floe_core::delta::store::LogFile;
use floe_core::delta::{LocalLogStore, LogStore};
use floe_core::storage::split_s3_uri;

use crate::retry::sdk_io_error;
use crate::vended::S3Clients;

/// Delta logs through the client [`S3Clients`] picks for each path.
#[derive(Clone)]
pub struct S3LogStore {
    clients: Arc<S3Clients>,
}

impl S3LogStore {
    pub fn new(clients: Arc<S3Clients>) -> Self {
        S3LogStore { clients }
    }
}

#[async_trait]
impl LogStore for S3LogStore {
    async fn read(&self, path: &str) -> io::Result<Option<Bytes>> {
        let Some((bucket, key)) = split_s3_uri(path) else { return LocalLogStore.read(path).await };
        let client = self.clients.client(path).await;
        match client.get_object().bucket(bucket).key(key).send().await {
            Ok(object) => {
                let body = object.body.collect().await.map_err(|e| io::Error::other(format!("GET {path}: {e}")))?;
                Ok(Some(body.into_bytes()))
            }
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => Ok(None),
            Err(e) => Err(sdk_io_error(format!("GET {path}"), &e)),
        }
    }

    async fn exists(&self, path: &str) -> io::Result<bool> {
        let Some((bucket, key)) = split_s3_uri(path) else { return LocalLogStore.exists(path).await };
        let client = self.clients.client(path).await;
        match client.head_object().bucket(bucket).key(key).send().await {
            Ok(_) => Ok(true),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_not_found()) => Ok(false),
            Err(e) => Err(sdk_io_error(format!("HEAD {path}"), &e)),
        }
    }

    async fn put_if_absent(&self, path: &str, bytes: Bytes) -> io::Result<bool> {
        let Some((bucket, key)) = split_s3_uri(path) else { return LocalLogStore.put_if_absent(path, bytes).await };
        let client = self.clients.client(path).await;
        let put = client.put_object().bucket(bucket).key(key).if_none_match("*").body(bytes.into());
        match put.send().await {
            Ok(_) => Ok(true),
            Err(e) if e.raw_response().is_some_and(|r| r.status().as_u16() == 412) => Ok(false),
            Err(e) => Err(sdk_io_error(format!("conditional PUT {path}"), &e)),
        }
    }

    async fn put(&self, path: &str, bytes: Bytes) -> io::Result<()> {
        let Some((bucket, key)) = split_s3_uri(path) else { return LocalLogStore.put(path, bytes).await };
        let client = self.clients.client(path).await;
        client
            .put_object()
            .bucket(bucket)
            .key(key)
            .body(bytes.into())
            .send()
            .await
            .map_err(|e| sdk_io_error(format!("PUT {path}"), &e))?;
        Ok(())
    }

    async fn list(&self, dir: &str, after: Option<&str>) -> io::Result<Vec<LogFile>> {
        let prefix = format!("{}/", dir.trim_end_matches('/'));
        let Some((bucket, key_prefix)) = split_s3_uri(&prefix) else { return LocalLogStore.list(dir, after).await };
        let client = self.clients.client(&prefix).await;
        let mut request = client.list_objects_v2().bucket(bucket).prefix(key_prefix).delimiter("/");
        if let Some(after) = after {
            request = request.start_after(format!("{key_prefix}{after}"));
        }
        let mut pages = request.into_paginator().send();
        let mut out = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| sdk_io_error(format!("LIST {prefix}"), &e))?;
            for object in page.contents() {
                let Some(name) = object.key().and_then(|k| k.strip_prefix(key_prefix)) else { continue };
                let modified_ms = object.last_modified().and_then(|t| t.to_millis().ok()).unwrap_or(0);
                out.push(LogFile { name: name.to_string(), modified_ms });
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    async fn delete(&self, paths: &[String]) -> io::Result<()> {
        let (s3, local): (Vec<String>, Vec<String>) = paths.iter().cloned().partition(|p| split_s3_uri(p).is_some());
        floe_core::storage::WarehouseFiles::delete(&crate::files::S3Files::routed(self.clients.clone()), &s3).await?;
        LocalLogStore.delete(&local).await
    }
}
