//! `s3://` locations through the AWS SDK, local paths through iceberg's local storage.
//!
//! Writes stream: bytes are buffered up to one part ([`MULTIPART_PART_BYTES`]); an object
//! that stays under one part is sent with one `PutObject`, a larger one as a multipart
//! upload, part by part, each uploading while the next fills, so memory holds two parts
//! whatever the file size. A failed
//! multipart upload is aborted, leaving nothing behind.

use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_s3::Client;
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use futures::stream::BoxStream;
use iceberg::io::{
    FileIO, FileIOBuilder, FileMetadata, FileRead, FileWrite, InputFile, LocalFsStorage, OutputFile, Storage,
    StorageConfig, StorageFactory,
};
use iceberg::{Error, ErrorKind, Result};
use serde::{Deserialize, Serialize};
use tokio_util::task::AbortOnDropHandle;

use crate::retry::sdk_error_retryable;
use crate::vended::S3Clients;
use floe_core::storage::split_s3_uri;

/// Size of each multipart part (S3's minimum is 5 MiB for all parts but the last): S3
/// bills a part as a PUT, so a larger part costs fewer requests (8 for a 128 MiB file)
/// and more memory (two parts per file written: one filling, one uploading).
pub const MULTIPART_PART_BYTES: usize = 16 * 1024 * 1024;

fn s3_error<E>(what: &str, path: &str, error: SdkError<E, HttpResponse>) -> Error
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let retryable = sdk_error_retryable(&error);
    let kind = match &error {
        SdkError::ServiceError(e) if e.raw().status().as_u16() == 404 => ErrorKind::DataInvalid,
        _ => ErrorKind::Unexpected,
    };
    Error::new(kind, format!("{what} {path}: {}", DisplayErrorContext(&error))).with_retryable(retryable)
}

/// Builds the [`WarehouseStorage`] for a `FileIO`; holds the SDK clients.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct WarehouseStorageFactory {
    #[serde(skip)]
    clients: Option<Arc<S3Clients>>,
}

impl std::fmt::Debug for WarehouseStorageFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WarehouseStorageFactory")
    }
}

impl WarehouseStorageFactory {
    pub fn new(clients: Arc<S3Clients>) -> Self {
        WarehouseStorageFactory { clients: Some(clients) }
    }
}

#[typetag::serde]
impl StorageFactory for WarehouseStorageFactory {
    fn build(&self, _config: &StorageConfig) -> Result<Arc<dyn Storage>> {
        Ok(Arc::new(WarehouseStorage { clients: self.clients.clone(), local: LocalFsStorage::new() }))
    }
}

/// `s3://` with the SDK client for the path ([`S3Clients`]: a table's vended one, or the
/// process's own), anything else on the local file system.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct WarehouseStorage {
    #[serde(skip)]
    clients: Option<Arc<S3Clients>>,
    #[serde(skip)]
    local: LocalFsStorage,
}

impl std::fmt::Debug for WarehouseStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WarehouseStorage")
    }
}

impl WarehouseStorage {
    /// The client and (bucket, key) when `path` is an S3 location.
    async fn s3<'p>(&self, path: &'p str) -> Result<Option<(Client, &'p str, &'p str)>> {
        match split_s3_uri(path) {
            None => Ok(None),
            Some((bucket, key)) => {
                let clients = self
                    .clients
                    .as_ref()
                    .ok_or_else(|| Error::new(ErrorKind::Unexpected, format!("no S3 client configured for {path}")))?;
                Ok(Some((clients.client(path).await, bucket, key)))
            }
        }
    }
}

#[async_trait]
#[typetag::serde]
impl Storage for WarehouseStorage {
    async fn exists(&self, path: &str) -> Result<bool> {
        let Some((client, bucket, key)) = self.s3(path).await? else { return self.local.exists(path).await };
        match client.head_object().bucket(bucket).key(key).send().await {
            Ok(_) => Ok(true),
            Err(SdkError::ServiceError(e)) if e.raw().status().as_u16() == 404 => Ok(false),
            Err(e) => Err(s3_error("HEAD", path, e)),
        }
    }

    async fn metadata(&self, path: &str) -> Result<FileMetadata> {
        let Some((client, bucket, key)) = self.s3(path).await? else { return self.local.metadata(path).await };
        let head = client.head_object().bucket(bucket).key(key).send().await.map_err(|e| s3_error("HEAD", path, e))?;
        Ok(FileMetadata { size: head.content_length().unwrap_or(0).max(0) as u64 })
    }

    async fn read(&self, path: &str) -> Result<Bytes> {
        let Some((client, bucket, key)) = self.s3(path).await? else { return self.local.read(path).await };
        get(&client, bucket, key, None).await.map_err(|e| e.with_context("path", path))
    }

    async fn reader(&self, path: &str) -> Result<Box<dyn FileRead>> {
        let Some((client, bucket, key)) = self.s3(path).await? else { return self.local.reader(path).await };
        Ok(Box::new(S3Reader { client: client.clone(), bucket: bucket.to_string(), key: key.to_string() }))
    }

