#!/usr/bin/env python3
"""Another engine deletes rows of a Floe table the merge-on-read way, as Athena, Trino,
Spark and Flink do: delete files written with pyarrow, committed by PyIceberg's snapshot
producer in a delete manifest (PyIceberg's own `delete()` only rewrites data files).
Also an independent reader that applies them by the Iceberg spec's rules.

    foreign_delete.py CATALOG_DB WAREHOUSE_DIR NAMESPACE.TABLE position PARTITION/OFFSET...
        one position delete file per data file holding any of these rows (its file_path
        bounds name that file), in one snapshot
    foreign_delete.py CATALOG_DB WAREHOUSE_DIR NAMESPACE.TABLE equality COLUMN VALUE...
        one equality delete file on the top-level COLUMN (a string or binary column; VALUE
        as text), of the unpartitioned spec: a global delete

tests/py/lifecycle_engine.py also writes position deletes one per partition (as Spark
does) and equality deletes on a long column, one per partition (as Flink does).
    foreign_delete.py CATALOG_DB WAREHOUSE_DIR NAMESPACE.TABLE position-every N MAX_BYTES
        one position delete file per live data file under MAX_BYTES, of its rows at
        positions 0, N, 2N, … (a tenth of them for N = 10; the compaction benchmark's)
    foreign_delete.py CATALOG_DB WAREHOUSE_DIR NAMESPACE.TABLE read
        every live row, position and equality deletes and deletion vectors applied
        (PyIceberg 0.12 reads no equality deletes; foreign_vector.py writes vectors): {"rows", "offsets", "duplicates", "values", "data_files",
        "delete_files"} — offsets and values as read_iceberg.py prints them

`glue ENDPOINT` in place of CATALOG_DB WAREHOUSE_DIR: the table through Glue and S3 at
ENDPOINT (moto); `http://… CREDENTIAL`: through a REST catalog.

The write commands print {"snapshot_id", "operation", "data_files": the data files the
position deletes name}.
"""
import io
import json
import struct
import sys
import uuid
import zlib
from collections import Counter, defaultdict

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.manifest import (DataFile, DataFileContent, FileFormat, ManifestContent, ManifestEntry,
                                ManifestEntryStatus, ManifestWriterV2)
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update.snapshot import _FastAppendFiles
from pyiceberg.typedef import Record
from pyroaring import BitMap

from read_iceberg import open_catalog

FILE_PATH_ID, POS_ID = 2147483546, 2147483545


class _DeleteManifestWriter(ManifestWriterV2):
    def content(self):
        return ManifestContent.DELETES


class _AddDeleteFiles(_FastAppendFiles):
    """A snapshot adding delete files (Java's RowDelta with deletes only: operation
    `delete`), every existing manifest kept."""

    def __init__(self, transaction, io, delete_files):
        super().__init__(operation=Operation.DELETE, transaction=transaction, io=io)
        self._delete_files = delete_files

    def _manifests(self):
        """One delete manifest per partition spec the delete files are of."""
        metadata = self._transaction.table_metadata
        by_spec = defaultdict(list)
        for data_file in self._delete_files:
            by_spec[data_file.spec_id].append(data_file)
        manifests = []
        for spec_id, files in sorted(by_spec.items()):
            with _DeleteManifestWriter(metadata.specs()[spec_id], metadata.schema(), self.new_manifest_output(),
                                       self._snapshot_id, self._compression) as writer:
                for data_file in files:
                    writer.add(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=self._snapshot_id,
                                                       sequence_number=None, file_sequence_number=None,
                                                       data_file=data_file))
            manifests.append(writer.to_manifest_file())
        return manifests + self._existing_manifests()


def live_entries(table, snapshot=None):
    """(data entries, delete entries) of `snapshot` (the current one by default), sequence
    numbers inherited."""
    data, deletes = [], []
    snapshot = snapshot or table.current_snapshot()
    for manifest in snapshot.manifests(table.io) if snapshot else []:
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            (data if entry.data_file.content == DataFileContent.DATA else deletes).append(entry)
    return data, deletes


def read_parquet(table, path):
    with table.io.new_input(path).open() as f:
        return pq.read_table(f)


def write_delete_file(table, arrow, content, spec_id, partition, **fields):
    """A delete file of partition `partition` of spec `spec_id`."""
    location = "%s/data/foreign-%s-deletes-%s.parquet" % (table.location(), content.name.lower(), uuid.uuid4())
    with table.io.new_output(location).create() as f:
        pq.write_table(arrow, f)
    size = len(table.io.new_input(location))
    data_file = DataFile.from_args(content=content, file_path=location, file_format=FileFormat.PARQUET,
                                   partition=partition, record_count=arrow.num_rows, file_size_in_bytes=size,
                                   **fields)
    data_file.spec_id = spec_id
    return data_file


def unpartitioned_spec_id(table):
    """A spec of the table without fields (a global equality delete's), the default else."""
    ids = [i for i, spec in table.metadata.specs().items() if not spec.fields]
    return ids[0] if ids else table.metadata.default_spec_id


