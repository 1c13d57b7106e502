#!/usr/bin/env bash
# Runs every test of Floe on a fresh machine: creates the Python virtualenv with the
# independent encoders and moto (tests/py/requirements.txt), then runs the workspace's
# tests. Tests start the servers they need themselves (moto on a free 127.0.0.1 port).
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${FLOE_VENV:-$PWD/.venv}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check -r tests/py/requirements.txt
export FLOE_PYTHON="$venv/bin/python"

# The habits: formatted, no clippy warnings, docs whose links resolve.
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet

# The three functions as `cargo lambda watch` builds them (`cargo run --bin <function>`
# resolves features over the whole workspace, as this does), so that the walkthrough's
# test (tests/integration/lambda_local.rs) finds them built in this target folder.
cargo build --workspace --bins --locked
cargo test --workspace --locked "$@"

# The fuzz targets (fuzz/) build floe-segment and floe-core with the harness: keep that compiling.
cargo check --locked -p floe-core --features fuzzing

# The command-line contract: a damaged segment is a message on stderr and exit code 1.
bad="$(mktemp)"
trap 'rm -f "$bad"' EXIT
head -c 50 tests/data/kafka/real__BiggerBrain+kafka__data__lsx1-0__00000000000000000000.log > "$bad"
set +e
# (With the test build's features, so nothing is built again.)
cargo run --quiet --locked -p floe-cli --features floe-core/fuzzing -- inspect "$bad" >/dev/null 2>"$bad.err"
rc=$?
set -e
if [ "$rc" -ne 1 ] || ! grep -q "byte 0 (batch base offset 0): truncated" "$bad.err"; then
  echo "floe inspect on a truncated segment: exit $rc, stderr: $(cat "$bad.err")" >&2
  exit 1
fi
rm -f "$bad.err"
echo "floe inspect: truncated segment → exit 1 with a located error, as documented"
