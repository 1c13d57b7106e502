//! One suite, every catalog: the same cases against the local SQLite catalog, Glue on
//! moto, the REST test server (tests/py/rest_catalog.py), S3 Tables on moto and Floe's
//! own catalog on AWS (the lock table's rows in DynamoDB on moto), each
//! through Floe's [`Catalog`] as the committer uses it (the way iceberg-rust's
//! `catalog/loader` tests run one case list over its catalogs). A case is an `async fn`
//! taking a [`Subject`]; [`suite!`] makes one `#[tokio::test]` per case and catalog
//! (`catalogs::<case>::<catalog>`).
//!
//! Cases: load the current pointer; create (twice: a conflict); a compare-and-swap that
//! lost is a conflict; list; a table dropped and created again under its name (a new
//! UUID) is not taken for the old one.

use std::collections::HashMap;
use std::sync::Arc;

use floe_core::catalog::{Catalog, TablePointer};
use floe_core::retry::Retryable;
use floe_core::table::{LoadedTable, TableName, load};
use iceberg::MetadataLocation;
use iceberg::io::FileIO;
use iceberg::spec::{NestedField, PartitionSpec, PrimitiveType, Schema, TableMetadata, Type};

use crate::rest_catalog::RestServer;
use crate::support;

/// Where a subject's catalog keeps its tables, and how a table is dropped there (not a
/// part of Floe's [`Catalog`]: the operator or another engine does it).
enum Backend {
    Sql(tempfile::TempDir),
    Glue { client: aws_sdk_glue::Client, bucket: String },
    Rest(RestServer),
    S3Tables { client: aws_sdk_s3tables::Client, arn: String },
    LockTable { client: aws_sdk_dynamodb::Client, table: String, bucket: String },
}

/// A catalog under test, with the FileIO its tables' files are written with.
pub(crate) struct Subject {
    backend: Backend,
    catalog: Arc<dyn Catalog>,
    file_io: FileIO,
    namespace: String,
}

impl Subject {
    async fn sql(_case: &str) -> Subject {
        let dir = tempfile::tempdir().unwrap();
        let catalog = floe_core::catalog::sqlite::SqliteCatalog::open(&dir.path().join("catalog.db"), "floe").unwrap();
        let file_io = floe_core::storage::local_file_io();
        Subject { backend: Backend::Sql(dir), catalog: Arc::new(catalog), file_io, namespace: "kafka".into() }
    }

    async fn glue(case: &str) -> Subject {
        let config = support::aws_config().await;
        let bucket = format!("suite-{}", case.replace('_', "-"));
        support::s3_client().await.create_bucket().bucket(&bucket).send().await.unwrap();
        let client = aws_sdk_glue::Client::new(&config);
        let catalog = Arc::new(floe_aws::glue::GlueCatalog::new(client.clone()));
        let file_io = floe_aws::s3::warehouse_file_io(support::s3_client().await);
        Subject { backend: Backend::Glue { client, bucket }, catalog, file_io, namespace: format!("suite_{case}") }
    }

    async fn rest(_case: &str) -> Subject {
        let server = RestServer::start();
        let catalog = server.catalog().await;
        let file_io = floe_core::storage::local_file_io();
        Subject { backend: Backend::Rest(server), catalog, file_io, namespace: "kafka".into() }
    }

