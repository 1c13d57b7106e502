//! Floe against an Iceberg REST catalog: tests/py/rest_catalog.py, a REST server whose
//! commits PyIceberg's SqlCatalog validates (requirements) and applies (updates), started
//! by each test on 127.0.0.1:0 with OAuth2 client credentials required. `floe local run
//! --config` with `[catalog] type = "rest"` commits through it; PyIceberg's own REST
//! client reads the tables back. With `--vend` the server keeps the tables in moto's S3
//! and vends per-table credentials; moto's record of who signed each request
//! (`/_floe/signed`) shows which credentials Floe used.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use floe_core::catalog::Catalog;
use floe_core::catalog::rest::{RestCatalog, RestHooks};
use floe_core::config::{CatalogConfig, FloeConfig};
use floe_core::table::TableName;
use iceberg::spec::TableMetadata;
use serde_json::{Value, json};

use crate::committer::{Read, copy, pyiceberg};
use crate::support;

const CREDENTIAL: &str = "floe-client:floe-secret";
/// The variable `credential_env` names in these tests (set once, to the same value).
const CREDENTIAL_ENV: &str = "FLOE_TEST_REST_CATALOG_CREDENTIAL";

/// A REST catalog server of this test, storing its tables under `dir`; stopped on drop.
pub(crate) struct RestServer {
    child: Child,
    pub(crate) uri: String,
    _dir: tempfile::TempDir,
}

impl RestServer {
    pub(crate) fn start() -> RestServer {
        RestServer::start_with(&[])
    }

    /// A server keeping its tables in `bucket` of the test's moto S3, vending credentials.
    fn vending(bucket: &str) -> RestServer {
        RestServer::start_with(&["--vend", &support::moto().endpoint, bucket])
    }

    fn start_with(args: &[&str]) -> RestServer {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(support::python())
            .arg(support::root().join("tests/py/rest_catalog.py"))
            .arg(dir.path())
            .args(["--credential", CREDENTIAL])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting the REST catalog server");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port: u16 = line.trim().parse().unwrap_or_else(|_| panic!("rest_catalog.py printed {line:?}"));
        RestServer { child, uri: format!("http://127.0.0.1:{port}"), _dir: dir }
    }

    fn config_toml(&self) -> String {
        format!(
            "[defaults]\nenabled = true\n\n[catalog]\ntype = \"rest\"\nuri = \"{}\"\ncredential_env = \"{CREDENTIAL_ENV}\"\n",
            self.uri
        )
    }

    /// `floe local run --config floe.toml` with this catalog, the warehouse (leases,
    /// data files) in `warehouse`.
    async fn run(&self, input: &Path, warehouse: &Path) -> floe_cli::local::LocalReport {
        self.run_with(input, warehouse, "").await
    }

    /// [`Self::run`], `defaults` added to the `[defaults]` section.
    async fn run_with(&self, input: &Path, warehouse: &Path, defaults: &str) -> floe_cli::local::LocalReport {
        set_credential();
        let file = warehouse.parent().unwrap().join(format!("{}.toml", warehouse.file_name().unwrap().display()));
        let toml = self.config_toml().replacen("enabled = true\n", &format!("enabled = true\n{defaults}"), 1);
        std::fs::write(&file, toml).unwrap();
        let config = FloeConfig::from_file(&file).unwrap();
        let report = floe_cli::local::run_local(input, warehouse, config).await.unwrap();
        assert!(report.failed.is_empty(), "{:?}", report.failed);
        report
    }

    pub(crate) async fn catalog(&self) -> std::sync::Arc<RestCatalog> {
        set_credential();
        let Some(CatalogConfig::Rest(rest)) = FloeConfig::parse(&self.config_toml()).unwrap().catalog else {
            panic!("not a REST catalog")
        };
        RestCatalog::connect(&rest, RestHooks::default()).await.unwrap()
    }

    fn read(&self, table: &str) -> Read {
        pyiceberg(&["rest", &self.uri, CREDENTIAL, table])
    }

