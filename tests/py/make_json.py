#!/usr/bin/env python3
"""JSON test data from Python's json module, in segments built by kafka-python.

    make_json.py OUT_DIR
    make_json.py --bench-seed OUT_DIR [MIB]

The second writes OUT_DIR/seed_json_zstd.log (~MIB MiB of Confluent-framed JSON Schema
values, every record new, zstd batches) and OUT_DIR/orders.schema.json, for the convert
benchmark.

Writes two topics:
  OUT_DIR/events-0/…log   JSON Schema values (Confluent wire format, schema id 7);
                          OUT_DIR/events.registry.json, OUT_DIR/events.schema.json,
                          OUT_DIR/events.expected.jsonl, OUT_DIR/events.bad.json
  OUT_DIR/clicks-0/…log   plain JSON values (no schema), whose types must be inferred;
                          OUT_DIR/clicks.expected.jsonl, OUT_DIR/clicks.bad.json
and for each topic OUT_DIR/<topic>.types.json: each column's Arrow type, as README's
mapping table (JSON Schema) or inference rules (plain JSON) give it.
"""
import base64
import datetime
import json
import os
import sys
import uuid

from segment_file import (KAFKA_COLUMN_TYPE, BenchValues, write_bench_segment, write_expectations, write_reference_case,
                          write_segment)

UTC = datetime.timezone.utc
T0 = 1764000000000

