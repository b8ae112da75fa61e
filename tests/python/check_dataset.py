"""Reads a shadow-reconciler Parquet dataset with the tools analysts use (pyarrow, DuckDB).

Usage: check_dataset.py DIR

Opens every committed file with pyarrow and reads each of its row groups completely, then has
DuckDB count executions and failures per plan and operation over the hive-partitioned `steps`
table, and, when the dataset has a `rollouts` table (the rollout driver's record), per rollout
its rounds, its decisions in order, its last phase and the failed gates of its rounds (from the
`gates` column's JSON). Prints one JSON document; exits non-zero (with the reason) when a file
does not read.
"""

import glob
import json
import os
import sys

import duckdb
import pyarrow.parquet as pq


def files(root):
    return sorted(
        path
        for path in glob.glob(os.path.join(root, "table=*", "**", "*.parquet"), recursive=True)
        if not os.path.basename(path).startswith(".")
    )


def main(root):
    checked = []
    for path in files(root):
        parquet = pq.ParquetFile(path)
        rows = 0
        for group in range(parquet.num_row_groups):
            table = parquet.read_row_group(group)
            if table.num_rows != parquet.metadata.row_group(group).num_rows:
                raise SystemExit(f"{path}: row group {group} is incomplete")
            rows += table.num_rows
        if rows != parquet.metadata.num_rows:
            raise SystemExit(f"{path}: {rows} rows read, footer says {parquet.metadata.num_rows}")
        checked.append({"path": os.path.relpath(path, root), "rows": rows,
                        "row_groups": parquet.num_row_groups})
    steps = os.path.join(root, "table=steps", "**", "*.parquet")
    failures = duckdb.sql(f"""
        SELECT plan, operation,
               count(*) FILTER (WHERE execution IN ('real', 'dry-run')) AS executions,
               count(*) FILTER (WHERE execution IN ('real', 'dry-run') AND outcome = 'failed') AS failures
        FROM read_parquet('{steps}', hive_partitioning = true)
        GROUP BY plan, operation ORDER BY plan, operation
    """).fetchall()
    total = duckdb.sql(
        f"SELECT count(*) FROM read_parquet('{os.path.join(root, 'table=*', '**', '*.parquet')}', union_by_name = true)"
    ).fetchall()[0][0]
    rollouts = os.path.join(root, "table=rollouts", "**", "*.parquet")
    per_rollout = []
    if glob.glob(rollouts, recursive=True):
        per_rollout = duckdb.sql(f"""
            SELECT rollout, "group", count(*) AS rounds,
                   coalesce(string_agg(decision, ',' ORDER BY time) FILTER (WHERE decision <> ''), '') AS decisions,
                   arg_max(phase, time) AS phase,
                   sum(len(list_filter(json_extract_string(gates, '$[*].result'), lambda r: r = 'Failed'))) AS failed_gates
            FROM read_parquet('{rollouts}', hive_partitioning = true)
            GROUP BY rollout, "group" ORDER BY rollout
        """).fetchall()
    json.dump({
        "files": checked,
        "rows": total,
        "failures": [
            {"plan": p, "operation": o, "executions": e, "failures": f} for p, o, e, f in failures
        ],
        "rollouts": [
            {"rollout": r, "group": g, "rounds": n, "decisions": d, "phase": p, "failed_gates": int(f)}
            for r, g, n, d, p, f in per_rollout
        ],
    }, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
