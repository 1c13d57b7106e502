//! The materializer Lambda's handler against moto: segments uploaded to a bucket whose
//! notifications go to SQS, the notifications moto delivers handed to the handler,
//! Parquet objects in the warehouse bucket judged by pyarrow, CommitTasks in a FIFO queue.

use std::path::Path;
use std::sync::Arc;

use aws_sdk_sqs::types::QueueAttributeName;
use floe_aws::lambda::{MaterializerEnv, handle_materializer_event, materializer};
use floe_aws::sqs::{SqsTaskQueue, task_from_message};
use floe_core::materializer::{Materializer, ObjectRef};
use floe_core::queue::TaskQueue;
use floe_core::retry::Retryable;
use floe_core::task::{CommitTask, Task};
use serde_json::Value;

use crate::convert::judge;
use crate::support::{self, Case, cases};

/// The shared buckets and task queue, and a queue the segments bucket notifies.
struct Aws {
    base: support::AwsBase,
    notifications: String,
    /// The lock table, where the materializer holds its tasks' files.
    locks: String,
}

impl std::ops::Deref for Aws {
    type Target = support::AwsBase;
    fn deref(&self) -> &support::AwsBase {
        &self.base
    }
}

async fn setup(name: &str) -> Aws {
    let base = support::aws_base(name).await;
    let sqs = &base.sqs;
    let notifications =
        sqs.create_queue().queue_name(format!("{name}-notifications")).send().await.unwrap().queue_url.unwrap();
    let arn = sqs
        .get_queue_attributes()
        .queue_url(&notifications)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap()[&QueueAttributeName::QueueArn]
        .clone();
    use aws_sdk_s3::types::{Event, NotificationConfiguration, QueueConfiguration};
    let queue_config = QueueConfiguration::builder().queue_arn(arn).events(Event::S3ObjectCreated).build().unwrap();
    base.s3
        .put_bucket_notification_configuration()
        .bucket(&base.segments)
        .notification_configuration(NotificationConfiguration::builder().queue_configurations(queue_config).build())
        .send()
        .await
        .unwrap();
    // Configuring the notification sends an s3:TestEvent; start from an empty queue.
    let _ = receive_all(sqs, &notifications).await;
    let locks = format!("{name}-leases");
    crate::committer::create_lease_table(&base.config, &locks).await;
    Aws { base, notifications, locks }
}

impl Aws {
    /// The materializer as the Lambda builds it at init, on the moto endpoint.
    async fn materializer(&self, config: Option<&str>) -> Materializer {
        let env = MaterializerEnv {
            config: config.map(str::to_string),
            warehouse: format!("s3://{}/warehouse", self.warehouse),
            task_queue_url: self.tasks.clone(),
            lock_table: self.locks.clone(),
            s3_path_style: true,
        };
        materializer(&support::aws_config().await, &env).await.unwrap()
    }

    async fn upload(&self, dir: &Path, key: &str) {
        let body = std::fs::read(dir.join(key)).unwrap();
        self.s3.put_object().bucket(&self.segments).key(key).body(body.into()).send().await.unwrap();
    }

    async fn notifications(&self) -> Vec<Value> {
        let bodies = receive_all(&self.sqs, &self.notifications).await;
        bodies.iter().map(|b| serde_json::from_str(b).unwrap()).collect()
    }

    async fn tasks(&self) -> Vec<CommitTask> {
        let mut tasks = Vec::new();
        for body in receive_all(&self.sqs, &self.tasks).await {
            match task_from_message(&self.s3, &body).await.unwrap() {
                Task::Data(task) => tasks.push(*task),
                other => panic!("a data task expected: {other:?}"),
            }
        }
        tasks
    }

    async fn warehouse_keys(&self) -> Vec<(String, Option<String>)> {
        let listed = self.s3.list_objects_v2().bucket(&self.warehouse).send().await.unwrap();
        let mut keys: Vec<_> =
            listed.contents().iter().map(|o| (o.key().unwrap().to_string(), o.e_tag().map(str::to_string))).collect();
        keys.sort();
        keys
    }

