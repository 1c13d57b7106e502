//! Segment objects in S3, as the materializer opens them: ranged GETs pinned to the ETag.

use std::io;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use floe_core::materializer::{ObjectRef, ObjectStore, Opened};

use crate::retry::sdk_io_error;
use crate::segment_source::{S3Source, transient};

/// Objects in S3, read with ranged GETs pinned to their ETag.
pub struct S3Objects {
    client: aws_sdk_s3::Client,
}

impl S3Objects {
    pub fn new(client: aws_sdk_s3::Client) -> Self {
        S3Objects { client }
    }
}

#[async_trait]
impl ObjectStore for S3Objects {
    async fn open(&self, object: &ObjectRef) -> io::Result<Opened> {
        let source = S3Source::open(self.client.clone(), &object.bucket, &object.key).await?;
        Ok(Opened {
            uri: format!("s3://{}/{}", object.bucket, object.key),
            size: source.size(),
            etag: source.etag().map(str::to_string),
            object: Arc::new(source),
        })
    }

    async fn get(&self, object: &ObjectRef) -> io::Result<Option<Bytes>> {
        let uri = format!("s3://{}/{}", object.bucket, object.key);
        match self.client.get_object().bucket(&object.bucket).key(&object.key).send().await {
            Ok(response) => {
                let body = response.body.collect().await.map_err(|e| transient(format!("GET {uri}: {e}")))?;
                Ok(Some(body.into_bytes()))
            }
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => Ok(None),
            Err(e) => Err(sdk_io_error(format!("GET {uri}"), &e)),
        }
    }
}
