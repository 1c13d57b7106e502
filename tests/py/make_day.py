#!/usr/bin/env python3
"""A day of Kafka traffic for tests/integration/day.rs, compressed in time: segments of
six topics as the brokers upload them, in two phases, and what a read_committed consumer
sees of each (kafka-python's batch builder; fastavro; Google's `protobuf` package).

    make_day.py OUT_DIR

  orders     Avro through the registry, partitions 0 (tiered-storage layout) and 1
             (log-dir copies); schema v1 (id 1: id, item) evolves mid-stream to v2 (id 2,
             adds an optional `note`, a compatible change) at offset 30 of partition 0
             and offset 25 of partition 1
  shipments  Protobuf through the registry (id 3, `ship.Shipment`), partitions 0-2
  ledger     plain JSON, tiered-storage layout: make_topic.py's four segments, producer
             7's transaction spanning them (committed at 65), producer 8's aborted at 45
  payments   raw, log-dir copies: make_topic.py's three segments (a committed and two
             aborted transactions) and the replica that re-uploads offsets 25..65 with
             other boundaries, as a new leader does
  clicks     plain JSON, bad_records = "dlq": partition 1 offset 7 is not JSON
  alerts     plain JSON, bad_records = "suspend": offset 4 is not JSON

Writes OUT_DIR/bucket/<key> (every object to upload), OUT_DIR/registry.json (the
registry stand-in's schemas) and OUT_DIR/day.json:
  {"phases": [[key, ...], [key, ...]],          objects uploaded in the morning, afternoon
   "tables": {table: {partition: [offsets]}},   what a read_committed consumer sees
   "values": {table: {"p/o": value}},           raw: the value as text; else the row
   "bad": {table: "p/o"}}                       the bad record of clicks and alerts
"""
import io
import json
import os
import shutil
import struct
import subprocess
import sys

import fastavro
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

import make_topic
from make_protobuf import frame as protobuf_frame
from make_segments import T0
from segment_file import write_segment

HERE = os.path.dirname(os.path.abspath(__file__))

ORDER_V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "item", "type": "string"}]}
ORDER_V2 = dict(ORDER_V1, fields=ORDER_V1["fields"] + [{"name": "note", "type": ["null", "string"], "default": None}])
SHIPMENT_PROTO = 'syntax = "proto3";\npackage ship;\n\nmessage Shipment {\n  int64 id = 1;\n  string city = 2;\n}\n'


class Day:
    def __init__(self, out):
        self.out = out
        self.bucket = os.path.join(out, "bucket")
        self.phases = [[], []]
        self.tables, self.values, self.bad = {}, {}, {}

    def log_dir(self, phase, key, records, base):
        """A log-dir copy `key` of `records` (ts, key, value) from offset `base`."""
        write_segment(os.path.join(self.bucket, key), records, [7], base=base)
        self.phases[phase].append(key)

    def copy(self, phase, src, key):
        os.makedirs(os.path.dirname(os.path.join(self.bucket, key)), exist_ok=True)
        shutil.copy(src, os.path.join(self.bucket, key))
        self.phases[phase].append(key)

    def tiered(self, phase, log, topic, partition, start, end):
        """`log` laid out as the tiered-storage plugin uploads it: .log, .indexes, then
        .rsm-manifest (the object whose event materializes it)."""
        out = subprocess.run([sys.executable, os.path.join(HERE, "make_tiered.py"), log, self.bucket,
                              "--topic", topic, "--partition", str(partition), "--start", str(start),
                              "--end", str(end), "--segment-id", "Seg%019d" % start],
                             check=True, capture_output=True).stdout
        keys = json.loads(out)
        self.phases[phase].extend(keys[ext] for ext in ("log", "indexes", "rsm-manifest"))

    def expect(self, table, partition, offset, value):
        self.tables.setdefault(table, {}).setdefault(str(partition), []).append(offset)
        self.values.setdefault(table, {})["%d/%d" % (partition, offset)] = value

    def write(self, registry):
        with open(os.path.join(self.out, "registry.json"), "w") as f:
            json.dump(registry, f)
        for table in self.tables.values():
            for offsets in table.values():
                offsets.sort()
        with open(os.path.join(self.out, "day.json"), "w") as f:
            json.dump({"phases": self.phases, "tables": self.tables, "values": self.values, "bad": self.bad}, f)


def avro(schema_id, schema, row):
    buf = io.BytesIO()
    buf.write(struct.pack(">bI", 0, schema_id))
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), row)
    return buf.getvalue()