    /// Downloads the task's data files; pyarrow must read them back as `case`'s records.
    async fn judge_files(&self, task: &CommitTask, case: &Case) {
        let dir = tempfile::tempdir().unwrap();
        let mut paths = Vec::new();
        for (i, file) in task.data_files.iter().enumerate() {
            let (bucket, key) = floe_core::storage::split_s3_uri(file.path()).unwrap();
            let body = self.s3.get_object().bucket(bucket).key(key).send().await.unwrap().body.collect().await;
            // Named as in S3 (its codec is in its name), numbered (names may repeat).
            let path = dir.path().join(format!("{i}-{}", key.rsplit('/').next().unwrap()));
            std::fs::write(&path, body.unwrap().into_bytes()).unwrap();
            paths.push(path.display().to_string());
        }
        judge(&case.expected, &paths.iter().map(String::as_str).collect::<Vec<_>>(), false);
    }
}

/// Receives and deletes every message now in the queue.
async fn receive_all(sqs: &aws_sdk_sqs::Client, queue: &str) -> Vec<String> {
    let mut bodies = Vec::new();
    loop {
        let got = sqs.receive_message().queue_url(queue).max_number_of_messages(10).send().await.unwrap();
        let messages = got.messages.unwrap_or_default();
        if messages.is_empty() {
            return bodies;
        }
        for m in messages {
            bodies.push(m.body.clone().unwrap());
            sqs.delete_message().queue_url(queue).receipt_handle(m.receipt_handle.unwrap()).send().await.unwrap();
        }
    }
}

fn case(name: &str) -> Case {
    cases().into_iter().find(|c| c.name == name).unwrap()
}

