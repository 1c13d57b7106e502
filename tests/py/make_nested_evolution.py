#!/usr/bin/env python3
"""Two segments of topic "shop" whose producer adds a nested field between them, in one
format (json, avro or protobuf), for the committer's "numbered before the table existed"
tests.

    make_nested_evolution.py FORMAT OUT_DIR

Writes:
  OUT_DIR/shop-0/00000000000000000000.log  offsets 0-9, version 1:
      {id: long, items: array<long>, name: string}; id = offset, items [i, i + 1], name "a<i>"
  OUT_DIR/shop-0/00000000000000000010.log  offsets 10-19, version 2, which adds an optional
      nested `meta {tag: string}` *before* `name` (so later fields' positions shift):
      id = offset, items [i], meta {tag: "t<i>"}, name "b<i>"
  OUT_DIR/v1.avsc, OUT_DIR/v2.avsc    (avro) each version's schema; payloads are fastavro's,
                                       Confluent-framed with schema ids 1 and 2
  OUT_DIR/v1.proto, OUT_DIR/v2.proto  (protobuf) each version's `shop.Row` as .proto text,
      `name` numbered 4 in both and v2's `meta` 3 (Floe orders columns by field number, so
      `meta` comes before `name` there too); payloads are Google's `protobuf` package's (classes built from descriptors written
      out below, independently of the text), framed with ids 1 and 2 and message index [0]
"""
import io
import json
import os
import struct
import sys

from segment_file import write_segment

T0 = {1: 1764489600000, 2: 1764489700000}


def record(version, i):
    if version == 1:
        return {"id": i, "items": [i, i + 1], "name": "a%d" % i}
    return {"id": 10 + i, "items": [i], "meta": {"tag": "t%d" % i}, "name": "b%d" % i}


def json_encoder(out):
    return lambda version, r: json.dumps(r).encode()


def avro_schema(version):
    fields = [{"name": "id", "type": "long"}, {"name": "items", "type": {"type": "array", "items": "long"}}]
    if version == 2:
        meta = {"type": "record", "name": "Meta", "fields": [{"name": "tag", "type": "string"}]}
        fields.append({"name": "meta", "type": ["null", meta], "default": None})
    fields.append({"name": "name", "type": "string"})
    return {"type": "record", "name": "Row", "namespace": "shop", "fields": fields}


def avro_encoder(out):
    import fastavro
    parsed = {}
    for v in (1, 2):
        with open(os.path.join(out, "v%d.avsc" % v), "w") as f:
            json.dump(avro_schema(v), f)
        parsed[v] = fastavro.parse_schema(avro_schema(v))

    def encode(version, r):
        buf = io.BytesIO()
        buf.write(struct.pack(">bI", 0, version))
        fastavro.schemaless_writer(buf, parsed[version], r)
        return buf.getvalue()
    return encode


PROTO = {
    1: """syntax = "proto3";
package shop;
message Row {
  int64 id = 1;
  repeated int64 items = 2;
  string name = 4;
}
""",
    2: """syntax = "proto3";
package shop;
message Row {
  message Meta {
    string tag = 1;
  }
  int64 id = 1;
  repeated int64 items = 2;
  Meta meta = 3;
  string name = 4;
}
""",
}


def proto_class(version):
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    FD = descriptor_pb2.FieldDescriptorProto
    f = descriptor_pb2.FileDescriptorProto(name="row.proto", package="shop", syntax="proto3")
    row = f.message_type.add(name="Row")
    row.field.add(name="id", number=1, type=FD.TYPE_INT64, label=FD.LABEL_OPTIONAL, json_name="id")
    row.field.add(name="items", number=2, type=FD.TYPE_INT64, label=FD.LABEL_REPEATED, json_name="items")
    if version == 2:
        meta = row.nested_type.add(name="Meta")
        meta.field.add(name="tag", number=1, type=FD.TYPE_STRING, label=FD.LABEL_OPTIONAL, json_name="tag")
        row.field.add(name="meta", number=3, type=FD.TYPE_MESSAGE, type_name=".shop.Row.Meta",
                      label=FD.LABEL_OPTIONAL, json_name="meta")
    row.field.add(name="name", number=4, type=FD.TYPE_STRING, label=FD.LABEL_OPTIONAL, json_name="name")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Row"))


def protobuf_encoder(out):
    classes = {}
    for v in (1, 2):
        with open(os.path.join(out, "v%d.proto" % v), "w") as f:
            f.write(PROTO[v])
        classes[v] = proto_class(v)

    def encode(version, r):
        m = classes[version]()
        m.id, m.name = r["id"], r["name"]
        m.items.extend(r["items"])
        if "meta" in r:
            m.meta.tag = r["meta"]["tag"]
        # Confluent framing: magic 0, schema id, message indexes [0] (the single byte 0).
        return struct.pack(">bI", 0, version) + b"\x00" + m.SerializeToString()
    return encode


def main(fmt, out):
    os.makedirs(out, exist_ok=True)
    encode = {"json": json_encoder, "avro": avro_encoder, "protobuf": protobuf_encoder}[fmt](out)
    for version, base in ((1, 0), (2, 10)):
        records = [(T0[version] + i, None, encode(version, record(version, i))) for i in range(10)]
        write_segment(os.path.join(out, "shop-0", "%020d.log" % base), records, [10], base=base)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