EVENTS_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Event",
    "type": "object",
    "definitions": {
        "Place": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": ["string", "null"]}},
                  "required": ["city"]},
    },
    "properties": {
        "id": {"type": "integer"},
        "ok": {"type": "boolean"},
        "score": {"type": "number"},
        "label": {"type": "string"},
        "at": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "clock": {"type": "string", "format": "time"},
        "uid": {"type": "string", "format": "uuid"},
        "kind": {"enum": ["A", "B", "C"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
        "maybe": {"type": ["integer", "null"]},
        "either": {"oneOf": [{"type": "null"}, {"type": "string"}]},
        "mixed": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
        "place": {"$ref": "#/definitions/Place"},
        "history": {"type": "array", "items": {"$ref": "#/definitions/Place"}},
    },
    "required": ["id"],
}


def b64(b):
    return None if b is None else base64.b64encode(b).decode()


def segment(path, records):
    """records: list of (timestamp ms, key bytes|None, value bytes|None) → offsets 0.."""
    write_segment(path, records, [len(records) // 2], codec=1)


def kafka(offset, ts, key):
    return {"partition": 0, "offset": offset, "timestamp": datetime.datetime.fromtimestamp(ts / 1000, UTC).isoformat(),
            "timestamp_type": "create", "headers": [], "key": b64(key)}


def events(out):
    records, expected, bad = [], [], []
    for i in range(20):
        at = datetime.datetime(2026, 3, 4, 5, 6, 7, 123456, tzinfo=UTC) + datetime.timedelta(days=i)
        u = uuid.UUID(int=0xfeedface * (i + 1))
        v = {
            "id": i, "ok": i % 2 == 0, "score": i * 1.5, "label": "é%d" % i, "at": at.isoformat().replace("+00:00", "Z"),
            "day": (datetime.date(2026, 1, 1) + datetime.timedelta(days=i)).isoformat(), "clock": "12:34:%02d.5" % i,
            "uid": str(u), "kind": "ABC"[i % 3], "tags": ["x"] * (i % 3), "counts": {"a": i, "b": -i} if i % 2 else {},
            "maybe": None if i % 3 == 0 else i, "either": None if i % 2 else "e%d" % i,
            "mixed": i if i % 2 else "m%d" % i,
            "place": {"city": "C%d" % i, "zip": None if i % 2 else "Z%d" % i},
            "history": [{"city": "H%d" % j} for j in range(i % 2)],
        }
        if i == 4:
            del v["label"]  # optional field absent → null
        ts, key = T0 + i, b"k%d" % i
        records.append((ts, key, b"\x00\x00\x00\x00\x07" + json.dumps(v).encode()))
        row = {"_kafka": kafka(len(records) - 1, ts, key)}
        for name in EVENTS_SCHEMA["properties"]:
            row[name] = v.get(name)
        row["at"] = at.isoformat()
        row["clock"] = datetime.time(12, 34, i, 500000).isoformat()
        row["uid"] = b64(u.bytes)
        row["mixed"] = json.dumps(v["mixed"]) if not isinstance(v["mixed"], str) else v["mixed"]
        row["place"] = {"city": v["place"]["city"], "zip": v["place"]["zip"]}
        row["history"] = [{"city": h["city"], "zip": None} for h in v["history"]]
        expected.append(row)
        if i in (3, 9, 14, 17):
            why = {3: "not JSON", 9: "required field `city` is missing", 14: "a string where Int64 was expected",
                   17: "magic byte"}[i]
            payload = {3: b"\x00\x00\x00\x00\x07{not json",
                       9: b"\x00\x00\x00\x00\x07" + json.dumps({"id": 1, "place": {"zip": "x"}}).encode(),
                       14: b"\x00\x00\x00\x00\x07" + json.dumps({"id": "one"}).encode(),
                       17: json.dumps({"id": 1}).encode()}[i]
            records.append((ts, b"bad", payload))
            bad.append({"offset": len(records) - 1, "why": why, "key": b64(b"bad"), "value": b64(payload)})
    segment(os.path.join(out, "events-0", "%020d.log" % 0), records)
    with open(os.path.join(out, "events.registry.json"), "w") as f:
        json.dump({"ids": {"7": {"schemaType": "JSON", "schema": json.dumps(EVENTS_SCHEMA)}}, "subjects": {"events-value": 7}}, f)
    with open(os.path.join(out, "events.schema.json"), "w") as f:
        json.dump(EVENTS_SCHEMA, f)
    write_expectations(out, "events.", {"expected.jsonl": expected}, bad, EVENTS_TYPES)


# The Arrow type of each `events` column, as README's JSON Schema mapping table documents
# it (pyarrow's spelling): every row of the table is here.
PLACE_TYPE = "struct<city: string not null, zip: string>"
EVENTS_TYPES = {
    "_kafka": KAFKA_COLUMN_TYPE, "id": "int64", "ok": "bool", "score": "double", "label": "string",
    "at": "timestamp[us, tz=+00:00]", "day": "date32[day]", "clock": "time64[us]", "uid": "fixed_size_binary[16]",
    "kind": "string", "tags": "list<element: string not null>", "counts": "map<string, int64 ('counts')>",
    "maybe": "int64", "either": "string", "mixed": "string", "place": PLACE_TYPE,
    "history": f"list<element: {PLACE_TYPE} not null>",
}


def clicks(out):
    records, values, bad = [], [], []
    for i in range(16):
        v = {"user": "u%d" % i, "n": i, "seen": i % 2 == 0, "gone": None}   # boolean; only null → string
        if i >= 5:
            v["price"] = i if i % 2 else i + 0.25          # long and double → double
        if i >= 8:
            v["meta"] = {"ref": "r%d" % i, "depth": i}     # a struct appears mid-segment
        v["odd"] = "s%d" % i if i % 3 else [i, i + 1]      # string vs array → JSON text
        if i % 4 == 0:
            v["tags"] = ["t%d" % i]
        ts = T0 + i
        records.append((ts, b"c%d" % i, json.dumps(v).encode()))
        values.append((len(records) - 1, ts, b"c%d" % i, v))
        if i == 6:
            records.append((ts, b"bad", b"{\"user\": "))
            bad.append({"offset": len(records) - 1, "why": "not JSON", "key": b64(b"bad"), "value": b64(b"{\"user\": ")})
    fields = sorted({k for _, _, _, v in values for k in v})
    expected = []
    for offset, ts, key, v in values:
        row = {"_kafka": kafka(offset, ts, key)}
        for name in fields:
            x = v.get(name)
            if name == "price" and x is not None:
                x = float(x)
            if name == "odd" and not isinstance(x, str):
                x = json.dumps(x, separators=(",", ":"), sort_keys=True)
            if name == "meta" and x is not None:
                x = {"depth": x["depth"], "ref": x["ref"]}
            row[name] = x
        expected.append(row)
    segment(os.path.join(out, "clicks-0", "%020d.log" % 0), records)
    write_expectations(out, "clicks.", {"expected.jsonl": expected}, bad, CLICKS_TYPES)


# The Arrow type of each `clicks` column, by README's rules for plain JSON.
CLICKS_TYPES = {
    "_kafka": KAFKA_COLUMN_TYPE, "user": "string", "n": "int64", "seen": "bool", "gone": "string",
    "price": "double", "meta": "struct<depth: int64, ref: string>", "odd": "string", "tags": "list<element: string>",
}


MONEY_SCHEMA = {"type": "object", "properties": {"currency": {"type": "string"}, "units": {"type": "integer"}},
                "required": ["units"]}
PAYMENT_SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"}, "amount": {"$ref": "money.json"}},
                  "required": ["id"]}


def references_case(out):
    """A registry JSON Schema whose `$ref` names another subject's schema (a schema
    reference): payments-value (id 32) refers to money.json, subject money version 1 (id 31)."""
    records, expected = [], []
    for i in range(4):
        v = {"id": i, "amount": {"currency": "EUR", "units": 100 * i - 50}}
        ts, key = T0 + i, b"p%d" % i
        records.append((ts, key, b"\x00\x00\x00\x00\x20" + json.dumps(v).encode()))
        expected.append(dict(v, _kafka=kafka(i, ts, key)))
    write_reference_case(out, "payments", (32, json.dumps(PAYMENT_SCHEMA), "money.json"),
                         (31, json.dumps(MONEY_SCHEMA), "money"), "JSON", records, expected)


BENCH_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "properties": {
        "id": {"type": "integer"}, "qty": {"type": "integer"}, "score": {"type": "number"},
        "ratio": {"type": "number"}, "paid": {"type": "boolean"}, "name": {"type": "string"},
        "note": {"type": "string"}, "status": {"enum": ["NEW", "PAID", "SHIPPED", "RETURNED"]},
        "at": {"type": "string", "format": "date-time"}, "day": {"type": "string", "format": "date"},
        "uid": {"type": "string", "format": "uuid"}, "coupon": {"type": ["string", "null"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
        "place": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": ["string", "null"]}},
                  "required": ["city"]},
    },
    "required": ["id"],
}


def bench_seed(out, mib=4):
    """`seed_json_zstd.log`: ~`mib` MiB of BENCH_SCHEMA values (Confluent wire format,
    schema id 7) in zstd batches of ~64 KiB, every record new (unique ids and UUIDs,
    random numbers and text); and `orders.schema.json` beside it."""
    values = BenchValues()
    rng = values.rng
    day0 = datetime.date(2026, 1, 1)
    at0 = datetime.datetime(2026, 1, 1, tzinfo=UTC)

    def value(i):
        c = values.common(i)
        v = {k: c[k] for k in ("id", "qty", "score", "ratio", "name", "note", "tags", "counts")}
        at = at0 + datetime.timedelta(microseconds=rng.randrange(10**13))
        v.update(paid=rng.random() < 0.5, status=rng.choice(BENCH_SCHEMA["properties"]["status"]["enum"]),
                 at=at.isoformat().replace("+00:00", "Z"), day=(day0 + datetime.timedelta(days=i % 200)).isoformat(),
                 uid=str(uuid.UUID(int=rng.getrandbits(128))),
                 coupon=None if rng.random() < 0.7 else "C-%08d" % rng.randrange(10**8),
                 place={"city": rng.choice(values.words).title(), "zip": None if i % 3 else "%05d" % (i % 200)})
        return b"\x00\x00\x00\x00\x07" + json.dumps(v).encode()

    os.makedirs(out, exist_ok=True)
    write_bench_segment(os.path.join(out, "seed_json_zstd.log"), 4, mib, value, T0)
    with open(os.path.join(out, "orders.schema.json"), "w") as f:
        json.dump(BENCH_SCHEMA, f)


if __name__ == "__main__" and sys.argv[1] == "--bench-seed":
    bench_seed(sys.argv[2], *(int(a) for a in sys.argv[3:4]))
elif __name__ == "__main__":
    os.makedirs(sys.argv[1], exist_ok=True)
    events(sys.argv[1])
    clicks(sys.argv[1])
    references_case(sys.argv[1])
