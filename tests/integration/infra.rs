//! The SAM template passes cfn-lint (offline, with the SAM transform applied), so
//! `sam deploy` does not fail on the template itself; each function's IAM is scoped to
//! what it does; the compactor runs alone on its schedule.

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
fn template() -> serde_json::Value {
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
            if actions.iter().any(|a| a.starts_with("glue:")) {
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
    // The materializer and the compactor read a floe.toml kept in another bucket.
    for name in ["MaterializerFunction", "CompactorFunction"] {
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
    assert_eq!(holds, ["dynamodb:BatchGetItem", "dynamodb:BatchWriteItem"], "the materializer holds its tasks' files");
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