/// Lays `case`'s segment out as Aiven's plugin uploads it; returns the keys by extension.
fn tiered_layout(case: &Case, out: &Path, extra: &[&str]) -> serde_json::Map<String, Value> {
    let (first, last) = (case.summary["first_offset"].to_string(), case.summary["last_offset"].to_string());
    let mut cmd = std::process::Command::new(support::python());
    cmd.arg(support::root().join("tests/py/make_tiered.py")).arg(&case.log).arg(out);
    cmd.args(["--topic", "floe-test.events", "--partition", "0", "--start", &first, "--end", &last]);
    if let Some(txn) = &case.txn_index {
        cmd.arg("--txnindex").arg(txn);
    }
    let output = cmd.args(extra).output().unwrap();
    assert!(output.status.success(), "make_tiered.py: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

#[tokio::test]
async fn tiered_segment_becomes_parquet_and_one_task_even_when_delivered_twice() {
    let aws = setup("tiered").await;
    let case = case("txn_with_index");
    let dir = tempfile::tempdir().unwrap();
    let keys = tiered_layout(&case, dir.path(), &["--compress", "--chunk", "700"]);
    // The plugin's order: the log, the indexes, the manifest last.
    for ext in ["log", "indexes", "rsm-manifest"] {
        aws.upload(dir.path(), keys[ext].as_str().unwrap()).await;
    }
    let events = aws.notifications().await;
    assert_eq!(events.len(), 3, "one notification per object");

    let materializer = aws.materializer(None).await;
    let mut queued = Vec::new();
    let mut ignored = Vec::new();
    for event in &events {
        let response = handle_materializer_event(&materializer, event.clone()).await.unwrap();
        queued.extend(response.queued);
        ignored.extend(response.ignored);
    }
    assert_eq!(queued.len(), 1, "only the manifest triggers: {ignored:?}");
    assert_eq!(ignored.len(), 2, "{ignored:?}");
    assert!(ignored.iter().any(|i| i.contains(".log: a tiered-storage .log is materialized when its .rsm-manifest")));

    let tasks = aws.tasks().await;
    assert_eq!(tasks.len(), 1);
    let task = &tasks[0];
    assert_eq!(task.task_id, queued[0]);
    assert_eq!((task.table.namespace.as_str(), task.table.name.as_str()), ("kafka", "floe_test_events"));
    assert_eq!(task.partition, 0);
    let offsets = task.offsets.unwrap();
    assert_eq!(offsets.first, case.summary["first_offset"].as_i64().unwrap());
    assert_eq!(offsets.last, case.summary["last_offset"].as_i64().unwrap());
    assert_eq!(task.record_count, case.summary["records"].as_u64().unwrap());
    assert_eq!(task.source.segment_id.as_deref(), Some("tqimKeZwStOEOwRzT3L5oQ"));
    assert_eq!(task.open_transactions.len(), 1);
    let open = &task.open_transactions[0];
    assert_eq!(open.records, case.summary["open_records"].as_u64().unwrap());
    assert_eq!(open.files.iter().map(|f| f.record_count).sum::<u64>(), open.records);
    let markers: Vec<floe_core::segment::TxnMarker> = serde_json::from_value(case.summary["markers"].clone()).unwrap();
    assert_eq!(task.transaction_markers, markers);
    assert!(
        task.data_files.iter().all(|f| f.path().starts_with(&format!("s3://{}/warehouse/kafka.db/", aws.warehouse)))
    );
    aws.judge_files(task, &case).await;

    // The same event again (a retry, or S3 delivering twice): the same task id, files of
    // its own; every object written before is still there, byte for byte (same ETag), so
    // a file the table may already reference is never written over.
    let before = aws.warehouse_keys().await;
    let manifest_event = events.iter().find(|e| e.to_string().contains("rsm-manifest")).unwrap();
    let again = handle_materializer_event(&materializer, manifest_event.clone()).await.unwrap();
    assert_eq!(again.queued, queued, "same task id");
    let after = aws.warehouse_keys().await;
    assert!(before.iter().all(|k| after.contains(k)), "an object written over: {before:?} → {after:?}");
    assert_eq!(after.len(), 2 * before.len(), "the retry's own files beside the first ones");
    assert!(aws.tasks().await.is_empty(), "the FIFO queue dropped the duplicate");
}

#[tokio::test]
async fn broker_log_dir_copy_from_an_eventbridge_event() {
    let aws = setup("logdir").await;
    let case = case("v2_large");
    let key = "copies/broker-1/floe-test.events-0/00000000000000000000.log";
    aws.s3
        .put_object()
        .bucket(&aws.segments)
        .key(key)
        .body(std::fs::read(&case.log).unwrap().into())
        .send()
        .await
        .unwrap();
    let mut event: Value = serde_json::from_str(
        &std::fs::read_to_string(support::root().join("events/eventbridge-object-created.json")).unwrap(),
    )
    .unwrap();
    event["detail"]["bucket"]["name"] = aws.segments.clone().into();
    event["detail"]["object"]["key"] = key.into();
    // A small multipart part size is not configurable from outside; 3000 records make a
    // few hundred KiB, so this exercises the single-PUT path; the multipart path is in
    // the benchmark and in `multipart_upload_of_a_large_file`.
    let materializer = aws.materializer(None).await;
    let response = handle_materializer_event(&materializer, event).await.unwrap();
    assert_eq!(response.queued.len(), 1);
    let tasks = aws.tasks().await;
    assert_eq!(tasks[0].record_count, 3000);
    assert_eq!(tasks[0].source.layout, floe_core::segment::SegmentLayout::BrokerLogDir);
    aws.judge_files(&tasks[0], &case).await;
}

#[tokio::test]
async fn encrypted_and_corrupt_segments_fail_with_the_reason_and_queue_nothing() {
    let aws = setup("badsegments").await;
    let dir = tempfile::tempdir().unwrap();
    let keys = tiered_layout(&case("v2_none"), dir.path(), &["--encrypt"]);
    for ext in ["log", "indexes", "rsm-manifest"] {
        aws.upload(dir.path(), keys[ext].as_str().unwrap()).await;
    }
    let materializer = aws.materializer(None).await;
    let mut failures = Vec::new();
    for event in aws.notifications().await {
        if let Err(failure) = handle_materializer_event(&materializer, event).await {
            failures.push(failure);
        }
    }
    assert_eq!(failures.len(), 1);
    assert!(!failures[0].retryable);
    assert!(
        failures[0].to_string().contains("encrypted tiered-storage segments are not supported yet"),
        "{}",
        failures[0]
    );

    // A broker segment with a flipped byte: the error names the file and the batch.
    let mut bytes = std::fs::read(case("v2_none").log).unwrap();
    bytes[70] ^= 0x55;
    let key = "logs/floe-test.events-0/00000000000000000000.log";
    aws.s3.put_object().bucket(&aws.segments).key(key).body(bytes.into()).send().await.unwrap();
    let events = aws.notifications().await;
    let failure = handle_materializer_event(&materializer, events[0].clone()).await.unwrap_err();
    assert!(!failure.retryable);
    let message = failure.to_string();
    assert!(message.contains(&format!("s3://{}/{key}", aws.segments)) && message.contains("byte 0"), "{message}");
    assert!(aws.tasks().await.is_empty());
}

#[tokio::test]
async fn oversized_tasks_travel_through_s3() {
    let aws = setup("bigtask").await;
    let case = case("v2_none");
    let dir = tempfile::tempdir().unwrap();
    let keys = tiered_layout(&case, dir.path(), &[]);
    for ext in ["log", "indexes", "rsm-manifest"] {
        aws.upload(dir.path(), keys[ext].as_str().unwrap()).await;
    }
    let materializer = aws.materializer(None).await;
    for event in aws.notifications().await {
        handle_materializer_event(&materializer, event).await.unwrap();
    }
    let mut task = aws.tasks().await.remove(0);
    // Pad the task past SQS's limit with files (as a segment of many small files would).
    let file = task.data_files[0].clone();
    task.data_files = vec![file; 600];
    task.task_id.push_str("-big");
    assert!(task.to_json().unwrap().len() > floe_aws::sqs::MAX_INLINE_BYTES);
    let queue =
        SqsTaskQueue::new(aws.sqs.clone(), aws.s3.clone(), &aws.tasks, &format!("s3://{}/warehouse", aws.warehouse));
    queue.send(&Task::Data(Box::new(task.clone()))).await.unwrap();
    let received = aws.tasks().await;
    assert_eq!(received, vec![task]);
    assert!(aws.warehouse_keys().await.iter().any(|(k, _)| k.starts_with("warehouse/tasks/")));
}

#[tokio::test]
async fn multipart_upload_of_a_large_file() {
    let aws = setup("multipart").await;
    let file_io = floe_aws::s3::warehouse_file_io(aws.s3.clone());
    let location = format!("s3://{}/big/object.bin", aws.warehouse);
    let part = floe_aws::s3::MULTIPART_PART_BYTES;
    let data: Vec<u8> = (0..part * 2 + 12345).map(|i| (i % 251) as u8).collect();
    let mut writer = file_io.new_output(&location).unwrap().writer().await.unwrap();
    for piece in data.chunks(1 << 20) {
        writer.write(bytes::Bytes::copy_from_slice(piece)).await.unwrap();
    }
    writer.close().await.unwrap();
    let head = aws.s3.head_object().bucket(&aws.warehouse).key("big/object.bin").send().await.unwrap();
    assert!(head.e_tag().unwrap().contains("-3"), "a 3-part upload: {:?}", head.e_tag());
    let read = file_io.new_input(&location).unwrap().read().await.unwrap();
    assert_eq!(read.as_ref(), data.as_slice());
    let input = file_io.new_input(&location).unwrap();
    let range = input.reader().await.unwrap().read(100..200).await.unwrap();
    assert_eq!(range.as_ref(), &data[100..200]);
}

/// A part that fails to upload in the background (past the SDK's retries) fails the
/// write that follows it, or the close, and the upload is aborted: no object, no
/// upload left open.
#[tokio::test]
async fn a_part_failing_in_the_background_fails_the_file_and_aborts_its_upload() {
    use crate::fault_proxy::{Fault, FaultProxy};
    let aws = setup("multipart-fails").await;
    let proxy = FaultProxy::start(&support::moto().endpoint).await;
    let config = support::aws_config_at(&proxy.endpoint).await;
    let s3 = aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&config).force_path_style(true).build());
    let file_io = floe_aws::s3::warehouse_file_io(s3);
    let part = floe_aws::s3::MULTIPART_PART_BYTES;
    let piece = bytes::Bytes::from(vec![7u8; 1 << 20]);
    // Three parts' worth: the first part's failure is seen when the second is full;
    // one part and a tail: at the close.
    for (name, mib) in [("written", (3 * part) >> 20), ("closed", (part >> 20) + 1)] {
        proxy.fail_next(1000, "S3.PUT", Fault::ServerError);
        let location = format!("s3://{}/failing/{name}.bin", aws.warehouse);
        let mut writer = file_io.new_output(&location).unwrap().writer().await.unwrap();
        let mut failed = None;
        for _ in 0..mib {
            if let Err(e) = writer.write(piece.clone()).await {
                failed = Some(e);
                break;
            }
        }
        let failed = match failed {
            Some(e) => {
                assert_eq!(name, "written", "{e}");
                e
            }
            None => writer.close().await.unwrap_err(),
        };
        assert!(failed.to_string().contains("UploadPart"), "{name}: {failed}");
        proxy.clear();
        let listed = aws.s3.list_objects_v2().bucket(&aws.warehouse).prefix("failing/").send().await.unwrap();
        assert_eq!(listed.key_count(), Some(0), "{name}: {:?}", listed.contents());
        let open = aws.s3.list_multipart_uploads().bucket(&aws.warehouse).send().await.unwrap();
        assert!(open.uploads().is_empty(), "{name}: {:?}", open.uploads());
    }
    assert!(proxy.injected("S3.PUT") >= 2);
}

