//! The warehouse's bytes: where data files, manifests and metadata are read and written.
//!
//! Iceberg's [`FileIO`] is the interface every other part uses. Floe gives it one storage
//! that serves both `s3://` locations (through the AWS SDK client the function already
//! built, so credentials, region, endpoint and retries are configured once) and local
//! paths (`/…` or `file://…`, what `floe local run` and the tests use).

#[cfg(feature = "aws")]
pub mod s3;

use iceberg::io::FileIO;

#[cfg(feature = "aws")]
pub use s3::{MULTIPART_PART_BYTES, WarehouseStorageFactory};

/// A `FileIO` for local paths only.
pub fn local_file_io() -> FileIO {
    FileIO::new_with_fs()
}

/// A `FileIO` serving `s3://` locations with `client`, and local paths.
#[cfg(feature = "aws")]
pub fn warehouse_file_io(client: aws_sdk_s3::Client) -> FileIO {
    iceberg::io::FileIOBuilder::new(std::sync::Arc::new(WarehouseStorageFactory::new(client))).build()
}

/// The whole object at `s3://bucket/key`; the error says what failed and whether a retry may help.
#[cfg(feature = "aws")]
pub async fn read_s3_uri(client: &aws_sdk_s3::Client, uri: &str) -> Result<bytes::Bytes, (String, bool)> {
    let (bucket, key) = split_s3_uri(uri).ok_or_else(|| (format!("{uri:?} is not s3://bucket/key"), false))?;
    let object =
        client.get_object().bucket(bucket).key(key).send().await.map_err(|e| {
            (aws_sdk_s3::error::DisplayErrorContext(&e).to_string(), crate::retry::sdk_error_retryable(&e))
        })?;
    let body = object.body.collect().await.map_err(|e| (e.to_string(), true))?;
    Ok(body.into_bytes())
}

/// Splits `s3://bucket/key` into (bucket, key).
pub fn split_s3_uri(uri: &str) -> Option<(&str, &str)> {
    let rest = uri.strip_prefix("s3://").or_else(|| uri.strip_prefix("s3a://"))?;
    let (bucket, key) = rest.split_once('/')?;
    (!bucket.is_empty()).then_some((bucket, key))
}

#[cfg(test)]
mod tests {
    use super::split_s3_uri;

    #[test]
    fn splits_s3_uris() {
        assert_eq!(split_s3_uri("s3://b/k/x.parquet"), Some(("b", "k/x.parquet")));
        assert_eq!(split_s3_uri("s3a://b/k"), Some(("b", "k")));
        assert_eq!(split_s3_uri("s3:///k"), None);
        assert_eq!(split_s3_uri("/tmp/x"), None);
    }
}