    async fn s3tables(case: &str) -> Subject {
        let config = support::aws_config().await;
        let client = aws_sdk_s3tables::Client::new(&config);
        // One table bucket per case (names of 3 to 63 characters).
        static BUCKETS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let name = format!("suite-{}", BUCKETS.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        let arn = client.create_table_bucket().name(name).send().await.unwrap().arn;
        let catalog = Arc::new(floe_aws::s3tables::S3TablesCatalog::new(client.clone(), &arn));
        let file_io = floe_aws::s3::warehouse_file_io(support::s3_client().await);
        Subject { backend: Backend::S3Tables { client, arn }, catalog, file_io, namespace: format!("suite_{case}") }
    }

    async fn lock_table(case: &str) -> Subject {
        let config = support::aws_config().await;
        let (table, bucket) = (format!("suite-own-{case}"), format!("suite-own-{}", case.replace('_', "-")));
        crate::committer::create_lease_table(&config, &table).await;
        support::s3_client().await.create_bucket().bucket(&bucket).send().await.unwrap();
        let client = aws_sdk_dynamodb::Client::new(&config);
        let catalog = Arc::new(floe_aws::lock_table_catalog::LockTableCatalog::new(client.clone(), &table));
        let file_io = floe_aws::s3::warehouse_file_io(support::s3_client().await);
        let backend = Backend::LockTable { client, table, bucket };
        Subject { backend, catalog, file_io, namespace: format!("suite_{case}") }
    }

    fn table(&self, name: &str) -> TableName {
        TableName { namespace: self.namespace.clone(), name: name.into() }
    }

    /// Creates `table` as the committer does: where the catalog assigns, else under the
    /// warehouse; its first metadata file written, then registered. Its metadata.
    async fn create(&self, table: &TableName) -> TableMetadata {
        let location = match self.catalog.create_location(table).await.unwrap() {
            Some(location) => location,
            None => match &self.backend {
                Backend::Sql(dir) => format!("{}/{}.db/{}", dir.path().display(), table.namespace, table.name),
                Backend::Glue { bucket, .. } | Backend::LockTable { bucket, .. } => {
                    format!("s3://{bucket}/{}.db/{}", table.namespace, table.name)
                }
                other => panic!("{} assigns every location", other.name()),
            },
        };
        let schema = Schema::builder()
            .with_fields(vec![Arc::new(NestedField::optional(1, "v", Type::Primitive(PrimitiveType::Long)))])
            .build()
            .unwrap();
        let spec = PartitionSpec::unpartition_spec();
        let created = floe_core::table::create(
            self.catalog.as_ref(),
            &self.file_io,
            table,
            &location,
            &floe_core::table::NewTable {
                schema: &schema,
                spec: &spec,
                format: iceberg::spec::FormatVersion::V2,
                upsert_key: None,
                formats: Default::default(),
            },
        )
        .await;
        assert!(created.unwrap(), "{table} existed already");
        self.load(table).await.metadata
    }

    async fn load(&self, table: &TableName) -> LoadedTable {
        load(self.catalog.as_ref(), &self.file_io, table).await.unwrap().expect("the table exists")
    }

    /// A commit over `base` (one property set), written where the catalog needs it
    /// (unless `write` is false): its metadata and the location named in the swap.
    async fn change(&self, base: &LoadedTable, value: &str, write: bool) -> (TableMetadata, String) {
        let properties = HashMap::from([("suite.change".to_string(), value.to_string())]);
        let metadata = base
            .metadata
            .clone()
            .into_builder(Some(base.pointer.metadata_location.clone()))
            .set_properties(properties)
            .unwrap()
            .build()
            .unwrap()
            .metadata;
        let location: MetadataLocation = base.pointer.metadata_location.parse().unwrap();
        let location = location.with_next_version().with_new_metadata(&metadata);
        if write && !self.catalog.writes_metadata() {
            metadata.write_to(&self.file_io, &location).await.unwrap();
        }
        (metadata, location.to_string())
    }

    /// Drops `table` the way an operator or another engine would.
    async fn drop_table(&self, table: &TableName) {
        match &self.backend {
            Backend::Sql(dir) => {
                let script = format!(
                    "from pyiceberg.catalog.sql import SqlCatalog\n\
                     SqlCatalog('floe', uri='sqlite:///{}/catalog.db').drop_table('{table}')\n",
                    dir.path().display()
                );
                let out = std::process::Command::new(support::python()).args(["-c", &script]).output().unwrap();
                assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            }
            Backend::Glue { client, .. } => {
                client.delete_table().database_name(&table.namespace).name(&table.name).send().await.unwrap();
            }
            Backend::Rest(server) => {
                let url = format!("{}/v1/namespaces/{}/tables/{}", server.uri, table.namespace, table.name);
                let token = server.token().await;
                let answer = reqwest::Client::new().delete(url).bearer_auth(token).send().await.unwrap();
                assert!(answer.status().is_success(), "{}", answer.text().await.unwrap());
            }
            Backend::S3Tables { client, arn } => {
                let request = client.delete_table().table_bucket_arn(arn).namespace(&table.namespace);
                request.name(&table.name).send().await.unwrap();
            }
            Backend::LockTable { client, table: lock_table, .. } => {
                let key = aws_sdk_dynamodb::types::AttributeValue::S(table.to_string());
                client.delete_item().table_name(lock_table).key("table", key).send().await.unwrap();
            }
        }
    }
}

impl Backend {
    fn name(&self) -> &'static str {
        match self {
            Backend::Sql(_) => "sql",
            Backend::Glue { .. } => "glue",
            Backend::Rest(_) => "rest",
            Backend::S3Tables { .. } => "s3tables",
            Backend::LockTable { .. } => "lock_table",
        }
    }
}