    async fn write(&self, path: &str, bs: Bytes) -> Result<()> {
        let Some((client, bucket, key)) = self.s3(path).await? else { return self.local.write(path, bs).await };
        client
            .put_object()
            .bucket(bucket)
            .key(key)
            .body(ByteStream::from(bs))
            .send()
            .await
            .map_err(|e| s3_error("PUT", path, e))?;
        Ok(())
    }

    async fn writer(&self, path: &str) -> Result<Box<dyn FileWrite>> {
        let Some((client, bucket, key)) = self.s3(path).await? else { return self.local.writer(path).await };
        Ok(Box::new(MultipartWriter::new(client.clone(), bucket, key, MULTIPART_PART_BYTES)))
    }

    async fn delete(&self, path: &str) -> Result<()> {
        let Some((client, bucket, key)) = self.s3(path).await? else { return self.local.delete(path).await };
        client.delete_object().bucket(bucket).key(key).send().await.map_err(|e| s3_error("DELETE", path, e))?;
        Ok(())
    }

    async fn delete_prefix(&self, path: &str) -> Result<()> {
        let Some((client, bucket, prefix)) = self.s3(path).await? else { return self.local.delete_prefix(path).await };
        let mut pages = client.list_objects_v2().bucket(bucket).prefix(prefix).into_paginator().send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| s3_error("LIST", path, e))?;
            for object in page.contents() {
                if let Some(key) = object.key() {
                    let uri = format!("s3://{bucket}/{key}");
                    client
                        .delete_object()
                        .bucket(bucket)
                        .key(key)
                        .send()
                        .await
                        .map_err(|e| s3_error("DELETE", &uri, e))?;
                }
            }
        }
        Ok(())
    }

    async fn delete_stream(&self, mut paths: BoxStream<'static, String>) -> Result<()> {
        while let Some(path) = paths.next().await {
            self.delete(&path).await?;
        }
        Ok(())
    }

    fn new_input(&self, path: &str) -> Result<InputFile> {
        Ok(InputFile::new(Arc::new(self.clone()), path.to_string()))
    }

    fn new_output(&self, path: &str) -> Result<OutputFile> {
        Ok(OutputFile::new(Arc::new(self.clone()), path.to_string()))
    }
}

/// GETs an object, or a byte range of it.
async fn get(client: &Client, bucket: &str, key: &str, range: Option<Range<u64>>) -> Result<Bytes> {
    let uri = format!("s3://{bucket}/{key}");
    let mut request = client.get_object().bucket(bucket).key(key);
    if let Some(r) = &range {
        if r.is_empty() {
            return Ok(Bytes::new());
        }
        request = request.range(format!("bytes={}-{}", r.start, r.end - 1));
    }
    let response = request.send().await.map_err(|e| s3_error("GET", &uri, e))?;
    let body = response.body.collect().await.map_err(|e| {
        Error::new(ErrorKind::Unexpected, format!("GET {uri}: reading the body: {e}")).with_retryable(true)
    })?;
    Ok(body.into_bytes())
}

/// Ranged reads of one object (Parquet footers and row groups, manifests).
struct S3Reader {
    client: Client,
    bucket: String,
    key: String,
}

#[async_trait]
impl FileRead for S3Reader {
    async fn read(&self, range: Range<u64>) -> Result<Bytes> {
        get(&self.client, &self.bucket, &self.key, Some(range)).await
    }
}

/// One object written part by part: a full part uploads in the background while the
/// next one fills, so the writer (the Parquet encoder) does not wait for the network
/// but when a part fills before the one before it is up. Memory: two parts.
struct MultipartWriter {
    client: Client,
    bucket: String,
    key: String,
    part_bytes: usize,
    buffer: BytesMut,
    upload_id: Option<String>,
    parts: Vec<CompletedPart>,
    /// The part uploading, if any (aborted when the writer is dropped).
    uploading: Option<AbortOnDropHandle<Result<CompletedPart>>>,
    closed: bool,
}

impl MultipartWriter {
    fn new(client: Client, bucket: &str, key: &str, part_bytes: usize) -> Self {
        MultipartWriter {
            client,
            bucket: bucket.to_string(),
            key: key.to_string(),
            part_bytes,
            buffer: BytesMut::new(),
            upload_id: None,
            parts: Vec::new(),
            uploading: None,
            closed: false,
        }
    }

