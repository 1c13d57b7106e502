#!/usr/bin/env python3
"""A raw topic in many segments of incompressible values, for the compaction tests
(kafka-python's batch builder):

    make_compaction.py OUT_DIR TOPIC PARTITION SEGMENTS [FIRST_SEGMENT] [VALUES]

writes OUT_DIR/<TOPIC>-<PARTITION>/<base>.log: SEGMENTS segments (numbered from
FIRST_SEGMENT, default 0) of RECORDS records each, every value (VALUES "random", the
default) VALUE_BYTES characters of random base64 (seeded by topic, partition and offset,
so the same offsets always hold the same values), so that each segment becomes a Parquet
file of about 270 KB (a fresh file: Snappy, which does not compress base64): four of
them fill a bin of a 1 MiB compaction target (1 MiB to 1.1 MiB); compaction's zstd
takes a quarter off. Record timestamps alternate between two days, so a table partitioned by
day(_kafka.timestamp) gets two files a segment.

VALUES "json": every value a JSON object of about 4 KB, a fixed template and 400
characters of random base64: about 12x compressible, each segment a Parquet file of
about 90 KB.
"""
import base64
import os
import random
import sys

from make_segments import T0, v2_batch

RECORDS = 270
VALUE_BYTES = 970
DAY = 24 * 3600 * 1000


def value(topic, partition, offset):
    rng = random.Random("%s/%d/%d" % (topic, partition, offset))
    raw = bytes(rng.getrandbits(8) for _ in range(VALUE_BYTES * 3 // 4))
    return base64.b64encode(raw)


def json_value(topic, partition, offset):
    noise = value(topic, partition, offset)[:400].decode()
    fields = ",".join('"field_%02d":"the value of field %02d of a page view"' % (i, i) for i in range(60))
    return ('{"event":"page_view","seq":%d,"session":"%s",%s}' % (offset, noise, fields)).encode()


def main(out, topic, partition, segments, first_segment=0, values="random"):
    make = {"random": value, "json": json_value}[values]
    d = os.path.join(out, "%s-%d" % (topic, partition))
    os.makedirs(d, exist_ok=True)
    for s in range(first_segment, first_segment + segments):
        base = s * RECORDS
        records = [(T0 + (o % 2) * DAY + o, b"k%d" % o, make(topic, partition, o), [])
                   for o in range(base, base + RECORDS)]
        data, _ = v2_batch(base, records)
        with open(os.path.join(d, "%020d.log" % base), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    args = sys.argv[1:]
    main(args[0], args[1], int(args[2]), int(args[3]), *(int(a) for a in args[4:5]), *args[5:6])
