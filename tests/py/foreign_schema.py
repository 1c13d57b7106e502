#!/usr/bin/env python3
"""Another engine changes a Floe table's schema (PyIceberg's update_schema), or reads its
rows column by column.

    foreign_schema.py CATALOG_DB WAREHOUSE_DIR NAMESPACE.TABLE CHANGE...
        CHANGE: add:COLUMN (an optional string), drop:COLUMN, rename:COLUMN:NEW,
        move_first:COLUMN, move_before:COLUMN:OTHER — all in one schema update;
        prints the new schema
    foreign_schema.py CATALOG_DB WAREHOUSE_DIR NAMESPACE.TABLE rows
        {"<partition>/<offset>": {column: value as text, or null}} for every row, every
        top-level column but _kafka (PyIceberg binds columns by field id)
"""
import json
import sys

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.types import StringType


def change(update, spec):
    op, *args = spec.split(":")
    if op == "add":
        update.add_column(args[0], StringType())
    elif op == "drop":
        update.delete_column(args[0])
    elif op == "rename":
        update.rename_column(args[0], args[1])
    elif op == "move_first":
        update.move_first(args[0])
    elif op == "move_before":
        update.move_before(args[0], args[1])
    else:
        sys.exit("unknown change " + spec)


def text(value):
    return value.decode("utf-8", "replace") if isinstance(value, (bytes, bytearray)) else value


def main():
    db, warehouse, name = sys.argv[1:4]
    table = SqlCatalog("floe", uri="sqlite:///" + db, warehouse="file://" + warehouse).load_table(name)
    if sys.argv[4:] == ["rows"]:
        rows = {}
        for row in table.scan().to_arrow().to_pylist():
            kafka = row.pop("_kafka")
            rows["%s/%s" % (kafka["partition"], kafka["offset"])] = {k: text(v) for k, v in row.items()}
        print(json.dumps(rows))
        return
    with table.update_schema() as update:
        for spec in sys.argv[4:]:
            change(update, spec)
    print(table.refresh().schema())


if __name__ == "__main__":
    main()