#[tokio::test]
async fn init_reads_the_config_from_s3_and_the_registry_password_from_secrets_manager() {
    let config = support::aws_config().await;
    let s3 = support::s3_client().await;
    s3.create_bucket().bucket("init-config").send().await.unwrap();
    let toml = "[defaults]\nenabled = true\nnamespace = \"from_s3\"\n";
    s3.put_object().bucket("init-config").key("floe.toml").body(toml.as_bytes().to_vec().into()).send().await.unwrap();
    let loaded = floe_aws::lambda::load_config(&s3, Some("s3://init-config/floe.toml")).await.unwrap();
    assert_eq!(loaded.resolve("orders").unwrap().namespace, "from_s3");
    let err = floe_aws::lambda::load_config(&s3, Some("s3://init-config/missing.toml")).await.unwrap_err();
    assert!(err.to_string().contains("s3://init-config/missing.toml"), "{err}");

    let secrets = aws_sdk_secretsmanager::Client::new(&config);
    let arn = secrets
        .create_secret()
        .name("floe/registry")
        .secret_string(r#"{"username": "floe", "password": "s3cr3t"}"#)
        .send()
        .await
        .unwrap()
        .arn
        .unwrap();
    let floe_toml =
        format!("[schema_registry]\nurl = \"http://127.0.0.1:1\"\nusername = \"floe\"\nsecret_arn = \"{arn}\"\n");
    let floe = floe_core::config::FloeConfig::parse(&floe_toml).unwrap();
    let password = floe_aws::lambda::registry_password(&secrets, &floe).await.unwrap();
    assert_eq!(password.as_deref(), Some("s3cr3t"));
    // A secret that does not exist: an init error naming it, not a panic.
    let missing = floe_toml.replace(&arn, "arn:aws:secretsmanager:us-east-1:123456789012:secret:nope");
    let err = floe_aws::lambda::registry_password(&secrets, &floe_core::config::FloeConfig::parse(&missing).unwrap())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("secret:nope"), "{err}");
}

