#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what the tests need (idempotently), then runs
# every test target, the benchmarks in test mode, the doc examples, and checks the shipped plans.
set -euo pipefail
cd "$(dirname "$0")/.."

# What the tests need beyond the Rust toolchain is installed here, idempotently. Nothing yet.
command -v cargo >/dev/null || { echo "scripts/test.sh: cargo is not installed" >&2; exit 1; }

cargo test --locked --all-targets
cargo test --locked --doc
cargo run --locked --quiet -- plan check deploy/plans/*.yaml
