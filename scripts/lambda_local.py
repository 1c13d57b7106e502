#!/usr/bin/env python3
"""The AWS side of the local walkthrough (scripts/lambda-local.sh, docs/lambdas.md
"Running them locally"), against the moto server that AWS_ENDPOINT_URL names:

    lambda_local.py create   the buckets, the FIFO task queue and its dead-letter queue,
                             the lock table (with its held-tasks index), the Glue
                             database and floe.toml, as infra/template.yaml makes them;
                             prints the functions' environment (an --env-file for
                             `cargo lambda watch`)
    lambda_local.py upload [--segments DIR]
                             the sample segments of examples/segments (or DIR's) into
                             the tiered-storage bucket, as tiered storage and broker
                             copies lay them out (the keys events/ names)
    lambda_local.py drain [--work DIR]
                             the task queue into the committer, as Lambda's SQS event
                             source does: up to 10 messages a batch, sent as an SQS event
                             with `cargo lambda invoke committer`; the messages not in the
                             response's batchItemFailures are deleted, the others left to
                             come back; until the queue is empty. Each event and response
                             is kept in DIR/floe-drain (DIR: $LAMBDA_LOCAL_DIR, else the
                             temporary folder). Fails when a message failed.
    lambda_local.py read [--json FILE]
                             every table of the `kafka` namespace read by PyIceberg
                             through the Glue API: rows, columns, a few rows

The Lambda runtime emulator is at 127.0.0.1:$LAMBDA_PORT (default 9000).
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import boto3

ROOT = pathlib.Path(__file__).resolve().parent.parent
SEGMENTS = ROOT / "examples" / "segments"
TIERED_BUCKET = "kafka-tiered"
WAREHOUSE_BUCKET = "floe-warehouse"
WAREHOUSE = f"s3://{WAREHOUSE_BUCKET}/warehouse"
CONFIG_KEY = "floe.toml"
TASK_QUEUE = "floe-tasks.fifo"
TASK_DLQ = "floe-tasks-dlq.fifo"
LOCK_TABLE = "floe-locks"
NAMESPACE = "kafka"
# Locally, a task the committer reported failed comes back after a minute (the
# template's is longer: a committer's whole timeout and more).
VISIBILITY_TIMEOUT_SECONDS = 60
# What floe.toml holds: every topic a table of raw records, but the Debezium topic of
# tests/py/make_debezium.py, an upsert table of its rows (and a Delta table: its deletes
# are deletion vectors); `orders` a Delta table too, `shipments` a Delta table alone; and compaction without waiting for the window, so
# that the first scheduled run compacts the small files.
FLOE_TOML = """[defaults]
enabled = true
compaction_window = "0s"

[[topics]]
topic = "orders"
formats = ["iceberg", "delta"]

[[topics]]
topic = "shipments"
formats = ["delta"]

[[topics]]
topic = "dbserver1.inventory.customers"
value_format = "json"
mode = "upsert"
envelope = "debezium"
formats = ["iceberg", "delta"]
"""


def endpoint():
    url = os.environ.get("AWS_ENDPOINT_URL")
    if not url:
        sys.exit("AWS_ENDPOINT_URL is not set: export AWS_ENDPOINT_URL=http://127.0.0.1:5000 (the moto server)")
    return url


def client(service):
    return boto3.client(service, endpoint_url=endpoint(), region_name=os.environ.get("AWS_REGION", "us-east-1"),
                        aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "testing"),
                        aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "testing"))


def wait_for_moto(seconds=60):
    s3 = client("s3")
    deadline = time.monotonic() + seconds
    while True:
        try:
            s3.list_buckets()
            return
        except Exception as error:  # connection refused while moto starts
            if time.monotonic() > deadline:
                sys.exit(f"no AWS emulator answers at {endpoint()}: {error}")
            time.sleep(0.2)


def create(_args):
    wait_for_moto()
    s3, sqs, dynamodb, glue = client("s3"), client("sqs"), client("dynamodb"), client("glue")
    for bucket in (TIERED_BUCKET, WAREHOUSE_BUCKET):
        s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=WAREHOUSE_BUCKET, Key=CONFIG_KEY, Body=FLOE_TOML.encode())
    dlq = sqs.create_queue(QueueName=TASK_DLQ, Attributes={"FifoQueue": "true"})["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    queue = sqs.create_queue(QueueName=TASK_QUEUE, Attributes={
        "FifoQueue": "true",
        "ContentBasedDeduplication": "false",
        "VisibilityTimeout": str(VISIBILITY_TIMEOUT_SECONDS),
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 100}),
    })["QueueUrl"]
    dynamodb.create_table(
        TableName=LOCK_TABLE,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "table", "AttributeType": "S"},
                              {"AttributeName": "held_table", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "table", "KeyType": "HASH"}],
        GlobalSecondaryIndexes=[{"IndexName": "held-tasks",
                                 "KeySchema": [{"AttributeName": "held_table", "KeyType": "HASH"}],
                                 "Projection": {"ProjectionType": "ALL"}}],
    )
    glue.create_database(DatabaseInput={"Name": NAMESPACE})
    print("# The functions' environment (docs/lambdas.md), for cargo lambda watch --env-file.")
    print("# FLOE_FUNCTION_TIMEOUT_SECONDS is left to each function's default (committer 300,")
    print("# compactor 900: their Timeout in infra/template.yaml).")
    for key, value in [
        ("FLOE_WAREHOUSE", WAREHOUSE),
        ("FLOE_TASK_QUEUE_URL", queue),
        ("FLOE_LOCK_TABLE", LOCK_TABLE),
        ("FLOE_CONFIG", f"s3://{WAREHOUSE_BUCKET}/{CONFIG_KEY}"),
        ("FLOE_S3_PATH_STYLE", "true"),
        ("FLOE_LEASE_SECONDS", "120"),
        ("AWS_ENDPOINT_URL", endpoint()),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("RUST_LOG", "info"),
    ]:
        print(f"{key}={value}")


def segment_keys(folder):
    """Each segment file of `folder` (the samples: examples/segments) and its key: the
    tiered-storage plugin's files under `tiered/`, the broker log-dir copies under `logs/`."""
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix != ".json"):
        rel = path.relative_to(folder).as_posix()
        yield path, rel if rel.startswith("tiered/") else f"logs/{rel}"


