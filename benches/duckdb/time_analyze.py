"""Times DuckDB over a dataset directory; prints the best of three, in seconds.

Usage: time_analyze.py DIR [full|failures]
  full      analyze.sql: the analyzer's counts, ordering pairs included (the equivalent work)
  failures  executions and failures per operation only (a plain GROUP BY, for reference)
"""

import os
import sys
import time

import duckdb

root = sys.argv[1]
kind = sys.argv[2] if len(sys.argv) > 2 else "full"
if kind == "full":
    query = open(os.path.join(os.path.dirname(__file__), "analyze.sql")).read()
else:
    query = """
        SELECT plan, operation,
               count(*) FILTER (WHERE execution IN ('real', 'dry-run')) AS executions,
               count(*) FILTER (WHERE execution IN ('real', 'dry-run') AND outcome = 'failed') AS failures
        FROM read_parquet('{dir}/table=steps/**/*.parquet') GROUP BY ALL
    """
query = query.replace("{dir}", root)
best = None
for _ in range(3):
    started = time.perf_counter()
    duckdb.sql(query).fetchall()
    elapsed = time.perf_counter() - started
    best = elapsed if best is None else min(best, elapsed)
print(best)
