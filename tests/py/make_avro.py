#!/usr/bin/env python3
"""Avro test data from an independent encoder (fastavro), framed in the Confluent wire
format and wrapped in a segment built by kafka-python.

    make_avro.py OUT_DIR

Writes:
  OUT_DIR/orders-0/00000000000000000000.log   the segment (topic "orders", partition 0)
  OUT_DIR/registry.json   {"ids": {id: {"schemaType": ..., "schema": ...}}, "subjects": {subject: id}}
  OUT_DIR/refs/…          a schema with a registry reference (see references_case)
  OUT_DIR/orders_v2.avsc  the latest value schema, for the local-file schema source
  OUT_DIR/expected.jsonl  the table rows (good records), as check_parquet.py --rows compares them
  OUT_DIR/bad.json        offsets of the bad records and why they are bad

Schema v1 (id 1) and v2 (id 2, latest): v2 promotes `qty` int → long and adds `note`.
Every row of the Avro → Iceberg mapping table appears in the schemas.
"""
import base64
import datetime
import decimal
import io
import json
import os
import struct
import sys
import uuid

import fastavro
from segment_file import (KAFKA_COLUMN_TYPE, BenchValues, header_framed, write_bench_segment, write_expectations,
                          write_reference_case, write_segment)

UTC = datetime.timezone.utc
T0 = 1764000000000


def schema(version):
    fields = [
        {"name": "id", "type": "long"},
        {"name": "qty", "type": "int" if version == 1 else "long"},
        {"name": "active", "type": "boolean"},
        {"name": "ratio", "type": "float"},
        {"name": "score", "type": "double"},
        {"name": "blob", "type": "bytes"},
        {"name": "name", "type": "string"},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "counts", "type": {"type": "map", "values": "long"}},
        {"name": "code", "type": {"type": "fixed", "name": "Code", "size": 4}},
        {"name": "nickname", "type": ["null", "string"], "default": None},
        {"name": "either", "type": ["null", "int", "string"], "default": None},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "big", "type": {"type": "fixed", "name": "Big", "size": 8, "logicalType": "decimal", "precision": 18, "scale": 4}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "t_ms", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "t_us", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "ts_ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "ts_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "local_ts", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "address", "type": {"type": "record", "name": "Address", "fields": [
            {"name": "city", "type": "string"},
            {"name": "zip", "type": ["null", "string"], "default": None}]}},
        {"name": "history", "type": {"type": "array", "items": "Address"}},
    ]
    if version == 2:
        fields.append({"name": "note", "type": ["null", "string"], "default": None})
    return {"type": "record", "name": "Order", "namespace": "shop", "fields": fields}


def b64(b):
    return None if b is None else base64.b64encode(b).decode()


def record(i, version):
    ts = datetime.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC) + datetime.timedelta(hours=i)
    r = {
        "id": 1000 + i,
        "qty": (2**40 + i) if version == 2 and i % 3 == 0 else i * 7 - 3,
        "active": i % 2 == 0,
        "ratio": 0.5 + i,
        "score": 1.0 / (i + 3),
        "blob": bytes([i, 255, 0, 7]),
        "name": "ordér-%d ✓" % i,
        "status": ["NEW", "PAID", "SHIPPED"][i % 3],
        "tags": ["t%d" % j for j in range(i % 4)],
        "counts": {"k%d" % j: j * i for j in range(i % 3)},
        "code": b"C%03d" % i,
        "nickname": None if i % 2 else "nick%d" % i,
        "either": [None, i, "s%d" % i][i % 3],
        "price": decimal.Decimal("%d.%02d" % (i * 13, i % 100)) * (-1 if i % 5 == 4 else 1),
        "big": decimal.Decimal("123456.7890") + i,
        "day": datetime.date(2026, 1, 1) + datetime.timedelta(days=i),
        "t_ms": datetime.time(1, 2, 3, 4000 * (i + 1)),
        "t_us": datetime.time(4, 5, 6, 7 + i),
        "ts_ms": ts,
        "ts_us": ts + datetime.timedelta(microseconds=123),
        "local_ts": datetime.datetime(2026, 5, 6, 7, 8, 9, 10 + i),
        "uid": str(uuid.UUID(int=(i + 1) * 0x1234567890abcdef)),
        "address": {"city": "Città %d" % i, "zip": None if i % 2 else "%05d" % i},
        "history": [{"city": "old%d" % j, "zip": None} for j in range(i % 2)],
    }
    if version == 2:
        r["note"] = None if i % 4 == 0 else "note %d" % i
    return r


