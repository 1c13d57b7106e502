#!/usr/bin/env python3
"""Protobuf test data from an independent encoder (Google's `protobuf` package, message
classes built at run time from FileDescriptorProtos — no codegen), framed in the
Confluent wire format and wrapped in a segment built by kafka-python.

    make_protobuf.py OUT_DIR
    make_protobuf.py --bench-seed OUT_DIR [MIB]   the benchmark's segment (see bench_seed)
    make_protobuf.py --schema-files OUT_DIR       only orders_v2.proto and orders_v2.desc

Writes:
  OUT_DIR/orders-0/00000000000000000000.log   the segment (topic "orders", partition 0)
  OUT_DIR/registry.json   {"ids": {id: {"schemaType": "PROTOBUF", "schema": <.proto text>}}, "subjects": {...}}
  OUT_DIR/orders_v2.proto the latest value schema as .proto text (local-file source)
  OUT_DIR/orders_v2.desc  the same as a binary FileDescriptorSet, imports included
  OUT_DIR/expected.jsonl  the table rows (good records), registry source
  OUT_DIR/expected_local.jsonl  the table rows with the local v2 file (ids not checked)
  OUT_DIR/bad.json        offsets of the bad records and why they are bad
  OUT_DIR/types.json      each column's Arrow type, as README's Protobuf mapping table gives it
  OUT_DIR/refs/…          a schema with a registry reference (see references_case)

Schema v1 (id 1) and v2 (id 2, latest): v2 promotes `qty` int32 → int64 and adds `note`.
Both define `shop.Order` (first message) and `shop.Refund`; two v2 records are Refunds,
framed with the explicit message-index array [1]. Every row of the Protobuf → Iceberg
mapping table appears in `shop.Order`. The .proto text and the descriptors come from one
field list below; protox (Floe's side) parses the text, this encoder uses the descriptors.
"""
import base64
import datetime
import json
import os
import struct
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf import timestamp_pb2, wrappers_pb2
from segment_file import (KAFKA_COLUMN_TYPE, BenchValues, write_bench_segment, write_expectations,
                          write_reference_case, write_segment)

UTC = datetime.timezone.utc
T0 = 1764000000000
FD = descriptor_pb2.FieldDescriptorProto
SCALARS = {
    "double": FD.TYPE_DOUBLE, "float": FD.TYPE_FLOAT, "int64": FD.TYPE_INT64, "uint64": FD.TYPE_UINT64,
    "int32": FD.TYPE_INT32, "fixed64": FD.TYPE_FIXED64, "fixed32": FD.TYPE_FIXED32, "bool": FD.TYPE_BOOL,
    "string": FD.TYPE_STRING, "bytes": FD.TYPE_BYTES, "uint32": FD.TYPE_UINT32, "sfixed32": FD.TYPE_SFIXED32,
    "sfixed64": FD.TYPE_SFIXED64, "sint32": FD.TYPE_SINT32, "sint64": FD.TYPE_SINT64,
}
WRAPPERS = ["StringValue", "Int32Value", "Int64Value", "BoolValue", "DoubleValue", "FloatValue", "BytesValue",
            "UInt32Value", "UInt64Value"]
WRAPPER_FIELDS = ["nickname", "i32w", "i64w", "bw", "dw", "fw", "byw", "u32w", "u64w"]
STATUS = ["NEW", "PAID", "SHIPPED"]


