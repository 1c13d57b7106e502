"""The job a hand-written Python Lambda does, as the convert benchmark's baseline
(BENCHMARKS.md, Targets: Floe ≥ 10× it per CPU second): read a segment with kafka-python, decode each
record's value (raw bytes; Confluent-framed Avro with fastavro; Confluent-framed Protobuf
with Google's `protobuf` package, turned into Python values field by field from the
descriptors; Confluent-framed JSON with the json module, typed by a JSON Schema), build
Arrow tables with pyarrow (partition, offset, timestamp and key beside the value) 8192
rows at a time, and write them as one Parquet file (zstd, or `--codec CODEC`).

  python_lambda.py [--codec CODEC] [--compact] SEGMENT OUT.parquet [AVRO_SCHEMA.avsc]
  python_lambda.py [--codec CODEC] [--compact] SEGMENT OUT.parquet --protobuf DESCRIPTOR_SET MESSAGE
  python_lambda.py [--codec CODEC] [--compact] SEGMENT OUT.parquet --json SCHEMA.json

Prints {"seconds": …, "cpu_seconds": …, "records": …, "bytes": …, "peak_rss_mib": …}: the
time from reading the file to the Parquet written, as the Lambda would spend it, the CPU
time of the process in it (user + system, every thread), the file's size, and the
process's peak RSS (interpreter and imports included, as in a Lambda). With `--compact`,
also what a compaction of that file costs, as a Python compactor would do it (pyarrow
reads it and writes it again with zstd, level 1 as pyarrow's default):
"compact_cpu_seconds" and "compacted_bytes"."""
import datetime
import io
import json
import os
import resource
import sys
import time
import uuid

import fastavro
import fastavro.read
import pyarrow as pa
import pyarrow.parquet as pq
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import FieldDescriptor as FD
from kafka.record.default_records import DefaultRecordBatch

ROWS = 8192


PRIMITIVE = {"null": pa.null(), "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(),
             "float": pa.float32(), "double": pa.float64(), "bytes": pa.binary(), "string": pa.string()}
LOGICAL = {"date": pa.date32(), "time-millis": pa.time32("ms"), "time-micros": pa.time64("us"),
           "timestamp-millis": pa.timestamp("ms", "UTC"), "timestamp-micros": pa.timestamp("us", "UTC"),
           "local-timestamp-millis": pa.timestamp("ms"), "local-timestamp-micros": pa.timestamp("us"),
           "uuid": pa.string()}


def arrow_type(t, named):
    """The Arrow type a Lambda author would declare for Avro type `t` (a union of several
    types as the text of its value)."""
    if isinstance(t, str):
        return PRIMITIVE[t] if t in PRIMITIVE else named[t]
    if isinstance(t, list):
        members = [m for m in t if m != "null"]
        return arrow_type(members[0], named) if len(members) == 1 else pa.string()
    if t.get("logicalType") == "decimal":
        return pa.decimal128(t["precision"], t.get("scale", 0))
    if t.get("logicalType") in LOGICAL:
        return LOGICAL[t["logicalType"]]
    kind = t["type"]
    if kind == "record":
        named[t["name"]] = pa.struct([(f["name"], arrow_type(f["type"], named)) for f in t["fields"]])
        return named[t["name"]]
    if kind == "enum":
        named[t["name"]] = pa.string()
        return pa.string()
    if kind == "fixed":
        named[t["name"]] = pa.binary(t["size"])
        return named[t["name"]]
    if kind == "array":
        return pa.list_(arrow_type(t["items"], named))
    if kind == "map":
        return pa.map_(pa.string(), arrow_type(t["values"], named))
    return arrow_type(kind, named)


PROTO_SCALARS = {
    FD.TYPE_BOOL: pa.bool_(), FD.TYPE_INT32: pa.int32(), FD.TYPE_SINT32: pa.int32(), FD.TYPE_SFIXED32: pa.int32(),
    FD.TYPE_INT64: pa.int64(), FD.TYPE_SINT64: pa.int64(), FD.TYPE_SFIXED64: pa.int64(),
    FD.TYPE_UINT32: pa.int64(), FD.TYPE_FIXED32: pa.int64(), FD.TYPE_UINT64: pa.uint64(),
    FD.TYPE_FIXED64: pa.uint64(), FD.TYPE_FLOAT: pa.float32(), FD.TYPE_DOUBLE: pa.float64(),
    FD.TYPE_STRING: pa.string(), FD.TYPE_BYTES: pa.binary(),
}
WRAPPERS = {"google.protobuf.%sValue" % n for n in
            ("Bool", "Int32", "Int64", "UInt32", "UInt64", "Float", "Double", "String", "Bytes")}