    /// A token from the server's token endpoint (OAuth2 client credentials).
    pub(crate) async fn token(&self) -> String {
        let (id, secret) = CREDENTIAL.split_once(':').unwrap();
        let form = [("grant_type", "client_credentials"), ("client_id", id), ("client_secret", secret)];
        let answer = json(reqwest::Client::new().post(format!("{}/v1/oauth/tokens", self.uri)).form(&form)).await;
        answer["access_token"].as_str().unwrap().to_string()
    }

    async fn tokens_given(&self) -> u64 {
        let answer = json(reqwest::Client::new().get(format!("{}/test/tokens", self.uri))).await;
        answer["tokens"].as_u64().unwrap()
    }

    /// loadTable, raw: its metadata.
    async fn load(&self, token: &str, table: &str) -> TableMetadata {
        let url = format!("{}/v1/namespaces/kafka/tables/{table}", self.uri);
        let answer = json(reqwest::Client::new().get(url).bearer_auth(token)).await;
        serde_json::from_value(answer["metadata"].clone()).unwrap()
    }
}

impl Drop for RestServer {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

fn set_credential() {
    // SAFETY: every test of this module sets this variable, which nothing else reads or
    // writes, to the same value; no test reads it while another writes a different one.
    unsafe { std::env::set_var(CREDENTIAL_ENV, CREDENTIAL) };
}

/// Two segments of `orders` partition 0 (offsets 0-99, 100-159) in a new input folder;
/// the second only with `both`.
fn orders_input(both: bool) -> tempfile::TempDir {
    let samples = support::root().join("examples/segments");
    let input = tempfile::tempdir().unwrap();
    copy(&samples, input.path(), "orders-0/00000000000000000000.log");
    if both {
        copy(&samples, input.path(), "orders-0/00000000000000000100.log");
    }
    input
}

/// Both segments of [`orders_input`] in the table, each record once, in `snapshots` snapshots.
fn assert_both_segments_once(read: &Read, snapshots: usize) {
    assert_eq!(read.offsets["0"], (0..160).collect::<Vec<_>>());
    assert_eq!((read.duplicates, read.snapshots), (0, snapshots));
}

fn warehouse_in(dir: &tempfile::TempDir, name: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::create_dir_all(&path).unwrap();
    path
}

#[tokio::test]
async fn floe_local_run_commits_through_a_rest_catalog_once() {
    let server = RestServer::start();
    let (input, dir) = (orders_input(false), tempfile::tempdir().unwrap());
    let warehouse = warehouse_in(&dir, "wh");
    let first = server.run(input.path(), &warehouse).await;
    assert_eq!(first.tables.iter().map(|t| t.snapshots).sum::<usize>(), 1, "{:?}", first.tables);
    // The client credentials were exchanged at the token endpoint; without a token the
    // server answers 401, which Floe names as a credential problem.
    assert!(server.tokens_given().await >= 1);
    let stranger = reqwest::get(format!("{}/v1/namespaces", server.uri)).await.unwrap();
    assert_eq!(stranger.status(), 401);

    let read = server.read("kafka.orders");
    assert_eq!(read.offsets["0"], (0..100).collect::<Vec<_>>());
    assert_eq!((read.duplicates, read.snapshots), (0, 1));
    assert_eq!(read.summary["floe.offsets.orders.0"], "0-99");
    // The table lives where the catalog put it, and the catalog lists it.
    let catalog = server.catalog().await;
    let listed = catalog.list("kafka").await.unwrap();
    assert_eq!(listed, vec![TableName { namespace: "kafka".into(), name: "orders".into() }]);

    // A rerun adds nothing; a new segment adds only itself.
    let again = server.run(input.path(), &warehouse).await;
    assert!(again.tables.iter().all(|t| t.snapshots == 0), "{:?}", again.tables);
    assert_eq!(server.read("kafka.orders").snapshots, 1);
    let more = orders_input(true);
    server.run(more.path(), &warehouse).await;
    assert_both_segments_once(&server.read("kafka.orders"), 2);
}

#[tokio::test]
async fn a_stale_assert_ref_snapshot_id_is_refused_with_409_and_floe_sees_a_conflict() {
    let server = RestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let warehouse = warehouse_in(&dir, "wh");
    server.run(orders_input(false).path(), &warehouse).await;
    let token = server.token().await;
    let base = server.load(&token, "orders").await;
    server.run(orders_input(true).path(), &warehouse).await;
    let now = server.load(&token, "orders").await;
    let (stale, current) = (base.current_snapshot_id().unwrap(), now.current_snapshot_id().unwrap());
    assert_ne!(stale, current);

    // Raw HTTP: the requirement on main's snapshot decides.
    let commit = |snapshot: i64| {
        let body = json!({
            "requirements": [
                {"type": "assert-table-uuid", "uuid": now.uuid().to_string()},
                {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": snapshot},
            ],
            "updates": [{"action": "set-properties", "updates": {"checked": snapshot.to_string()}}],
        });
        reqwest::Client::new()
            .post(format!("{}/v1/namespaces/kafka/tables/orders", server.uri))
            .bearer_auth(&token)
            .json(&body)
            .send()
    };
    let refused = commit(stale).await.unwrap();
    assert_eq!(refused.status(), 409);
    let text = refused.text().await.unwrap();
    assert!(text.contains("CommitFailedException"), "{text}");
    assert_eq!(commit(current).await.unwrap().status(), 200);

    // Floe's commit built on the old table: the catalog refuses it, Floe reads a conflict
    // (reload and replan). Nothing changed.
    let table = TableName { namespace: "kafka".into(), name: "orders".into() };
    let after = server.load(&token, "orders").await;
    let conflict = server.catalog().await.commit(&table, &base, &after).await.unwrap_err();
    assert!(conflict.is_conflict(), "{conflict}");
    // A swap from a pointer that moved is a conflict before anything is sent.
    let catalog = server.catalog().await;
    let pointer = catalog.current(&table).await.unwrap().unwrap();
    let mut stale_pointer = pointer.clone();
    stale_pointer.metadata_location.push_str(".old");
    let moved = catalog.swap(&table, &stale_pointer, &after, &pointer.metadata_location).await.unwrap_err();
    assert!(moved.is_conflict(), "{moved}");
    assert_both_segments_once(&server.read("kafka.orders"), 2);
}

#[tokio::test]
async fn racing_committers_through_a_rest_catalog_write_every_record_once() {
    // Two runs with their own lease stores (nothing fences them but the catalog) on the
    // same input, at the same time: the catalog's requirement check lets one commit
    // each segment; the other reloads, finds it committed, and adds nothing.
    let server = RestServer::start();
    let (input, dir) = (orders_input(true), tempfile::tempdir().unwrap());
    let (a, b) = (warehouse_in(&dir, "a"), warehouse_in(&dir, "b"));
    let (ra, rb) = tokio::join!(server.run(input.path(), &a), server.run(input.path(), &b));
    let snapshots: usize = ra.tables.iter().chain(&rb.tables).map(|t| t.snapshots).sum();
    assert!(snapshots >= 1, "{:?} {:?}", ra.tables, rb.tables);
    assert_both_segments_once(&server.read("kafka.orders"), snapshots);
    // Once more from each: nothing new.
    let (ra, rb) = tokio::join!(server.run(input.path(), &a), server.run(input.path(), &b));
    assert!(ra.tables.iter().chain(&rb.tables).all(|t| t.snapshots == 0));
}

/// `floe aws audit --config` with `[catalog] type = "rest"` reads the table through the
/// REST catalog (the built binary, credentials from the environment as floe.toml says):
/// every record once, exit 0; a table the catalog does not have cannot be audited, exit 2.
#[tokio::test]
async fn floe_aws_audit_with_config_reads_a_rest_catalogs_table() {
    let server = RestServer::start();
    let (input, dir) = (orders_input(true), tempfile::tempdir().unwrap());
    server.run(input.path(), &warehouse_in(&dir, "wh")).await;
    let config = dir.path().join("floe.toml");
    std::fs::write(&config, server.config_toml()).unwrap();
    let config = config.to_str().unwrap();
    let env = [(CREDENTIAL_ENV, CREDENTIAL)];

    let (code, out) = crate::s3tables::floe_aws(&["audit", "kafka.orders", "--json", "--config", config], &env);
    assert_eq!(code, Some(0), "{out}");
    let report: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!((&report["exactly_once"], &report["partitions"][0]["committed"]), (&json!(true), &json!("0-159")));
    assert_eq!(report["partitions"][0]["rows"], 160, "{report}");
    let (code, out) = crate::s3tables::floe_aws(&["audit", "kafka.nothing", "--config", config], &env);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("no table kafka.nothing"), "{out}");
}

/// Row retention through a REST catalog: the sample segment's records were written on
/// 2025-11-30. Under a ten-year `retention` the run's compaction keeps them all; under
/// 30 days the next run's removes every one (its files whole, unrewritten), and
/// `floe aws audit` explains each offset as expired.
#[tokio::test]
async fn rows_past_the_retention_are_removed_through_a_rest_catalog() {
    let server = RestServer::start();
    let (input, dir) = (orders_input(true), tempfile::tempdir().unwrap());
    let warehouse = warehouse_in(&dir, "wh");
    server.run_with(input.path(), &warehouse, "retention = \"3650d\"\n").await;
    assert_both_segments_once(&server.read("kafka.orders"), 1);

    let run = server.run_with(input.path(), &warehouse, "retention = \"30d\"\n").await;
    assert!(run.tables.iter().all(|t| t.snapshots == 0), "no segment committed again: {:?}", run.tables);
    let read = server.read("kafka.orders");
    assert_eq!((read.rows, read.operation.as_deref()), (0, Some("replace")));
    let config = dir.path().join("floe.toml");
    std::fs::write(&config, server.config_toml()).unwrap();
    let env = [(CREDENTIAL_ENV, CREDENTIAL)];
    let args = ["audit", "kafka.orders", "--json", "--config", config.to_str().unwrap()];
    let (code, out) = crate::s3tables::floe_aws(&args, &env);
    assert_eq!(code, Some(0), "{out}");
    let report: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    let gaps = report["partitions"][0]["gaps"].as_array().unwrap();
    assert_eq!(gaps.len(), 1, "{report}");
    assert_eq!((&gaps[0]["first"], &gaps[0]["last"], &gaps[0]["reason"]), (&json!(0), &json!(159), &json!("expired")));
}

/// An upsert table through a REST catalog: created with its key, each commit's position
/// deletes and key index committed with the data, shuffled segments resolved, PyIceberg
/// reading one row per live key.
#[tokio::test]
async fn an_upsert_table_through_a_rest_catalog_holds_each_key_s_latest_record() {
    let server = RestServer::start();
    let model = crate::upsert::model("accounts.json");
    let (input, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let warehouse = warehouse_in(&dir, "wh");
    let segments = crate::upsert::segments();
    for i in [4, 1, 0, 5, 2, 3] {
        copy(crate::upsert::data(), input.path(), &segments[i]);
        server.run_with(input.path(), &warehouse, "value_format = \"json\"\nmode = \"upsert\"\n").await;
    }
    let read = server.read("kafka.accounts");
    crate::upsert::assert_model(&read, &model, "through a REST catalog");
    let metadata = server.load(&server.token().await, "accounts").await;
    assert_eq!(metadata.properties()["floe.upsert-key"], r#"["_kafka.key"]"#);
}

/// Another engine's position deletes through a REST catalog (PyIceberg), a third of the
/// first file's rows: the next run's compaction rewrites that file without them, whatever
/// its size, and drops the delete file; the audit labels the offsets deleted.
#[tokio::test]
async fn compaction_applies_another_engine_s_deletes_through_a_rest_catalog() {
    another_engine_s_deletes_applied_through_a_rest_catalog("", "foreign_delete.py", "position").await;
}

/// The same with a deletion vector on a format v3 table (written as Spark writes it, by
/// tests/py/foreign_vector.py; the server's PyIceberg applies the commit): the table stays
/// v3 with its row lineage.
#[tokio::test]
async fn compaction_applies_a_deletion_vector_through_a_rest_catalog() {
    let server =
        another_engine_s_deletes_applied_through_a_rest_catalog("format_version = 3\n", "foreign_vector.py", "delete")
            .await;
    let metadata = server.load(&server.token().await, "orders").await;
    assert_eq!(metadata.format_version(), iceberg::spec::FormatVersion::V3);
    let (first, added) = metadata.current_snapshot().unwrap().row_range().unwrap();
    assert_eq!(first + added, metadata.next_row_id());
}

/// `script ACTION` (tests/py) deletes a third of the first file's rows of a table made with
/// `defaults`; then compaction rewrites the file without them and drops the delete file,
/// and the audit labels the offsets deleted.
async fn another_engine_s_deletes_applied_through_a_rest_catalog(
    defaults: &str,
    script: &str,
    action: &str,
) -> RestServer {
    let server = RestServer::start();
    let (input, dir) = (orders_input(false), tempfile::tempdir().unwrap());
    let warehouse = warehouse_in(&dir, "wh");
    server.run_with(input.path(), &warehouse, defaults).await;
    let rows: Vec<String> = (0..35).map(|o| format!("0/{o}")).collect();
    let mut args = vec![server.uri.as_str(), CREDENTIAL, "kafka.orders", action];
    args.extend(rows.iter().map(String::as_str));
    let out = std::process::Command::new(support::python())
        .arg(support::root().join("tests/py").join(script))
        .args(&args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{script}: {}", String::from_utf8_lossy(&out.stderr));
    let kept: Vec<i64> = (35..100).collect();
    assert_eq!(server.read("kafka.orders").offsets["0"], kept, "PyIceberg applies the deletes");

    let run = server.run_with(input.path(), &warehouse, defaults).await;
    let compacted: Vec<(usize, usize)> =
        run.compactions.iter().map(|c| (c.delete_files_applied, c.delete_files_dropped)).collect();
    assert_eq!(compacted, [(1, 1)], "{:?}", run.compactions);
    let read = server.read("kafka.orders");
    assert_eq!((&read.offsets["0"], read.operation.as_deref()), (&kept, Some("replace")));
    assert_eq!(read.summary.get("removed-delete-files").map(String::as_str), Some("1"));
    let config = dir.path().join("floe.toml");
    std::fs::write(&config, server.config_toml()).unwrap();
    let env = [(CREDENTIAL_ENV, CREDENTIAL)];
    let (code, out) =
        crate::s3tables::floe_aws(&["audit", "kafka.orders", "--json", "--config", config.to_str().unwrap()], &env);
    assert_eq!(code, Some(0), "{out}");
    let report: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    let gaps = &report["partitions"][0]["gaps"];
    assert_eq!(gaps, &json!([{"first": 0, "last": 34, "reason": "deleted"}]), "{report}");
    server
}

#[tokio::test]
async fn an_existing_table_s_new_files_go_under_its_own_location() {
    // A table made elsewhere (here: by Floe through another catalog) and registered with
    // a location that is not where this catalog would put a new table: Floe's new files
    // go under the table's own location, where the catalog's maintenance and Floe's sweep
    // and compaction look.
    let (before, server) = (RestServer::start(), RestServer::start());
    let dir = tempfile::tempdir().unwrap();
    before.run(orders_input(false).path(), &warehouse_in(&dir, "a")).await;
    let metadata = before.load(&before.token().await, "orders").await;
    let elsewhere = dir.path().join("elsewhere/orders");
    std::fs::create_dir_all(elsewhere.join("metadata")).unwrap();
    let mut moved = serde_json::to_value(&metadata).unwrap();
    moved["location"] = json!(elsewhere.display().to_string());
    let file = elsewhere.join(format!("metadata/00000-{}.metadata.json", metadata.uuid()));
    std::fs::write(&file, moved.to_string()).unwrap();
    let table = TableName { namespace: "kafka".into(), name: "orders".into() };
    server.catalog().await.create(&table, &metadata, &file.display().to_string()).await.unwrap();

    server.run(orders_input(true).path(), &warehouse_in(&dir, "b")).await;
    assert_both_segments_once(&server.read("kafka.orders"), 2);
    let new_files: Vec<_> = walk(&elsewhere).into_iter().filter(|p| p.ends_with(".parquet")).collect();
    assert_eq!(new_files.len(), 1, "{new_files:?}");
    assert!(new_files[0].contains("/data/"), "{new_files:?}");
}

/// A request's answer, as JSON.
async fn json(request: reqwest::RequestBuilder) -> Value {
    request.send().await.unwrap().json().await.unwrap()
}

/// The S3 requests moto served under `prefix` (`/bucket/key prefix`): who signed each
/// (access key id), the operation and the path.
async fn signed(prefix: &str) -> Vec<(String, String, String)> {
    let url = format!("{}/_floe/signed?prefix={prefix}", support::moto().endpoint);
    serde_json::from_value(json(reqwest::Client::new().get(url)).await).unwrap()
}

#[tokio::test]
async fn a_table_s_files_are_read_and_written_with_the_credentials_the_catalog_vends() {
    // The catalog keeps its tables in this bucket and vends a fresh key ("vended-<n>") with
    // each table it answers; its own key ("rest-catalog") writes its metadata files. The
    // test process's own credentials are neither: a file Floe read or wrote with them
    // would be signed by another key (or not reach moto at all).
    let bucket = "rest-vended";
    support::s3_client().await.create_bucket().bucket(bucket).send().await.unwrap();
    let server = RestServer::vending(bucket);
    let dir = tempfile::tempdir().unwrap();
    let warehouse = warehouse_in(&dir, "wh");
    let first = server.run(orders_input(false).path(), &warehouse).await;
    assert_eq!(first.tables.iter().map(|t| t.snapshots).sum::<usize>(), 1, "{:?}", first.tables);
    let again = server.run(orders_input(false).path(), &warehouse).await;
    assert!(again.tables.iter().all(|t| t.snapshots == 0), "{:?}", again.tables);
    server.run(orders_input(true).path(), &warehouse).await;
    // PyIceberg's REST client, with the credentials the catalog vends to it, reads each record once.
    assert_both_segments_once(&server.read("kafka.orders"), 2);
    let token = server.token().await;
    let location = server.load(&token, "orders").await.location().replace("s3://", "/");
    let location = format!("{}/", location.trim_end_matches('/'));
    assert!(location.starts_with(&format!("/{bucket}/rest/")), "{location}");

    // `floe local compact` 15 minutes later compacts the two small files into one; days
    // later its orphan sweep deletes a stray file (put there with the test's own key).
    let s3 = support::s3_client().await;
    let stray = format!("{}data/stray.parquet", &location[bucket.len() + 2..]);
    s3.put_object().bucket(bucket).key(&stray).body(b"stray".to_vec().into()).send().await.unwrap();
    let config = FloeConfig::parse(&server.config_toml()).unwrap();
    let compact = async |by_ms: i64| {
        let clock = floe_core::lock::Clock::Shifted { by_ms };
        // Boxed: the compaction's future is too large for a test thread's stack in debug builds.
        Box::pin(floe_cli::compact::compact(&warehouse, config.clone(), clock, Vec::new())).await.unwrap().remove(0)
    };
    let compacted = compact(15 * 60 * 1000).await;
    assert_eq!((compacted.files_in, compacted.files_out, compacted.committed), (2, 1, 1), "{compacted:?}");
    let swept = compact(30 * 24 * 3600 * 1000).await;
    assert!(swept.orphans_removed >= 1, "{swept:?}");
    assert!(s3.head_object().bucket(bucket).key(&stray).send().await.is_err(), "the stray file is still there");
    let read = server.read("kafka.orders");
    assert_eq!((read.offsets["0"].len(), read.duplicates), (160, 0));

    let mut requests = signed(&format!("/{bucket}/")).await;
    requests
        .retain(|(key, operation, path)| operation != "CreateBucket" && !(key == "testing" && path.ends_with(&stray)));
    for (key, operation, path) in &requests {
        // The sweep's deletes, bucket requests, with vended keys.
        if operation == "DeleteObjects" {
            assert!(key.starts_with("vended-"), "{operation} {path} signed by {key}");
            continue;
        }
        // Everything else in the bucket is under the table's location, as the catalog gave it.
        assert!(path.starts_with(&location), "{operation} {path} is outside {location}");
        // Every file of the table was read and written with vended keys; the catalog's own
        // key read, and wrote only its own metadata files.
        let reads = ["GetObject", "HeadObject", "ListObjects"].contains(&operation.as_str());
        let catalog_own = key == "rest-catalog" && (reads || path.ends_with(".metadata.json"));
        assert!(key.starts_with("vended-") || catalog_own, "{operation} {path} signed by {key}");
    }
    // Objects written: one PutObject, or a multipart upload completed.
    let puts = |suffix: &str, vended: bool| {
        let written = |op: &String| op == "PutObject" || op == "CompleteMultipartUpload";
        requests
            .iter()
            .filter(|(k, op, p)| written(op) && p.ends_with(suffix) && k.starts_with("vended-") == vended)
            .count()
    };
    // Floe's data files (the compacted one too), manifests and manifest lists of the three
    // commits, with vended keys.
    assert!(puts(".parquet", true) >= 3, "{requests:?}");
    assert!(puts(".avro", true) >= 6, "{requests:?}");
    // Floe wrote one metadata file, the table's first (registered); for each commit the
    // catalog wrote its own, and Floe none that would stay unreferenced.
    assert_eq!((puts(".metadata.json", true), puts(".metadata.json", false)), (1, 3), "{requests:?}");
    // Floe's reads of the table (its metadata, manifests) were signed with vended keys too.
    assert!(requests.iter().any(|(k, op, p)| k.starts_with("vended-") && op == "GetObject" && p.ends_with(".avro")));
    // Nothing of the table landed in Floe's own warehouse folder (its leases database only).
    let local: Vec<_> = walk(&warehouse).into_iter().filter(|p| !p.contains("catalog.db")).collect();
    assert!(local.is_empty(), "{local:?}");
}

fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path.display().to_string());
        }
    }
    out
}

