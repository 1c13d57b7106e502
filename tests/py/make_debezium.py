#!/usr/bin/env python3
"""Debezium-shaped change events of one table, as Debezium's JSON converter writes them,
in segments built by kafka-python; and what an upsert table of `after` must hold.

    make_debezium.py OUT_DIR

Topic `dbserver1.inventory.customers` (Debezium's naming: server, schema, table),
partition 0, three segments of 30 records (offsets 0.., 30.., 60..):
- a snapshot first: op "r" for customers 1001..1008 (`source.snapshot` = "true");
- then creates (op "c", `before` null), updates (op "u", `before` the old row) and
  deletes (op "d", `after` null), half of them followed by a tombstone (a null
  value), as Debezium emits for log compaction with `tombstones.on.delete`.
Keys are Debezium's: the primary key as JSON, `{"id": 1001}`. Values have
`schemas.enable = false` (the envelope itself) in segments 0 and 2, and `true` (the
envelope under `payload`, beside its `schema`) in segment 1.

Also OUT_DIR/customers.json: {"live": {"0": [offsets of the live rows]},
"values": {"0/<offset>": the row as read_iceberg.py prints it}, "keys": N, "tombstones": N};
and with --avro, the same kind of events as Debezium's Avro converter writes them,
under OUT_DIR/avro (see `avro_topic`):

    make_debezium.py --avro OUT_DIR
"""
import io
import json
import os
import random
import struct
import sys

from segment_file import write_segment

T0 = 1764000000000
SEGMENT = 30
NAMES = ["Sally", "George", "Edward", "Anne", "Kim", "Ravi", "Lena", "Omar"]


def customer(rng, i):
    first, last = rng.choice(NAMES), rng.choice(NAMES) + "son"
    return {"id": i, "first_name": first, "last_name": last, "email": f"{first.lower()}.{i}@example.com"}


def envelope(op, before, after, ts, snapshot=False, wrapped=False):
    event = {"before": before, "after": after,
             "source": {"version": "2.7.0.Final", "connector": "postgresql", "name": "dbserver1", "ts_ms": ts,
                        "snapshot": "true" if snapshot else "false", "db": "inventory", "schema": "public",
                        "table": "customers", "lsn": ts * 8},
             "op": op, "ts_ms": ts + 3, "transaction": None}
    if wrapped:
        event = {"schema": {"type": "struct", "name": "dbserver1.inventory.customers.Envelope", "optional": False,
                            "fields": [{"field": "before"}, {"field": "after"}, {"field": "op"}]},
                 "payload": event}
    return json.dumps(event).encode()


def events(rng):
    """The change events, in offset order: (key id, op, before, after, snapshot) or
    (key id, None) for a tombstone; and the rows an upsert table of `after` holds, by id:
    (offset, row)."""
    rows, out = {}, []

    def emit(key_id, *event):
        out.append((key_id, *event))

    for i in range(1001, 1009):
        row = customer(rng, i)
        rows[i] = (len(out), row)
        emit(i, "r", None, row, True)
    next_id = 1009
    while len(out) < 3 * SEGMENT:
        kind = rng.random()
        if kind < 0.25 or not rows:
            row = customer(rng, next_id)
            rows[next_id] = (len(out), row)
            emit(next_id, "c", None, row, False)
            next_id += 1
        elif kind < 0.75:
            i = rng.choice(sorted(rows))
            old = rows[i][1]
            row = dict(old, email=f"{old['first_name'].lower()}.{i}.{len(out)}@example.org")
            rows[i] = (len(out), row)
            emit(i, "u", old, row, False)
        elif len(out) < 3 * SEGMENT - 1:
            i = rng.choice(sorted(rows))
            old = rows.pop(i)[1]
            emit(i, "d", old, None, False)
            if rng.random() < 0.5:  # tombstones.on.delete: a tombstone follows the delete
                emit(i, None)
    return out, rows


def write_model(out, name, rows, events):
    tombstones = sum(1 for e in events if e[1] in ("d", None))
    live = sorted(o for o, _ in rows.values())
    values = {f"0/{o}": json.dumps(row, sort_keys=True) for o, row in rows.values()}
    with open(os.path.join(out, name), "w") as f:
        json.dump({"live": {"0": live}, "values": values, "keys": len(rows), "tombstones": tombstones}, f)


def write_segments(out, topic, records):
    for s in range(3):
        base = s * SEGMENT
        path = os.path.join(out, f"{topic}-0", f"{base:020d}.log")
        write_segment(path, records[base:base + SEGMENT], [11], codec=4, base=base)