def orders(day):
    """Per partition: (segment bases, end, first v2 offset, tiered)."""
    layout = {0: ([0, 20, 40], 60, 30, True), 1: ([0, 25], 50, 25, False)}
    for partition, (bases, end, evolved, tiered) in layout.items():
        for n, base in enumerate(bases):
            last = bases[n + 1] if n + 1 < len(bases) else end
            records = []
            for o in range(base, last):
                row = {"id": partition * 1000 + o, "item": "item-%d" % o}
                if o >= evolved:
                    row["note"] = "note-%d" % o
                    value = avro(2, ORDER_V2, row)
                else:
                    value = avro(1, ORDER_V1, row)
                records.append((T0 + o, b"order-%d" % o, value))
                day.expect("orders", partition, o, dict({"note": None}, **row))
            phase = 0 if n + 1 < len(bases) else 1
            if tiered:
                log = os.path.join(day.out, "staging", "orders-%d" % partition, "%020d.log" % base)
                write_segment(log, records, [7], base=base)
                day.tiered(phase, log, "orders", partition, base, last - 1)
            else:
                day.log_dir(phase, "orders-%d/%020d.log" % (partition, base), records, base)


def shipment_class():
    fd = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="ship.proto", package="ship", syntax="proto3")
    message = file.message_type.add(name="Shipment")
    message.field.add(name="id", number=1, type=fd.TYPE_INT64, label=fd.LABEL_OPTIONAL)
    message.field.add(name="city", number=2, type=fd.TYPE_STRING, label=fd.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("ship.Shipment"))


def shipments(day):
    cls = shipment_class()
    for partition in range(3):
        for phase, base in enumerate([0, 15]):
            records = []
            for o in range(base, base + 15):
                row = {"id": 1 + partition * 1000 + o, "city": "city-%d" % (o % 4)}
                records.append((T0 + o, None, protobuf_frame(3, [0], cls(**row).SerializeToString())))
                day.expect("shipments", partition, o, row)
            day.log_dir(phase, "shipments-%d/%020d.log" % (partition, base), records, base)


def ledger_and_payments(day):
    staging = os.path.join(day.out, "staging", "topic")
    make_topic.main(staging)
    for base, end, phase in [(0, 19, 0), (20, 39, 0), (40, 59, 1), (60, 79, 1)]:
        log = os.path.join(staging, "ledger-0", "%020d.log" % base)
        day.tiered(phase, log, "ledger", 0, base, end)
    with open(os.path.join(staging, "ledger_expected.json")) as f:
        for offset, value in json.load(f)["values"].items():
            day.expect("ledger", 0, int(offset), json.loads(value))
    for base, phase in [(0, 0), (55, 0), (66, 1)]:
        rel = "payments-0/%020d.log" % base
        day.copy(phase, os.path.join(staging, rel), rel)
    # The new leader uploads offsets 25..65 again, cut at other boundaries.
    day.copy(1, os.path.join(staging, "replica", "payments-0", "%020d.log" % 25),
             "broker-2/payments-0/%020d.log" % 25)
    with open(os.path.join(staging, "expected.json")) as f:
        for offset, value in json.load(f)["values"].items():
            day.expect("payments", 0, int(offset), value)


def json_topic(day, topic, segments, bad):
    """segments: (partition, base, count, phase); `bad` (partition, offset) is not JSON."""
    for partition, base, count, phase in segments:
        records = []
        for o in range(base, base + count):
            row = {"id": partition * 1000 + o, "topic": topic}
            if (partition, o) == bad:
                records.append((T0 + o, None, b"{not json"))
                day.bad[topic] = "%d/%d" % bad
            else:
                records.append((T0 + o, None, json.dumps(row).encode()))
                day.expect(topic, partition, o, row)
        day.log_dir(phase, "%s-%d/%020d.log" % (topic, partition, base), records, base)


def main(out):
    day = Day(out)
    orders(day)
    shipments(day)
    ledger_and_payments(day)
    json_topic(day, "clicks", [(0, 0, 12, 0), (1, 0, 12, 0), (0, 12, 12, 1)], (1, 7))
    json_topic(day, "alerts", [(0, 0, 10, 0), (0, 10, 10, 0), (0, 20, 10, 1)], (0, 4))
    shutil.rmtree(os.path.join(out, "staging"))
    schema = lambda s: {"schemaType": "AVRO", "schema": json.dumps(s)}
    day.write({
        "ids": {"1": schema(ORDER_V1), "2": schema(ORDER_V2),
                "3": {"schemaType": "PROTOBUF", "schema": SHIPMENT_PROTO}},
        "subjects": {"orders-value": 2, "shipments-value": 3},
        "versions": {"orders-value": {"1": 1, "2": 2}, "shipments-value": {"1": 3}},
    })


if __name__ == "__main__":
    main(sys.argv[1])
