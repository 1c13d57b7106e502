//! Which AWS SDK errors are worth retrying, and an SDK error as the typed storage error
//! the ports that speak `io::Error` carry.

use floe_core::retry::StorageError;

/// Whether an AWS SDK error is worth retrying: timeouts, connection failures, throttling, 5xx.
pub fn sdk_error_retryable<E: aws_sdk_s3::error::ProvideErrorMetadata>(
    error: &aws_sdk_s3::error::SdkError<E, aws_sdk_s3::config::http::HttpResponse>,
) -> bool {
    use aws_sdk_s3::error::SdkError;
    match error {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => true,
        SdkError::ServiceError(e) => {
            let status = e.raw().status().as_u16();
            let code = e.err().code().unwrap_or_default();
            status >= 500
                || status == 429
                || code.contains("Throttl")
                || matches!(
                    code,
                    "SlowDown" | "RequestTimeout" | "RequestLimitExceeded" | "ProvisionedThroughputExceededException"
                )
        }
        _ => false,
    }
}

/// An SDK error as an `io::Error` saying what failed, carrying a [`StorageError`]:
/// transient when [`sdk_error_retryable`], refused otherwise.
pub fn sdk_io_error<E: aws_sdk_s3::error::ProvideErrorMetadata + std::error::Error + 'static>(
    what: String,
    error: &aws_sdk_s3::error::SdkError<E, aws_sdk_s3::config::http::HttpResponse>,
) -> std::io::Error {
    let message = format!("{what}: {}", aws_sdk_s3::error::DisplayErrorContext(error));
    StorageError::judged(message, sdk_error_retryable(error)).into()
}
