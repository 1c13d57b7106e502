#!/usr/bin/env python3
"""Reads a local Delta table as engines other than Floe do; prints one JSON object.

    read_delta.py deltalake TABLE_FOLDER [--version V] [--app APP_ID ...] [--endpoint URL]
        delta-rs (the `deltalake` package): its DataFusion query engine, at the newest
        version or at V; each APP_ID's transaction version; an s3:// table from S3 at
        URL (moto)
    read_delta.py duckdb TABLE_FOLDER
        DuckDB's delta extension (delta_scan)

The DuckDB extension is loaded by path from the `duckdb-extension-delta` wheel
(tests/py/requirements.txt); DuckDB never downloads one. Output: the rows as
read_folder.py summarises them ({"rows", "offsets", "duplicates", "values"}), and from
delta-rs the table's "version", its "txns" ({app id: version}), its "protocol"
([reader, writer]), its "files" (how many) and its "operations" (each version's, oldest
first), its "columns" and each row but `_kafka` as JSON ("rows_json", by
"<partition>/<offset>"). A failure exits 1 with the reader's error on stderr.
"""
import argparse
import datetime
import glob
import json
import os
import sys

import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from read_folder import summary  # noqa: E402


def storage_options(endpoint):
    """S3 at `endpoint` (moto), with the test credentials."""
    if not endpoint:
        return None
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
    }


def with_deltalake(folder, version, apps, endpoint):
    from deltalake import DeltaTable, QueryBuilder

    table = DeltaTable(folder, version=version, storage_options=storage_options(endpoint))
    data = pa.table(QueryBuilder().register("t", table).execute("SELECT * FROM t").read_all())
    out = summary(data)
    out["columns"] = data.column_names
    # Generated partition columns, from the files' partition values, against what their
    # expressions give of each row (timestamps in UTC).
    utc = lambda r: r["_kafka"]["timestamp"].astimezone(datetime.timezone.utc)  # noqa: E731
    generated = {
        "timestamp_day": ("day_mismatches", lambda r: utc(r).date()),
        "timestamp_month": ("month_mismatches", lambda r: utc(r).strftime("%Y-%m")),
        "timestamp_year": ("year_mismatches", lambda r: utc(r).year),
        "region_trunc": ("trunc_mismatches", lambda r: None if r["region"] is None else r["region"][:1]),
    }
    for column, (key, expected) in generated.items():
        if column in data.column_names:
            out[key] = sum(1 for r in data.to_pylist() if r[column] != expected(r))
    out["rows_json"] = {"%s/%s" % (r["_kafka"]["partition"], r["_kafka"]["offset"]):
                        json.dumps({k: v for k, v in r.items() if k != "_kafka"}, sort_keys=True, default=str)
                        for r in data.to_pylist()}
    protocol = table.protocol()
    out.update(
        version=table.version(),
        txns={app: table.transaction_version(app) for app in apps},
        protocol=[protocol.min_reader_version, protocol.min_writer_version],
        files=len(table.file_uris()),
        partition_columns=table.metadata().partition_columns,
        counts={str(k): v for k, v in counts(table).items()},
        operations=[h.get("operation") for h in sorted(table.history(), key=lambda h: h["version"])],
    )
    return out


def counts(table):
    """Rows per value of the first partition column, filtered by it (the filter a reader
    prunes files by), null included."""
    from deltalake import QueryBuilder

    columns = table.metadata().partition_columns
    if not columns:
        return {}
    column = columns[-1]
    query = 'SELECT "%s" AS v, count(*) AS n FROM t GROUP BY "%s"' % (column, column)
    rows = pa.table(QueryBuilder().register("t", table).execute(query).read_all()).to_pylist()
    return {r["v"]: r["n"] for r in rows}


def with_duckdb(folder):
    import duckdb
    import duckdb_extension_delta

    con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    pattern = os.path.join(duckdb_extension_delta.__path__[0], "extensions", "v" + duckdb.__version__, "delta.duckdb_extension")
    found = glob.glob(pattern)
    if not found:
        sys.exit("no delta extension at %s" % pattern)
    con.execute("LOAD '%s'" % found[0].replace("'", "''"))
    data = con.execute("SELECT * FROM delta_scan('%s')" % folder.replace("'", "''")).to_arrow_table()
    return summary(data)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["deltalake", "duckdb"])
    parser.add_argument("folder")
    parser.add_argument("--version", type=int)
    parser.add_argument("--app", action="append", default=[], help="an app id whose txn version to read")
    parser.add_argument("--endpoint", help="S3 at this endpoint (moto), for an s3:// table")
    args = parser.parse_args()
    if args.mode == "deltalake":
        out = with_deltalake(args.folder, args.version, args.app, args.endpoint)
    else:
        out = with_duckdb(args.folder)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