def proto_field(f):
    """(Arrow type, Python value of the field's value) for one element of field `f`."""
    if f.type == FD.TYPE_ENUM:
        names = {v.number: v.name for v in f.enum_type.values}
        return pa.string(), lambda v: names.get(v, str(v))
    if f.type != FD.TYPE_MESSAGE:
        return PROTO_SCALARS[f.type], lambda v: v
    name = f.message_type.full_name
    if name == "google.protobuf.Timestamp":
        return pa.timestamp("us", "UTC"), lambda v: v.seconds * 1_000_000 + v.nanos // 1000
    if name in WRAPPERS:
        return proto_field(f.message_type.fields_by_name["value"])[0], lambda v: v.value
    return proto_message(f.message_type)


def proto_message(desc):
    """(Arrow struct type, message → dict) for message `desc`, as a Lambda author would
    write it: maps as lists of pairs, repeated fields as lists, fields with presence
    None when unset."""
    columns, convert = [], []
    for f in desc.fields:
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            kt, kv = proto_field(f.message_type.fields_by_name["key"])
            vt, vv = proto_field(f.message_type.fields_by_name["value"])
            columns.append((f.name, pa.map_(kt, vt)))
            convert.append((f.name, None, lambda m, kv=kv, vv=vv: [(kv(k), vv(v)) for k, v in m.items()]))
        elif f.is_repeated:
            t, v = proto_field(f)
            columns.append((f.name, pa.list_(t)))
            convert.append((f.name, None, lambda xs, v=v: [v(x) for x in xs]))
        else:
            t, v = proto_field(f)
            columns.append((f.name, t))
            convert.append((f.name, f.has_presence, v))

    def to_dict(msg):
        return {name: None if presence and not msg.HasField(name) else v(getattr(msg, name))
                for name, presence, v in convert}
    return pa.struct(columns), to_dict


def protobuf_decoder(descriptor_set, message):
    """The message class of `message` in a binary FileDescriptorSet, and its converter."""
    pool = descriptor_pool.DescriptorPool()
    files = descriptor_pb2.FileDescriptorSet.FromString(open(descriptor_set, "rb").read())
    for f in files.file:
        pool.Add(f)
    desc = pool.FindMessageTypeByName(message)
    struct, to_dict = proto_message(desc)
    return message_factory.GetMessageClass(desc), struct, to_dict


def confluent_body(value):
    """A Confluent-framed Protobuf value without its magic byte, schema id and message
    indexes (zig-zag varints: a count, then that many)."""
    pos = 5

    def varint():
        nonlocal pos
        shift = n = 0
        while True:
            b = value[pos]
            pos += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return (n >> 1) ^ -(n & 1)
    for _ in range(varint()):
        varint()
    return value[pos:]


JSON_FORMATS = {"date-time": (pa.timestamp("us", "UTC"), datetime.datetime.fromisoformat),
                "date": (pa.date32(), datetime.date.fromisoformat),
                "uuid": (pa.binary(16), lambda s: uuid.UUID(s).bytes)}
JSON_TYPES = {"integer": pa.int64(), "number": pa.float64(), "boolean": pa.bool_(), "string": pa.string()}


def json_field(t):
    """(Arrow type, JSON value → Python value or None when it needs no change) for JSON
    Schema `t` (the constructs of the benchmark's schema)."""
    kind = t.get("type")
    if isinstance(kind, list):
        kind = next(k for k in kind if k != "null")
    if "enum" in t:
        return pa.string(), None
    if kind == "string" and t.get("format") in JSON_FORMATS:
        arrow, parse = JSON_FORMATS[t["format"]]
        return arrow, lambda v: None if v is None else parse(v)
    if kind == "array":
        item, convert = json_field(t["items"])
        return pa.list_(item), convert and (lambda v: None if v is None else [convert(x) for x in v])
    if kind == "object" and "properties" in t:
        return json_object(t)
    if kind == "object":
        value, convert = json_field(t["additionalProperties"])
        return pa.map_(pa.string(), value), lambda v: None if v is None else [
            (k, convert(x) if convert else x) for k, x in v.items()]
    return JSON_TYPES[kind], None


