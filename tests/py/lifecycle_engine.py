#!/usr/bin/env python3
"""The other engine and the reader of the lifecycle test (tests/integration/lifecycle):
one long-lived PyIceberg process per sequence, answering JSON lines.

    lifecycle_engine.py CATALOG_DB WAREHOUSE_DIR

Each line on stdin is a request {"op": ..., ...}; each answer one line on stdout:
{"ok": result} or {"error": "..."}. Requests:

  segment    {"path", "batches"}        writes a Kafka segment with kafka-python: batches
                                        of records {"base", "records": [[ts, key, value,
                                        headers]], "pid", "epoch", "log_append"} (pid null:
                                        not transactional; value a string, written as UTF-8,
                                        null: a tombstone;
                                        headers [[key, value or null]]; log_append: the
                                        broker's time, a LogAppendTime topic's, or null) or a
                                        marker {"marker": offset, "pid", "epoch", "commit", "ts"}
  append     {"table", "rows"}          appends rows (column name -> value; `_kafka` filled
                                        from "partition"/"offset" keys)
  delete     {"table", "lo", "hi", "every": 1}  copy-on-write delete of the rows lo <= id < hi;
                                        {"refused": why} while equality deletes are live
  pos_delete / eq_delete {"table", "lo", "hi", "every"}  merge-on-read deletes of the rows
                                        lo <= id < hi whose id is lo plus a multiple of every, written by
                                        tests/py/foreign_delete.py: position deletes, one file
                                        per partition (as Spark; an even lo) or per data file
                                        (as Trino; an odd lo); equality deletes on `id`, one
                                        file per partition (global when unpartitioned)
  properties {"table", "set"}           table properties set
  add_column {"table", "name"}          a new optional string column
  move       {"table", "column", "before"}  before null: move_first
  rename     {"table", "from", "to"}
  drop       {"table", "column"}
  spec       {"table", "source", "transform", "name"}  transform: "bucket[N]", "truncate[N]"
  tag / branch {"table", "name"}        a ref to the current snapshot
  read       {"table", "ref"}           every row (ref null: the table, with its current
                                        schema; a ref with its snapshot's): {"snapshot", "rows",
                                        "offsets"}, rows as [partition, offset, {column: value,
                                        "__key": key, "__ts": ms, "__ts_type", "__headers":
                                        [[key, value]]}] with nulls left out; offsets: the
                                        `floe.offsets.*` of the newest snapshot in the read
                                        one's ancestry that has them; null when the table does
                                        not exist. A snapshot with equality deletes is read by
                                        spec_read (PyIceberg reads none)
  refs       {"table"}                  {name: snapshot id}
  times      {"table"}                  each retained snapshot's [timestamp ms, written by Floe],
                                        in commit (sequence number) order
  columns    {"table"}                  the top-level column names, in order
  state      {"table"}                  the table state (`floe.state`) of the newest snapshot
                                        Floe wrote, parsed; null when none
  files      {"table"}                  the files each retained snapshot references (manifest
                                        lists, manifests, data and delete files) that are missing
"""
import base64
import datetime
import json
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from make_segments import v2_batch  # noqa: E402


def catalog(db, warehouse):
    from pyiceberg.catalog.sql import SqlCatalog
    return SqlCatalog("floe", uri="sqlite:///" + db, warehouse="file://" + warehouse)