def order_fields(version):
    """(name, number, type, kind): kind is "", "repeated", "optional", "map" (type is
    (key, value)) or "oneof:<name>"."""
    f = [
        ("id", 1, "int64", ""), ("qty", 2, "int32" if version == 1 else "int64", ""), ("active", 3, "bool", ""),
        ("ratio", 4, "float", ""), ("score", 5, "double", ""), ("blob", 6, "bytes", ""), ("name", 7, "string", ""),
        ("status", 8, "Status", ""), ("delta", 9, "sint32", ""), ("big_delta", 10, "sint64", ""),
        ("sf32", 11, "sfixed32", ""), ("sf64", 12, "sfixed64", ""), ("u32", 13, "uint32", ""),
        ("u64", 14, "uint64", ""), ("fx32", 15, "fixed32", ""), ("fx64", 16, "fixed64", ""),
        ("tags", 17, "string", "repeated"), ("counts", 18, ("string", "int64"), "map"),
        ("address", 19, "Address", ""), ("history", 20, "Address", "repeated"),
        ("card", 21, "string", "oneof:payment"), ("voucher", 22, "int64", "oneof:payment"),
        ("created", 23, "google.protobuf.Timestamp", ""),
    ]
    f += [(n, 24 + k, "google.protobuf." + w, "") for k, (n, w) in enumerate(zip(WRAPPER_FIELDS, WRAPPERS))]
    f += [("memo", 33, "string", "optional"), ("by_zone", 34, ("int32", "Address"), "map"),
          ("scores", 35, "int32", "repeated")]
    if version == 2:
        f.append(("note", 36, "string", ""))
    return f


ADDRESS = [("city", 1, "string", ""), ("zip", 2, "string", "optional")]
REFUND = [("id", 1, "int64", ""), ("reason", 2, "string", ""), ("note", 3, "string", "")]
LOCAL_TYPES = {"Status": (FD.TYPE_ENUM, ".shop.Order.Status"), "Address": (FD.TYPE_MESSAGE, ".shop.Order.Address")}


# ---- the .proto text ----

def proto_text(version):
    def line(name, number, t, kind):
        if kind == "map":
            return "map<%s, %s> %s = %d;" % (t[0], t[1], name, number)
        prefix = {"repeated": "repeated ", "optional": "optional "}.get(kind, "")
        return "%s%s %s = %d;" % (prefix, t, name, number)

    out = ['syntax = "proto3";', "package shop;", 'import "google/protobuf/timestamp.proto";',
           'import "google/protobuf/wrappers.proto";', "", "message Order {",
           "  enum Status { %s }" % " ".join("%s = %d;" % (s, i) for i, s in enumerate(STATUS)),
           "  message Address {"] + ["    " + line(*f) for f in ADDRESS] + ["  }"]
    done_oneofs = set()
    fields = order_fields(version)
    for f in fields:
        if f[3].startswith("oneof:"):
            group = f[3][6:]
            if group not in done_oneofs:
                done_oneofs.add(group)
                members = [g for g in fields if g[3] == f[3]]
                out.append("  oneof %s { %s }" % (group, " ".join(line(g[0], g[1], g[2], "") for g in members)))
            continue
        out.append("  " + line(*f))
    out += ["}", "", "message Refund {"] + ["  " + line(*f) for f in REFUND] + ["}", ""]
    return "\n".join(out)


# ---- the descriptors ----

def camel(name):
    return "".join(p[:1].upper() + p[1:] for p in name.split("_"))


def set_type(fd, t):
    if t in SCALARS:
        fd.type = SCALARS[t]
    elif t in LOCAL_TYPES:
        fd.type, fd.type_name = LOCAL_TYPES[t]
    else:
        fd.type, fd.type_name = FD.TYPE_MESSAGE, "." + t


def message_proto(name, fields, scope):
    m = descriptor_pb2.DescriptorProto(name=name)
    real_oneofs, synthetic = [], []
    for fname, number, t, kind in fields:
        fd = m.field.add(name=fname, number=number, json_name=fname if "_" not in fname else
                         fname.split("_")[0] + "".join(p.capitalize() for p in fname.split("_")[1:]))
        fd.label = FD.LABEL_REPEATED if kind in ("repeated", "map") else FD.LABEL_OPTIONAL
        if kind == "map":
            entry = m.nested_type.add(name=camel(fname) + "Entry")
            entry.options.map_entry = True
            for k, (n, kt) in enumerate([("key", t[0]), ("value", t[1])]):
                e = entry.field.add(name=n, number=k + 1, label=FD.LABEL_OPTIONAL, json_name=n)
                set_type(e, kt)
            fd.type, fd.type_name = FD.TYPE_MESSAGE, ".%s.%s.%s" % (scope, name, entry.name)
            continue
        set_type(fd, t)
        if kind.startswith("oneof:"):
            if kind[6:] not in real_oneofs:
                real_oneofs.append(kind[6:])
            fd.oneof_index = real_oneofs.index(kind[6:])
        elif kind == "optional":
            fd.proto3_optional = True
            synthetic.append(fd)
    for o in real_oneofs:
        m.oneof_decl.add(name=o)
    # Synthetic oneofs of proto3 `optional` fields come after the real ones.
    for fd in synthetic:
        fd.oneof_index = len(m.oneof_decl)
        m.oneof_decl.add(name="_" + fd.name)
    return m


