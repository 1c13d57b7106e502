#!/usr/bin/env python3
"""Another engine manages a Floe table's refs, spec and properties, and reads its refs:
PyIceberg, through its own SqlCatalog.

    foreign_refs.py CATALOG_DB WAREHOUSE_DIR NAMESPACE.TABLE ACTION [ARG...]

tag NAME: a tag on the current snapshot. branch NAME [MIN_SNAPSHOTS_TO_KEEP]: a branch on
it. spec COLUMN NAME: the partition spec gains the field NAME = identity(COLUMN).
properties KEY=VALUE...: table
properties set. Each prints the current snapshot's id.
refs: prints {"<ref>": {"type", "snapshot_id", "rows", "offsets": {"<partition>": [sorted]},
"parent_rows": rows of the snapshot's parent, or null when it is expired}}, every ref read
at its snapshot (time travel).
"""
import json
import sys

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.transforms import IdentityTransform


def read(table, snapshot_id):
    rows = table.scan(snapshot_id=snapshot_id).to_arrow().to_pylist()
    offsets = {}
    for row in rows:
        meta = row["_kafka"]
        offsets.setdefault(str(meta["partition"]), []).append(meta["offset"])
    return len(rows), {p: sorted(o) for p, o in offsets.items()}


def main():
    db, warehouse, name, action, *args = sys.argv[1:]
    table = SqlCatalog("floe", uri="sqlite:///" + db, warehouse="file://" + warehouse).load_table(name)
    current = table.current_snapshot().snapshot_id
    if action == "tag":
        table.manage_snapshots().create_tag(current, args[0]).commit()
    elif action == "branch":
        keep = int(args[1]) if len(args) > 1 else None
        table.manage_snapshots().create_branch(current, args[0], min_snapshots_to_keep=keep).commit()
    elif action == "spec":
        with table.update_spec() as update:
            update.add_field(args[0], IdentityTransform(), args[1])
    elif action == "properties":
        with table.transaction() as tx:
            tx.set_properties(**dict(a.split("=", 1) for a in args))
    elif action == "refs":
        out = {}
        for ref_name, ref in table.metadata.refs.items():
            rows, offsets = read(table, ref.snapshot_id)
            parent = table.snapshot_by_id(ref.snapshot_id).parent_snapshot_id
            parent_rows = read(table, parent)[0] if parent and table.snapshot_by_id(parent) else None
            out[ref_name] = {"type": ref.snapshot_ref_type.value, "snapshot_id": ref.snapshot_id, "rows": rows,
                             "offsets": offsets, "parent_rows": parent_rows}
        print(json.dumps(out))
        return
    else:
        sys.exit("unknown action " + action)
    print(current)


if __name__ == "__main__":
    main()
