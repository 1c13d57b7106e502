//! Floe on AWS (`floe-aws`): every AWS implementation of a port the core defines, and the
//! Lambda functions' wiring. The core names no AWS SDK; this crate is where they meet.
//!
//! | port (`floe-core`) | here |
//! |---|---|
//! | `catalog::Catalog` | [`glue::GlueCatalog`]: Glue tables, `UpdateTable` with `VersionId` (the REST catalog is floe-core's, `catalog::rest`; its AWS hooks are [`rest_hooks`]) |
//! | `catalog::Catalog` | [`s3tables::S3TablesCatalog`]: S3 Tables, `UpdateTableMetadataLocation` with `versionToken` |
//! | `catalog::Catalog` (Floe's own, `catalog::split`) | [`lock_table_catalog::LockTableCatalog`]: Delta-only topics' Iceberg pointers on the lock table's rows, conditional updates |
//! | `delta::LogStore`, `delta::DeltaCatalog` | [`delta_log::S3LogStore`]: `If-None-Match` puts; [`glue::GlueCatalog`]: Delta tables in Glue |
//! | `lock::TableLocks` | [`dynamodb::DynamoDbLocks`]: leases with fencing, table status |
//! | `maintenance::TableRegistry` | [`dynamodb::DynamoDbLocks`]: tables, held task files (index [`dynamodb::HELD_INDEX`]), maintenance record |
//! | `queue::TaskQueue` | [`sqs::SqsTaskQueue`]: FIFO SQS, large tasks spilled to S3 |
//! | `storage::WarehouseFiles` | [`files::S3Files`]: ListObjectsV2, DeleteObjects by the thousand |
//! | `materializer::ObjectStore` | [`objects::S3Objects`]: ranged GETs pinned to the ETag |
//! | `segment::SegmentSource` | [`segment_source::S3Source`] |
//! | the warehouse `FileIO` | [`s3::warehouse_file_io`]: the SDK client, multipart uploads; [`s3::routed_file_io`]: per table location the client [`vended::S3Clients`] picks (a REST catalog's vended credentials, [`vended::VendedRoutes`]) |
//! | `catalog::rest::{SignRequest, ReadSecret}`, `catalog::rest::vended::StorageCredentials` | [`rest_hooks::SigV4Signer`], [`rest_hooks::SecretsManager`], [`vended::VendedRoutes`] |
//!
//! - [`catalogs`]: the one catalog factory: `[catalog]` into {catalog, `FileIO`, warehouse files}, on AWS or for a local warehouse: Glue ([`glue`]), an Iceberg REST catalog (floe-core's, with [`rest_hooks`]), S3 Tables ([`s3tables`]), SQLite (local).
//! - [`events`]: S3 notifications, EventBridge and SQS-wrapped events → the objects they name.
//! - [`lambda`]: the functions' typed environments, config and secrets loading, handlers.
//! - [`retry`]: which SDK errors are worth retrying.
//! - [`access`]: start-up permission checks (a missing permission named before work).
//! - [`vended`]: the S3 client each path is read and written with: a REST catalog's vended credentials for it ([`vended::VendedRoutes`], one per opened catalog), else the own.
//! - [`rest_hooks`]: what the REST catalog takes from AWS: SigV4 signing, Secrets Manager.

pub mod access;
pub mod catalogs;
pub mod delta_log;
pub mod dynamodb;
pub mod events;
pub mod files;
pub mod glue;
pub mod lambda;
pub mod lock_table_catalog;
pub mod objects;
pub mod rest_hooks;
pub mod retry;
pub mod s3;
pub mod s3tables;
pub mod segment_source;
pub mod sqs;
pub mod vended;