def upload(args):
    s3 = client("s3")
    for path, key in segment_keys(pathlib.Path(args.segments) if args.segments else SEGMENTS):
        s3.put_object(Bucket=TIERED_BUCKET, Key=key, Body=path.read_bytes())
        print(f"s3://{TIERED_BUCKET}/{key}", file=sys.stderr)


def invoke(function, data_file):
    """`cargo lambda invoke` of the function served by `cargo lambda watch`; its JSON answer."""
    port = os.environ.get("LAMBDA_PORT", "9000")
    command = ["cargo", "lambda", "invoke", function, "--data-file", str(data_file),
               "-A", "127.0.0.1", "-P", port, "--output-format", "json"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr}{done.stdout}")
    return json.loads(done.stdout)


def sqs_event(messages, queue_arn):
    """The event Lambda's SQS event source hands the function for these messages."""
    return {"Records": [{
        "messageId": m["MessageId"],
        "receiptHandle": m["ReceiptHandle"],
        "body": m["Body"],
        "attributes": m.get("Attributes", {}),
        "messageAttributes": {},
        "md5OfBody": m["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": os.environ.get("AWS_REGION", "us-east-1"),
    } for m in messages]}


def queue_url(sqs):
    return sqs.get_queue_url(QueueName=TASK_QUEUE)["QueueUrl"]


def drain(args):
    sqs = client("sqs")
    url = queue_url(sqs)
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    work = pathlib.Path(args.work or os.environ.get("LAMBDA_LOCAL_DIR") or tempfile.gettempdir()) / "floe-drain"
    work.mkdir(parents=True, exist_ok=True)
    left = []
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])
        messages = got.get("Messages", [])
        if not messages:
            break
        batch = len(list(work.glob("committer-*.event.json"))) + 1
        event_file = work / f"committer-{batch}.event.json"
        event_file.write_text(json.dumps(sqs_event(messages, arn), indent=2))
        started = time.monotonic()
        response = invoke("committer", event_file)
        seconds = time.monotonic() - started
        (work / f"committer-{batch}.response.json").write_text(
            json.dumps({"response": response, "seconds": seconds}))
        failed = {f["itemIdentifier"] for f in response.get("batchItemFailures") or []}
        for m in messages:
            if m["MessageId"] not in failed:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        left += sorted(failed)
        print(f"committer batch {batch}: {len(messages)} message(s), {len(failed)} failed, {seconds:.1f} s",
              file=sys.stderr)
    if left:
        sys.exit(f"the committer failed {len(left)} message(s), left in the queue to come back after "
                 f"{VISIBILITY_TIMEOUT_SECONDS} s: {', '.join(left)} (its log says why)")


def text(value):
    """A value JSON has no type for, as text: bytes as UTF-8 (raw tables' keys and values)."""
    if isinstance(value, (bytes, bytearray)):
        return value.decode("utf-8", "replace")
    return str(value)


