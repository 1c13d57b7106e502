//! The warehouse's bytes: where data files, manifests and metadata are read and written.
//!
//! Iceberg's [`FileIO`] is the interface every other part uses: here for local paths
//! (`/…` or `file://…`, what `floe local run` and the tests use); `floe-aws` gives one
//! that serves `s3://` locations through the SDK client the function already built.

use iceberg::io::FileIO;

/// A `FileIO` for local paths only.
pub fn local_file_io() -> FileIO {
    FileIO::new_with_fs()
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