def file_proto(version):
    f = descriptor_pb2.FileDescriptorProto(name="orders.proto", package="shop", syntax="proto3")
    f.dependency.extend(["google/protobuf/timestamp.proto", "google/protobuf/wrappers.proto"])
    order = message_proto("Order", order_fields(version), "shop")
    order.enum_type.add(name="Status").value.extend(
        [descriptor_pb2.EnumValueDescriptorProto(name=s, number=i) for i, s in enumerate(STATUS)])
    address = message_proto("Address", ADDRESS, "shop.Order")
    order.nested_type.insert(0, address)
    f.message_type.append(order)
    f.message_type.append(message_proto("Refund", REFUND, "shop"))
    return f


def well_known():
    out = []
    for module in (timestamp_pb2, wrappers_pb2):
        p = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(p)
        out.append(p)
    return out


def classes(version):
    pool = descriptor_pool.DescriptorPool()
    for p in well_known():
        pool.Add(p)
    pool.Add(file_proto(version))
    get = lambda n: message_factory.GetMessageClass(pool.FindMessageTypeByName(n))
    return {"Order": get("shop.Order"), "Refund": get("shop.Refund")}


# ---- records ----

def b64(b):
    return None if b is None else base64.b64encode(b).decode()


def order(i, version):
    """The record's values (None: not set)."""
    r = {
        "id": 1000 + i,
        "qty": (2**40 + i) if version == 2 and i % 3 == 0 else i * 7 - 3,
        "active": i % 2 == 0,
        "ratio": 0.5 + i,
        "score": 1.0 / (i + 3),
        "blob": bytes([i, 255, 0, 7]) if i % 6 else b"",
        "name": "ordér-%d ✓" % i if i % 5 else "",
        "status": 7 if i == 9 else i % 3,
        "delta": -3 * i, "big_delta": -(2**40) - i, "sf32": -i, "sf64": -(2**50) - i,
        "u32": 2**32 - 1 - i, "u64": 2**64 - 1 - i if i % 2 else i, "fx32": i * 1000, "fx64": 2**63 + i,
        "tags": ["t%d" % j for j in range(i % 4)],
        "counts": {"k%d" % j: j * i - 1 for j in range(i % 3)},
        "address": None if i % 4 == 3 else {"city": "Città %d" % i, "zip": None if i % 2 else "%05d" % i},
        "history": [{"city": "old%d" % j, "zip": None if j else "0%d" % i} for j in range(i % 3)],
        "card": "card-%d" % i if i % 3 == 0 else None,
        "voucher": i * 11 if i % 3 == 1 else None,
        "created": None if i % 7 == 6 else (1767322800 + i * 3600, 678123456 + i),
        "nickname": None if i % 2 else ("" if i == 4 else "nick%d" % i),
        "i32w": None if i % 3 == 2 else i % 4 - 1,
        "i64w": -(2**40) - i if i % 2 else None,
        "bw": None if i % 5 == 4 else i % 2 == 0,
        "dw": i * 0.25 if i % 3 else None,
        "fw": i + 0.5 if i % 2 else None,
        "byw": bytes([i]) if i % 3 else None,
        "u32w": 2**32 - 1 if i % 4 == 0 else None,
        "u64w": 2**64 - 1 if i % 5 == 0 else None,
        "memo": None if i % 3 == 0 else ("" if i % 3 == 1 else "memo %d" % i),
        "by_zone": {j * 10 - 5: {"city": "z%d" % j, "zip": "9%04d" % j} for j in range(i % 3)},
        "scores": [i, -i, 2**31 - 1][: i % 4],
    }
    if version == 2:
        r["note"] = "" if i % 4 == 0 else "note %d" % i
    return r


