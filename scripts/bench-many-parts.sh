#!/usr/bin/env bash
# `analyze` over a dataset of many small parts, as a month of a writer that commits two parts a
# minute leaves (about 86,000 files), side by side with DuckDB on the same files
# (docs/performance.md, "analyze over a month of parts").
#
#   scripts/bench-many-parts.sh [RUNS]     (default 24: about 28,600 parts, 85,800 files)
#
# Each run is `simulate --seed N --parquet-max-rows 40` (a part closes at every reconcile, about
# 3,600 files a run); the runs' datasets are merged into one directory (their parts have distinct
# writer ids), then `analyze --format json` and benches/duckdb/time_analyze.py read it under
# /usr/bin/time. Needs a release build (`cargo build --release`) and the venv of scripts/test.sh
# (SHADOW_RECONCILER_PYTHON, else .venv/bin/python) for DuckDB.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-24}
binary=target/release/shadow-reconciler
[ -x "$binary" ] || { echo "bench-many-parts.sh: build it first: cargo build --release" >&2; exit 1; }
python=${SHADOW_RECONCILER_PYTHON:-.venv/bin/python}
[ -x "$python" ] || { echo "bench-many-parts.sh: no Python with DuckDB at $python: run scripts/test.sh once, or set SHADOW_RECONCILER_PYTHON" >&2; exit 1; }
command -v /usr/bin/time >/dev/null || { echo "bench-many-parts.sh: /usr/bin/time is missing (Debian's package time)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/data"
for seed in $(seq 1 "$runs"); do
  (cd "$work" && "$OLDPWD/$binary" simulate -q --seed "$seed" --parquet-dir "run-$seed" \
    --parquet-max-rows 40 >/dev/null 2>"run-$seed.log") || {
    echo "bench-many-parts.sh: simulate --seed $seed failed:" >&2; tail -5 "$work/run-$seed.log" >&2; exit 1; }
  cp -rn "$work/run-$seed/." "$work/data/"
  rm -rf "$work/run-$seed"
done
files=$(find "$work/data" -name '*.parquet' | wc -l)
parts=$(find "$work/data" -path '*table=reconciles*' -name '*.parquet' | wc -l)
echo "dataset: $parts parts, $files files, $(du -sh "$work/data" | cut -f1)"

measure() { # label command...
  local label=$1; shift
  local status=0
  /usr/bin/time -v "$@" >"$work/out" 2>"$work/time" || status=$?
  # analyze exits 1 or 3 for a dataset that is not ready: a verdict, not a failure.
  if [ "$status" -ne 0 ] && [ "$status" -ne 1 ] && [ "$status" -ne 3 ]; then
    echo "bench-many-parts.sh: $label failed ($status):" >&2; tail -5 "$work/time" >&2; exit 1
  fi
  awk -v label="$label" '
    /Elapsed \(wall clock\)/ { n = split($NF, t, ":"); wall = (n == 3 ? t[1] * 3600 + t[2] * 60 + t[3] : t[1] * 60 + t[2]) }
    /User time/ { user = $NF } /System time/ { sys = $NF }
    /Maximum resident set size/ { rss = $NF / 1024 }
    END { printf "%s: wall %.2f s, CPU %.2f s, peak RSS %.0f MiB\n", label, wall, user + sys, rss }' "$work/time"
}
measure "analyze" "$binary" analyze --format json "$work/data"
"$python" -c 'import json, sys; plans = json.load(open(sys.argv[1]))["plans"]; print("analyze counted", sum(p["reconciles"] for p in plans), "reconciles")' "$work/out"
measure "DuckDB (python + time_analyze.py)" "$python" benches/duckdb/time_analyze.py "$work/data"
echo "DuckDB's own timing of its queries: $(tail -1 "$work/out") s"