/// One `#[tokio::test]` per case and catalog: `catalogs::<case>::{sql, glue, rest, s3tables, lock_table}`.
macro_rules! suite {
    ($($case:ident),* $(,)?) => {$(
        mod $case {
            #[tokio::test]
            async fn sql() {
                super::$case(super::Subject::sql(stringify!($case)).await).await
            }
            #[tokio::test]
            async fn glue() {
                super::$case(super::Subject::glue(stringify!($case)).await).await
            }
            #[tokio::test]
            async fn rest() {
                super::$case(super::Subject::rest(stringify!($case)).await).await
            }
            #[tokio::test]
            async fn s3tables() {
                super::$case(super::Subject::s3tables(stringify!($case)).await).await
            }
            #[tokio::test]
            async fn lock_table() {
                super::$case(super::Subject::lock_table(stringify!($case)).await).await
            }
        }
    )*};
}

suite!(load_current, create, a_lost_swap_is_a_conflict, list, a_re_created_table_is_not_the_old_one);

async fn load_current(s: Subject) {
    let table = s.table("orders");
    assert!(s.catalog.current(&table).await.unwrap().is_none(), "no table yet");
    let created = s.create(&table).await;
    let pointer = s.catalog.current(&table).await.unwrap().expect("created");
    let read = TableMetadata::read_from(&s.file_io, &pointer.metadata_location).await.unwrap();
    assert_eq!(read.uuid(), created.uuid());
    assert!(pointer.metadata_location.starts_with(created.location()), "{pointer:?} {}", created.location());
}

async fn create(s: Subject) {
    let table = s.table("orders");
    let created = s.create(&table).await;
    let again = s.catalog.create(&table, &created, &s.load(&table).await.pointer.metadata_location).await;
    assert!(again.as_ref().is_err_and(|e| e.is_conflict()), "{again:?}");
    assert_eq!(s.load(&table).await.metadata.uuid(), created.uuid(), "the first table stands");
}

async fn a_lost_swap_is_a_conflict(s: Subject) {
    let table = s.table("orders");
    s.create(&table).await;
    let base = s.load(&table).await;
    let (first, at) = s.change(&base, "first", true).await;
    s.catalog.swap(&table, &base.pointer, &first, &at).await.unwrap();
    // Another commit planned on the same base lost the race: refused, nothing applied.
    let (second, at) = s.change(&base, "second", true).await;
    let lost = s.catalog.swap(&table, &base.pointer, &second, &at).await.unwrap_err();
    assert!(lost.is_conflict(), "{lost}");
    let now = s.load(&table).await;
    assert_eq!(now.metadata.properties().get("suite.change").map(String::as_str), Some("first"));
    assert_ne!(now.pointer.metadata_location, base.pointer.metadata_location);
}

async fn list(s: Subject) {
    let (b, a) = (s.table("orders_b"), s.table("orders_a"));
    s.create(&b).await;
    s.create(&a).await;
    assert_eq!(s.catalog.list(&s.namespace).await.unwrap(), vec![a, b]);
}

async fn a_re_created_table_is_not_the_old_one(s: Subject) {
    let table = s.table("orders");
    s.create(&table).await;
    let old = s.load(&table).await;
    s.drop_table(&table).await;
    assert!(s.catalog.current(&table).await.unwrap().is_none(), "dropped");
    let new = s.create(&table).await;
    assert_ne!(new.uuid(), old.metadata.uuid());
    let current: TablePointer = s.catalog.current(&table).await.unwrap().unwrap();
    assert_ne!(current.metadata_location, old.pointer.metadata_location);
    // A commit planned on the old table (a committer that loaded it before the drop) is
    // refused, not applied over the new one.
    // (S3 Tables drops a table's storage with it: the stale metadata file cannot even be
    // written there; the swap is tried all the same.)
    let s3tables = matches!(s.backend, Backend::S3Tables { .. });
    let (stale, at) = s.change(&old, "stale", !s3tables).await;
    let refused = s.catalog.swap(&table, &old.pointer, &stale, &at).await.unwrap_err();
    assert!(refused.is_conflict() || !refused.retryable(), "{refused}");
    let now = s.load(&table).await;
    assert_eq!(now.metadata.uuid(), new.uuid());
    assert!(!now.metadata.properties().contains_key("suite.change"), "the stale commit was applied");
}