def set_address(msg, a):
    msg.city = a["city"]
    if a["zip"] is not None:
        msg.zip = a["zip"]


def encode_order(cls, r):
    m = cls()
    for k in ("id", "qty", "active", "ratio", "score", "blob", "name", "status", "delta", "big_delta", "sf32",
              "sf64", "u32", "u64", "fx32", "fx64", "note"):
        if k in r:
            setattr(m, k, r[k])
    m.tags.extend(r["tags"])
    for k, v in r["counts"].items():
        m.counts[k] = v
    if r["address"] is not None:
        set_address(m.address, r["address"])
    for a in r["history"]:
        set_address(m.history.add(), a)
    for k in ("card", "voucher", "memo"):
        if r[k] is not None:
            setattr(m, k, r[k])
    if r["created"] is not None:
        m.created.seconds, m.created.nanos = r["created"]
    for k in WRAPPER_FIELDS:
        if r[k] is not None:
            getattr(m, k).value = r[k]
    for k, a in r["by_zone"].items():
        set_address(m.by_zone[k], a)
    m.scores.extend(r["scores"])
    return m.SerializeToString()


def zigzag_varint(n):
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def indexes(path):
    """Confluent's message-index array; [0] is the single byte 0."""
    if path == [0]:
        return b"\x00"
    return zigzag_varint(len(path)) + b"".join(zigzag_varint(i) for i in path)


def frame(schema_id, path, body):
    return struct.pack(">bI", 0, schema_id) + indexes(path) + body


def kafka_meta(offset, ts_ms, key):
    return {"partition": 0, "offset": offset,
            "timestamp": datetime.datetime.fromtimestamp(ts_ms / 1000, UTC).isoformat(),
            "timestamp_type": "create", "headers": [], "key": b64(key)}


