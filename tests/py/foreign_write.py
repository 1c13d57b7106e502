#!/usr/bin/env python3
"""Another engine writes a Floe table: PyIceberg, through its own SqlCatalog (or Glue
catalog), commits a snapshot without Floe's summary keys.

    foreign_write.py CATALOG_DB WAREHOUSE_DIR NAMESPACE.TABLE overwrite|append|delete [ROWS]
    foreign_write.py glue ENDPOINT NAMESPACE.TABLE ...      the same through Glue and S3 at ENDPOINT (moto)

overwrite: every row written again into new files (as Spark's or Athena's OPTIMIZE
would); append: the first ROWS rows (5 unless given) appended once more; delete: every row deleted (a
GDPR-style delete). Prints the new snapshot's operation.
"""
import sys

from pyiceberg.expressions import AlwaysTrue

from read_iceberg import open_catalog


def main():
    db, warehouse, name, action = sys.argv[1:5]
    table = open_catalog(db, warehouse).load_table(name)
    rows = table.scan().to_arrow()
    if action == "overwrite":
        table.overwrite(rows)
    elif action == "append":
        table.append(rows.slice(0, int(sys.argv[5]) if len(sys.argv) > 5 else 5))
    elif action == "delete":
        table.delete(AlwaysTrue())
    else:
        sys.exit("unknown action " + action)
    table = table.refresh()
    print(table.current_snapshot().summary.operation.value)


if __name__ == "__main__":
    main()
