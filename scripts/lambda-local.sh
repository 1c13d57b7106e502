#!/usr/bin/env bash
# The three Lambdas on one machine, step by step as docs/lambdas.md "Running them
# locally" walks through them: moto for AWS, `cargo lambda watch` for the Lambda runtime,
# the sample events of events/, the task queue drained into the committer, the tables
# read by PyIceberg through the Glue API. Every step is a command to copy.
#
# Stops everything it started when it ends, and exits non-zero at the first step that
# fails. tests/integration/lambda_local.rs runs it and checks the outcome.
#
# Settings (environment):
#   FLOE_PYTHON       the Python with tests/py/requirements.txt (default .venv/bin/python,
#                     which scripts/test.sh creates); cargo-lambda is installed beside it
#   MOTO_PORT         the AWS emulator's port (default 5000)
#   LAMBDA_PORT       `cargo lambda watch`'s port (default 9000)
#   LAMBDA_LOCAL_DIR  where the environment file, the logs, the events sent to the
#                     committer and the responses are kept (default: a new temporary folder)
set -euo pipefail
cd "$(dirname "$0")/.."

python="${FLOE_PYTHON:-$PWD/.venv/bin/python}"
export PATH="$(dirname "$python"):$PATH" # python and cargo-lambda
export MOTO_PORT="${MOTO_PORT:-5000}" LAMBDA_PORT="${LAMBDA_PORT:-9000}"
export LAMBDA_LOCAL_DIR="${LAMBDA_LOCAL_DIR:-$(mktemp -d)}"
work="$LAMBDA_LOCAL_DIR"
mkdir -p "$work"

# The servers run in the background, in sessions of their own where setsid exists, each
# stopped as a whole (cargo lambda watch with the functions it runs); the steps in
# between run in this script's process group, so that stopping the group stops the step
# under way, then the servers.
started=()
background() {
  if command -v setsid >/dev/null; then setsid "$@" & else "$@" & fi
  started+=($!)
}
stop() {
  local status=$?
  for pid in "${started[@]}"; do
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${started[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  if [ "$status" -ne 0 ]; then
    echo "lambda-local: failed (exit $status); logs in $work" >&2
  fi
  exit "$status"
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step() { printf '\n== %s\n' "$*" >&2; }

step "1. The local AWS: moto on 127.0.0.1:$MOTO_PORT; buckets, queues, lock table, Glue database"
background python tests/py/moto_server.py "$MOTO_PORT" >"$work/moto.log" 2>&1
export AWS_ENDPOINT_URL="http://127.0.0.1:$MOTO_PORT" AWS_REGION=us-east-1
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing
python scripts/lambda_local.py create >"$work/lambda-local.env"
cat "$work/lambda-local.env" >&2

step "2. The sample segments uploaded to the tiered-storage bucket"
python scripts/lambda_local.py upload
# A Debezium topic's change events, no event announces: the backfill (step 6) hands them
# to the materializer, and floe.toml makes their table an upsert table.
python tests/py/make_debezium.py "$work/debezium"
python scripts/lambda_local.py upload --segments "$work/debezium"

step "3. The three functions under cargo lambda watch (built first: cargo build --workspace --bins)"
cargo build --workspace --bins --locked
background cargo lambda watch --ignore-changes -A 127.0.0.1 -P "$LAMBDA_PORT" \
  --env-file "$work/lambda-local.env" >"$work/watch.log" 2>&1
python - <<'EOF' # until the runtime emulator answers
import os, socket, sys, time
deadline = time.monotonic() + 60
while True:
    try:
        socket.create_connection(("127.0.0.1", int(os.environ["LAMBDA_PORT"])), timeout=1).close()
        break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit("cargo lambda watch did not start; see watch.log")
        time.sleep(0.2)
EOF

step "4. The materializer on each sample event of events/"
for event in eventbridge-object-created s3-object-created sqs-s3-notification s3-test-event; do
  cargo lambda invoke materializer --data-file "events/$event.json" -A 127.0.0.1 -P "$LAMBDA_PORT" \
    --output-format json | tee "$work/materializer-$event.response.json"
  echo
done

step "5. The task queue drained into the committer"
python scripts/lambda_local.py drain --work "$work"

step "6. The history already in the bucket, backfilled through the Lambda Invoke API of cargo lambda watch"
AWS_ENDPOINT_URL_LAMBDA="http://127.0.0.1:$LAMBDA_PORT" FLOE_S3_PATH_STYLE=true \
  "${CARGO_TARGET_DIR:-target}/debug/floe" aws backfill --bucket kafka-tiered --function materializer \
  --state "$work/backfill.state" | tee "$work/backfill.out"
python scripts/lambda_local.py drain --work "$work"
step "7. The compactor on the schedule's event, its tasks drained into the committer"
cargo lambda invoke compactor --data-file events/eventbridge-scheduled.json -A 127.0.0.1 -P "$LAMBDA_PORT" \
  --output-format json | tee "$work/compactor.response.json"
echo
python scripts/lambda_local.py drain --work "$work"

step "8. The tables, read by PyIceberg through the Glue API"
python scripts/lambda_local.py read --json "$work/tables.json"
