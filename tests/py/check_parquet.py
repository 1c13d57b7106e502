#!/usr/bin/env python3
"""Independent judge of Floe's Parquet output: reads the files with pyarrow and compares
them with what the records must be.

    check_parquet.py EXPECTED.jsonl FILE.parquet [FILE.parquet ...]

    check_parquet.py --rows [--types TYPES.json] [--field-ids IDS.json] EXPECTED.jsonl FILE.parquet [...]

EXPECTED.jsonl holds `floe inspect`-shaped lines (raw layout) or, with --rows, the
expected table rows as JSON (value-as-payload layouts). Checks: every column, nested
ones included, carries a PARQUET:field_id; every column chunk is zstd, or Snappy in a
fresh file (named `*.snappy.parquet`, for compaction to compress with zstd); the rows,
ordered by _kafka.offset, equal the expected ones. With --types, the top-level columns
are exactly those named in TYPES.json, each with the Arrow type the documentation gives
it (pyarrow's spelling, nested types written out); with --field-ids (JSON: Iceberg
column name → field id, the table schema's), every column, nested ones included,
carries exactly the table's id. Prints a one-line JSON verdict; exits 1 on any
difference.
"""
import base64
import datetime
import decimal
import json
import sys
import uuid

import pyarrow as pa
import pyarrow.parquet as pq


def field_ids(fields, path=""):
    """Every column's PARQUET:field_id (None where it has none) by its Iceberg name:
    nested fields dotted, list elements `element`, map parts `key` and `value`."""
    out = {}
    for f in fields:
        p = path + f.name
        out[p] = int(f.metadata[b"PARQUET:field_id"]) if f.metadata and b"PARQUET:field_id" in f.metadata else None
        t = f.type
        if pa.types.is_struct(t):
            out.update(field_ids([t.field(i) for i in range(t.num_fields)], p + "."))
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            out.update(field_ids([t.value_field], p + "."))
        elif pa.types.is_map(t):
            out.update(field_ids([t.key_field, t.item_field], p + "."))
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
    types, want_ids = {}, None
    if args[0] == "--types":
        types = json.load(open(args[1]))
        args = args[2:]
    if args[0] == "--field-ids":
        want_ids = json.load(open(args[1]))
        args = args[2:]
    expected = [json.loads(l) for l in open(args[0]) if l.strip()]
    rows, missing, wrong_ids, wrong_types, problems_codec = [], [], [], [], []
    for path in args[1:]:
        table = pq.read_table(path)
        ids = field_ids(list(table.schema))
        missing += [f"{path}:{name}" for name, i in ids.items() if i is None]
        if want_ids is not None:
            wrong_ids += [{"file": path, "column": name, "id": ids.get(name), "table's": want_ids.get(name)}
                          for name in sorted(set(ids) | set(want_ids)) if ids.get(name) != want_ids.get(name)]
        meta = pq.ParquetFile(path).metadata
        codecs = {meta.row_group(g).column(c).compression for g in range(meta.num_row_groups)
                  for c in range(meta.num_columns)}
        if codecs != {"SNAPPY" if path.endswith(".snappy.parquet") else "ZSTD"}:
            problems_codec.append({"file": path, "codecs": sorted(codecs)})
        if types:
            for name in sorted(set(types) | set(table.schema.names)):
                want = types.get(name, "(not documented)")
                got = table.schema.field(name).type if name in table.schema.names else "(no such column)"
                if str(got) != want:
                    wrong_types.append({"column": name, "type": str(got), "documented": want})
        schema = table.schema
        row_type = pa.struct(list(schema))
        rows += [(r, row_type) for r in table.to_pylist()]
    rows.sort(key=lambda r: r[0]["_kafka"]["offset"])
    problems = []
    if missing:
        problems.append({"missing_field_ids": missing[:10]})
    if wrong_ids:
        problems.append({"field_ids": wrong_ids[:10]})
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
