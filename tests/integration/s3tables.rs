//! The S3 Tables catalog against moto's `s3tables` API (table buckets, namespaces, tables,
//! `GetTableMetadataLocation`/`UpdateTableMetadataLocation` with version tokens, and each
//! table's own storage bucket): the version token is the compare-and-swap, Floe's commits
//! hold exactly once through it, the files go to the storage S3 Tables assigned, and
//! PyIceberg reads the table from the metadata file S3 Tables points to.

use std::sync::Arc;

use floe_aws::s3tables::S3TablesCatalog;
use floe_core::catalog::{Access, Catalog, TablePointer};
use floe_core::materializer::Materializer;
use floe_core::retry::Retryable;
use floe_core::table::{CatalogTables, TableName};

use crate::committer::{
    Aws, Read, assert_payments, conflicts_and_racing_committers_never_duplicate, payments, pyiceberg, setup,
};
use crate::support;

/// A table bucket of the test's own on moto.
async fn table_bucket(aws: &Aws, name: &str) -> String {
    let client = aws_sdk_s3tables::Client::new(&aws.config);
    client.create_table_bucket().name(name).send().await.unwrap().arn
}

fn s3tables(aws: &Aws, bucket_arn: &str) -> S3TablesCatalog {
    S3TablesCatalog::new(aws_sdk_s3tables::Client::new(&aws.config), bucket_arn)
}

/// PyIceberg's read of the table, from the metadata file S3 Tables points to.
async fn read(catalog: &S3TablesCatalog, table: &TableName) -> Read {
    let pointer = catalog.current(table).await.unwrap().expect("the table is registered");
    pyiceberg(&["static", &support::moto().endpoint, &pointer.metadata_location, &table.to_string()])
}

/// The Lambdas' materializer, its tables looked up (and made) through S3 Tables.
async fn materializer(aws: &Aws, catalog: Arc<dyn Catalog>) -> Materializer {
    let base = aws.materializer().await;
    let tables =
        CatalogTables { catalog, file_io: base.file_io.clone(), delta_log: Arc::new(floe_core::delta::LocalLogStore) };
    Materializer { tables: Some(Arc::new(tables)), ..base }
}

#[tokio::test]
async fn commits_through_s3_tables_hold_exactly_once_and_pyiceberg_reads_them() {
    let aws = setup("s3trace").await;
    let arn = table_bucket(&aws, "s3trace").await;
    let shared: Arc<dyn Catalog> = Arc::new(s3tables(&aws, &arn));
    let (topic, offsets, values) = payments();
    let tasks = aws.materialize_payments_with(&materializer(&aws, shared.clone()).await, topic.path()).await;
    let table = aws.table();

    // The materializer made the table in S3 Tables and wrote its files to the storage S3
    // Tables assigned it, not to Floe's warehouse.
    let storage = shared.create_location(&table).await.unwrap().unwrap();
    assert!(!storage.contains(&aws.warehouse), "{storage}");
    for task in &tasks {
        for file in &task.data_files {
            let path = file.path();
            assert!(path.starts_with(&format!("{storage}/data/")), "{path} is not under {storage}");
        }
    }
    assert!(shared.current(&table).await.unwrap().is_none(), "made, but no metadata registered yet");

    let fresh = || Arc::new(s3tables(&aws, &arn)) as Arc<dyn Catalog>;
    conflicts_and_racing_committers_never_duplicate(&aws, &tasks, &table, fresh).await;

    let pointer = shared.current(&table).await.unwrap().unwrap();
    assert!(pointer.metadata_location.starts_with(&format!("{storage}/metadata/")), "{pointer:?}");
    let read = read(&s3tables(&aws, &arn), &table).await;
    assert_payments(&read, &offsets, &values);
    assert_eq!(read.snapshots, 3, "{:#?}", read.history);
    // No dead-letter table: the topic is not in `dlq` mode (before: an empty one for
    // every topic).
    assert_eq!(shared.list(&aws.namespace).await.unwrap(), vec![table.clone()]);
}

