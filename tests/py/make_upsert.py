#!/usr/bin/env python3
"""Upsert test data: a keyed topic's segments built by kafka-python, and what the table
must hold after them, from a dict model applying the records in offset order.

    make_upsert.py OUT_DIR
    make_upsert.py --random SEED OUT_DIR   (topic `keyed`, see `random_topic`)

Writes OUT_DIR/accounts-<p>/<base>.log for partitions 0 and 1, three segments each
(offsets 0.., 40.., 80..), of JSON values {"id", "balance", "note"} keyed by "k<id>"
(each key in one partition, as Kafka's partitioner sends it), with updates, tombstones
(null values) and keys written again after their tombstone; and OUT_DIR/accounts.json:

    {"live": {"<p>": [the offsets whose rows the table holds]},
     "values": {"<p>/<offset>": the row's value as read_iceberg.py prints it},
     "keys": live keys, "tombstones": N, "records": N}

and topic `ledger`, keyed by value columns (see `ledger`), and topic `wallets`, in
transactions (see `wallets`).
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


def wallets(out):
    """Topic `wallets` (partition 0): keyed JSON values in transactions that span
    segments, laid out as make_topic.py's `ledger` (producer 7 commits at 65 what it
    wrote from 10 on; producer 8 aborts at 45 what it wrote at 15..19 and 30..34), five
    keys whose last records are the transactions' (below), four others at random, a
    tenth of those tombstones; OUT_DIR/wallets.json as accounts.json, from the records a
    read_committed consumer sees, in offset order."""
    from make_segments import marker, v2_batch
    rng = random.Random(46)
    # Keys whose last records are in the transactions (key: [(offset, tombstone)]): w0's
    # last is producer 7's (committed), w1's producer 8's (aborted: 5 stays), w2 is
    # written by 7 then by a plain record, w3 tombstoned by 7, w4 by 8 (aborted: 8 stays).
    planned = {0: [(3, False), (42, False)], 1: [(5, False), (31, False)], 2: [(12, False), (50, False)],
               3: [(7, False), (43, True)], 4: [(8, False), (33, True)]}
    at = {o: (i, t) for i, writes in planned.items() for o, t in writes}
    records = {}
    for offset in range(80):
        i, tombstone = at.get(offset) or (rng.randrange(5, 9), rng.random() < 0.1)
        value = None if tombstone else json.dumps({"id": i, "n": offset}).encode()
        records[offset] = (T0 + offset, f"w{i}".encode(), value, [])

    def batch(first, n, pid=-1):
        return v2_batch(first, [records[o] for o in range(first, first + n)], txn=pid >= 0, pid=pid,
                        epoch=0 if pid >= 0 else -1)[0]

    segments = {
        0: [batch(0, 10), batch(10, 5, 7), batch(15, 5, 8)],
        20: [batch(20, 5, 7), batch(25, 5), batch(30, 5, 8), batch(35, 5)],
        40: [batch(40, 5, 7), marker(45, 8, 0, False), batch(46, 14)],
        60: [batch(60, 5), marker(65, 7, 0, True), batch(66, 14)],
    }
    folder = os.path.join(out, "wallets-0")
    os.makedirs(folder, exist_ok=True)
    for base, parts in segments.items():
        with open(os.path.join(folder, f"{base:020d}.log"), "wb") as f:
            f.write(b"".join(parts))
    aborted = set(range(15, 20)) | set(range(30, 35)) | {45, 65}
    state = {}
    for offset in sorted(set(range(80)) - aborted):
        _, key, value, _ = records[offset]
        state[key] = None if value is None else offset
    live = sorted(o for o in state.values() if o is not None)
    values = {f"0/{o}": json.dumps(json.loads(records[o][2]), sort_keys=True) for o in live}
    with open(os.path.join(out, "wallets.json"), "w") as f:
        json.dump({"live": {"0": live}, "values": values, "keys": len(live),
                   "tombstones": sum(1 for o in records if records[o][2] is None), "records": 80}, f)


def random_topic(out, seed):
    """Topic `keyed` of seed `seed`: two partitions of 3 to 5 segments, 10 to 40 records
    each, keys from a pool of 6 to 14 per partition or written once, a sixth of the
    records tombstones;
    OUT_DIR/keyed.json lists each segment's records, for a model of any committed subset:
    {"segments": [{"path", "partition", "records": [[offset, key, row as read_iceberg.py
    prints it, or null for a tombstone]]}]}."""
    rng = random.Random(seed)
    segments = []
    for p in (0, 1):
        pool = [f"s{seed}p{p}k{i}" for i in range(rng.randint(6, 14))]
        offset = 0
        for _ in range(rng.randint(3, 5)):
            batch, listed = [], []
            for _ in range(rng.randint(10, 40)):
                # A hot key, or a key written once (the index grows, a commit changes a
                # part of it: the key index takes deltas).
                key = rng.choice(pool) if rng.random() < 0.65 else f"s{seed}p{p}c{offset}"
                if rng.random() < 1 / 6:
                    batch.append((T0 + offset, key.encode(), None))
                    listed.append([offset, key, None])
                else:
                    value = {"v": rng.randint(0, 10 ** 6), "at": offset}
                    batch.append((T0 + offset, key.encode(), json.dumps(value).encode()))
                    listed.append([offset, key, json.dumps(value, sort_keys=True)])
                offset += 1
            base = listed[0][0]
            path = f"keyed-{p}/{base:020d}.log"
            write_segment(os.path.join(out, path), batch, [5], codec=rng.choice([0, 1, 4]), base=base)
            segments.append({"path": path, "partition": p, "records": listed})
    with open(os.path.join(out, "keyed.json"), "w") as f:
        json.dump({"segments": segments}, f)


if __name__ == "__main__":
    if sys.argv[1] == "--random":
        random_topic(sys.argv[3], int(sys.argv[2]))
        sys.exit(0)
    ledger(sys.argv[1])
    wallets(sys.argv[1])
    main()
