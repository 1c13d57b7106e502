#!/usr/bin/env python3
"""Upsert test data: a keyed topic's segments built by kafka-python, and what the table
must hold after them, from a dict model applying the records in offset order.

    make_upsert.py OUT_DIR

Writes OUT_DIR/accounts-<p>/<base>.log for partitions 0 and 1, three segments each
(offsets 0.., 40.., 80..), of JSON values {"id", "balance", "note"} keyed by "k<id>"
(each key in one partition, as Kafka's partitioner sends it), with updates, tombstones
(null values) and keys written again after their tombstone; and OUT_DIR/accounts.json:

    {"live": {"<p>": [the offsets whose rows the table holds]},
     "values": {"<p>/<offset>": the row's value as read_iceberg.py prints it},
     "keys": live keys, "tombstones": N, "records": N}

and topic `ledger`, keyed by value columns (see `ledger`).
"""
import json
import os
import random
import sys

from segment_file import write_segment

T0 = 1764000000000
SEGMENT = 40
SEGMENTS = 3


def main():
    out = sys.argv[1]
    rng = random.Random(44)
    live, values, model = {}, {}, {}
    tombstones = records = 0
    for p in (0, 1):
        keys = [i for i in range(24) if i % 2 == p]
        offset = 0
        state = {}  # key → offset of its last record, None when tombstoned
        for s in range(SEGMENTS):
            batch = []
            for _ in range(SEGMENT):
                i = rng.choice(keys)
                key = f"k{i:02d}".encode()
                if rng.random() < 0.15 and state.get(i) is not None:
                    batch.append((T0 + offset, key, None))
                    state[i] = None
                    tombstones += 1
                else:
                    value = {"id": i, "balance": rng.randint(-1000, 1000), "note": f"p{p} o{offset}"}
                    batch.append((T0 + offset, key, json.dumps(value).encode()))
                    state[i] = offset
                    values[f"{p}/{offset}"] = json.dumps(value, sort_keys=True)
                offset += 1
                records += 1
            base = s * SEGMENT
            write_segment(os.path.join(out, f"accounts-{p}", f"{base:020d}.log"), batch, [7, 13], codec=1, base=base)
        live[str(p)] = sorted(o for o in state.values() if o is not None)
        model.update({(p, k): o for k, o in state.items() if o is not None})
    kept = {k: v for k, v in values.items() if int(k.split("/")[1]) in live[k.split("/")[0]]}
    with open(os.path.join(out, "accounts.json"), "w") as f:
        json.dump({"live": live, "values": kept, "keys": len(model), "tombstones": tombstones, "records": records}, f)


def ledger(out):
    """Topic `ledger` (partition 0, two segments of 40): JSON values {"id", "region",
    "amount"} keyed by their columns `id` and `region` (`key_columns`), message keys
    absent; OUT_DIR/ledger.json as accounts.json."""
    rng = random.Random(45)
    state, values = {}, {}
    records = []
    for offset in range(80):
        key = (rng.randrange(8), rng.choice(["eu", "us"]))
        value = {"id": key[0], "region": key[1], "amount": rng.randint(0, 99)}
        records.append((T0 + offset, None, json.dumps(value).encode()))
        state[key] = offset
        values[f"0/{offset}"] = json.dumps(value, sort_keys=True)
    for base in (0, 40):
        write_segment(os.path.join(out, "ledger-0", f"{base:020d}.log"), records[base:base + 40], [9], base=base)
    live = sorted(state.values())
    kept = {k: v for k, v in values.items() if int(k.split("/")[1]) in live}
    with open(os.path.join(out, "ledger.json"), "w") as f:
        json.dump({"live": {"0": live}, "values": kept, "keys": len(live), "tombstones": 0, "records": 80}, f)


if __name__ == "__main__":
    ledger(sys.argv[1])
    main()
