"""Seed inputs for the `decode_payload` fuzz target (`floe_core::fuzz`): valid values of
each format (the JSON values serve both the JSON Schema and the plain JSON topic),
encoded by fastavro, Google's protobuf package and Python's json, in the harness's
input layout (format byte, header flag, values joined by the separator).

  python tests/py/make_fuzz_seeds.py fuzz/seeds/decode_payload   (from the repository root)
"""
import datetime
import hashlib
import io
import json
import os
import sys
import uuid

import fastavro

import make_avro
import make_protobuf

SEPARATOR = b"\xff\x00\xff\x00"
AVRO, PROTOBUF, JSON_SCHEMA, PLAIN_JSON = 0, 1, 2, 3


def avro_values():
    parsed = fastavro.parse_schema(make_avro.schema(2))
    out = []
    for i in range(6):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, make_avro.record(i, 2))
        out.append(buf.getvalue())
    return out


def protobuf_values():
    order = make_protobuf.classes(2)["Order"]
    return [make_protobuf.encode_order(order, make_protobuf.order(i, 2)) for i in range(6)]


def json_values():
    out = []
    for i in range(6):
        at = datetime.datetime(2026, 3, 4, 5, 6, 7, tzinfo=datetime.timezone.utc) + datetime.timedelta(days=i)
        v = {"id": i, "ok": i % 2 == 0, "score": i * 1.5, "label": "é%d" % i,
             "at": at.isoformat().replace("+00:00", "Z"), "day": "2026-01-0%d" % (i + 1),
             "clock": "12:34:%02d.5" % i, "uid": str(uuid.UUID(int=0xfeedface * (i + 1))),
             "kind": "ABC"[i % 3], "tags": ["x"] * (i % 3), "counts": {"a": i} if i % 2 else {},
             "maybe": None if i % 3 == 0 else i, "either": None if i % 2 else "e%d" % i,
             "mixed": i if i % 2 else "m%d" % i, "place": {"city": "C%d" % i, "zip": None},
             "history": [{"city": "H%d" % j} for j in range(i % 2)]}
        out.append(json.dumps(v).encode())
    return out


def main(out):
    os.makedirs(out, exist_ok=True)
    for fmt, values in [(AVRO, avro_values()), (PROTOBUF, protobuf_values()), (JSON_SCHEMA, json_values()),
                        (PLAIN_JSON, json_values())]:
        inputs = [[v] for v in values] + [values]
        for vs in inputs:
            data = bytes([fmt, 1]) + SEPARATOR.join(vs)
            with open(os.path.join(out, hashlib.sha1(data).hexdigest()), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main(sys.argv[1])
