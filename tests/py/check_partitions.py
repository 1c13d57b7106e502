#!/usr/bin/env python3
"""PyIceberg's judgement of a partitioned table: its spec, each data file's partition
value against the rows in the file, and partition pruning. Prints one JSON object.

    check_partitions.py sql  CATALOG_DB WAREHOUSE_DIR NAMESPACE.TABLE DAY REGION
    check_partitions.py glue ENDPOINT   -            NAMESPACE.TABLE DAY REGION

DAY: days since 1970-01-01 to scan with a `_kafka.timestamp` filter; REGION: a value to
scan with `region = REGION`.

Output: {"spec": [{"name", "transform", "source", "field_id"}],
         "files": [{"path", "partition": {name: value}, "rows", "mismatches"}],
         "rows": [[partition, offset], …] (every row of a full scan),
         "day_scan": {"files": [partition values], "rows": [[partition, offset], …]},
         "region_scan": {…the same…}}
A mismatch is a row whose own partition value (day of `_kafka.timestamp`, `region`)
differs from its file's.
"""
import datetime
import json
import sys

import pyarrow.parquet as pq
from pyiceberg.expressions import And, EqualTo, GreaterThanOrEqual, LessThan

from read_iceberg import catalog

EPOCH = datetime.date(1970, 1, 1)


def as_days(value):
    if isinstance(value, datetime.datetime):
        return (value.astimezone(datetime.timezone.utc).date() - EPOCH).days
    if isinstance(value, datetime.date):
        return (value - EPOCH).days
    return value


def partition_of(table, data_file):
    return {f.name: as_days(data_file.partition[i]) for i, f in enumerate(table.spec().fields)}


def row_partition(table, row):
    out = {}
    for f in table.spec().fields:
        source = table.schema().find_column_name(f.source_id)
        value = row
        for part in source.split("."):
            value = None if value is None else value.get(part)
        transform = str(f.transform)
        if transform == "day":
            value = None if value is None else as_days(value)
        elif transform != "identity":
            raise SystemExit("check_partitions.py: transform %s not handled" % transform)
        out[f.name] = value
    return out


def keys(arrow):
    return sorted([r["_kafka"]["partition"], r["_kafka"]["offset"]] for r in arrow.to_pylist())


def scan(table, row_filter):
    s = table.scan(row_filter=row_filter)
    return {"files": [partition_of(table, t.file) for t in s.plan_files()], "rows": keys(s.to_arrow())}


def main():
    kind, where, warehouse, name, day, region = sys.argv[1:7]
    table = catalog(kind, where, warehouse).load_table(name)
    spec = [{"name": f.name, "transform": str(f.transform), "field_id": f.field_id,
             "source": table.schema().find_column_name(f.source_id)} for f in table.spec().fields]
    files = []
    for task in table.scan().plan_files():
        expected = partition_of(table, task.file)
        with table.io.new_input(task.file.file_path).open() as f:
            rows = pq.read_table(f).to_pylist()
        mismatches = sum(1 for r in rows if row_partition(table, r) != expected)
        files.append({"path": task.file.file_path, "partition": expected, "rows": len(rows),
                      "mismatches": mismatches})
    start = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(days=int(day))
    end = start + datetime.timedelta(days=1)
    by_day = And(GreaterThanOrEqual("_kafka.timestamp", start.isoformat()),
                 LessThan("_kafka.timestamp", end.isoformat()))
    print(json.dumps({
        "spec": spec,
        "files": files,
        "rows": keys(table.scan().to_arrow()),
        "day_scan": scan(table, by_day),
        "region_scan": scan(table, EqualTo("region", region)),
    }))


if __name__ == "__main__":
    main()
