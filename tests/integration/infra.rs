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