def main():
    out = sys.argv[1]
    evs, rows = events(random.Random(7))
    records = []
    for offset, (key_id, *event) in enumerate(evs):
        ts = T0 + offset
        value = None
        if event[0] is not None:
            op, before, after, snapshot = event
            value = envelope(op, before, after, ts, snapshot=snapshot, wrapped=SEGMENT <= offset < 2 * SEGMENT)
        records.append((ts, json.dumps({"id": key_id}).encode(), value))
    write_segments(out, "dbserver1.inventory.customers", records)
    write_model(out, "customers.json", rows, evs)


AVRO_TOPIC = "avro.inventory.customers"
AVRO_KEY = {"type": "record", "name": "Key", "namespace": AVRO_TOPIC, "fields": [{"name": "id", "type": "int"}]}


def avro_envelope(phone):
    """Debezium's Avro envelope of the customers table (its `Value` record defined in
    `before`, named in `after`); `phone`: the table gained a nullable column."""
    columns = [{"name": "id", "type": "int"}, {"name": "first_name", "type": "string"},
               {"name": "last_name", "type": "string"}, {"name": "email", "type": "string"}]
    if phone:
        columns.append({"name": "phone", "type": ["null", "string"], "default": None})
    value = {"type": "record", "name": "Value", "namespace": AVRO_TOPIC, "fields": columns}
    source = {"type": "record", "name": "Source", "namespace": "io.debezium.connector.postgresql", "fields": [
        {"name": "version", "type": "string"}, {"name": "connector", "type": "string"},
        {"name": "name", "type": "string"}, {"name": "ts_ms", "type": "long"},
        {"name": "snapshot", "type": ["null", "string"], "default": None},
        {"name": "db", "type": "string"}, {"name": "schema", "type": "string"},
        {"name": "table", "type": "string"}, {"name": "lsn", "type": ["null", "long"], "default": None}]}
    block = {"type": "record", "name": "block", "namespace": "event", "fields": [
        {"name": "id", "type": "string"}, {"name": "total_order", "type": "long"},
        {"name": "data_collection_order", "type": "long"}]}
    return {"type": "record", "name": "Envelope", "namespace": AVRO_TOPIC, "fields": [
        {"name": "before", "type": ["null", value], "default": None},
        {"name": "after", "type": ["null", f"{AVRO_TOPIC}.Value"], "default": None},
        {"name": "source", "type": source},
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": ["null", "long"], "default": None},
        {"name": "transaction", "type": ["null", block], "default": None}]}


def avro_topic(out):
    """Topic `avro.inventory.customers`: the same kind of events as Debezium's Avro
    converter writes them (Confluent wire format; keys `{"id"}` records, schema 1), the
    envelope's schema 2 until offset 60, then schema 3, whose rows gained `phone`; and
    OUT_DIR/avro/registry.json, OUT_DIR/avro/customers.json (as customers.json)."""
    import fastavro
    out = os.path.join(out, "avro")
    evs, rows = events(random.Random(8))
    schemas = {1: AVRO_KEY, 2: avro_envelope(False), 3: avro_envelope(True)}
    parsed = {k: fastavro.parse_schema(v) for k, v in schemas.items()}

    def frame(schema_id, record):
        buf = io.BytesIO()
        buf.write(struct.pack(">bI", 0, schema_id))
        fastavro.schemaless_writer(buf, parsed[schema_id], record)
        return buf.getvalue()

    records = []
    for offset, (key_id, *event) in enumerate(evs):
        ts = T0 + offset
        value = None
        evolved = offset >= 2 * SEGMENT
        if event[0] is not None:
            op, before, after, snapshot = event
            if evolved:
                before, after = [None if r is None else dict(r, phone=f"+1-555-{r['id']}") for r in (before, after)]
            source = {"version": "2.7.0.Final", "connector": "postgresql", "name": "avro", "ts_ms": ts,
                      "snapshot": "true" if snapshot else "false", "db": "inventory", "schema": "public",
                      "table": "customers", "lsn": ts * 8}
            event = {"before": before, "after": after, "source": source, "op": op, "ts_ms": ts + 3,
                     "transaction": None}
            value = frame(3 if evolved else 2, event)
        records.append((ts, frame(1, {"id": key_id}), value))
    for i, (_, row) in rows.items():
        row.setdefault("phone", f"+1-555-{i}" if rows[i][0] >= 2 * SEGMENT else None)
    write_segments(out, AVRO_TOPIC, records)
    write_model(out, "customers.json", rows, evs)
    registry = {"ids": {str(k): {"schemaType": "AVRO", "schema": json.dumps(v)} for k, v in schemas.items()},
                "subjects": {f"{AVRO_TOPIC}-key": 1, f"{AVRO_TOPIC}-value": 3}}
    with open(os.path.join(out, "registry.json"), "w") as f:
        json.dump(registry, f)


if __name__ == "__main__":
    if sys.argv[1] == "--avro":
        avro_topic(sys.argv[2])
    else:
        main()