/// A Glue endpoint that throttles every request (HTTP 400 `ThrottlingException`, as Glue
/// answers under load), on a free 127.0.0.1 port; served until the test ends.
async fn throttling_glue() -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                // Headers, then the body its Content-Length announces.
                loop {
                    let Ok(n) = stream.read(&mut buf).await else { return };
                    if n == 0 {
                        return;
                    }
                    request.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&request).to_ascii_lowercase();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text[..end]
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0)))
                            .unwrap_or(0usize);
                        if request.len() >= end + 4 + length {
                            break;
                        }
                    }
                }
                let body = r#"{"__type":"ThrottlingException","message":"Rate exceeded"}"#;
                let response = format!(
                    "HTTP/1.1 400 Bad Request\r\nContent-Type: application/x-amz-json-1.1\r\nx-amzn-ErrorType: ThrottlingException\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    endpoint
}

#[tokio::test]
async fn a_throttled_glue_on_the_table_lookup_is_retryable() {
    use floe_aws::glue::GlueCatalog;
    use floe_aws::lambda::MaterializerFailure;
    use floe_core::table::CatalogTables;
    let aws = setup("throttled").await;
    let case = case("v2_none");
    let key = "copies/broker-1/floe-test.events-0/00000000000000000000.log";
    let body = std::fs::read(&case.log).unwrap();
    aws.s3.put_object().bucket(&aws.segments).key(key).body(body.into()).send().await.unwrap();
    let glue_config =
        aws_sdk_glue::config::Builder::from(&support::aws_config().await).endpoint_url(throttling_glue().await).build();
    let tables = CatalogTables {
        catalog: Arc::new(GlueCatalog::new(aws_sdk_glue::Client::from_conf(glue_config))),
        file_io: floe_core::storage::local_file_io(),
        delta_log: Arc::new(floe_core::delta::LocalLogStore),
    };
    let materializer = Materializer { tables: Some(Arc::new(tables)), ..aws.materializer(None).await };
    let error = materializer.handle(&ObjectRef::new(&aws.segments, key)).await.unwrap_err();
    assert!(error.to_string().contains("Throttling"), "{error}");
    assert!(error.retryable(), "a throttled table lookup must be retried: {error}");
    assert_eq!(MaterializerFailure::from(error).error_type(), "Floe.Retryable");
    assert!(aws.tasks().await.is_empty(), "nothing queued");
}