def expected_row(i, version, offset, ts_ms, key):
    r = record(i, version)
    row = {
        "_kafka": {
            "partition": 0, "offset": offset,
            "timestamp": datetime.datetime.fromtimestamp(ts_ms / 1000, UTC).isoformat(),
            "timestamp_type": "create", "headers": [], "key": b64(key),
        },
        "id": r["id"], "qty": r["qty"], "active": r["active"], "ratio": r["ratio"], "score": r["score"],
        "blob": b64(r["blob"]), "name": r["name"], "status": r["status"], "tags": r["tags"],
        "counts": {k: v for k, v in r["counts"].items()} if r["counts"] else {},
        "code": b64(r["code"]), "nickname": r["nickname"],
        "either": None if r["either"] is None else {
            "member0": r["either"] if isinstance(r["either"], int) else None,
            "member1": r["either"] if isinstance(r["either"], str) else None},
        "price": str(r["price"]), "big": str(r["big"]),
        "day": r["day"].isoformat(), "t_ms": r["t_ms"].isoformat(), "t_us": r["t_us"].isoformat(),
        "ts_ms": r["ts_ms"].isoformat(), "ts_us": r["ts_us"].isoformat(),
        "local_ts": r["local_ts"].isoformat(),
        "uid": b64(uuid.UUID(r["uid"]).bytes),
        "address": r["address"],
        "history": r["history"],
        "note": r.get("note"),
    }
    return row


def frame(schema_id, parsed, rec):
    buf = io.BytesIO()
    buf.write(struct.pack(">bI", 0, schema_id))
    fastavro.schemaless_writer(buf, parsed, rec)
    return buf.getvalue()


def main(out):
    os.makedirs(os.path.join(out, "orders-0"), exist_ok=True)
    schemas = {1: schema(1), 2: schema(2)}
    parsed = {k: fastavro.parse_schema(v) for k, v in schemas.items()}
    records, expected, bad = [], [], []
    offset = 0
    for i in range(30):
        version = 1 if i < 12 else 2
        key = None if i % 7 == 3 else b"order-%d" % i
        ts_ms = T0 + i * 1000
        value = frame(version, parsed[version], record(i, version))
        records.append((ts_ms, key, value))
        expected.append(expected_row(i, version, offset, ts_ms, key))
        offset += 1
        if i in (5, 17, 23, 27):
            headers = []
            if i == 27:  # an unknown schema id in a __value_schema_id header (the body decodes with v2)
                bad_value, headers = header_framed(frame(98, parsed[2], record(i, 2)), 0, b"\x00" + struct.pack(">I", 98))
            else:
                bad_value = {5: frame(99, parsed[1], record(i, 1)),                # unknown schema id
                             17: frame(2, parsed[2], record(i, 2))[:-9],           # truncated
                             23: b"\x01" + frame(2, parsed[2], record(i, 2))[1:]}[i]  # wrong magic byte
            records.append((ts_ms, b"bad", bad_value, headers))
            why = {5: "schema id 99", 17: "truncated", 23: "magic byte 1", 27: "schema id 98 in a header"}[i]
            bad.append({"offset": offset, "why": why, "key": b64(b"bad"), "value": b64(bad_value)})
            offset += 1
    # A tombstone: null value, all value columns null.
    records.append((T0 + 99_000, b"gone", None))
    row = {k: None for k in expected[0] if k != "_kafka"}
    row["_kafka"] = {"partition": 0, "offset": offset, "timestamp": datetime.datetime.fromtimestamp((T0 + 99_000) / 1000, UTC).isoformat(),
                     "timestamp_type": "create", "headers": [], "key": b64(b"gone")}
    expected.append(row)

    write_segment(os.path.join(out, "orders-0", "%020d.log" % 0), records, [10, 15], codec=4)
    registry = {"ids": {str(k): {"schemaType": "AVRO", "schema": json.dumps(v)} for k, v in schemas.items()},
                "subjects": {"orders-value": 2}}
    with open(os.path.join(out, "registry.json"), "w") as f:
        json.dump(registry, f)
    with open(os.path.join(out, "orders_v2.avsc"), "w") as f:
        json.dump(schemas[2], f)
    write_expectations(out, "", {"expected.jsonl": expected}, bad, DOCUMENTED_TYPES)


