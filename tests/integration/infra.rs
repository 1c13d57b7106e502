//! The SAM template passes cfn-lint (offline, with the SAM transform applied), so
//! `sam deploy` does not fail on the template itself.

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
    for binary in ["materializer", "committer"] {
        assert!(template.contains(&format!("Binary: {binary}")));
        assert!(support::root().join("functions").join(binary).join("src/main.rs").exists());
    }
}

/// The template's resources as cfn-lint reads them (`!Sub` → `{"Fn::Sub": …}`).
fn template_resources() -> serde_json::Value {
    let script = "import json, sys\nfrom cfnlint.decode import decode\n\
                  template, matches = decode(sys.argv[1])\nassert not matches, matches\n\
                  print(json.dumps(template['Resources']))";
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
    let resources = template_resources();
    for name in ["MaterializerFunction", "CommitterFunction"] {
        let (statements, templates) = statements(&resources[name]);
        // No SAM template granting delete or bucket configuration on the warehouse.
        assert!(!templates.iter().any(|t| t.starts_with("S3") && t != "S3ReadPolicy"), "{name}: {templates:?}");
        for statement in &statements {
            let actions = actions(statement);
            assert_ne!(statement["Resource"], "*", "{name}: {statement}");
            assert!(
                !actions
                    .iter()
                    .any(|a| a.starts_with("s3:Delete") || a.starts_with("s3:PutBucket") || a.ends_with(":*")),
                "{name} deletes nothing, configures no bucket: {statement}"
            );
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
        }
    }
    // The materializer reads a floe.toml kept in another bucket.
    let (statements, _) = statements(&resources["MaterializerFunction"]);
    let config = statements.iter().find(|s| s["Resource"].to_string().contains("ConfigUri"));
    assert_eq!(config.map(actions), Some(vec!["s3:GetObject".to_string()]), "{statements:#?}");
}
