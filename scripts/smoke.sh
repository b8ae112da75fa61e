#!/usr/bin/env bash
# The fast loop after a change (docs/testing.md): the library's and the binary's unit tests, the
# integration tests that need nothing but the binary (plans, error messages, the dataset lock,
# the generated manifests, the models' shared vectors), and the main job on a small population:
# `simulate`, its Parquet and its analysis. About 3 minutes once built; the whole suite
# (scripts/test.sh, what CI runs) takes much longer and needs real components.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "scripts/smoke.sh: cargo is not installed" >&2; exit 1; }
start=$(date +%s)
cargo test --locked -q --lib --bins
cargo test --locked -q --test suite -- \
  error_messages::every_bad_input_gets_its_message plan_validation:: plan_hash:: shipped_plans:: \
  dataset_lock:: manifests:: conflict_vectors:: engine_legacy_loop:: engine_candidate_code::
cargo run --locked -q -- plan check deploy/plans/*.yaml
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The main job, small: exits non-zero if the shadow wrote anything or the run failed.
cargo run --locked -q -- simulate --hosted-clusters 40 --addons 10 --duration 60 \
  --parquet-dir "$tmp/data" --html "$tmp/report.html" -q >"$tmp/simulate.out"
grep -q "readiness to enforce:" "$tmp/simulate.out" ||
  { cat "$tmp/simulate.out"; echo "scripts/smoke.sh: simulate printed no analysis" >&2; exit 1; }
# analyze answers 0 ready, 1 not ready, 3 inconclusive; anything else is a failure.
code=0
cargo run --locked -q -- analyze "$tmp/data" --format json >"$tmp/analysis.json" || code=$?
case $code in 0|1|3) ;; *) echo "scripts/smoke.sh: analyze exited $code" >&2; exit 1 ;; esac
echo "scripts/smoke.sh: passed in $(( $(date +%s) - start )) s"