def field(name, type_, field_id):
    return pa.field(name, type_, nullable=False, metadata={b"PARQUET:field_id": str(field_id).encode()})


def kafka_keys(arrow):
    """A data file's rows as `PARTITION/OFFSET`."""
    return ["%s/%s" % (k["partition"], k["offset"]) for k in arrow.column("_kafka").to_pylist()]


def holding(table, wanted, keys_of):
    """Per live data file holding any of the rows `wanted` (by `keys_of(file's arrow)`):
    (its entry, the positions and keys of those rows)."""
    for entry in live_entries(table)[0]:
        keys = keys_of(read_parquet(table, entry.data_file.file_path))
        found = [(i, k) for i, k in enumerate(keys) if k in wanted]
        if found:
            yield entry, found


def by_partition(table, wanted, keys_of):
    """[`holding`] grouped by the data files' (spec id, partition), in order."""
    groups = {}
    for entry, found in holding(table, wanted, keys_of):
        key = (entry.data_file.spec_id, repr(entry.data_file.partition))
        groups.setdefault(key, (entry.data_file.partition, []))[1].append((entry, found))
    return [(spec_id, partition, members) for (spec_id, _), (partition, members) in sorted(groups.items())]


def position_deletes(table, rows, per="file", keys_of=kafka_keys):
    """Position delete files of the rows `rows` (by `keys_of`): one per data file holding
    any (`per="file"`), or one per partition (`per="partition"`, as Spark writes them:
    the partition set, naming every file of it that holds any, sorted by path and position)."""
    wanted = set(rows)
    schema = pa.schema([field("file_path", pa.string(), FILE_PATH_ID), field("pos", pa.int64(), POS_ID)])
    groups = by_partition(table, wanted, keys_of) if per == "partition" else \
        [(e.data_file.spec_id, e.data_file.partition, [(e, found)]) for e, found in holding(table, wanted, keys_of)]
    files = []
    for spec_id, partition, members in groups:
        pairs = sorted((e.data_file.file_path, i) for e, found in members for i, _ in found)
        arrow = pa.table([[p for p, _ in pairs], [i for _, i in pairs]], schema=schema)
        bounds = ({FILE_PATH_ID: pairs[0][0].encode()}, {FILE_PATH_ID: pairs[-1][0].encode()})
        # Of the data files' partition and spec: a position delete applies within them.
        files.append(write_delete_file(table, arrow, DataFileContent.POSITION_DELETES, spec_id, partition,
                                       lower_bounds=bounds[0], upper_bounds=bounds[1]))
    return files


def every_nth_position(table, n, max_bytes):
    """A position delete file per live data file under `max_bytes`, of the rows at
    positions 0, n, 2n, … (no data file read: its record count is in the manifest)."""
    schema = pa.schema([field("file_path", pa.string(), FILE_PATH_ID), field("pos", pa.int64(), POS_ID)])
    files = []
    for entry in live_entries(table)[0]:
        data = entry.data_file
        if data.file_size_in_bytes >= max_bytes:
            continue
        positions = list(range(0, data.record_count, n))
        arrow = pa.table([[data.file_path] * len(positions), positions], schema=schema)
        bound = data.file_path.encode()
        files.append(write_delete_file(table, arrow, DataFileContent.POSITION_DELETES, data.spec_id, data.partition,
                                       lower_bounds={FILE_PATH_ID: bound}, upper_bounds={FILE_PATH_ID: bound}))
    return files


def equality_deletes(table, column, values, scoped=False):
    """One equality delete file on the top-level COLUMN (string, binary or long) of the
    values `values`: global (of an unpartitioned spec), or, `scoped`, one per partition
    holding any of them (of that partition, as Flink writes them)."""
    iceberg_field = table.schema().find_field(column)
    kind = str(iceberg_field.field_type)
    type_ = {"binary": pa.binary(), "long": pa.int64()}.get(kind, pa.string())

    def delete_file(values, spec_id, partition):
        data = [v.encode() for v in values] if kind == "binary" else list(values)
        arrow = pa.table([data], schema=pa.schema([field(column, type_, iceberg_field.field_id)]))
        return write_delete_file(table, arrow, DataFileContent.EQUALITY_DELETES, spec_id, partition,
                                 equality_ids=[iceberg_field.field_id])

    if not scoped:
        return [delete_file(values, unpartitioned_spec_id(table), Record())]
    keys_of = lambda arrow: arrow.column(column).to_pylist()  # noqa: E731
    return [delete_file(sorted({k for _, found in members for _, k in found}), spec_id, partition)
            for spec_id, partition, members in by_partition(table, set(values), keys_of)]


def as_text(value):
    return value.decode("utf-8", "replace") if isinstance(value, (bytes, bytearray)) else value


