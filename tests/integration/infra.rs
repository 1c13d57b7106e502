//! The SAM template passes cfn-lint and `sam validate --lint` (offline), so `sam deploy`
//! does not fail on the template itself; each function's IAM is scoped to what it does;
//! the compactor runs alone on its schedule; the EventBridge rule invokes the
//! materializer only for the object that starts a segment (the rule as SAM translates it,
//! judged by moto's EventBridge pattern matcher); the task queue's timing follows AWS's
//! rule; the committer's concurrency is a parameter; every alarm notifies the topic
//! and watches a metric that is emitted.

use floe_core::segment::{ObjectKind, SegmentLayout, SegmentLocation};

use crate::support;

#[test]
fn sam_template_passes_cfn_lint() {
    let cfn_lint = support::python().parent().unwrap().join("cfn-lint");
    let out = std::process::Command::new(cfn_lint)
        .arg(support::root().join("infra/template.yaml"))
        .env("AWS_DEFAULT_REGION", "us-east-1")
        .output()
        .expect("cfn-lint from tests/py/requirements.txt");
    assert!(
        out.status.success(),
        "cfn-lint: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The functions the template builds are the workspace's binaries.
    let template = std::fs::read_to_string(support::root().join("infra/template.yaml")).unwrap();
    for binary in ["materializer", "committer", "compactor"] {
        assert!(template.contains(&format!("Binary: {binary}")));
        assert!(support::root().join("functions").join(binary).join("src/main.rs").exists());
    }
}

/// The template as cfn-lint reads it (`!Sub` → `{"Fn::Sub": …}`).
pub(crate) fn template() -> serde_json::Value {
    let script = "import json, sys\nfrom cfnlint.decode import decode\n\
                  template, matches = decode(sys.argv[1])\nassert not matches, matches\n\
                  print(json.dumps(template))";
    let out = std::process::Command::new(support::python())
        .args(["-c", script])
        .arg(support::root().join("infra/template.yaml"))
        .output()
        .expect("python with cfn-lint");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every policy statement of a function (those inside `!If` too), and the SAM policy
/// templates it uses by name.
fn statements(function: &serde_json::Value) -> (Vec<serde_json::Value>, Vec<String>) {
    let (mut statements, mut templates) = (Vec::new(), Vec::new());
    let mut policies: Vec<serde_json::Value> =
        function["Properties"]["Policies"].as_array().expect("Policies is a list").clone();
    while let Some(policy) = policies.pop() {
        if let Some(branches) = policy.get("Fn::If").and_then(|b| b.as_array()) {
            policies.extend(branches[1..].iter().cloned());
        } else if let Some(list) = policy.get("Statement").and_then(|s| s.as_array()) {
            statements.extend(list.iter().cloned());
        } else if let Some(object) = policy.as_object() {
            templates.extend(object.keys().filter(|k| *k != "Ref").cloned());
        }
    }
    (statements, templates)
}

fn actions(statement: &serde_json::Value) -> Vec<String> {
    match &statement["Action"] {
        serde_json::Value::String(a) => vec![a.clone()],
        serde_json::Value::Array(list) => list.iter().filter_map(|a| a.as_str().map(str::to_string)).collect(),
        other => panic!("Action {other}"),
    }
}

#[test]
fn iam_is_scoped_to_what_each_function_does() {
    let template = template();
    let resources = &template["Resources"];
    let held_index = format!("${{LockTable.Arn}}/index/{}", floe_aws::dynamodb::HELD_INDEX);
    for name in ["MaterializerFunction", "CommitterFunction", "CompactorFunction"] {
        let (statements, templates) = statements(&resources[name]);
        // No SAM template granting delete or bucket configuration on the warehouse.
        assert!(!templates.iter().any(|t| t.starts_with("S3") && t != "S3ReadPolicy"), "{name}: {templates:?}");
        for statement in &statements {
            let actions = actions(statement);
            assert_ne!(statement["Resource"], "*", "{name}: {statement}");
            assert!(
                !actions.iter().any(|a| a.starts_with("s3:PutBucket") || a.ends_with(":*")),
                "{name} configures no bucket, grants no wildcard: {statement}"
            );
            if actions.iter().any(|a| a.starts_with("s3:Delete")) {
                // The committer deletes old metadata files, the compactor orphans; both
                // under the warehouse prefix, nothing else.
                let scope = match name {
                    "CommitterFunction" => "${WarehouseBucket.Arn}/${WarehousePrefix}/*/metadata/*.metadata.json",
                    "CompactorFunction" => "${WarehouseBucket.Arn}/${WarehousePrefix}/*",
                    _ => panic!("{name} deletes nothing: {statement}"),
                };
                assert_eq!(statement["Resource"]["Fn::Sub"], scope, "{name}: {statement}");
            }
            if actions == ["glue:GetCatalog"] {
                // Glue's Iceberg REST endpoint (SigV4) reads the catalog itself.
                assert!(statement["Resource"].to_string().ends_with(":catalog\"}"), "{name}: {statement}");
            } else if actions.iter().any(|a| a.starts_with("glue:")) {
                let arns = statement["Resource"].to_string();
                for scope in [":catalog\"", ":database/${GlueDatabases}\"", ":table/${GlueDatabases}/*\""] {
                    assert!(arns.contains(scope), "{name}: glue on {scope}: {statement}");
                }
                assert!(!arns.contains("\"*\""), "{name}: {statement}");
            }
            if actions.iter().any(|a| a == "s3:PutObject") {
                assert_eq!(
                    statement["Resource"]["Fn::Sub"], "${WarehouseBucket.Arn}/${WarehousePrefix}/*",
                    "{name} writes only under the warehouse prefix"
                );
            }
            if actions.iter().any(|a| a == "s3:ListBucket") {
                let prefix = &statement["Condition"]["StringLike"]["s3:prefix"]["Fn::Sub"];
                assert_eq!(prefix, "${WarehousePrefix}/*", "{name} lists only the warehouse prefix: {statement}");
            }
            if actions.iter().any(|a| a.starts_with("dynamodb:")) {
                let lock_table = serde_json::json!({"Fn::GetAtt": ["LockTable", "Arn"]});
                let on = match &statement["Resource"] {
                    serde_json::Value::Array(list) => list.clone(),
                    one => vec![one.clone()],
                };
                assert!(
                    on.iter().all(|r| *r == lock_table || r["Fn::Sub"] == held_index.as_str()),
                    "{name}: the lock table and its index only: {statement}"
                );
            }
        }
    }
    // The functions read a floe.toml kept in another bucket (the committer its [catalog]).
    for name in ["MaterializerFunction", "CommitterFunction", "CompactorFunction"] {
        let (granted, _) = statements(&resources[name]);
        let config = granted.iter().find(|s| s["Resource"].to_string().contains("ConfigUri"));
        assert_eq!(config.map(actions), Some(vec!["s3:GetObject".to_string()]), "{name}: {granted:#?}");
    }
    // The compactor keeps the registry: tables (Scan), held tasks (the index, batches),
    // its record (UpdateItem); the committer's CRUD policy covers the same and the index.
    let (granted, _) = statements(&resources["CompactorFunction"]);
    let dynamodb: Vec<String> = granted.iter().flat_map(actions).filter(|a| a.starts_with("dynamodb:")).collect();
    for action in ["Scan", "Query", "GetItem", "UpdateItem", "BatchGetItem", "BatchWriteItem"] {
        assert!(dynamodb.contains(&format!("dynamodb:{action}")), "compactor: {action} in {dynamodb:?}");
    }
    assert!(statements(&resources["CommitterFunction"]).1.contains(&"DynamoDBCrudPolicy".to_string()));
}

#[test]
fn the_compactor_runs_alone_on_a_schedule_and_the_lock_table_has_its_index() {
    let template = template();
    let compactor = &template["Resources"]["CompactorFunction"]["Properties"];
    assert_eq!((&compactor["ReservedConcurrentExecutions"], &compactor["Timeout"]), (&1.into(), &900.into()));
    let schedule = &compactor["Events"]["Schedule"];
    assert_eq!(schedule["Type"], "Schedule");
    assert_eq!(schedule["Properties"]["Schedule"], serde_json::json!({"Ref": "CompactionSchedule"}));
    assert_eq!(template["Parameters"]["CompactionSchedule"]["Default"], "rate(5 minutes)");
    // A run never overlaps another, and a failed run waits for the next tick.
    assert_eq!(compactor["EventInvokeConfig"]["MaximumRetryAttempts"], 0);
    let env = &compactor["Environment"]["Variables"];
    for (var, resource) in [("FLOE_TASK_QUEUE_URL", "TaskQueue"), ("FLOE_CONFIG", "ConfigUri")] {
        assert_eq!(env[var], serde_json::json!({"Ref": resource}), "{var}");
    }
    // Every function keeps or reads the registry in the lock table.
    let global = &template["Globals"]["Function"]["Environment"]["Variables"];
    assert_eq!(global["FLOE_LOCK_TABLE"], serde_json::json!({"Ref": "LockTable"}));
    let (materializer, _) = statements(&template["Resources"]["MaterializerFunction"]);
    let holds: Vec<String> = materializer.iter().flat_map(actions).filter(|a| a.starts_with("dynamodb:")).collect();
    assert_eq!(
        holds,
        ["dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:BatchWriteItem", "dynamodb:UpdateItem"],
        "the materializer holds its tasks' files, records a table's configuration issue, and reads a Delta-only \
         topic's Iceberg record"
    );
    // The index DynamoDbLocks queries for held tasks.
    let lock_table = &template["Resources"]["LockTable"]["Properties"];
    let index = &lock_table["GlobalSecondaryIndexes"][0];
    assert_eq!(index["IndexName"], floe_aws::dynamodb::HELD_INDEX);
    assert_eq!(index["KeySchema"], serde_json::json!([{"AttributeName": "held_table", "KeyType": "HASH"}]));
    assert_eq!(index["Projection"]["ProjectionType"], "ALL");
    assert!(lock_table["AttributeDefinitions"].to_string().contains("held_table"));
}

/// The committer shortens the wait of the tasks it gives back for a retryable reason: it
/// knows its queue and may change its messages' visibility.
#[test]
fn the_committer_may_shorten_its_tasks_visibility() {
    let template = template();
    let committer = &template["Resources"]["CommitterFunction"];
    let env = &committer["Properties"]["Environment"]["Variables"];
    assert_eq!(env["FLOE_TASK_QUEUE_URL"], serde_json::json!({"Ref": "TaskQueue"}));
    let (statements, _) = statements(committer);
    let change = statements.iter().find(|s| actions(s) == ["sqs:ChangeMessageVisibility"]).expect("a statement");
    assert_eq!(change["Resource"], serde_json::json!({"Fn::GetAtt": ["TaskQueue", "Arn"]}));
}

/// The committer and the compactor know their own timeouts (the budget when an invocation's
/// deadline is not a real one, as under `cargo lambda watch`): the template's, which are
/// also the functions' defaults.
#[test]
fn the_functions_budget_is_their_timeout() {
    let template = template();
    for (function, default) in [
        ("CommitterFunction", floe_aws::lambda::COMMITTER_TIMEOUT_SECONDS),
        ("CompactorFunction", floe_aws::lambda::COMPACTOR_TIMEOUT_SECONDS),
    ] {
        let properties = &template["Resources"][function]["Properties"];
        let budget = &properties["Environment"]["Variables"]["FLOE_FUNCTION_TIMEOUT_SECONDS"];
        assert_eq!(budget.as_str(), Some(properties["Timeout"].to_string().as_str()), "{function}");
        assert_eq!(properties["Timeout"], default, "{function}");
    }
}

/// An object of the tiered-storage bucket: its key, the layout `SegmentLocation` reads it
/// as (`None`: a file no layout names, like `leader-epoch-checkpoint`), and whether its
/// upload starts a segment (the one event the materializer needs).
struct Sample {
    key: String,
    layout: Option<SegmentLayout>,
    starts: bool,
}

/// Every object of each layout as Kafka writes it: the plugin's upload and the broker
/// log dirs of examples/segments (a plugin prefix `tiered/`, and the same upload under
/// `other/`), the files a broker keeps beside its `.log`s, and a `LocalTieredStorage`
/// segment with the files `RemoteLogSegmentFileset` writes beside it.
fn samples() -> Vec<Sample> {
    let examples = support::root().join("examples/segments");
    let mut keys = Vec::new();
    let mut folders = vec![examples.clone()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else {
                keys.push(path.strip_prefix(&examples).unwrap().to_str().unwrap().to_string());
            }
        }
    }
    let plugin: Vec<String> = keys.iter().filter(|k| k.starts_with("tiered/")).cloned().collect();
    assert_eq!(plugin.len(), 3, "the plugin's .log, .indexes and .rsm-manifest: {keys:?}");
    keys.extend(plugin.iter().map(|k| k.replacen("tiered/", "other/", 1)));
    let broker = "orders-0/00000000000000000000";
    keys.extend(["index", "timeindex", "txnindex", "snapshot"].map(|ext| format!("{broker}.{ext}")));
    keys.extend(["leader-epoch-checkpoint", "partition.metadata"].map(|file| format!("orders-0/{file}")));
    let local = "kafka-remote/orders-3-Ab3defGhIjKlMnOpQrStUv/00000000000000000010-zz_-_abcdefghijklmnopq";
    keys.extend(
        ["log", "index", "timeindex", "txnindex", "snapshot", "leader_epoch_checkpoint"]
            .map(|ext| format!("{local}.{ext}")),
    );
    keys.into_iter()
        .map(|key| {
            let location = SegmentLocation::parse(&key);
            let starts = location.as_ref().is_some_and(|l| match l.layout {
                SegmentLayout::TieredStorage => l.kind == ObjectKind::Manifest,
                SegmentLayout::BrokerLogDir | SegmentLayout::LocalTieredStorage => l.kind == ObjectKind::Log,
            });
            Sample { layout: location.map(|l| l.layout), starts, key }
        })
        .collect()
}

/// For the given stack parameters: the materializer's rule, as SAM translates it, and
/// whether each object's (bucket, key) "Object Created" event matches it (EventBridge's
/// matcher as moto implements it: prefix, suffix, wildcard, anything-but, …).
fn rule_matches(parameters: &serde_json::Value, objects: &[(&str, &str)]) -> (serde_json::Value, Vec<bool>) {
    let out = std::process::Command::new(support::python())
        .arg(support::root().join("tests/py/segment_rule.py"))
        .arg(support::root().join("infra/template.yaml"))
        .arg(support::root().join("events/eventbridge-object-created.json"))
        .arg(parameters.to_string())
        .arg(serde_json::json!(objects).to_string())
        .envs(offline_aws())
        .output()
        .expect("python with aws-sam-cli and moto");
    assert!(out.status.success(), "segment_rule.py: {}", String::from_utf8_lossy(&out.stderr));
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let matched = answer["matched"].as_array().expect("one answer per object");
    assert_eq!(matched.len(), objects.len());
    (answer["pattern"].clone(), matched.iter().map(|m| m == true).collect())
}

/// Region, dummy credentials, no telemetry, no instance metadata, and every HTTP request
/// (SAM CLI's weekly version check) sent to a closed local port: AWS tooling offline.
fn offline_aws() -> [(&'static str, &'static str); 9] {
    [
        ("AWS_DEFAULT_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
        ("SAM_CLI_TELEMETRY", "0"),
        ("HTTPS_PROXY", "http://127.0.0.1:9"),
        ("HTTP_PROXY", "http://127.0.0.1:9"),
        ("https_proxy", "http://127.0.0.1:9"),
        ("http_proxy", "http://127.0.0.1:9"),
    ]
}

/// Only the upload that starts a segment invokes the materializer: the plugin's
/// `.rsm-manifest` (never its `.log` or `.indexes`), or the `.log` of `LocalTieredStorage`
/// and broker log-dir copies (never their indexes), under `SegmentPrefix`, in the
/// tiered-storage bucket.
#[test]
fn the_rule_invokes_the_materializer_only_for_a_segments_first_object() {
    let samples = samples();
    let bucket = "kafka-tiered";
    let plugin = [SegmentLayout::TieredStorage];
    let log_files = [SegmentLayout::BrokerLogDir, SegmentLayout::LocalTieredStorage];
    let cases = [
        (serde_json::json!({"SegmentPrefix": "tiered/"}), &plugin[..], "tiered/"),
        (serde_json::json!({"SegmentLayout": "tiered-storage"}), &plugin[..], ""),
        (serde_json::json!({"SegmentLayout": "log-files"}), &log_files[..], ""),
        (
            serde_json::json!({"SegmentLayout": "log-files", "SegmentPrefix": "kafka-remote/"}),
            &log_files[..],
            "kafka-remote/",
        ),
    ];
    for (mut parameters, layouts, prefix) in cases {
        parameters["TieredStorageBucket"] = bucket.into();
        // A bucket of log files holds no plugin uploads (the plugin's .log would trigger).
        let held: Vec<&Sample> =
            samples.iter().filter(|s| layouts == plugin || s.layout != Some(SegmentLayout::TieredStorage)).collect();
        // Each object in the tiered-storage bucket, and in another bucket (never Floe's).
        let objects: Vec<(&str, &str)> =
            ["another-bucket", bucket].iter().flat_map(|b| held.iter().map(move |s| (*b, s.key.as_str()))).collect();
        let (pattern, matched) = rule_matches(&parameters, &objects);
        for ((in_bucket, key), matched) in objects.iter().zip(matched) {
            let sample = held.iter().find(|s| s.key == *key).unwrap();
            let expected = *in_bucket == bucket
                && sample.starts
                && sample.layout.is_some_and(|l| layouts.contains(&l))
                && key.starts_with(prefix);
            assert_eq!(matched, expected, "s3://{in_bucket}/{key} with {parameters}: rule {pattern}");
        }
    }
    // The samples hold both kinds: objects that start segments, and ones that must not.
    assert!(samples.iter().filter(|s| s.starts).count() >= 4);
    assert!(samples.iter().any(|s| s.layout == Some(SegmentLayout::TieredStorage) && s.key.ends_with(".log")));
}

/// The task queue follows AWS's rule for a queue that feeds a function: its visibility
/// timeout is at least six times the committer's timeout. docs/lambdas.md says how often a
/// suspended table's kept tasks come back, and when they reach the dead-letter queue.
#[test]
fn the_task_queue_waits_six_committer_timeouts() {
    let template = template();
    let queue = &template["Resources"]["TaskQueue"]["Properties"];
    let visibility = queue["VisibilityTimeout"].as_u64().expect("VisibilityTimeout in seconds");
    let timeout = template["Resources"]["CommitterFunction"]["Properties"]["Timeout"].as_u64().unwrap();
    assert!(visibility >= 6 * timeout, "VisibilityTimeout {visibility} < 6 × the committer's Timeout {timeout}");
    let receives = queue["RedrivePolicy"]["maxReceiveCount"].as_u64().unwrap();
    let lambdas = std::fs::read_to_string(support::root().join("docs/lambdas.md")).unwrap();
    let documented = format!(
        "every {} minutes (the queue's\nvisibility timeout, {visibility} s); after {receives} receives (about {} hours",
        visibility / 60,
        receives * visibility / 3600
    );
    assert!(lambdas.contains(&documented), "docs/lambdas.md should say: {documented}");
}

/// The committer's reserved concurrency is the stack's `CommitterReservedConcurrency`,
/// one by default.
#[test]
fn the_committers_concurrency_is_a_parameter_of_one() {
    let template = template();
    let parameter = &template["Parameters"]["CommitterReservedConcurrency"];
    assert_eq!(
        (&parameter["Type"], &parameter["Default"], &parameter["MinValue"]),
        (&"Number".into(), &1.into(), &1.into())
    );
    let committer = &template["Resources"]["CommitterFunction"]["Properties"];
    assert_eq!(committer["ReservedConcurrentExecutions"], serde_json::json!({"Ref": "CommitterReservedConcurrency"}));
}

/// The tables a committer commits at once are the stack's `CommitConcurrency`, by
/// default the committer's own default.
#[test]
fn the_tables_committed_at_once_are_a_parameter() {
    let template = template();
    let parameter = &template["Parameters"]["CommitConcurrency"];
    let default = floe_core::committer::DEFAULT_CONCURRENCY;
    assert_eq!(
        (&parameter["Type"], &parameter["Default"], &parameter["MinValue"]),
        (&"Number".into(), &default.into(), &1.into())
    );
    let variables = &template["Resources"]["CommitterFunction"]["Properties"]["Environment"]["Variables"];
    assert_eq!(variables["FLOE_COMMIT_CONCURRENCY"], serde_json::json!({"Ref": "CommitConcurrency"}));
}

/// `sam validate --lint` (SAM CLI's own checks, cfn-lint with SAM's rules) passes on the
/// template, offline, and fails on a broken one.
#[test]
fn sam_validate_lint_passes() {
    let sam = |template: &std::path::Path| {
        std::process::Command::new(support::python().parent().unwrap().join("sam"))
            .args(["validate", "--lint", "--template"])
            .arg(template)
            .envs(offline_aws())
            .output()
            .expect("sam from tests/py/requirements.txt")
    };
    let out = sam(&support::root().join("infra/template.yaml"));
    let said = |out: &std::process::Output| {
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    };
    assert!(out.status.success(), "sam validate --lint: {}", said(&out));
    // The same template with the committer's timeout a string Lambda cannot take.
    let text = std::fs::read_to_string(support::root().join("infra/template.yaml")).unwrap();
    let broken_text = text.replacen("Timeout: 300", "Timeout: five minutes", 1);
    assert_ne!(broken_text, text);
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("template.yaml");
    std::fs::write(&broken, broken_text).unwrap();
    let out = sam(&broken);
    assert!(!out.status.success(), "sam validate --lint passed a broken template: {}", said(&out));
}

/// The metric an alarm watches: (namespace, name, dimensions), whether given directly or
/// as the one `MetricStat` of a metric-math alarm.
fn watched(alarm: &serde_json::Value) -> (String, String, Vec<(String, serde_json::Value)>) {
    let metric = match alarm.get("Metrics").and_then(|m| m.as_array()) {
        Some(queries) => {
            let stats: Vec<&serde_json::Value> =
                queries.iter().filter_map(|q| q.pointer("/MetricStat/Metric")).collect();
            assert_eq!(stats.len(), 1, "one metric under the math: {alarm}");
            stats[0].clone()
        }
        None => alarm.clone(),
    };
    let dimensions = metric["Dimensions"]
        .as_array()
        .map(|d| d.iter().map(|d| (d["Name"].as_str().unwrap().to_string(), d["Value"].clone())).collect())
        .unwrap_or_default();
    (metric["Namespace"].as_str().unwrap().to_string(), metric["MetricName"].as_str().unwrap().to_string(), dimensions)
}

/// Every alarm notifies the one topic (mailed to `AlarmEmail` when it is set), says what
/// to do, chooses how missing data counts, and watches a metric that exists: Floe's own
/// ones as `floe_core::metrics` declares them (name, emitting function, dimensions),
/// Lambda's errors and throttles of the template's functions, SQS's depth of its queues.
/// The stall alarm watches the metric the moto test sees a stalled committer set.
#[test]
fn every_alarm_notifies_the_topic_says_what_to_do_and_watches_an_emitted_metric() {
    use floe_core::metrics::{ALL, FUNCTION, STALLED_TASK_AGE};
    use serde_json::json;

    let template = template();
    let resources = template["Resources"].as_object().unwrap();
    assert_eq!(resources["AlarmTopic"]["Type"], "AWS::SNS::Topic");
    let subscription = &resources["AlarmEmailSubscription"];
    assert_eq!(subscription["Condition"], "HasAlarmEmail");
    assert_eq!(subscription["Properties"]["Endpoint"], json!({"Ref": "AlarmEmail"}));
    assert_eq!(template["Parameters"]["AlarmEmail"]["Default"], "");

    let mut watched_all = Vec::new();
    for (name, resource) in resources.iter().filter(|(_, r)| r["Type"] == "AWS::CloudWatch::Alarm") {
        let alarm = &resource["Properties"];
        assert_eq!(alarm["AlarmActions"], json!([{"Ref": "AlarmTopic"}]), "{name}");
        let description = alarm["AlarmDescription"].as_str().unwrap_or_default();
        assert!(description.split_whitespace().count() >= 15, "{name} says what to do: {description:?}");
        let missing = alarm["TreatMissingData"].as_str().unwrap_or_default();
        assert!(["breaching", "notBreaching", "ignore", "missing"].contains(&missing), "{name}: {missing:?}");
        let (namespace, metric, dimensions) = watched(alarm);
        match namespace.as_str() {
            "Floe" => {
                let declared = ALL.iter().find(|m| m.name == metric).unwrap_or_else(|| panic!("{name}: {metric}"));
                assert_eq!(dimensions, [(FUNCTION.to_string(), json!(declared.function))], "{name}: over tables");
            }
            "AWS/Lambda" => {
                assert!(["Errors", "Throttles"].contains(&metric.as_str()), "{name}: {metric}");
                let function = dimensions[0].1["Ref"].as_str().unwrap();
                assert_eq!(
                    (dimensions[0].0.as_str(), &resources[function]["Type"]),
                    ("FunctionName", &json!("AWS::Serverless::Function"))
                );
            }
            "AWS/SQS" => {
                assert_eq!(metric, "ApproximateNumberOfMessagesVisible", "{name}");
                let queue = dimensions[0].1["Fn::GetAtt"][0].as_str().unwrap();
                assert_eq!(
                    (dimensions[0].0.as_str(), &resources[queue]["Type"]),
                    ("QueueName", &json!("AWS::SQS::Queue"))
                );
            }
            other => panic!("{name}: namespace {other}"),
        }
        let subject = dimensions.first().map(|(_, v)| v.to_string()).unwrap_or_default();
        watched_all.push((metric, subject));
    }
    // What the issue asks to be loud about, each watched.
    let has = |metric: &str, subject: &str| watched_all.iter().any(|(m, s)| m == metric && s.contains(subject));
    for (metric, subject) in [
        // Floe's own delay, not the records' age: a backfill of history fires nothing.
        ("ProcessingDelay", "committer"),
        (STALLED_TASK_AGE.name, STALLED_TASK_AGE.function),
        ("SuspendedTables", "compactor"),
        ("ApproximateNumberOfMessagesVisible", "TaskDeadLetterQueue"),
        ("ApproximateNumberOfMessagesVisible", "MaterializerFailureQueue"),
    ] {
        assert!(has(metric, subject), "{metric} of {subject}: {watched_all:?}");
    }
    assert!(!watched_all.iter().any(|(m, _)| m == "FreshnessLag"), "the records' age is alarmed: {watched_all:?}");
    for function in ["MaterializerFunction", "CommitterFunction", "CompactorFunction"] {
        assert!(has("Errors", function) && has("Throttles", function), "{function}: {watched_all:?}");
    }

    // The compactor may read the task queue's message count (the stall metric's gate).
    let (granted, _) = statements(&template["Resources"]["CompactorFunction"]);
    let count = granted.iter().find(|s| actions(s).contains(&"sqs:GetQueueAttributes".to_string()));
    assert_eq!(count.map(|s| &s["Resource"]), Some(&json!({"Fn::GetAtt": ["TaskQueue", "Arn"]})));
}

/// The template for one set of stack parameters (the others at their defaults): each
/// `Fn::If` replaced by its branch, `AWS::NoValue` dropped, as CloudFormation does.
fn deployed(template: &serde_json::Value, parameters: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    fn value(template: &Value, parameters: &Value, v: &Value) -> Value {
        match v.get("Ref").and_then(Value::as_str) {
            Some(name) => parameters.get(name).cloned().unwrap_or_else(|| {
                let default = &template["Parameters"][name]["Default"];
                assert!(!default.is_null(), "parameter {name} has no default: set it");
                default.clone()
            }),
            None => v.clone(),
        }
    }
    fn holds(template: &Value, parameters: &Value, condition: &Value) -> bool {
        let (op, args) = condition.as_object().and_then(|o| o.iter().next()).expect("a condition function");
        let all = || args.as_array().unwrap().iter().map(|c| holds(template, parameters, c)).collect::<Vec<_>>();
        match op.as_str() {
            "Condition" => holds(template, parameters, &template["Conditions"][args.as_str().unwrap()]),
            "Fn::Equals" => value(template, parameters, &args[0]) == value(template, parameters, &args[1]),
            "Fn::Not" => !holds(template, parameters, &args[0]),
            "Fn::And" => all().iter().all(|b| *b),
            "Fn::Or" => all().iter().any(|b| *b),
            other => panic!("condition function {other}"),
        }
    }
    fn resolve(template: &Value, parameters: &Value, v: &Value) -> Option<Value> {
        match v {
            Value::Object(o) if o.get("Ref") == Some(&"AWS::NoValue".into()) => None,
            Value::Object(o) if o.len() == 1 && o.contains_key("Fn::If") => {
                let branches = o["Fn::If"].as_array().unwrap();
                let condition = serde_json::json!({"Condition": branches[0]});
                let chosen = if holds(template, parameters, &condition) { &branches[1] } else { &branches[2] };
                resolve(template, parameters, chosen)
            }
            Value::Object(o) => Some(Value::Object(
                o.iter().filter_map(|(k, v)| Some((k.clone(), resolve(template, parameters, v)?))).collect(),
            )),
            Value::Array(list) => {
                Some(Value::Array(list.iter().filter_map(|v| resolve(template, parameters, v)).collect()))
            }
            other => Some(other.clone()),
        }
    }
    resolve(template, parameters, template).unwrap()
}

/// The AWS actions `source` (a catalog of shared/aws/src) calls through its SDK client
/// (`self.client.get_table_metadata_location()` → `s3tables:GetTableMetadataLocation`).
fn sdk_calls(source: &str, service: &str) -> std::collections::BTreeSet<String> {
    let text = std::fs::read_to_string(support::root().join("shared/aws/src").join(source)).unwrap();
    let mut calls = std::collections::BTreeSet::new();
    for (at, _) in text.match_indices(".client") {
        let rest = text[at + ".client".len()..].trim_start();
        let Some(call) = rest.strip_prefix('.') else { continue };
        let name: String = call.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        let pascal: String = name.split('_').map(|word| word[..1].to_uppercase() + &word[1..]).collect();
        calls.insert(format!("{service}:{pascal}"));
    }
    calls
}

/// Each function's actions on catalogs (Glue, S3 Tables, a REST catalog's secret) as
/// deployed with `parameters`, and the statements granting S3 Tables actions.
pub(crate) fn catalog_grants(
    template: &serde_json::Value,
    parameters: &serde_json::Value,
    function: &str,
) -> (std::collections::BTreeSet<String>, Vec<serde_json::Value>) {
    let deployed = deployed(template, parameters);
    let (granted, _) = statements(&deployed["Resources"][function]);
    let is_catalog = |a: &String| ["glue:", "s3tables:", "secretsmanager:"].iter().any(|p| a.starts_with(p));
    let on_catalogs = granted.iter().flat_map(actions).filter(is_catalog).collect();
    let s3tables = granted.into_iter().filter(|s| actions(s).iter().any(|a| a.starts_with("s3tables:"))).collect();
    (on_catalogs, s3tables)
}

/// `CatalogType` (with `TableBucketArn`, `CatalogSecretArn`, `RestSigV4Service`) grants
/// each function what its catalog's code calls and nothing of the other catalogs': Glue
/// on the configured databases, S3 Tables on the table bucket and its tables (the
/// committer every action shared/aws/src/s3tables.rs calls, plus reading and writing the
/// tables' files; the materializer reads and makes tables; the compactor reads), a REST
/// catalog's secret. The functions learn the stack's catalog to refuse a floe.toml that
/// names another, and CloudFormation refuses S3 Tables without a bucket.
#[test]
fn each_catalog_type_grants_what_its_code_calls_and_nothing_of_the_others() {
    use std::collections::BTreeSet;

    use serde_json::json;
    let template = template();
    let bucket = "arn:aws:s3tables:us-east-1:123456789012:bucket/analytics";
    let secret = "arn:aws:secretsmanager:us-east-1:123456789012:secret:catalog-AbCdEf";
    let set = |actions: &[&str]| actions.iter().map(|a| a.to_string()).collect::<BTreeSet<String>>();
    let with = |base: &BTreeSet<String>, more: &[&str]| base.union(&set(more)).cloned().collect::<BTreeSet<_>>();
    let without =
        |base: &BTreeSet<String>, less: &[&str]| base.difference(&set(less)).cloned().collect::<BTreeSet<_>>();

    // What the catalogs' code calls: the committer commits, so it is granted all of it.
    let glue_calls = sdk_calls("glue.rs", "glue");
    let s3tables_calls = sdk_calls("s3tables.rs", "s3tables");
    assert!(s3tables_calls.contains("s3tables:UpdateTableMetadataLocation"), "{s3tables_calls:?}");
    let data = ["s3tables:GetTableData", "s3tables:PutTableData"];
    let s3tables_committer = with(&s3tables_calls, &data);
    let s3tables_writes = ["s3tables:UpdateTableMetadataLocation", "s3tables:CreateNamespace", "s3tables:CreateTable"];
    let s3tables_materializer = set(&[
        "s3tables:GetTableMetadataLocation",
        "s3tables:CreateNamespace",
        "s3tables:CreateTable",
        "s3tables:GetTableData",
        "s3tables:PutTableData",
    ]);
    let s3tables_compactor = without(&s3tables_committer, &s3tables_writes);
    let glue_materializer = set(&["glue:GetTable", "glue:GetDatabase"]);
    let glue_compactor = set(&["glue:GetTable", "glue:GetTables", "glue:GetDatabase"]);
    let signed_s3tables =
        ["s3tables:GetTableBucket", "s3tables:GetNamespace", "s3tables:ListNamespaces", "s3tables:GetTable"];
    let secret_read = ["secretsmanager:GetSecretValue"];

    let functions = ["MaterializerFunction", "CommitterFunction", "CompactorFunction"];
    let cases = [
        (json!({}), [glue_materializer.clone(), glue_calls.clone(), glue_compactor.clone()]),
        (
            json!({"CatalogType": "s3tables", "TableBucketArn": bucket}),
            [s3tables_materializer.clone(), s3tables_committer.clone(), s3tables_compactor.clone()],
        ),
        (
            json!({"CatalogType": "rest", "CatalogSecretArn": secret}),
            [set(&secret_read), set(&secret_read), set(&secret_read)],
        ),
        (json!({"CatalogType": "rest"}), [set(&[]), set(&[]), set(&[])]),
        (
            json!({"CatalogType": "rest", "RestSigV4Service": "glue"}),
            [
                with(&glue_materializer, &["glue:GetCatalog", "glue:CreateDatabase", "glue:CreateTable"]),
                with(&glue_calls, &["glue:GetCatalog"]),
                with(&glue_compactor, &["glue:GetCatalog"]),
            ],
        ),
        (
            json!({"CatalogType": "rest", "RestSigV4Service": "s3tables", "TableBucketArn": bucket}),
            [
                with(&s3tables_materializer, &signed_s3tables),
                with(&s3tables_committer, &signed_s3tables),
                with(&s3tables_compactor, &signed_s3tables),
            ],
        ),
    ];
    for (parameters, expected) in cases {
        for (function, expected) in functions.iter().zip(expected) {
            let (granted, s3tables) = catalog_grants(&template, &parameters, function);
            assert_eq!(granted, expected, "{function} with {parameters}");
            for statement in s3tables {
                let on = json!([{"Ref": "TableBucketArn"}, {"Fn::Sub": "${TableBucketArn}/table/*"}]);
                assert_eq!(statement["Resource"], on, "{function} with {parameters}: the bucket and its tables only");
            }
        }
    }
    // The REST secret is the one named, read only.
    let deployed = deployed(&template, &json!({"CatalogType": "rest", "CatalogSecretArn": secret}));
    let (granted, _) = statements(&deployed["Resources"]["CommitterFunction"]);
    let read = granted.iter().find(|s| actions(s) == secret_read).expect("the secret's statement");
    assert_eq!(read["Resource"], json!({"Ref": "CatalogSecretArn"}));

    // The functions know the stack's catalog (floe_aws::lambda::deployed_catalog_matches).
    let variables = &template["Globals"]["Function"]["Environment"]["Variables"];
    assert_eq!(variables["FLOE_CATALOG_TYPE"], json!({"Ref": "CatalogType"}));
    assert_eq!(variables["FLOE_TABLE_BUCKET_ARN"], json!({"Ref": "TableBucketArn"}));
    assert_eq!(template["Parameters"]["CatalogType"]["AllowedValues"], json!(["glue", "rest", "s3tables"]));
    let rule = &template["Rules"]["TableBucketForS3Tables"];
    assert_eq!(rule["Assertions"][0]["Assert"], json!({"Fn::Not": [{"Fn::Equals": [{"Ref": "TableBucketArn"}, ""]}]}));
    // The bucket pattern takes a real table bucket ARN and refuses others.
    let pattern = template["Parameters"]["TableBucketArn"]["AllowedPattern"].as_str().unwrap();
    assert!(pattern.starts_with("^(arn:aws[a-z-]*:s3tables:") && pattern.ends_with(")?$"), "{pattern}");
}