    fn uri(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.key)
    }

    /// Waits for the part uploading, if any, and records it.
    async fn uploaded(&mut self) -> Result<()> {
        if let Some(uploading) = self.uploading.take() {
            let part = uploading
                .await
                .map_err(|e| Error::new(ErrorKind::Unexpected, format!("UploadPart {}: {e}", self.uri())))??;
            self.parts.push(part);
        }
        Ok(())
    }

    /// Starts uploading `body` as the next part, once the part before it is up.
    async fn upload_part(&mut self, body: Bytes) -> Result<()> {
        let upload_id = match &self.upload_id {
            Some(id) => id.clone(),
            None => {
                let created = self
                    .client
                    .create_multipart_upload()
                    .bucket(&self.bucket)
                    .key(&self.key)
                    .send()
                    .await
                    .map_err(|e| s3_error("CreateMultipartUpload", &self.uri(), e))?;
                let id = created.upload_id().unwrap_or_default().to_string();
                self.upload_id = Some(id.clone());
                id
            }
        };
        self.uploaded().await?;
        let number = self.parts.len() as i32 + 1;
        let upload = self
            .client
            .upload_part()
            .bucket(&self.bucket)
            .key(&self.key)
            .upload_id(upload_id)
            .part_number(number)
            .body(ByteStream::from(body));
        let uri = self.uri();
        self.uploading = Some(AbortOnDropHandle::new(tokio::spawn(async move {
            let uploaded = upload.send().await.map_err(|e| s3_error("UploadPart", &uri, e))?;
            Ok(CompletedPart::builder().part_number(number).set_e_tag(uploaded.e_tag).build())
        })));
        Ok(())
    }

    async fn finish(&mut self) -> Result<()> {
        let rest = self.buffer.split().freeze();
        let Some(upload_id) = self.upload_id.clone() else {
            self.client
                .put_object()
                .bucket(&self.bucket)
                .key(&self.key)
                .body(ByteStream::from(rest))
                .send()
                .await
                .map_err(|e| s3_error("PUT", &self.uri(), e))?;
            return Ok(());
        };
        if !rest.is_empty() {
            self.upload_part(rest).await?;
        }
        self.uploaded().await?;
        let completed = CompletedMultipartUpload::builder().set_parts(Some(std::mem::take(&mut self.parts))).build();
        self.client
            .complete_multipart_upload()
            .bucket(&self.bucket)
            .key(&self.key)
            .upload_id(upload_id)
            .multipart_upload(completed)
            .send()
            .await
            .map_err(|e| s3_error("CompleteMultipartUpload", &self.uri(), e))?;
        Ok(())
    }

    async fn abort(&mut self) {
        // A part still uploading is cancelled first.
        self.uploading = None;
        if let Some(upload_id) = self.upload_id.take() {
            let aborted = self
                .client
                .abort_multipart_upload()
                .bucket(&self.bucket)
                .key(&self.key)
                .upload_id(upload_id)
                .send()
                .await;
            if let Err(e) = aborted {
                tracing::warn!(object = %self.uri(), error = %DisplayErrorContext(e), "abort of a multipart upload failed");
            }
        }
    }
}

#[async_trait]
impl FileWrite for MultipartWriter {
    async fn write(&mut self, bs: Bytes) -> Result<()> {
        if self.closed {
            return Err(Error::new(ErrorKind::Unexpected, format!("{} is closed", self.uri())));
        }
        self.buffer.extend_from_slice(&bs);
        while self.buffer.len() >= self.part_bytes {
            let part = self.buffer.split_to(self.part_bytes).freeze();
            if let Err(e) = self.upload_part(part).await {
                self.abort().await;
                self.closed = true;
                return Err(e);
            }
        }
        Ok(())
    }

    async fn close(&mut self) -> Result<()> {
        if self.closed {
            return Err(Error::new(ErrorKind::Unexpected, format!("{} is already closed", self.uri())));
        }
        self.closed = true;
        let finished = self.finish().await;
        if finished.is_err() {
            self.abort().await;
        }
        finished
    }
}

/// A `FileIO` serving `s3://` locations with `client`, and local paths.
pub fn warehouse_file_io(client: aws_sdk_s3::Client) -> FileIO {
    routed_file_io(S3Clients::new(client))
}

/// A `FileIO` serving `s3://` locations with the client [`S3Clients`] picks for each path
/// (a table's vended credentials), and local paths.
pub fn routed_file_io(clients: Arc<S3Clients>) -> FileIO {
    FileIOBuilder::new(Arc::new(WarehouseStorageFactory::new(clients))).build()
}

/// The whole object at `s3://bucket/key`; the error says what failed and whether a retry may help.
pub async fn read_s3_uri(client: &aws_sdk_s3::Client, uri: &str) -> std::result::Result<bytes::Bytes, (String, bool)> {
    let (bucket, key) = split_s3_uri(uri).ok_or_else(|| (format!("{uri:?} is not s3://bucket/key"), false))?;
    let object =
        client.get_object().bucket(bucket).key(key).send().await.map_err(|e| {
            (aws_sdk_s3::error::DisplayErrorContext(&e).to_string(), crate::retry::sdk_error_retryable(&e))
        })?;
    let body = object.body.collect().await.map_err(|e| (e.to_string(), true))?;
    Ok(body.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn unconfigured_client_is_an_error_not_a_panic() {
        let storage = WarehouseStorage::default();
        let err = storage.s3("s3://bucket/key").await.err().unwrap();
        assert!(err.to_string().contains("no S3 client"), "{err}");
        assert!(storage.s3("/tmp/x").await.unwrap().is_none());
    }
}