def read_delta(location, url):
    """The Delta table at `location` as delta-rs reads it, when there is one."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder
    from deltalake.exceptions import TableNotFoundError
    options = {"AWS_ENDPOINT_URL": url, "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1",
               "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    try:
        table = DeltaTable(location, storage_options=options)
    except TableNotFoundError:
        return None
    rows = pa.table(QueryBuilder().register("t", table).execute("SELECT _kafka FROM t").read_all()).to_pylist()
    offsets = {}
    for row in rows:
        offsets.setdefault(str(row["_kafka"]["partition"]), []).append(row["_kafka"]["offset"])
    # Deletion vectors the log's commits gave files (the commits are objects in S3).
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    s3 = client("s3")
    vectors = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/_delta_log/"):
        for entry in page.get("Contents", []):
            if entry["Key"].endswith(".json"):
                body = s3.get_object(Bucket=bucket, Key=entry["Key"])["Body"].read().decode()
                vectors += sum(1 for line in body.splitlines() if '"add"' in line and '"deletionVector"' in line)
    return {
        "version": table.version(),
        "rows": len(rows),
        "offsets": {p: sorted(o) for p, o in offsets.items()},
        "operations": [h.get("operation") for h in sorted(table.history(), key=lambda h: h["version"])],
        "vectors_added": vectors,
    }


def read(args):
    from pyiceberg.catalog.glue import GlueCatalog
    url = endpoint()
    catalog = GlueCatalog("floe", **{
        "glue.endpoint": url, "glue.region": "us-east-1",
        "glue.access-key-id": "testing", "glue.secret-access-key": "testing",
        "s3.endpoint": url, "s3.region": "us-east-1", "s3.access-key-id": "testing",
        "s3.secret-access-key": "testing", "s3.path-style-access": "true"})
    tables = {}
    identifiers = sorted(catalog.list_tables(NAMESPACE))
    if not identifiers:
        sys.exit(f"no tables in the Glue database {NAMESPACE}")
    for identifier in identifiers:
        name = ".".join(identifier)
        table = catalog.load_table(identifier)
        data = table.scan().to_arrow()
        rows = data.to_pylist()
        offsets = {}
        for row in rows:
            offsets.setdefault(str(row["_kafka"]["partition"]), []).append(row["_kafka"]["offset"])
        snapshot = table.current_snapshot()
        tables[name] = {
            "rows": len(rows),
            "values": {f"{r['_kafka']['partition']}/{r['_kafka']['offset']}":
                       json.dumps({k: v for k, v in r.items() if k != "_kafka"}, sort_keys=True, default=text)
                       for r in rows},
            "columns": [f.name for f in table.schema().fields],
            "offsets": {p: sorted(o) for p, o in offsets.items()},
            "snapshots": [s.summary.operation.value for s in table.metadata.snapshots],
            "data_files": int(snapshot.summary["total-data-files"]) if snapshot else 0,
        }
        delta = read_delta(table.location(), url)
        if delta:
            tables[name]["delta"] = delta
            print(f"  Delta table: version {delta['version']}, {delta['rows']} rows, "
                  f"operations {', '.join(delta['operations'])}")
        print(f"{name}: {len(rows)} rows in {tables[name]['data_files']} file(s); "
              f"columns {', '.join(tables[name]['columns'])}; snapshots {', '.join(tables[name]['snapshots'])}")
        for row in rows[:3]:
            print("  ", json.dumps(row, default=text))
    # Delta-only topics' tables: in Glue as Delta tables under their own names (a Delta
    # mirror of an Iceberg table is `<table>_delta`, read above).
    glue = client("glue")
    for page in glue.get_paginator("get_tables").paginate(DatabaseName=NAMESPACE):
        for entry in page["TableList"]:
            name = f"{NAMESPACE}.{entry['Name']}"
            mirror = name.endswith("_delta") and name[:-len("_delta")] in tables
            if entry.get("Parameters", {}).get("table_type", "").upper() != "DELTA" or mirror:
                continue
            delta = read_delta(entry["StorageDescriptor"]["Location"], url)
            tables[name] = {"rows": delta["rows"], "offsets": delta["offsets"], "delta": delta}
            print(f"{name} (Delta alone): version {delta['version']}, {delta['rows']} rows, "
                  f"operations {', '.join(delta['operations'])}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(tables, indent=2))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("create").set_defaults(run=create)
    upload_parser = commands.add_parser("upload")
    upload_parser.add_argument("--segments", help="a folder of segments to upload instead of examples/segments")
    upload_parser.set_defaults(run=upload)
    drain_parser = commands.add_parser("drain")
    drain_parser.add_argument("--work", help="where the events sent and the responses are kept")
    drain_parser.set_defaults(run=drain)
    read_parser = commands.add_parser("read")
    read_parser.add_argument("--json", help="also write what was read to this file")
    read_parser.set_defaults(run=read)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