/// Every data file the table's current snapshot reads lies under the table's location.
fn assert_files_under_location(read: &Read) {
    let location = format!("{}/", read.location.trim_end_matches('/'));
    let plain = |p: &str| p.strip_prefix("file://").unwrap_or(p).to_string();
    assert!(!read.files.is_empty());
    for file in &read.files {
        assert!(plain(file).starts_with(&plain(&location)), "{file} is outside {location}");
    }
}

#[tokio::test]
async fn a_catalog_giving_each_create_a_new_location_gets_every_file_under_the_table_s() {
    // Each segment of the first run asks where a new table's files go before the table
    // exists, and this catalog answers each time elsewhere (as BigLake's does): the
    // table is made where the first task's files are, and the other's are copied under it.
    let server = RestServer::start_with(&["--location-per-create"]);
    let dir = tempfile::tempdir().unwrap();
    let warehouse = warehouse_in(&dir, "wh");
    server.run(orders_input(true).path(), &warehouse).await;
    let read = server.read("kafka.orders");
    assert_both_segments_once(&read, 1);
    assert_files_under_location(&read);
    // An existing table's new files go under its location straight away.
    let more = orders_input(true);
    copy(&support::root().join("examples/segments"), more.path(), "orders-1/00000000000000000000.log");
    server.run(more.path(), &warehouse).await;
    let read = server.read("kafka.orders");
    assert_eq!((read.offsets["0"].len(), &read.offsets["1"], read.duplicates), (160, &(0..80).collect(), 0));
    assert_files_under_location(&read);
}

