#!/usr/bin/env python3
"""Reads a local Floe table as engines without Floe's catalog do, and as the lines
`floe local table` prints; prints one JSON object.

    read_folder.py duckdb-scan TABLE_FOLDER     DuckDB: SELECT * FROM iceberg_scan('<folder>')
    read_folder.py duckdb-line LINE             DuckDB: the printed line (INSTALL/LOAD skipped)
    read_folder.py pyiceberg-lines LINES        Python (PyIceberg, delta-rs): the printed lines, rows in `table`
    read_folder.py static TABLE_FOLDER          PyIceberg: StaticTable.from_metadata('<folder>')

The DuckDB extensions are loaded by path from the `duckdb-extension-avro`,
`duckdb-extension-iceberg` and `duckdb-extension-delta` wheels (tests/py/requirements.txt);
DuckDB never downloads one. Output: {"rows": N, "offsets": {"<partition>": [sorted offsets]}, "duplicates": N,
"values": {"<partition>/<offset>": value as text}}; a failure exits 1 with DuckDB's or
PyIceberg's error on stderr.
"""
import glob
import json
import os
import sys
from collections import Counter


def duckdb_connection():
    import duckdb
    import duckdb_extension_avro
    import duckdb_extension_delta
    import duckdb_extension_iceberg
    con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    packages = [(duckdb_extension_avro, "avro"), (duckdb_extension_iceberg, "iceberg"), (duckdb_extension_delta, "delta")]
    for package, name in packages:
        pattern = os.path.join(package.__path__[0], "extensions", "v" + duckdb.__version__, name + ".duckdb_extension")
        found = glob.glob(pattern)
        if not found:
            sys.exit("no %s extension at %s" % (name, pattern))
        con.execute("LOAD '%s'" % found[0].replace("'", "''"))
    return con


def duckdb_line(line):
    """The rows of the line's last statement; INSTALL and LOAD are skipped (loaded above)."""
    con = duckdb_connection()
    statements = [s.strip() for s in line.split(";") if s.strip()]
    run = [s for s in statements if not s.upper().startswith(("INSTALL ", "LOAD "))]
    for statement in run[:-1]:
        con.execute(statement)
    return con.execute(run[-1]).to_arrow_table()


def pyiceberg_lines(lines):
    scope = {}
    exec(lines, scope)
    return scope["table"]


def static_table(folder):
    from pyiceberg.table import StaticTable
    return StaticTable.from_metadata(folder).scan().to_arrow()


def summary(data):
    offsets, seen, values = {}, Counter(), {}
    for row in data.to_pylist():
        meta = row["_kafka"]
        key = "%s/%s" % (meta["partition"], meta["offset"])
        seen[key] += 1
        offsets.setdefault(str(meta["partition"]), []).append(meta["offset"])
        value = row.get("value")
        if isinstance(value, (bytes, bytearray)):
            value = value.decode("utf-8", "replace")
        values[key] = value
    return {
        "rows": data.num_rows,
        "offsets": {p: sorted(o) for p, o in offsets.items()},
        "duplicates": sum(c - 1 for c in seen.values()),
        "values": values,
    }


def main():
    mode, arg = sys.argv[1:3]
    if mode == "duckdb-scan":
        data = duckdb_line("SELECT * FROM iceberg_scan('%s')" % arg.replace("'", "''"))
    elif mode == "duckdb-line":
        data = duckdb_line(arg)
    elif mode == "pyiceberg-lines":
        data = pyiceberg_lines(arg)
    elif mode == "static":
        data = static_table(arg)
    else:
        sys.exit("unknown mode %r" % mode)
    print(json.dumps(summary(data)))


if __name__ == "__main__":
    main()