def json_object(t):
    """(Arrow struct type, dict → dict with the typed fields converted) for object schema `t`."""
    fields = {name: json_field(f) for name, f in t["properties"].items()}
    converted = [(name, convert) for name, (_, convert) in fields.items() if convert]

    def convert(v):
        if v is None:
            return None
        for name, c in converted:
            if name in v:
                v[name] = c(v[name])
        return v
    return pa.struct([(name, arrow) for name, (arrow, _) in fields.items()]), convert


def main(segment, out, schema_path=None, *protobuf, codec="zstd", compact=False):
    meta = [("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", pa.int64()), ("key", pa.binary())]
    proto = typed_json = None
    if schema_path == "--json":
        struct, typed_json = json_object(json.load(open(protobuf[0])))
        schema, several = None, set()
        arrow_schema = pa.schema(meta + [(f.name, f.type) for f in struct])
    elif schema_path == "--protobuf":
        cls, struct, to_dict = protobuf_decoder(*protobuf)
        proto = (cls, to_dict)
        schema, several = None, set()
        arrow_schema = pa.schema(meta + [(f.name, f.type) for f in struct])
    elif schema_path:
        avsc = json.load(open(schema_path))
        schema = fastavro.parse_schema(avsc)
        value = arrow_type(avsc, {})
        arrow_schema = pa.schema(meta + [(f.name, f.type) for f in value])
        several = {f["name"] for f in avsc["fields"] if isinstance(f["type"], list)
                   and len([m for m in f["type"] if m != "null"]) > 1}
    else:
        schema, several = None, set()
        arrow_schema = pa.schema(meta + [("value", pa.binary())])
    # UUIDs as their text.
    fastavro.read.LOGICAL_READERS["string-uuid"] = lambda data, *_: data
    start, cpu = time.perf_counter(), time.process_time()
    with open(segment, "rb") as f:
        data = f.read()
    writer, rows, records, pos = None, [], 0, 0

    def flush():
        nonlocal writer, rows
        table = pa.Table.from_pylist(rows, schema=arrow_schema)
        if writer is None:
            writer = pq.ParquetWriter(out, arrow_schema, compression=codec)
        writer.write_table(table)
        rows = []

    while pos + 12 <= len(data):
        length = int.from_bytes(data[pos + 8:pos + 12], "big")
        batch = DefaultRecordBatch(data[pos:pos + 12 + length])
        pos += 12 + length
        for r in batch:
            row = {"partition": 0, "offset": r.offset, "timestamp": r.timestamp, "key": r.key}
            if typed_json is not None:
                row.update(typed_json(json.loads(r.value[5:])))
            elif proto is not None:
                row.update(proto[1](proto[0].FromString(confluent_body(r.value))))
            elif schema is None:
                row["value"] = r.value
            else:
                value = fastavro.schemaless_reader(io.BytesIO(r.value[5:]), schema, None)
                for name in several:
                    if value[name] is not None:
                        value[name] = str(value[name])
                row.update(value)
            rows.append(row)
            records += 1
            if len(rows) >= ROWS:
                flush()
    if rows:
        flush()
    writer.close()
    report = {"seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu,
              "records": records, "bytes": os.path.getsize(out),
              # The job's own peak, before the compaction (a process of its own on AWS).
              "peak_rss_mib": peak_rss_mib()}
    if compact:
        compacted = out + ".compacted.parquet"
        cpu = time.process_time()
        source = pq.ParquetFile(out)
        with pq.ParquetWriter(compacted, source.schema_arrow, compression="zstd") as rewritten:
            for batch in source.iter_batches(batch_size=ROWS):
                rewritten.write_batch(batch)
        report.update(compact_cpu_seconds=time.process_time() - cpu, compacted_bytes=os.path.getsize(compacted))
    print(json.dumps(report))


def peak_rss_mib():
    """This process's peak RSS since it started: VmHWM (getrusage's ru_maxrss also counts
    the parent's memory as it was at the spawn), ru_maxrss where there is no /proc."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


if __name__ == "__main__":
    args, options = sys.argv[1:], {}
    while args and args[0].startswith("--") and args[0] in ("--codec", "--compact"):
        if args[0] == "--codec":
            options["codec"], args = args[1], args[2:]
        else:
            options["compact"], args = True, args[1:]
    main(*args, **options)
