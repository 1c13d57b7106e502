//! Floe's integration tests: one binary, run by the README's test command.
//!
//! Independent judges: segments written by real brokers (tests/data/kafka) and segments
//! built at test time by kafka-python (tests/py), never by our own encoder.

mod audit;
mod avro;
mod backfill;
mod catalogs;
mod clock;
mod committer;
mod compaction;
mod concurrency;
mod convert;
mod day;
mod delta;
mod edges;
mod fault_proxy;
mod faults;
mod first_run;
mod foreign;
mod health;
mod history;
mod infra;
mod json;
mod lambda_local;
mod lifecycle;
mod maintenance;
mod materializer;
mod metrics;
mod partition;
mod protobuf;
mod querying;
mod rest_catalog;
mod retention;
mod s3tables;
mod segments;
#[path = "../support/mod.rs"]
mod shared;
mod support;
mod sweep;
mod upsert;
