#!/usr/bin/env python3
"""Independent reader of Floe's tables: PyIceberg opens the table through its own
catalog client and reads every row; prints one JSON object.

    read_iceberg.py sql  CATALOG_DB WAREHOUSE_DIR NAMESPACE.TABLE [ROW_FILTER] [snapshot=ID]
    read_iceberg.py own  CATALOG_DB WAREHOUSE_DIR NAMESPACE.TABLE [...]
                         (Floe's own catalog in the same file: Delta-only topics' tables)
    read_iceberg.py glue ENDPOINT   -            NAMESPACE.TABLE [ROW_FILTER] [snapshot=ID]
    read_iceberg.py rest URI        CREDENTIAL   NAMESPACE.TABLE [ROW_FILTER] [snapshot=ID]
    read_iceberg.py static ENDPOINT METADATA_LOCATION NAMESPACE.TABLE [...]
                         (the metadata file S3 Tables' GetTableMetadataLocation returned,
                          read with PyIceberg's StaticTable; S3 at ENDPOINT)

ROW_FILTER (PyIceberg's expression syntax, e.g. "qty >= 5") prunes files by their column
bounds before the rows are filtered. snapshot=ID reads that snapshot (time travel); the
summary is then that snapshot's.

Output: {"rows": N, "offsets": {"<topic>/<partition>": [sorted offsets]}, "duplicates": N,
         "columns": [...], "snapshots": N, "summary": {current snapshot summary},
         "values": {"<partition>/<offset>": value as text (the row as JSON, less _kafka,
                    when the table has no `value` column)},
         "location": the table's location, "files": [the data files the scan reads]}
"""
import json
import sys
from collections import Counter


def catalog(kind, where, warehouse):
    if kind == "rest":
        from pyiceberg.catalog.rest import RestCatalog
        return RestCatalog("floe", uri=where, credential=warehouse)
    if kind in ("sql", "own"):
        from pyiceberg.catalog.sql import SqlCatalog
        name = "floe" if kind == "sql" else "floe-own"
        return SqlCatalog(name, uri="sqlite:///" + where, warehouse="file://" + warehouse)
    from pyiceberg.catalog.glue import GlueCatalog
    return GlueCatalog("floe", **{
        "glue.endpoint": where, "glue.region": "us-east-1",
        "glue.access-key-id": "testing", "glue.secret-access-key": "testing", **s3_properties(where)})


def s3_properties(endpoint):
    return {"s3.endpoint": endpoint, "s3.region": "us-east-1", "s3.access-key-id": "testing",
            "s3.secret-access-key": "testing", "s3.path-style-access": "true"}


def open_catalog(first, second):
    """The catalog the other scripts name by their first two arguments: `glue ENDPOINT`
    (Glue and S3 at ENDPOINT, moto), `http://… CREDENTIAL` (a REST catalog), else
    `CATALOG_DB WAREHOUSE_DIR` (SQLite)."""
    if first == "glue":
        return catalog("glue", second, "-")
    if first.startswith(("http://", "https://")):
        return catalog("rest", first, second)
    return catalog("sql", first, second)


def main():
    kind, where, warehouse, name = sys.argv[1:5]
    if kind == "static":
        from pyiceberg.table import StaticTable
        table = StaticTable.from_metadata(warehouse, properties=s3_properties(where))
    else:
        table = catalog(kind, where, warehouse).load_table(name)
    options = {}
    for arg in sys.argv[5:]:
        if arg.startswith("snapshot="):
            options["snapshot_id"] = int(arg.split("=", 1)[1])
        else:
            options["row_filter"] = arg
    scan = table.scan(**options)
    data = scan.to_arrow()
    rows = data.to_pylist()
    offsets, seen = {}, Counter()
    values = {}
    topic = name.split(".", 1)[1]
    for row in rows:
        meta = row.get("_kafka") or {}
        partition, offset = meta.get("partition"), meta.get("offset")
        key = "%s/%s" % (partition, offset)
        seen[key] += 1
        offsets.setdefault(str(partition), []).append(offset)
        if "value" in row:
            value = row["value"]
            if isinstance(value, (bytes, bytearray)):
                value = value.decode("utf-8", "replace")
        else:
            # A table of the payload's own columns: the row as JSON, less `_kafka`.
            value = json.dumps({k: v for k, v in row.items() if k != "_kafka"}, sort_keys=True, default=str)
        values[key] = value
    snapshot = table.snapshot_by_id(options["snapshot_id"]) if "snapshot_id" in options else table.current_snapshot()
    print(json.dumps({
        "rows": len(rows),
        "offsets": {p: sorted(o) for p, o in offsets.items()},
        "duplicates": sum(c - 1 for c in seen.values()),
        "columns": [f.name for f in table.schema().fields],
        "schema": str(table.schema()),
        "snapshots": len(table.metadata.snapshots),
        "summary": snapshot.summary.additional_properties if snapshot else {},
        "operation": snapshot.summary.operation.value if snapshot else None,
        "history": [dict(s.summary.additional_properties, operation=s.summary.operation.value,
                         snapshot_id=str(s.snapshot_id)) for s in table.metadata.snapshots],
        "values": values,
        "nulls": {name: data.column(name).null_count for name in data.column_names},
        "location": table.metadata.location,
        "format_version": table.metadata.format_version,
        "files": sorted(task.file.file_path for task in scan.plan_files()),
    }))


if __name__ == "__main__":
    main()
