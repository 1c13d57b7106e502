#!/usr/bin/env python3
"""Times PyIceberg scans of a table in a SQLite catalog: a full scan, and a scan with a
row filter, each streamed to the end (Arrow record batches, rows counted, nothing kept).

    scan_iceberg.py CATALOG_DB WAREHOUSE_DIR NAMESPACE.TABLE ROUNDS ROW_FILTER

Each round loads the table anew (catalog, metadata, manifests: what a reader pays
before its first row), then runs the scan; the table load and the scan are timed
together. Interpreter start-up and imports are not counted.

Output: one JSON object {"files": N, "full": {"rows": N, "seconds": [per round]},
                         "filtered": {"rows": N, "files": N, "seconds": [...]}}
"""
import json
import sys
import time

from pyiceberg.catalog.sql import SqlCatalog


def scan(catalog, name, row_filter):
    """Rows and files of one scan, and its seconds (table load included)."""
    start = time.perf_counter()
    table = catalog.load_table(name)
    scan = table.scan(row_filter=row_filter) if row_filter else table.scan()
    files = sum(1 for _ in scan.plan_files())
    rows = sum(batch.num_rows for batch in scan.to_arrow_batch_reader())
    return rows, files, time.perf_counter() - start


def main():
    db, warehouse, name, rounds, row_filter = sys.argv[1:6]
    catalog = SqlCatalog("floe", uri="sqlite:///" + db, warehouse="file://" + warehouse)
    out = {}
    for label, expression in (("full", None), ("filtered", row_filter)):
        seconds = []
        for _ in range(int(rounds)):
            rows, files, took = scan(catalog, name, expression)
            seconds.append(took)
        out[label] = {"rows": rows, "files": files, "seconds": seconds}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
