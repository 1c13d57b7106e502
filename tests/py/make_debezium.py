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
"values": {"0/<offset>": the row as read_iceberg.py prints it}, "keys": N, "tombstones": N}.
"""
import json
import os
import random
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


def main():
    out = sys.argv[1]
    rng = random.Random(7)
    rows = {}  # id → (offset, row)
    records, offset, tombstones = [], 0, 0

    def emit(key_id, value):
        nonlocal offset
        records.append((T0 + offset, json.dumps({"id": key_id}).encode(), value))
        offset += 1

    def wrapped():
        return SEGMENT <= offset < 2 * SEGMENT

    for i in range(1001, 1009):
        row = customer(rng, i)
        rows[i] = (offset, row)
        emit(i, envelope("r", None, row, T0 + offset, snapshot=True, wrapped=wrapped()))
    next_id = 1009
    while offset < 3 * SEGMENT:
        kind = rng.random()
        if kind < 0.25 or not rows:
            row = customer(rng, next_id)
            rows[next_id] = (offset, row)
            emit(next_id, envelope("c", None, row, T0 + offset, wrapped=wrapped()))
            next_id += 1
        elif kind < 0.75:
            i = rng.choice(sorted(rows))
            old = rows[i][1]
            row = dict(old, email=f"{old['first_name'].lower()}.{i}.{offset}@example.org")
            rows[i] = (offset, row)
            emit(i, envelope("u", old, row, T0 + offset, wrapped=wrapped()))
        elif offset < 3 * SEGMENT - 1:
            i = rng.choice(sorted(rows))
            old = rows.pop(i)[1]
            emit(i, envelope("d", old, None, T0 + offset, wrapped=wrapped()))
            tombstones += 1
            if rng.random() < 0.5:  # tombstones.on.delete: a tombstone follows the delete
                emit(i, None)
                tombstones += 1
    for s in range(3):
        base = s * SEGMENT
        path = os.path.join(out, "dbserver1.inventory.customers-0", f"{base:020d}.log")
        write_segment(path, records[base:base + SEGMENT], [11], codec=4, base=base)
    live = sorted(o for o, _ in rows.values())
    values = {f"0/{o}": json.dumps(row, sort_keys=True) for o, row in rows.values()}
    with open(os.path.join(out, "customers.json"), "w") as f:
        json.dump({"live": {"0": live}, "values": values, "keys": len(rows), "tombstones": tombstones}, f)


if __name__ == "__main__":
    main()