#[tokio::test]
async fn a_stale_version_token_is_refused_as_a_conflict_and_bad_names_are_refused_plainly() {
    let aws = setup("s3ttoken").await;
    let arn = table_bucket(&aws, "s3ttoken").await;
    let catalog = s3tables(&aws, &arn);
    let (topic, _, _) = payments();
    let m = materializer(&aws, Arc::new(s3tables(&aws, &arn))).await;
    let task = aws.materialize(&m, topic.path(), crate::committer::SEGMENTS[0]).await;
    let committer = crate::committer::committer_with(&aws, Arc::new(s3tables(&aws, &arn)), &aws.locks, "one");
    assert_eq!(committer.commit(&[task], None).await.results[0].1, floe_core::committer::TaskResult::Committed);
    let table = aws.table();
    let now = catalog.current(&table).await.unwrap().unwrap();
    let metadata = floe_core::table::load(&catalog, &committer.file_io, &table).await.unwrap().unwrap().metadata;

    // A token the table does not have: S3 Tables' ConflictException, a Conflict to Floe.
    let stale = TablePointer { version: Some("0123456789abcdef0123".into()), ..now.clone() };
    let refused = catalog.swap(&table, &stale, &metadata, &now.metadata_location).await.unwrap_err();
    assert!(refused.is_conflict(), "{refused}");
    assert!(refused.to_string().contains("ConflictException"), "{refused}");
    assert_eq!(catalog.current(&table).await.unwrap().unwrap(), now, "the pointer did not move");

    // The current token moves the pointer, and the token changes with it.
    catalog.swap(&table, &now, &metadata, &now.metadata_location).await.unwrap();
    let moved = catalog.current(&table).await.unwrap().unwrap();
    assert_ne!(moved.version, now.version);

    // A name S3 Tables would refuse: no such table can exist, and making one is refused
    // before any call, saying the rule.
    let bad = TableName { namespace: aws.namespace.clone(), name: "Payments-v2".into() };
    assert!(catalog.current(&bad).await.unwrap().is_none());
    let e = catalog.create_location(&bad).await.unwrap_err();
    assert!(!e.retryable() && e.to_string().contains("only lowercase letters, digits and `_`"), "{e}");
    // A valid name of 253 characters: its `<table>_dlq` (257) is asked for by the audit,
    // and is no table rather than an error.
    let long = TableName { namespace: aws.namespace.clone(), name: "p".repeat(253) };
    assert!(catalog.create_location(&long).await.unwrap().is_some());
    assert!(catalog.current(&long.dead_letters()).await.unwrap().is_none());

    // The start-up check refuses such a name too; every action Floe needs is allowed here
    // (moto does not enforce IAM), so the check passes for the table, and changes nothing.
    let e = catalog.check_access(&[table.clone(), bad], Access::Commit).await.unwrap_err();
    assert!(e.to_string().contains("Payments-v2"), "{e}");
    catalog.check_access(std::slice::from_ref(&table), Access::Commit).await.unwrap();
    assert_eq!(catalog.current(&table).await.unwrap().unwrap(), moved);
}

#[tokio::test]
async fn floe_toml_points_the_lambdas_at_a_table_bucket_and_leaves_compaction_to_it() {
    use aws_lambda_events::event::eventbridge::EventBridgeEvent;
    use floe_aws::lambda::{handle_committer_event, handle_compactor_event};

    let config = support::aws_config().await;
    let arn = aws_sdk_s3tables::Client::new(&config).create_table_bucket().name("s3tconfig").send().await.unwrap().arn;
    // No compaction window: with Glue, the compactor compacts these small files at once
    // (the Glue compactor test in maintenance.rs). Mode `dlq`, and no bad record.
    let sections = format!(
        "compaction_window = \"0s\"\nbad_records = \"dlq\"\n[catalog]\ntype = \"s3tables\"\ntable_bucket_arn = \"{arn}\"\n"
    );
    let aws = crate::committer::setup_with("s3tconfig", &sections).await;
    let (topic, offsets, values) = payments();
    let (m, committer) = (aws.materializer().await, aws.configured_committer().await);
    for key in crate::committer::SEGMENTS {
        let task = aws.materialize(&m, topic.path(), key).await;
        // S3 Tables compacts them, so they are written as they stay: zstd, not fresh.
        assert!(task.data_files.iter().all(|f| !floe_core::datafile::is_fresh(f.path())), "{task:?}");
        let (event, receipts) = aws.receive().await;
        let response = handle_committer_event(&committer, event.clone(), None).await;
        assert!(response.batch_item_failures.is_empty(), "{:?}", response.batch_item_failures);
        // The same batch again (a redelivery): nothing added.
        assert!(handle_committer_event(&committer, event, None).await.batch_item_failures.is_empty());
        aws.delete(&receipts).await;
    }
    let catalog = s3tables(&aws, &arn);
    let before = read(&catalog, &aws.table()).await;
    assert_payments(&before, &offsets, &values);
    assert_eq!(before.snapshots, 3, "{:#?}", before.history);

    let text = std::fs::read_to_string(support::root().join(crate::maintenance::SCHEDULED_EVENT)).unwrap();
    let scheduled: EventBridgeEvent<serde_json::Value> = serde_json::from_str(&text).unwrap();
    let response = handle_compactor_event(&aws.compactor().await, scheduled, None).await;
    assert!(response.compacted.is_empty() && response.failed.is_empty(), "{response:?}");
    assert_eq!(response.orphans_removed, 0);
    let (event, _) = aws.receive().await;
    assert!(event.records.is_empty(), "no CompactionTask queued");
    assert_eq!(read(&catalog, &aws.table()).await.snapshots, 3);
    // In `dlq` mode, the dead-letter table is made by the first dead letter: none yet.
    assert_eq!(catalog.list(&aws.namespace).await.unwrap(), vec![aws.table()]);

    floe_aws_status_and_audit_read_the_table_bucket_through_floe_toml(&aws, &catalog, offsets.len()).await;
}

