//! Floe's core library: everything the three Lambda functions and the `floe` command-line
//! program share.
//!
//! The crate is organised by what each part does. Parts that talk to an outside service
//! sit behind a small trait with an AWS implementation and a local one (the local one is
//! what `floe` runs on, not a mock).
//!
//! - [`catalog`]: where tables are registered (Glue, or a SQLite file), and the pointer compare-and-swap.
//! - [`committer`]: batches of CommitTasks → one snapshot per table, exactly once.
//! - [`config`]: `floe.toml`, the typed configuration shared by the CLI and the Lambdas.
//! - [`schema`]: table layout, source schemas → Iceberg schemas, the evolution planner.
//! - [`convert`]: records → Arrow record batches, column by column.
//! - [`datafile`]: Parquet data files with field ids, rolling at the target size, as Iceberg `DataFile`s.
//! - `fuzz` (feature `fuzzing`): the payload decoders' harness, for the fuzz target and its corpus replay.
//! - [`materialize`]: one segment → Parquet data files, bad-record modes applied.
//! - [`partition`]: `partition_by` bound to a table schema as an Iceberg partition spec; batches split by partition value.
//! - [`lock`]: one committer per table: leases with fencing, and each table's status (DynamoDB, SQLite).
//! - [`materializer`]: an S3 object event → segment → data files → a CommitTask on the queue.
//! - [`queue`]: the task queue to the committer (FIFO SQS, or in process).
//! - [`table`]: Iceberg tables as Floe commits them: snapshots, committed offsets, schema evolution.
//! - [`task`]: the CommitTask, versioned JSON from the materializer to the committer.
//! - [`retry`]: bounded retries with backoff; which AWS errors are retryable.
//! - [`guard`]: a dependency's panic caught and turned into an error (the committer's lease is released).
//! - [`storage`]: the warehouse's bytes (`s3://` through the SDK, local paths), as an Iceberg `FileIO`.
//! - [`segment`]: decoding Kafka log segments (`.log` files a broker writes and tiered
//!   storage copies to S3) into records, with read_committed transaction semantics,
//!   streaming over any byte source with bounded memory.

pub mod catalog;
pub mod committer;
pub mod config;
pub mod convert;
pub mod datafile;
#[cfg(feature = "fuzzing")]
pub mod fuzz;
pub mod guard;
pub mod lock;
pub mod materialize;
pub mod materializer;
pub mod partition;
pub mod queue;
pub mod retry;
pub mod schema;
pub mod segment;
pub mod storage;
pub mod table;
pub mod task;
pub use floe_segment::varint;
