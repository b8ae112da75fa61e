"""Checks with pyarrow that killed writers left whole datasets, as docs/parquet.md tells readers.

Usage: check_crashed.py DIR [DIR ...]

For each dataset: every committed file (`*.parquet`, not hidden) of every table reads
completely; the parts `reconciles` and `steps` both hold (same partition, same file name) are
taken, as docs/parquet.md tells other readers to; in them, every reconcile has its step rows and
every step row its reconcile (the `reconcile_id` sets are equal), and the part's `writes` rows,
when it has a `writes` file, belong to its reconciles. A `reconciles` or `steps` file without its
sibling, or a `writes` file of a part that is not whole, is part of a rotation: counted and
listed, never read as data. Prints one JSON document; exits non-zero naming the
dataset and the part when a file does not read or the tables differ.
"""

import glob
import json
import os
import sys

import pyarrow.parquet as pq


def committed(root, table):
    base = os.path.join(root, f"table={table}")
    found = {}
    for path in glob.glob(os.path.join(base, "**", "*.parquet"), recursive=True):
        if not os.path.basename(path).startswith("."):
            found[os.path.relpath(path, base)] = path
    return found


def reconcile_ids(path):
    try:
        parquet = pq.ParquetFile(path)
        table = parquet.read(columns=["reconcile_id"])
    except Exception as error:  # any reader error is the finding
        raise SystemExit(f"{path}: a committed file does not read with pyarrow: {error}")
    if table.num_rows != parquet.metadata.num_rows:
        raise SystemExit(f"{path}: {table.num_rows} rows read, footer says "
                         f"{parquet.metadata.num_rows}")
    return set(table.column("reconcile_id").to_pylist())


def main(roots):
    summary = {"datasets": 0, "whole_parts": 0, "half_rotations": [], "reconciles": 0}
    for root in roots:
        summary["datasets"] += 1
        reconciles, steps = committed(root, "reconciles"), committed(root, "steps")
        writes = committed(root, "writes")
        whole = set(reconciles) & set(steps)
        parts_of = sorted(set(reconciles) ^ set(steps))
        orphans = [reconciles.get(name) or steps[name] for name in parts_of]
        orphans += [writes[name] for name in sorted(set(writes) - whole)]
        for path in sorted(orphans):
            reconcile_ids(path)  # readable, but not data
            summary["half_rotations"].append(os.path.relpath(path, os.path.dirname(root)))
        for name in sorted(whole):
            r, s = reconcile_ids(reconciles[name]), reconcile_ids(steps[name])
            if r != s:
                raise SystemExit(f"{root}: part {name}: {len(r - s)} reconciles without step "
                                 f"rows, {len(s - r)} step rows' reconciles missing")
            if name in writes and not reconcile_ids(writes[name]) <= r:
                raise SystemExit(f"{root}: part {name}: writes rows of reconciles the part "
                                 "does not hold")
            summary["whole_parts"] += 1
            summary["reconciles"] += len(r)
    print(json.dumps(summary))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    main(sys.argv[1:])