#[tokio::test]
async fn a_catalog_without_staged_create_or_register_gets_a_plain_create_then_the_commit() {
    let server = RestServer::start_with(&["--no-stage-create"]);
    let dir = tempfile::tempdir().unwrap();
    let warehouse = warehouse_in(&dir, "wh");
    server.run(orders_input(false).path(), &warehouse).await;
    server.run(orders_input(true).path(), &warehouse).await;
    let read = server.read("kafka.orders");
    assert_both_segments_once(&read, 2);
    assert_files_under_location(&read);
}

#[tokio::test]
async fn tokens_ended_early_are_fetched_again_and_refused_commits_are_replanned() {
    // Tokens without `expires_in` that the server ends after 4 requests, and every
    // second commit refused (409): a 401 fetches a new token once and sends again.
    let server = RestServer::start_with(&["--token-uses", "4", "--conflict-every", "2"]);
    let dir = tempfile::tempdir().unwrap();
    let warehouse = warehouse_in(&dir, "wh");
    server.run(orders_input(false).path(), &warehouse).await;
    server.run(orders_input(true).path(), &warehouse).await;
    assert_both_segments_once(&server.read("kafka.orders"), 2);
    assert!(server.tokens_given().await >= 3, "{}", server.tokens_given().await);
}

#[tokio::test]
async fn a_commit_applied_then_answered_500_is_checked_and_found_committed() {
    // Every commit is applied, then answered 500: Floe loads the table again, finds its
    // snapshot there, and counts the commit done (not a failure, not a second commit).
    let server = RestServer::start_with(&["--apply-then-500", "1"]);
    let dir = tempfile::tempdir().unwrap();
    let warehouse = warehouse_in(&dir, "wh");
    let first = server.run(orders_input(false).path(), &warehouse).await;
    assert_eq!(first.tables.iter().map(|t| t.snapshots).sum::<usize>(), 1, "{:?}", first.tables);
    server.run(orders_input(true).path(), &warehouse).await;
    assert_both_segments_once(&server.read("kafka.orders"), 2);
}

