#!/usr/bin/env python3
"""A topic partition in three consecutive segments, with transactions that span them
(kafka-python's batch builder), for the committer's tests:

    make_topic.py OUT_DIR

  segment A  offsets  0..54   plain 0..49; producer 7 opens a transaction (50..54), no marker
  segment B  offsets 55..65   producer 7: 55..57, COMMIT at 58; producer 8: 59..61, ABORT at 62;
                              producer 9 opens another (63..65), no marker
  segment C  offsets 66..99   ABORT of producer 9 at 66; plain 67..99

writes OUT_DIR/payments-0/<base>.log for each, and OUT_DIR/expected.json: the offsets a
read_committed consumer sees (0..57, 67..99) and each one's value. Also, as another
broker re-uploads after a leader change, the same records with other boundaries:
OUT_DIR/replica/payments-0/00000000000000000025.log holding offsets 25..65 (the end of
A and all of B).

And a topic `ledger` in four segments whose transactions span three of them:

  segment A  offsets  0..19   plain 0..9; producer 7: 10..14; producer 8: 15..19
  segment B  offsets 20..39   producer 7: 20..24; plain 25..29; producer 8: 30..34; plain 35..39
  segment C  offsets 40..59   producer 7: 40..44; ABORT of producer 8 at 45; plain 46..59
  segment D  offsets 60..79   plain 60..64; COMMIT of producer 7 at 65; plain 66..79

in OUT_DIR/ledger-0/<base>.log, its committed offsets and values in
OUT_DIR/ledger_expected.json; and A re-cut from 10 on with B (offsets 10..39, both
transactions open in it, starting in A's offsets) in OUT_DIR/replica/ledger-0/<10>.log.
"""
import json
import os
import sys

from make_segments import T0, marker, v2_batch


def recs(first, n):
    return [(T0 + first + i, b"k%d" % (first + i), json.dumps({"payment": first + i}).encode(), [])
            for i in range(n)]


def main(out):
    d = os.path.join(out, "payments-0")
    os.makedirs(d, exist_ok=True)
    segments = {
        0: [v2_batch(0, recs(0, 25))[0], v2_batch(25, recs(25, 25), codec="zstd")[0],
            v2_batch(50, recs(50, 5), txn=True, pid=7, epoch=0)[0]],
        55: [v2_batch(55, recs(55, 3), txn=True, pid=7, epoch=0)[0], marker(58, 7, 0, True),
             v2_batch(59, recs(59, 3), txn=True, pid=8, epoch=0)[0], marker(62, 8, 0, False),
             v2_batch(63, recs(63, 3), txn=True, pid=9, epoch=0)[0]],
        66: [marker(66, 9, 0, False), v2_batch(67, recs(67, 33), codec="lz4")[0]],
    }
    for base, parts in segments.items():
        with open(os.path.join(d, "%020d.log" % base), "wb") as f:
            f.write(b"".join(parts))
    replica = os.path.join(out, "replica", "payments-0")
    os.makedirs(replica, exist_ok=True)
    with open(os.path.join(replica, "%020d.log" % 25), "wb") as f:
        f.write(b"".join(segments[0][1:] + segments[55]))
    committed = list(range(0, 58)) + list(range(67, 100))
    write_expected(os.path.join(out, "expected.json"), committed)
    ledger(out)


def write_expected(path, committed):
    with open(path, "w") as f:
        json.dump({"offsets": committed, "values": {str(o): json.dumps({"payment": o}) for o in committed}}, f)


def ledger(out):
    d = os.path.join(out, "ledger-0")
    os.makedirs(d, exist_ok=True)

    def txn(first, n, pid):
        return v2_batch(first, recs(first, n), txn=True, pid=pid, epoch=0)[0]

    segments = {
        0: [v2_batch(0, recs(0, 10))[0], txn(10, 5, 7), txn(15, 5, 8)],
        20: [txn(20, 5, 7), v2_batch(25, recs(25, 5))[0], txn(30, 5, 8), v2_batch(35, recs(35, 5))[0]],
        40: [txn(40, 5, 7), marker(45, 8, 0, False), v2_batch(46, recs(46, 14), codec="zstd")[0]],
        60: [v2_batch(60, recs(60, 5))[0], marker(65, 7, 0, True), v2_batch(66, recs(66, 14))[0]],
    }
    for base, parts in segments.items():
        with open(os.path.join(d, "%020d.log" % base), "wb") as f:
            f.write(b"".join(parts))
    replica = os.path.join(out, "replica", "ledger-0")
    os.makedirs(replica, exist_ok=True)
    with open(os.path.join(replica, "%020d.log" % 10), "wb") as f:
        f.write(b"".join(segments[0][1:] + segments[20]))
    aborted = set(range(15, 20)) | set(range(30, 35)) | {45, 65}
    write_expected(os.path.join(out, "ledger_expected.json"), [o for o in range(80) if o not in aborted])


if __name__ == "__main__":
    main(sys.argv[1])