/// `floe aws …` with moto's endpoint and test credentials, S3 path-style (as the
/// functions under test), and `env`: its exit code and output.
pub(crate) fn floe_aws(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let out = std::process::Command::new(crate::first_run::floe_binary())
        .arg("aws")
        .args(args)
        .envs(env.iter().copied())
        .env("AWS_ENDPOINT_URL", &support::moto().endpoint)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("FLOE_S3_PATH_STYLE", "true")
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code(), text)
}

/// The `floe aws status --json` line of `table`.
fn status_of(lines: &str, table: &str) -> serde_json::Value {
    let mut rows = lines.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok());
    rows.find(|row| row["table"] == table).unwrap_or_else(|| panic!("no status of {table}: {lines}"))
}

/// `floe aws status --config` and `floe aws audit --config` find the tables where the
/// functions committed them, in the table bucket floe.toml names: the last snapshot,
/// committed offsets and lag; every record once (exit 0). When the table's committed
/// offsets claim records its data does not hold, the audit names them and exits 1.
async fn floe_aws_status_and_audit_read_the_table_bucket_through_floe_toml(
    aws: &Aws,
    catalog: &S3TablesCatalog,
    records: usize,
) {
    let table = aws.table();
    let config = aws.config_file.to_str().unwrap();
    let (code, out) = floe_aws(&["status", "--lock-table", &aws.locks, "--json", "--config", config], &[]);
    assert_eq!(code, Some(0), "{out}");
    let status = status_of(&out, &table.to_string());
    assert_eq!(status["offsets"], serde_json::json!({"payments-0": "0-99"}), "{status}");
    assert_eq!(status["state"], "running", "{status}");
    assert!(status["last_commit"].is_string() && status["lag"].is_string(), "{status}");
    assert!(status["files"].as_u64().is_some_and(|n| n > 0), "{status}");
    // Without --config the status reads Glue, where this table is not.
    let (code, out) = floe_aws(&["status", "--lock-table", &aws.locks, "--json"], &[]);
    assert_eq!(code, Some(0), "{out}");
    let status = status_of(&out, &table.to_string());
    assert_eq!((&status["offsets"], &status["last_commit"]), (&serde_json::json!({}), &serde_json::Value::Null));

    let (code, out) = floe_aws(&["audit", &table.to_string(), "--json", "--config", config], &[]);
    assert_eq!(code, Some(0), "{out}");
    let report: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    let partition = &report["partitions"][0];
    assert_eq!((&partition["committed"], partition["rows"].as_u64()), (&"0-99".into(), Some(records as u64)));
    assert_eq!(report["exactly_once"], true, "{report}");

    // A snapshot whose committed offsets say 0-119 over the same data: 100-119 missing.
    let now = catalog.current(&table).await.unwrap().unwrap();
    let (bucket, key) = floe_core::storage::split_s3_uri(&now.metadata_location).unwrap();
    let object = aws.s3.get_object().bucket(bucket).key(key).send().await.unwrap();
    let text = String::from_utf8(object.body.collect().await.unwrap().to_vec()).unwrap();
    let claimed = r#""floe.offsets.payments.0":"0-99""#;
    assert!(text.contains(claimed), "{text}");
    let tampered = text.replace(claimed, r#""floe.offsets.payments.0":"0-119""#);
    let location = now.metadata_location.replace(".metadata.json", "-claims-more.metadata.json");
    let (_, tampered_key) = floe_core::storage::split_s3_uri(&location).unwrap();
    aws.s3
        .put_object()
        .bucket(bucket)
        .key(tampered_key)
        .body(tampered.clone().into_bytes().into())
        .send()
        .await
        .unwrap();
    let metadata: iceberg::spec::TableMetadata = serde_json::from_str(&tampered).unwrap();
    catalog.swap(&table, &now, &metadata, &location).await.unwrap();
    let (code, out) = floe_aws(&["audit", &table.to_string(), "--config", config], &[]);
    assert_eq!(code, Some(1), "{out}");
    // The 9 offsets Floe counted without rows (58-66) explain 9 of the gaps' offsets, not 29.
    assert!(out.contains("committed 0-119, 91 rows"), "{out}");
    assert!(out.contains("20 offset(s) among the unexplained gaps are missing"), "{out}");
    assert!(out.contains("not exactly once: topic payments partition 0: unexplained gap(s)"), "{out}");
}

/// A moto server enforcing IAM (tests/py/moto_iam.py) with a table bucket and a user per
/// entry of `users`, allowed those actions: the bucket's ARN and each user's catalog.
struct IamMoto {
    _child: std::process::Child,
    endpoint: String,
    table_bucket_arn: String,
    keys: serde_json::Value,
}

impl IamMoto {
    fn start(users: &serde_json::Value) -> IamMoto {
        use std::io::BufRead;
        let wanted = serde_json::json!({"bucket": "iam", "users": users});
        let mut child = std::process::Command::new(support::python())
            .arg(support::root().join("tests/py/moto_iam.py"))
            .arg(wanted.to_string())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("starting moto_iam.py");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let ready: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|_| panic!("moto_iam.py: {line:?}"));
        IamMoto {
            _child: child,
            endpoint: format!("http://127.0.0.1:{}", ready["port"]),
            table_bucket_arn: ready["table_bucket_arn"].as_str().unwrap().to_string(),
            keys: ready["keys"].clone(),
        }
    }

    /// The catalog as `user` reaches it.
    async fn catalog(&self, user: &str) -> Arc<dyn Catalog> {
        let key = &self.keys[user];
        let credentials =
            aws_sdk_s3::config::Credentials::new(key[0].as_str().unwrap(), key[1].as_str().unwrap(), None, None, "iam");
        let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .endpoint_url(&self.endpoint)
            .region(aws_config::Region::new("us-east-1"))
            .credentials_provider(credentials)
            .load()
            .await;
        Arc::new(S3TablesCatalog::new(aws_sdk_s3tables::Client::new(&config), &self.table_bucket_arn))
    }
}