def live_vectors(table):
    """The deletion vectors (v3) of the current snapshot as their manifest entries give
    them (read with fastavro: PyIceberg 0.12 reads no `referenced_data_file`,
    `content_offset` or `content_size_in_bytes`): (sequence number, data file, Puffin
    file, offset, length, cardinality)."""
    snapshot = table.current_snapshot()
    vectors = []
    for manifest in snapshot.manifests(table.io) if snapshot else []:
        if manifest.content != ManifestContent.DELETES:
            continue
        with table.io.new_input(manifest.manifest_path).open() as f:
            entries = list(fastavro.reader(io.BytesIO(f.read())))
        for entry in entries:
            data_file = entry["data_file"]
            if entry["status"] == 2 or data_file["file_format"].upper() != "PUFFIN":
                continue
            sequence = entry["sequence_number"]
            vectors.append((manifest.sequence_number if sequence is None else sequence,
                            data_file["referenced_data_file"], data_file["file_path"], data_file["content_offset"],
                            data_file["content_size_in_bytes"], data_file["record_count"]))
    return vectors


def vector_positions(table, puffin_path, offset, length, cardinality):
    """The positions of a deletion vector, decoded by the Puffin spec: the blob at
    `offset` (`length` bytes, as the file's footer lists it), framed as length (BE) |
    magic | portable 64-bit roaring bitmap | CRC-32 (BE)."""
    with table.io.new_input(puffin_path).open() as f:
        raw = f.read()
    footer_size = struct.unpack("<i", raw[-12:-8])[0]
    footer = json.loads(raw[-12 - footer_size:-12])
    assert any(b["offset"] == offset and b["length"] == length for b in footer["blobs"]), footer
    payload = raw[offset:offset + length]
    body = payload[4:4 + struct.unpack(">I", payload[:4])[0]]
    assert body[:4] == bytes([0xD1, 0xD3, 0x39, 0x64]), "deletion vector magic"
    assert zlib.crc32(body) == struct.unpack(">I", payload[4 + len(body):8 + len(body)])[0], "deletion vector CRC"
    bitmap, at, positions = body[4:], 8, []
    for _ in range(struct.unpack("<Q", bitmap[:8])[0]):
        key = struct.unpack("<I", bitmap[at:at + 4])[0]
        lows = BitMap.deserialize(bitmap[at + 4:])
        at += 4 + len(lows.serialize())
        positions.extend((key << 32) + low for low in lows)
    assert len(positions) == cardinality
    return positions


def read(table):
    """Every live row with the deletes applied: a position delete or deletion vector to
    data files of a data sequence number at most its own, an equality delete to those
    strictly older."""
    data, deletes = live_entries(table)
    positions = defaultdict(list)
    equalities = []
    for sequence, path, *blob in live_vectors(table):
        positions[path].extend((sequence, pos) for pos in vector_positions(table, *blob))
    for entry in deletes:
        if entry.data_file.file_format == FileFormat.PUFFIN:
            continue
        rows = read_parquet(table, entry.data_file.file_path)
        if entry.data_file.content == DataFileContent.POSITION_DELETES:
            for path, pos in zip(rows.column("file_path").to_pylist(), rows.column("pos").to_pylist()):
                positions[path].append((entry.sequence_number, pos))
        else:
            names = [table.schema().find_column_name(i) for i in entry.data_file.equality_ids]
            keys = {tuple(r[n] for n in names) for r in rows.to_pylist()}
            equalities.append((entry.sequence_number, names, keys))
    offsets, seen, values = {}, Counter(), {}
    for entry in data:
        seq, path = entry.sequence_number, entry.data_file.file_path
        gone = {pos for s, pos in positions[path] if seq <= s}
        for i, row in enumerate(read_parquet(table, path).to_pylist()):
            if i in gone or any(seq < s and tuple(row[n] for n in names) in keys for s, names, keys in equalities):
                continue
            kafka = row["_kafka"]
            key = "%s/%s" % (kafka["partition"], kafka["offset"])
            seen[key] += 1
            offsets.setdefault(str(kafka["partition"]), []).append(kafka["offset"])
            values[key] = as_text(row.get("value"))
    print(json.dumps({
        "rows": sum(seen.values()),
        "offsets": {p: sorted(o) for p, o in offsets.items()},
        "duplicates": sum(c - 1 for c in seen.values()),
        "values": values,
        "data_files": sorted(e.data_file.file_path for e in data),
        "delete_files": len(deletes),
        "delete_paths": sorted(e.data_file.file_path for e in deletes),
    }))


def main():
    db, warehouse, name, action = sys.argv[1:5]
    table = open_catalog(db, warehouse).load_table(name)
    if action == "read":
        return read(table)
    if action == "position":
        files = position_deletes(table, sys.argv[5:])
    elif action == "position-every":
        files = every_nth_position(table, int(sys.argv[5]), int(sys.argv[6]))
    elif action == "equality":
        files = equality_deletes(table, sys.argv[5], sys.argv[6:])
    else:
        sys.exit("unknown action " + action)
    if not files:
        sys.exit("no row to delete")
    with table.transaction() as transaction:
        with _AddDeleteFiles(transaction, table.io, files):
            pass
    snapshot = table.refresh().current_snapshot()
    named = [f.lower_bounds[FILE_PATH_ID].decode() for f in files if f.lower_bounds]
    print(json.dumps({"snapshot_id": snapshot.snapshot_id, "operation": snapshot.summary.operation.value,
                      "data_files": named}))


if __name__ == "__main__":
    main()
