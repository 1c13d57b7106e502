#!/usr/bin/env python3
"""Independent judge of Floe's Parquet output: reads the files with pyarrow and compares
them with what the records must be.

    check_parquet.py EXPECTED.jsonl FILE.parquet [FILE.parquet ...]

    check_parquet.py --rows [--types TYPES.json] EXPECTED.jsonl FILE.parquet [...]

EXPECTED.jsonl holds `floe inspect`-shaped lines (raw layout) or, with --rows, the
expected table rows as JSON (value-as-payload layouts). Checks: every column, nested
ones included, carries a PARQUET:field_id; every column chunk is zstd; the rows, ordered by _kafka.offset, equal the
expected ones; with --types, each named top-level column has the Arrow type the
documentation's mapping table gives (its pyarrow spelling, or "list", "map", "struct"
for the kind alone). Prints a one-line JSON verdict; exits 1 on any difference.
"""
import base64
import datetime
import decimal
import json
import sys
import uuid

import pyarrow as pa
import pyarrow.parquet as pq


def missing_field_ids(fields, path=""):
    out = []
    for f in fields:
        p = path + f.name
        if not f.metadata or b"PARQUET:field_id" not in f.metadata:
            out.append(p)
        t = f.type
        if pa.types.is_struct(t):
            out += missing_field_ids([t.field(i) for i in range(t.num_fields)], p + ".")
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            out += missing_field_ids([t.value_field], p + ".")
        elif pa.types.is_map(t):
            out += missing_field_ids([t.key_field, t.item_field], p + ".")
    return out


def plain(v, t=None):
    """pyarrow values → JSON-comparable values (bytes as base64, times as ISO, maps as
    objects), guided by the column type `t` where the value alone is ambiguous."""
    if v is None:
        return None
    if t is not None and pa.types.is_map(t):
        return {str(k): plain(x, t.item_type) for k, x in v}
    if t is not None and pa.types.is_struct(t):
        return {t.field(i).name: plain(v.get(t.field(i).name), t.field(i).type) for i in range(t.num_fields)}
    if t is not None and (pa.types.is_list(t) or pa.types.is_large_list(t)):
        return [plain(x, t.value_type) for x in v]
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, (datetime.datetime, datetime.date, datetime.time)):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, uuid.UUID):
        return str(v)
    return v


def main():
    args = sys.argv[1:]
    rows_mode = args[0] == "--rows"
    if rows_mode:
        args = args[1:]
    types = {}
    if args[0] == "--types":
        types = json.load(open(args[1]))
        args = args[2:]
    expected = [json.loads(l) for l in open(args[0]) if l.strip()]
    rows, missing, wrong_types, problems_codec = [], [], [], []
    for path in args[1:]:
        table = pq.read_table(path)
        missing += [f"{path}:{m}" for m in missing_field_ids(list(table.schema))]
        meta = pq.ParquetFile(path).metadata
        codecs = {meta.row_group(g).column(c).compression for g in range(meta.num_row_groups)
                  for c in range(meta.num_columns)}
        if codecs - {"ZSTD"}:
            problems_codec.append({"file": path, "codecs": sorted(codecs)})
        for name, want in types.items():
            got = table.schema.field(name).type
            kind = {"list": pa.types.is_list, "map": pa.types.is_map, "struct": pa.types.is_struct}.get(want)
            if not (kind(got) if kind else str(got) == want):
                wrong_types.append({"column": name, "type": str(got), "documented": want})
        schema = table.schema
        row_type = pa.struct(list(schema))
        rows += [(r, row_type) for r in table.to_pylist()]
    rows.sort(key=lambda r: r[0]["_kafka"]["offset"])
    problems = []
    if missing:
        problems.append({"missing_field_ids": missing[:10]})
    if wrong_types:
        problems.append({"types": wrong_types[:10]})
    problems += problems_codec[:3]
    if len(rows) != len(expected):
        problems.append({"rows": len(rows), "expected": len(expected)})
    for (got, row_type), want in zip(rows, expected):
        k = got["_kafka"]
        if rows_mode:
            got_cmp = plain(got, row_type)
            want_cmp = want
        else:
            ts = k["timestamp"]
            got_cmp = {
                "offset": k["offset"],
                "timestamp": -1 if ts is None else int(ts.timestamp() * 1000),
                "timestamp_type": k["timestamp_type"],
                "key": plain(got["key"]),
                "value": plain(got["value"]),
                "headers": [{"key": h["key"], "value": plain(h["value"])} for h in (k["headers"] or [])],
            }
            want_cmp = want
        if got_cmp != want_cmp:
            problems.append({"offset": k["offset"], "got": got_cmp, "want": want_cmp})
            break
    print(json.dumps({"ok": not problems, "rows": len(rows), "problems": problems}, default=str))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
