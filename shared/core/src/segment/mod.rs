//! Kafka log segments: the decoder is the `floe-segment` crate, re-exported here so that
//! the core names it `segment`. (Reading a segment from S3 is `floe-aws`'s.)

pub use floe_segment::*;
