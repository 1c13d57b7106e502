#!/usr/bin/env python3
"""A raw topic in many segments of incompressible values, for the compaction tests
(kafka-python's batch builder):

    make_compaction.py OUT_DIR TOPIC PARTITION SEGMENTS [FIRST_SEGMENT]

writes OUT_DIR/<TOPIC>-<PARTITION>/<base>.log: SEGMENTS segments (numbered from
FIRST_SEGMENT, default 0) of RECORDS records each, every value VALUE_BYTES characters of
random base64 (seeded by topic, partition and offset, so the same offsets always hold the
same values), so that each segment becomes a Parquet file of about 270 KB: four of them
fill a bin of a 1 MiB compaction target (1 MiB to 1.1 MiB). Record timestamps alternate
between two days, so a table partitioned by day(_kafka.timestamp) gets two files a segment.
"""
import base64
import os
import random
import sys

from make_segments import T0, v2_batch

RECORDS = 270
VALUE_BYTES = 1300
DAY = 24 * 3600 * 1000


def value(topic, partition, offset):
    rng = random.Random("%s/%d/%d" % (topic, partition, offset))
    raw = bytes(rng.getrandbits(8) for _ in range(VALUE_BYTES * 3 // 4))
    return base64.b64encode(raw)


def main(out, topic, partition, segments, first_segment=0):
    d = os.path.join(out, "%s-%d" % (topic, partition))
    os.makedirs(d, exist_ok=True)
    for s in range(first_segment, first_segment + segments):
        base = s * RECORDS
        records = [(T0 + (o % 2) * DAY + o, b"k%d" % o, value(topic, partition, o), [])
                   for o in range(base, base + RECORDS)]
        data, _ = v2_batch(base, records)
        with open(os.path.join(d, "%020d.log" % base), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    args = sys.argv[1:]
    main(args[0], args[1], int(args[2]), int(args[3]), *(int(a) for a in args[4:]))
