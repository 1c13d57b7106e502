//! Floe's core library (`floe-core`): everything the Lambda functions and the `floe`
//! command-line program share, naming no AWS SDK (the AWS implementations of its ports
//! are `floe-aws`'s; the segment decoder is `floe-segment`, re-exported as [`segment`]).
//!
//! Parts that talk to an outside service sit behind a small trait with a local
//! implementation here (what `floe` runs on, not a mock) and an AWS one in `floe-aws`.
//! From the bottom up:
//!
//! - [`segment`]: Kafka log segments → committed records (`floe-segment`).
//! - [`vocabulary`]: the words every layer shares (a table's name, offset ranges, a
//!   task's files, a transaction left open); it imports nothing of Floe.
//! - [`partition`]: the `partition_by` grammar, bound to a table schema as an Iceberg
//!   partition spec; batches split by partition value.
//! - [`schema`]: the table's columns (layout) and their evolution.
//! - [`config`]: `floe.toml`, the typed configuration shared by the CLI and the Lambdas.
//! - [`registry`]: Schema Registry client, local schema files, the wire format that names
//!   a payload's schema.
//! - [`formats`]: Avro, Protobuf, JSON Schema and plain JSON: schemas → Iceberg, payloads
//!   → Arrow columns.
//! - [`columns`]: records → Arrow record batches, column by column.
//! - [`datafile`]: Parquet data files with field ids, rolling at the target size, as Iceberg `DataFile`s.
//! - [`storage`]: the warehouse's bytes on local paths, as an Iceberg `FileIO`.
//! - [`catalog`]: where tables are registered (a SQLite file here; Glue in `floe-aws`), and
//!   the pointer compare-and-swap.
//! - [`lock`]: one committer per table: leases with fencing, and each table's status.
//! - [`queue`]: the task queue to the committer (in process here; FIFO SQS in `floe-aws`).
//! - [`table`]: Iceberg tables as Floe commits them: snapshots, committed offsets,
//!   transaction state, rewrites, compaction planning.
//! - [`task`]: the CommitTask, versioned JSON — where the materializer and the committer meet.
//! - [`materializer`]: a segment object → data files ([`materializer::segment`], bad-record
//!   modes applied) → a CommitTask on the queue.
//! - [`committer`]: batches of tasks → one snapshot per table, exactly once
//!   ([`committer::plan`] decides, as a pure function).
//! - [`maintenance`]: compaction runs, the orphan sweep, files held while their task is
//!   queued, a table's health (the registry they record in is [`lock::registry`]'s).
//! - [`metrics`]: what an invocation counted, as CloudWatch Embedded Metric Format lines.
//! - [`retry`]: [`Retryable`](retry::Retryable), the trait every error implements, and
//!   bounded retries with backoff of the errors that answer true (imported by every
//!   layer, it imports nothing of the crate). [`guard`]: a dependency's panic turned into
//!   an error.
//! - `fuzz` (feature `fuzzing`): the payload decoders' harness, for the fuzz target.
//! - `testing` (feature `testing`): what the tests and benchmarks share (a seeded
//!   generator).
//!
//! The layering (lower modules never import upper ones) is checked by a unit test,
//! `layering.rs`.

pub mod catalog;
pub mod columns;
pub mod committer;
pub mod config;
pub mod datafile;
pub mod delta;
pub mod formats;
#[cfg(feature = "fuzzing")]
pub mod fuzz;
pub mod guard;
#[cfg(test)]
mod layering;
pub mod lock;
pub mod maintenance;
pub mod materializer;
pub mod metrics;
pub mod partition;
pub mod queue;
pub mod registry;
pub mod retry;
pub mod schema;
pub mod segment;
pub mod storage;
pub mod table;
pub mod task;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod vocabulary;
pub use floe_segment::varint;