class Engine:
    def __init__(self, db, warehouse):
        self.db = db
        self.catalog = catalog(db, warehouse)
        self.planned = {}  # snapshot id -> the files it references (they never change)

    def table(self, name):
        t = self.catalog.load_table(name)
        stamp_after(t.metadata)
        return t

    def segment(self, path, batches):
        parts = []
        for b in batches:
            if "marker" in b:
                key = (1 if b["commit"] else 0).to_bytes(4, "big")
                value = (0).to_bytes(2, "big") + (7).to_bytes(4, "big")
                data, _ = v2_batch(b["marker"], [(b["ts"], key, value, [])], txn=True, pid=b["pid"],
                                   epoch=b["epoch"], control=True)
            else:
                records = [(ts, None if k is None else k.encode(), None if v is None else v.encode(),
                            [(hk, None if hv is None else hv.encode()) for hk, hv in hs])
                           for ts, k, v, hs in b["records"]]
                pid = b.get("pid")
                data, _ = v2_batch(b["base"], records, txn=pid is not None, pid=-1 if pid is None else pid,
                                   epoch=-1 if pid is None else b["epoch"], log_append_ts=b.get("log_append"))
            parts.append(data)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(b"".join(parts))

    def append(self, table, rows):
        import pyarrow as pa
        t = self.table(table)
        keyed = "_kafka.tombstone" in t.schema().column_names  # an upsert table's (required)
        out = []
        for r in rows:
            r = dict(r)
            ts = EPOCH + datetime.timedelta(milliseconds=r.pop("ts"))
            r["_kafka"] = {"partition": r.pop("partition"), "offset": r.pop("offset"), "timestamp": ts,
                           "timestamp_type": "create", "headers": [], "key": None}
            if keyed:
                r["_kafka"]["tombstone"] = False
            out.append(r)
        t.append(pa.Table.from_pylist(out, schema=t.schema().as_arrow()))

    def delete(self, table, lo, hi, every):
        assert every == 1, "a copy-on-write delete of a range"
        from pyiceberg.expressions import And, GreaterThanOrEqual, LessThan
        t = self.table(table)
        if equality_deletes(t, t.current_snapshot()):
            return {"refused": "PyIceberg rewrites no files that equality deletes apply to"}
        t.delete(And(GreaterThanOrEqual("id", lo), LessThan("id", hi)))

    def pos_delete(self, table, lo, hi, every):
        """Position deletes of the rows lo <= id < hi: one file per partition (as Spark)
        for an even `lo`, one per data file (file-scoped, as Trino and Athena) for an odd;
        on a v3 table, deletion vectors as Spark writes them (tests/py/foreign_vector.py:
        a file's earlier vector merged into its new one)."""
        import foreign_delete
        t = self.table(table)
        if t.metadata.format_version >= 3:
            return self.vector_delete(t, lo, hi, every)
        ids = self.between(t, lo, hi, every)
        ids_of = lambda arrow: arrow.column("id").to_pylist()  # noqa: E731
        per = "file" if lo % 2 else "partition"
        self.commit_deletes(t, foreign_delete.position_deletes(t, ids, per=per, keys_of=ids_of) if ids else [])

    def eq_delete(self, table, lo, hi, every):
        """Equality deletes on `id` of the rows lo <= id < hi, one file per partition."""
        import foreign_delete
        t = self.table(table)
        ids = self.between(t, lo, hi, every)
        self.commit_deletes(t, foreign_delete.equality_deletes(t, "id", sorted(ids), scoped=True) if ids else [])

    def vector_delete(self, t, lo, hi, every):
        import foreign_vector
        chosen = lambda i: i is not None and lo <= i < hi and (i - lo) % every == 0  # noqa: E731
        rows = {"%s/%s" % (r["_kafka"]["partition"], r["_kafka"]["offset"])
                for r in spec_read(t, t.current_snapshot(), t.schema()) if chosen(r.get("id"))}
        if not rows:
            return None
        try:
            foreign_vector.delete(t, sorted(rows))
        except SystemExit as e:
            return {"refused": str(e)}
        return None

    @staticmethod
    def between(t, lo, hi, every):
        """The ids lo <= id < hi, lo plus a multiple of `every`, the table holds now."""
        rows = spec_read(t, t.current_snapshot(), t.schema())
        return {r["id"] for r in rows if r.get("id") is not None and lo <= r["id"] < hi and (r["id"] - lo) % every == 0}

    @staticmethod
    def commit_deletes(t, files):
        """One snapshot adding the delete files (tests/py/foreign_delete.py writes them)."""
        import foreign_delete
        if files:
            with t.transaction() as tx:
                with foreign_delete._AddDeleteFiles(tx, t.io, files):
                    pass

    def properties(self, table, set):
        with self.table(table).transaction() as tx:
            tx.set_properties(set)

    def add_column(self, table, name):
        from pyiceberg.types import StringType
        with self.table(table).update_schema() as u:
            u.add_column(name, StringType())

    def move(self, table, column, before):
        with self.table(table).update_schema() as u:
            if before is None:
                u.move_first(column)
            else:
                u.move_before(column, before)

    def rename(self, table, **names):
        with self.table(table).update_schema() as u:
            u.rename_column(names["from"], names["to"])

    def drop(self, table, column):
        with self.table(table).update_schema() as u:
            u.delete_column(column)

    def spec(self, table, source, transform, name):
        from pyiceberg.transforms import parse_transform
        with self.table(table).update_spec() as u:
            u.add_field(source, parse_transform(transform), name)

    def tag(self, table, name):
        t = self.table(table)
        t.manage_snapshots().create_tag(t.current_snapshot().snapshot_id, name).commit()

    def branch(self, table, name):
        t = self.table(table)
        t.manage_snapshots().create_branch(t.current_snapshot().snapshot_id, name).commit()

    def read(self, table, ref):
        from pyiceberg.exceptions import NoSuchTableError
        try:
            t = self.table(table)
        except NoSuchTableError:
            return None
        if ref is None:
            snapshot = t.current_snapshot()
        else:
            if ref not in t.metadata.refs:
                return {"snapshot": None, "rows": None, "missing_ref": True}
            snapshot = t.snapshot_by_id(t.metadata.refs[ref].snapshot_id)
        if snapshot is None:
            return {"snapshot": None, "rows": []}
        # The table read with its current schema; a ref as of its snapshot's schema.
        if equality_deletes(t, snapshot) or (t.metadata.format_version >= 3 and ref is None):
            # PyIceberg reads no equality deletes: the spec's rules, applied here; and a
            # v3 table's deletion vectors by the spec's rules too (not PyIceberg's reader).
            schema = t.schema() if ref is None else t.metadata.schema_by_id(snapshot.schema_id)
            data = spec_read(t, snapshot, schema)
        else:
            scan = t.scan() if ref is None else t.scan(snapshot_id=snapshot.snapshot_id)
            data = scan.to_arrow().to_pylist()
        rows = []
        for row in data:
            meta = row.pop("_kafka", None) or {}
            values = {k: v for k, v in ((k, clean(v)) for k, v in row.items()) if v is not None}
            values.update(metadata(meta))
            if "__key" not in values and isinstance(row.get("key"), bytes):
                values["__key"] = row["key"].decode("utf-8", "replace")  # a dead letter's key
            rows.append([meta.get("partition"), meta.get("offset"), values])
        return {"snapshot": str(snapshot.snapshot_id), "rows": rows, "offsets": floe_offsets(t, snapshot)}

    def columns(self, table):
        return [f.name for f in self.table(table).schema().fields]

    def times(self, table):
        """Each retained snapshot's [timestamp ms, whether Floe wrote it], in commit order."""
        snapshots = sorted(self.table(table).metadata.snapshots, key=lambda s: s.sequence_number or 0)
        return [[s.timestamp_ms, any(k.startswith("floe.") for k in (s.summary.additional_properties if s.summary else {}))]
                for s in snapshots]

    def refs(self, table):
        return {name: str(ref.snapshot_id) for name, ref in self.table(table).metadata.refs.items()}

    def state(self, table):
        t = self.table(table)
        snapshot = t.current_snapshot()
        while snapshot is not None:
            summary = snapshot.summary.additional_properties if snapshot.summary else {}
            if any(k.startswith("floe.") for k in summary):
                location = summary.get("floe.state")
                if location is None:
                    return None
                with open(location[len("file://"):] if location.startswith("file://") else location) as f:
                    return json.load(f)
            snapshot = t.snapshot_by_id(snapshot.parent_snapshot_id) if snapshot.parent_snapshot_id else None
        return None

    def files(self, table):
        t = self.table(table)
        io = t.io
        missing = []
        for snapshot in t.metadata.snapshots:
            if not exists(snapshot.manifest_list):
                missing.append("%s (manifest list of %d)" % (snapshot.manifest_list, snapshot.snapshot_id))
                continue
            if snapshot.snapshot_id not in self.planned:
                import foreign_delete
                paths = [m.manifest_path for m in snapshot.manifests(io)]
                data, deletes = foreign_delete.live_entries(t, snapshot)
                paths.extend(e.data_file.file_path for e in data + deletes)
                self.planned[snapshot.snapshot_id] = sorted(set(paths))
            missing.extend("%s (of snapshot %d)" % (p, snapshot.snapshot_id)
                           for p in self.planned[snapshot.snapshot_id] if not exists(p))
        return missing


EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)

# The earliest time this engine stamps commits with (ms): after the table's latest.
FLOOR_MS = [0]


def stamp_after(metadata):
    """This engine's next commits stamped after every time `metadata` logs: max(now,
    last + 1 ms), as Java's writers must (they refuse a snapshot before the last) and as
    Floe does. PyIceberg 0.12 stamps the wall clock, and after a commit from a clock
    ahead writes a snapshot log out of order, which iceberg-rust refuses to read."""
    times = [metadata.last_updated_ms] + [e.timestamp_ms for e in metadata.snapshot_log] + \
        [e.timestamp_ms for e in metadata.metadata_log]
    FLOOR_MS[0] = max(times) + 2


def clock_with_floor():
    """PyIceberg's clocks (snapshot times, metadata times) never before FLOOR_MS."""
    import time
    import pyiceberg.table.snapshots as snapshots
    import pyiceberg.table.update as update

    class Time:
        @staticmethod
        def time():
            return max(time.time(), FLOOR_MS[0] / 1000)

    class DateTime(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            floor = datetime.datetime.fromtimestamp(FLOOR_MS[0] / 1000, datetime.timezone.utc)
            return max(datetime.datetime.now(datetime.timezone.utc), floor)

    snapshots.time = Time
    update.datetime = DateTime


def equality_deletes(t, snapshot):
    """Whether `snapshot` has live equality delete files."""
    import foreign_delete
    from pyiceberg.manifest import DataFileContent
    deletes = foreign_delete.live_entries(t, snapshot)[1] if snapshot else []
    return any(e.data_file.content == DataFileContent.EQUALITY_DELETES for e in deletes)


def spec_read(t, snapshot, schema):
    """Every live row of `snapshot` under `schema`, deletes applied by the Iceberg spec's
    rules: a position delete (or, of the current snapshot, a deletion vector: Puffin,
    decoded by tests/py/foreign_delete.py) to the data file it names, of a data sequence
    number at most its own; an equality delete to data files strictly older, of its
    partition (spec and values) unless its spec is unpartitioned. Each data file read by
    PyIceberg without deletes (its projection by field id), rows in file order."""
    import foreign_delete
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan
    from pyiceberg.manifest import DataFileContent
    from pyiceberg.table import FileScanTask
    data, deletes = foreign_delete.live_entries(t, snapshot)
    specs = t.metadata.specs()
    positions, equalities = {}, []
    if t.current_snapshot() is not None and snapshot.snapshot_id == t.current_snapshot().snapshot_id:
        for seq, data_file, puffin, offset, length, count in foreign_delete.live_vectors(t):
            vector = foreign_delete.vector_positions(t, puffin, offset, length, count)
            positions.setdefault(data_file, []).extend((seq, pos) for pos in vector)
    for entry in deletes:
        f, seq = entry.data_file, entry.sequence_number
        if f.file_format.name == "PUFFIN":
            assert snapshot.snapshot_id == t.current_snapshot().snapshot_id, "deletion vectors of the current snapshot only"
            continue
        arrow = foreign_delete.read_parquet(t, f.file_path)
        if f.content == DataFileContent.POSITION_DELETES:
            for path, pos in zip(arrow.column("file_path").to_pylist(), arrow.column("pos").to_pylist()):
                positions.setdefault(path, []).append((seq, pos))
            continue
        by_id = {int(c.metadata[b"PARQUET:field_id"]): i for i, c in enumerate(arrow.schema)}
        columns = [arrow.column(by_id[i]).to_pylist() for i in f.equality_ids]
        scope = None if specs[f.spec_id].is_unpartitioned() else (f.spec_id, f.partition)
        equalities.append((seq, scope, f.equality_ids, set(zip(*columns))))
    rows = []
    for entry in data:
        f, seq = entry.data_file, entry.sequence_number
        gone = {pos for s, pos in positions.get(f.file_path, []) if seq <= s}
        applying = [(ids, keys) for s, scope, ids, keys in equalities
                    if seq < s and (scope is None or scope == (f.spec_id, f.partition))]
        read = ArrowScan(t.metadata, t.io, schema, AlwaysTrue()).to_table([FileScanTask(f)]).to_pylist()
        for i, row in enumerate(read):
            if i in gone or any(tuple(row[schema.find_column_name(n)] for n in ids) in keys for ids, keys in applying):
                continue
            rows.append(row)
    return rows


def metadata(meta):
    """A row's `_kafka` fields as the model holds them (`__` names; nulls left out)."""
    out = {}
    if meta.get("key") is not None:
        out["__key"] = meta["key"].decode("utf-8", "replace")
    if meta.get("timestamp") is not None:
        out["__ts"] = (meta["timestamp"] - EPOCH) // datetime.timedelta(milliseconds=1)
    if meta.get("timestamp_type") is not None:
        out["__ts_type"] = meta["timestamp_type"]
    out["__headers"] = [[h["key"], None if h.get("value") is None else h["value"].decode("utf-8", "replace")]
                        for h in meta.get("headers") or []]
    return out


def floe_offsets(t, snapshot):
    """The `floe.offsets.*` of the newest snapshot in `snapshot`'s ancestry that Floe wrote."""
    while snapshot is not None:
        summary = snapshot.summary.additional_properties if snapshot.summary else {}
        if any(k.startswith("floe.") for k in summary):
            return {k: v for k, v in summary.items() if k.startswith("floe.offsets.")}
        snapshot = t.snapshot_by_id(snapshot.parent_snapshot_id) if snapshot.parent_snapshot_id else None
    return {}


def exists(path):
    return os.path.exists(path[len("file://"):] if path.startswith("file://") else path)


def clean(value):
    """A value as JSON, nulls left out of structs (an absent field and a null one read alike)."""
    if isinstance(value, dict):
        value = {k: c for k, c in ((k, clean(v)) for k, v in value.items()) if c is not None}
        return value or None
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    if isinstance(value, list):
        return [clean(v) for v in value]
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    return value


def main():
    clock_with_floor()
    engine = Engine(*sys.argv[1:3])
    for line in sys.stdin:
        request = json.loads(line)
        op = request.pop("op")
        try:
            answer = {"ok": getattr(engine, op)(**request)}
        except Exception as e:  # every failure is the test's to judge
            answer = {"error": "%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc(limit=4))}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
