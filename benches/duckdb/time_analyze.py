"""Times DuckDB running analyze.sql over a dataset directory; prints the best of three, in seconds."""

import os
import sys
import time

import duckdb

query = open(os.path.join(os.path.dirname(__file__), "analyze.sql")).read().replace("{dir}", sys.argv[1])
best = None
for _ in range(3):
    started = time.perf_counter()
    duckdb.sql(query).fetchall()
    elapsed = time.perf_counter() - started
    best = elapsed if best is None else min(best, elapsed)
print(best)
