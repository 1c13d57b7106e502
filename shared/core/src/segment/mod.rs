//! Kafka log segments: the decoder is the `floe-segment` crate, re-exported here so that
//! the core names it `segment`; the S3 source (ranged GETs) lives beside it.

pub use floe_segment::*;

#[cfg(feature = "aws")]
mod s3;
#[cfg(feature = "aws")]
pub use s3::{DEFAULT_RANGE_BYTES, S3Source};