#[tokio::test]
async fn status_and_the_run_s_catalog_line_name_the_rest_catalog() {
    let server = RestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let warehouse = warehouse_in(&dir, "wh");
    set_credential();
    let file = dir.path().join("floe.toml");
    std::fs::write(&file, server.config_toml()).unwrap();
    let config = FloeConfig::from_file(&file).unwrap();
    let mut out = Vec::new();
    floe_cli::local::run(orders_input(false).path(), &warehouse, config.clone(), &mut out).await.unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains(&format!("catalog: {} (REST)", server.uri)), "{out}");
    assert!(!out.contains("SQLite"), "{out}");
    let status = floe_cli::local::status_in(&warehouse, &config).await.unwrap();
    let tables: Vec<_> = status.iter().map(|t| t.table.as_str()).collect();
    assert_eq!(tables, ["kafka.orders"]);
    let shown = serde_json::to_value(&status[0]).unwrap();
    assert_eq!((&shown["state"], &shown["snapshots"]), (&json!("running"), &json!(1)), "{shown}");
}

#[tokio::test]
async fn the_sweep_keeps_the_files_of_a_table_renamed_away_from_the_location_floe_reuses() {
    // `kafka.orders` renamed to `kafka.orders_2025` in the catalog; Floe's next run makes a
    // new `kafka.orders`, which this name-based catalog places at the same location. Days
    // later, compaction's sweep of the new table must leave the renamed one whole.
    let server = RestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let warehouse = warehouse_in(&dir, "wh");
    server.run(orders_input(false).path(), &warehouse).await;
    let token = server.token().await;
    let rename = json!({
        "source": {"namespace": ["kafka"], "name": "orders"},
        "destination": {"namespace": ["kafka"], "name": "orders_2025"},
    });
    let url = format!("{}/v1/tables/rename", server.uri);
    let answer = reqwest::Client::new().post(url).bearer_auth(&token).json(&rename).send().await.unwrap();
    assert!(answer.status().is_success(), "{}", answer.text().await.unwrap());
    let renamed = server.read("kafka.orders_2025");
    assert_eq!(renamed.offsets["0"], (0..100).collect::<Vec<_>>());

    server.run(orders_input(true).path(), &warehouse).await;
    let (old, new) = (server.load(&token, "orders_2025").await, server.load(&token, "orders").await);
    assert_eq!(old.location(), new.location(), "the two tables share a location");
    let config = FloeConfig::parse(&server.config_toml()).unwrap();
    for by_ms in [15 * 60 * 1000, 30 * 24 * 3600 * 1000] {
        let clock = floe_core::lock::Clock::Shifted { by_ms };
        Box::pin(floe_cli::compact::compact(&warehouse, config.clone(), clock, Vec::new())).await.unwrap();
    }
    assert_eq!(server.read("kafka.orders_2025"), renamed);
    let new = server.read("kafka.orders");
    assert_eq!((new.offsets["0"].len(), new.duplicates), (160, 0));
}