/// The stack's IAM as infra/template.yaml grants it with `CatalogType=s3tables`, against
/// moto enforcing IAM on actions: the committer's and the compactor's grants pass their
/// start-up access checks (the Lambdas' `AccessCheck`); a committer lacking any one
/// action the check probes gets the start-up error naming that action, and so would a
/// compactor that probed the pointer update it is not granted.
#[tokio::test]
async fn the_templates_grants_pass_the_access_check_and_a_missing_action_is_named() {
    use floe_aws::access::AccessCheck;
    let parameters = serde_json::json!({"CatalogType": "s3tables", "TableBucketArn": "arn:aws:s3tables:us-east-1:123456789012:bucket/iam"});
    let template = crate::infra::template();
    let granted = |function: &str| -> Vec<String> {
        let (actions, _) = crate::infra::catalog_grants(&template, &parameters, function);
        actions.into_iter().collect()
    };
    let (committer, compactor) = (granted("CommitterFunction"), granted("CompactorFunction"));
    let probed = [
        "s3tables:GetTableBucket",
        "s3tables:ListNamespaces",
        "s3tables:ListTables",
        "s3tables:GetTableMetadataLocation",
        "s3tables:UpdateTableMetadataLocation",
    ];
    let mut users = serde_json::json!({"committer": committer, "compactor": compactor});
    for action in probed {
        assert!(committer.iter().any(|a| a == action), "the committer is granted {action}: {committer:?}");
        let lacking: Vec<&String> = committer.iter().filter(|a| *a != action).collect();
        users[format!("without-{action}")] = serde_json::json!(lacking);
    }
    let moto = IamMoto::start(&users);
    let table = TableName { namespace: "kafka".into(), name: "orders".into() };

    AccessCheck::new(moto.catalog("committer").await, Access::Commit).check([table.clone()]).await.unwrap();
    AccessCheck::new(moto.catalog("compactor").await, Access::Read).check([table.clone()]).await.unwrap();
    let refused = AccessCheck::new(moto.catalog("compactor").await, Access::Commit).check([table.clone()]).await;
    let refused = refused.unwrap_err().to_string();
    assert!(
        refused.starts_with("access denied: s3tables:UpdateTableMetadataLocation on table kafka.orders"),
        "{refused}"
    );
    for action in probed {
        let check = AccessCheck::new(moto.catalog(&format!("without-{action}")).await, Access::Commit);
        let refused = check.check([table.clone()]).await.unwrap_err();
        assert!(!refused.retryable(), "{refused}");
        assert!(refused.to_string().starts_with(&format!("access denied: {action} on ")), "{action}: {refused}");
    }
}
