#!/usr/bin/env python3
"""Two segments of a plain JSON topic whose producer adds fields inside nested records
between them: for the compaction of files written before a nested field was added.

    make_nested_fields.py OUT_DIR TOPIC

Writes OUT_DIR/<TOPIC>-0/00000000000000000000.log, offsets 0-9:
    {"id": i, "info": {"a": "a<i>"}, "items": [{"x": i}]}
and OUT_DIR/<TOPIC>-0/00000000000000000010.log, offsets 10-19, whose records add `info.n`
and `items[].y`:
    {"id": 10 + i, "info": {"a": "b<i>", "n": i}, "items": [{"x": i, "y": "y<i>"}]}
"""
import json
import os
import sys

from segment_file import write_segment

T0 = 1764489600000


def record(version, i):
    if version == 1:
        return {"id": i, "info": {"a": "a%d" % i}, "items": [{"x": i}]}
    return {"id": 10 + i, "info": {"a": "b%d" % i, "n": i}, "items": [{"x": i, "y": "y%d" % i}]}


def main(out, topic):
    for version, base in ((1, 0), (2, 10)):
        records = [(T0 + base + i, None, json.dumps(record(version, i)).encode()) for i in range(10)]
        write_segment(os.path.join(out, "%s-0" % topic, "%020d.log" % base), records, [10], base=base)


if __name__ == "__main__":
    main(*sys.argv[1:])
