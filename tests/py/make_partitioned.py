#!/usr/bin/env python3
"""A JSON topic whose records span several days and regions, for the partitioning tests
(kafka-python's batch builder):

    make_partitioned.py OUT_DIR [--long-regions]

  events-0/…00.log   offsets  0..59: one record an hour from 2025-11-24 20:00 UTC;
                     55..59 are producer 7's transaction, open at the end of the segment
  events-0/…60.log   COMMIT of producer 7 at offset 60, then 61..99
  events-1/…00.log   offsets  0..39: one record every two hours from the same start
  replica/events-0/…30.log  offsets 30..99 again (the end of the first segment and all of
                     the second), as another broker re-uploads after a leader change

Values are {"id": <partition * 1000 + offset>, "region": "eu" | "us" | null} (null every
third record). With --long-regions, "eu" and "us" are 1,000-byte strings sharing a
998-byte prefix of multi-byte characters and characters a path must escape (far past what
one folder name may hold), ending in "eu" and "us". Writes OUT_DIR/expected.json: {"rows": [[partition, offset, timestamp ms,
region], …]} — the records a read_committed consumer sees.
"""
import json
import os
import sys

from make_segments import marker, v2_batch

START = 1763942400000 + 20 * 3600 * 1000  # 2025-11-24T20:00:00Z
HOUR = 3600 * 1000
REGIONS = ["eu", "us", None]
LONG = False  # --long-regions
LONG_PREFIX = ("r\u00e9gion/\u00fc " * 100).encode()[:998].decode()


def long_region(region):
    return None if region is None else LONG_PREFIX + region


def record(partition, offset, step):
    ts = START + offset * step
    region = REGIONS[offset % 3]
    value = {"id": partition * 1000 + offset, "region": long_region(region) if LONG else region}
    return (ts, b"k%d" % offset, json.dumps(value).encode(), []), [partition, offset, ts, value["region"]]


def batch(partition, first, n, step, **kw):
    pairs = [record(partition, o, step) for o in range(first, first + n)]
    data, _ = v2_batch(first, [p[0] for p in pairs], **kw)
    return data, [p[1] for p in pairs]


def main(out):
    rows = []
    segments = {}
    a1, r1 = batch(0, 0, 30, HOUR, codec="zstd")
    a2, r2 = batch(0, 30, 25, HOUR)
    a3, r3 = batch(0, 55, 5, HOUR, txn=True, pid=7, epoch=0)
    segments["events-0/%020d.log" % 0] = a1 + a2 + a3
    b1, r4 = batch(0, 61, 39, HOUR, codec="lz4")
    segments["events-0/%020d.log" % 60] = marker(60, 7, 0, True) + b1
    segments["replica/events-0/%020d.log" % 30] = a2 + a3 + marker(60, 7, 0, True) + b1
    c1, r5 = batch(1, 0, 40, 2 * HOUR)
    segments["events-1/%020d.log" % 0] = c1
    rows = r1 + r2 + r3 + r4 + r5
    for rel, data in segments.items():
        path = os.path.join(out, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump({"rows": rows}, f)


if __name__ == "__main__":
    LONG = "--long-regions" in sys.argv[2:]
    main(sys.argv[1])