# The Arrow type of each column, as README's Avro mapping table documents it (pyarrow's
# spelling).
ADDRESS_TYPE = "struct<city: string, zip: string>"
DOCUMENTED_TYPES = {
    "_kafka": KAFKA_COLUMN_TYPE,
    "id": "int64", "qty": "int64", "active": "bool", "ratio": "float", "score": "double",
    "blob": "large_binary", "name": "string", "status": "string", "tags": "list<element: string not null>",
    "counts": "map<string, int64 ('counts')>", "code": "fixed_size_binary[4]", "nickname": "string",
    "either": "struct<member0: int32, member1: string>", "price": "decimal128(9, 2)", "big": "decimal128(18, 4)",
    "day": "date32[day]", "t_ms": "time64[us]", "t_us": "time64[us]", "ts_ms": "timestamp[us, tz=+00:00]",
    "ts_us": "timestamp[us, tz=+00:00]", "local_ts": "timestamp[us]", "uid": "fixed_size_binary[16]",
    "address": ADDRESS_TYPE, "history": f"list<element: {ADDRESS_TYPE} not null>", "note": "string",
}


BENCH_CODECS = {"zstd": 4, "lz4": 3, "none": 0}


def bench_seed(out, mib=4):
    """Segments of ~`mib` MiB of v2 records (batches of ~64 KiB before compression) for
    the benchmarks, one per codec (`seed_avro_<codec>.log`, the same records in each),
    with the schema file beside them. Every record is new (unique ids and UUIDs, random
    numbers and text), as in a real topic; the codecs are written in parallel."""
    import multiprocessing
    os.makedirs(out, exist_ok=True)
    with multiprocessing.Pool(min(len(BENCH_CODECS), os.cpu_count() or 1)) as pool:
        pool.starmap(bench_segment, [(out, codec, mib) for codec in BENCH_CODECS])
    with open(os.path.join(out, "orders_v2.avsc"), "w") as f:
        json.dump(schema(2), f)


def bench_segment(out, codec, mib):
    parsed = fastavro.parse_schema(schema(2))
    values = BenchValues()

    def varied(i):
        r = record(i % 200, 2)
        r.update(**values.common(i))
        r.update(uid=str(uuid.UUID(int=values.rng.getrandbits(128))),
                 price=decimal.Decimal(values.rng.randrange(-10**8, 10**8)) / 100)
        return r

    write_bench_segment(os.path.join(out, "seed_avro_%s.log" % codec), BENCH_CODECS[codec], mib,
                        lambda i: frame(2, parsed, varied(i)), T0)

ADDRESS_REF = {"type": "record", "name": "Address", "namespace": "common", "fields": [
    {"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "string"], "default": None}]}
CUSTOMER = {"type": "record", "name": "Customer", "namespace": "crm", "fields": [
    {"name": "name", "type": "string"}, {"name": "home", "type": "common.Address"},
    {"name": "past", "type": {"type": "array", "items": "common.Address"}}]}


def references_case(out):
    """A registry schema using a named type of another subject (a schema reference):
    customers-value (id 22) uses common.Address, subject address version 1 (id 21).

      OUT_DIR/refs/customers-0/…log  four Customer records framed with schema id 22
      OUT_DIR/refs/registry.json     ids, subjects and the address subject's versions
      OUT_DIR/refs/expected.jsonl    the rows pyarrow must read back
    """
    named = {}
    fastavro.parse_schema(ADDRESS_REF, named_schemas=named)
    parsed = fastavro.parse_schema(CUSTOMER, named_schemas=named)
    records, expected = [], []
    for i in range(4):
        home = {"city": "Città %d" % i, "zip": None if i % 2 else "%05d" % i}
        past = [{"city": "old%d" % j, "zip": None} for j in range(i % 3)]
        rec = {"name": "customer %d" % i, "home": home, "past": past}
        ts_ms = T0 + i * 1000
        key = b"c%d" % i
        records.append((ts_ms, key, frame(22, parsed, rec)))
        expected.append(dict(rec, _kafka={
            "partition": 0, "offset": i,
            "timestamp": datetime.datetime.fromtimestamp(ts_ms / 1000, UTC).isoformat(),
            "timestamp_type": "create", "headers": [], "key": b64(key)}))
    write_reference_case(out, "customers", (22, json.dumps(CUSTOMER), "common.Address"),
                         (21, json.dumps(ADDRESS_REF), "address"), "AVRO", records, expected)


if __name__ == "__main__":
    if sys.argv[1] == "--bench-seed":
        bench_seed(sys.argv[2], *(int(a) for a in sys.argv[3:4]))
    else:
        main(sys.argv[1])
        references_case(sys.argv[1])