def expected_order(r, note):
    row = {k: r[k] for k in ("id", "qty", "active", "ratio", "score", "name", "delta", "big_delta", "sf32",
                             "sf64", "u32", "fx32", "tags", "counts", "address", "history", "card", "voucher",
                             "memo", "scores", "nickname", "i32w", "i64w", "bw", "dw", "fw", "u32w")}
    row["blob"] = b64(r["blob"])
    row["status"] = STATUS[r["status"]] if r["status"] < len(STATUS) else str(r["status"])
    for k in ("u64", "fx64", "u64w"):
        row[k] = None if r[k] is None else str(r[k])
    row["byw"] = b64(r["byw"])
    row["by_zone"] = {str(k): v for k, v in r["by_zone"].items()}
    if r["created"] is None:
        row["created"] = None
    else:
        s, n = r["created"]
        t = datetime.datetime.fromtimestamp(s, UTC) + datetime.timedelta(microseconds=n // 1000)
        row["created"] = t.isoformat()
    row["note"] = note
    return row


def main(out):
    os.makedirs(os.path.join(out, "orders-0"), exist_ok=True)
    cls = {1: classes(1), 2: classes(2)}
    records, expected, local, bad = [], [], [], []
    columns = None
    offset = 0

    def add(ts_ms, key, value, row, local_row):
        nonlocal offset
        records.append((ts_ms, key, value))
        meta = kafka_meta(offset, ts_ms, key)
        if row is not None:
            expected.append(dict(row, _kafka=meta))
        if local_row is not None:
            local.append(dict(local_row, _kafka=meta))
        offset += 1

    for i in range(30):
        version = 1 if i < 12 else 2
        key = None if i % 7 == 3 else b"order-%d" % i
        ts_ms = T0 + i * 1000
        if i in (14, 26):
            refund = cls[2]["Refund"](id=5000 + i, reason="dup", note="refund %d" % i)
            row = {c: None for c in columns}
            row.update(id=5000 + i, note="refund %d" % i)
            add(ts_ms, key, frame(2, [1], refund.SerializeToString()), row, row)
        else:
            r = order(i, version)
            row = expected_order(r, r.get("note"))
            columns = columns or list(row)
            # With the local v2 file, v1 payloads decode with v2: `note` is proto3 with no
            # presence, so its default.
            add(ts_ms, key, frame(version, [0], encode_order(cls[version]["Order"], r)), row,
                expected_order(r, r.get("note", "")))
        if i in (5, 17, 23):
            r = order(i, 1 if i == 5 else 2)
            body = encode_order(cls[1 if i == 5 else 2]["Order"], r)
            if i == 5:  # unknown schema id (the local file ignores ids: a good row there)
                add(ts_ms, b"bad", frame(99, [0], body), None, expected_order(r, ""))
            elif i == 17:  # truncated: cut until the reference decoder rejects it too
                for cut in range(3, len(body)):
                    try:
                        cls[2]["Order"].FromString(body[:-cut])
                    except Exception:
                        break
                else:
                    raise SystemExit("no truncation the decoder rejects")
                add(ts_ms, b"bad", frame(2, [0], body[:-cut]), None, None)
            else:  # a message index the schema does not have
                add(ts_ms, b"bad", frame(2, [7], body), None, None)
            why = {5: "schema id 99", 17: "truncated", 23: "message index"}[i]
            _, bad_key, bad_value = records[-1]
            bad.append({"offset": offset - 1, "why": why, "key": b64(bad_key), "value": b64(bad_value)})
    # A tombstone: null value, all value columns null.
    row = {c: None for c in columns}
    add(T0 + 99_000, b"gone", None, row, row)

    write_segment(os.path.join(out, "orders-0", "%020d.log" % 0), records, [10, 15])
    registry = {"ids": {str(v): {"schemaType": "PROTOBUF", "schema": proto_text(v)} for v in (1, 2)},
                "subjects": {"orders-value": 2}}
    with open(os.path.join(out, "registry.json"), "w") as f:
        json.dump(registry, f)
    write_schema_files(out)
    write_expectations(out, "", {"expected.jsonl": expected, "expected_local.jsonl": local}, bad, DOCUMENTED_TYPES)


# The Arrow type of each column of `shop.Order` v2, as README's Protobuf mapping table
# documents it (pyarrow's spelling): every row of the table is here.
ADDRESS_TYPE = "struct<city: string, zip: string>"
DOCUMENTED_TYPES = {
    "_kafka": KAFKA_COLUMN_TYPE,
    "id": "int64", "qty": "int64", "active": "bool", "ratio": "float", "score": "double",
    "blob": "large_binary", "name": "string", "status": "string", "delta": "int32", "big_delta": "int64",
    "sf32": "int32", "sf64": "int64", "u32": "int64", "u64": "decimal128(20, 0)", "fx32": "int64",
    "fx64": "decimal128(20, 0)", "tags": "list<element: string not null>",
    "counts": "map<string, int64 ('counts')>", "address": ADDRESS_TYPE,
    "history": f"list<element: {ADDRESS_TYPE} not null>", "card": "string", "voucher": "int64",
    "created": "timestamp[us, tz=+00:00]", "nickname": "string", "i32w": "int32", "i64w": "int64", "bw": "bool",
    "dw": "double", "fw": "float", "byw": "large_binary", "u32w": "int64", "u64w": "decimal128(20, 0)",
    "memo": "string", "by_zone": f"map<int32, {ADDRESS_TYPE} ('by_zone')>", "scores": "list<element: int32 not null>",
    "note": "string",
}


MONEY_PROTO = """syntax = "proto3";
package common;

message Money {
  string currency = 1;
  int64 units = 2;
}
"""
PAYMENT_PROTO = """syntax = "proto3";
package pay;
import "common/money.proto";

message Payment {
  string id = 1;
  common.Money amount = 2;
  repeated common.Money fees = 3;
}
"""


def references_case(out):
    """A registry schema that imports another subject's schema (a schema reference):
    payments-value (id 12) imports common/money.proto, subject money version 1 (id 11).

      OUT_DIR/refs/payments-0/…log   four Payment records framed with schema id 12
      OUT_DIR/refs/registry.json     ids, subjects and the money subject's versions
      OUT_DIR/refs/expected.jsonl    the rows pyarrow must read back
    """
    money = descriptor_pb2.FileDescriptorProto(name="common/money.proto", package="common", syntax="proto3")
    m = money.message_type.add(name="Money")
    m.field.add(name="currency", number=1, type=FD.TYPE_STRING, label=FD.LABEL_OPTIONAL)
    m.field.add(name="units", number=2, type=FD.TYPE_INT64, label=FD.LABEL_OPTIONAL)
    payment = descriptor_pb2.FileDescriptorProto(name="pay/payment.proto", package="pay", syntax="proto3",
                                                 dependency=["common/money.proto"])
    p = payment.message_type.add(name="Payment")
    p.field.add(name="id", number=1, type=FD.TYPE_STRING, label=FD.LABEL_OPTIONAL)
    p.field.add(name="amount", number=2, type=FD.TYPE_MESSAGE, type_name=".common.Money", label=FD.LABEL_OPTIONAL)
    p.field.add(name="fees", number=3, type=FD.TYPE_MESSAGE, type_name=".common.Money", label=FD.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(money)
    pool.Add(payment)
    Payment = message_factory.GetMessageClass(pool.FindMessageTypeByName("pay.Payment"))
    Money = message_factory.GetMessageClass(pool.FindMessageTypeByName("common.Money"))

    records, expected = [], []
    for i in range(4):
        fees = [Money(currency="EUR", units=j + 1) for j in range(i % 3)]
        msg = Payment(id="p%d" % i, amount=Money(currency="EUR", units=100 * i - 50), fees=fees)
        ts_ms = T0 + i * 1000
        key = b"p%d" % i
        records.append((ts_ms, key, frame(12, [0], msg.SerializeToString())))
        expected.append({"id": "p%d" % i, "amount": {"currency": "EUR", "units": 100 * i - 50},
                         "fees": [{"currency": "EUR", "units": j + 1} for j in range(i % 3)],
                         "_kafka": kafka_meta(i, ts_ms, key)})
    write_reference_case(out, "payments", (12, PAYMENT_PROTO, "common/money.proto"), (11, MONEY_PROTO, "money"),
                         "PROTOBUF", records, expected, indexes_len=1)


def write_schema_files(out):
    """The v2 schema in `out`: `orders_v2.proto` (text) and `orders_v2.desc` (a binary
    FileDescriptorSet, imports included)."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "orders_v2.proto"), "w") as f:
        f.write(proto_text(2))
    descriptor_set = descriptor_pb2.FileDescriptorSet(file=well_known() + [file_proto(2)])
    with open(os.path.join(out, "orders_v2.desc"), "wb") as f:
        f.write(descriptor_set.SerializeToString())


def bench_seed(out, mib=4):
    """A segment of ~`mib` MiB of v2 Orders in zstd batches for the benchmark
    (`seed_protobuf_zstd.log`), with `orders_v2.proto` and `orders_v2.desc` beside it.
    Every record is new, as in make_avro.py's seeds: unique ids, random numbers and text,
    varying collections."""
    write_schema_files(out)
    cls = classes(2)["Order"]
    values = BenchValues()

    def varied(i):
        r = order(i % 200, 2)
        r.update(**values.common(i))
        r.update(u64=values.rng.getrandbits(64), delta=values.rng.randrange(-2**31, 2**31))
        return frame(2, [0], encode_order(cls, r))

    write_bench_segment(os.path.join(out, "seed_protobuf_zstd.log"), 4, mib, varied, T0)


if __name__ == "__main__":
    if sys.argv[1] == "--bench-seed":
        bench_seed(sys.argv[2], *(int(a) for a in sys.argv[3:4]))
    elif sys.argv[1] == "--schema-files":
        write_schema_files(sys.argv[2])
    else:
        main(sys.argv[1])
        references_case(sys.argv[1])
