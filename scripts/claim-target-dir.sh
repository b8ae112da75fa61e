#!/usr/bin/env bash
# Claims a cargo target directory that several checkouts of this repository share (the per-machine
# builds of scripts/test.sh and scripts/image.sh) for the checkout it is run from. Cargo names
# this crate's artifacts the same from every checkout and judges them fresh by the times of the
# sources, not by their path: sources of one checkout that are older than another checkout's
# artifacts would be taken as built. So when another checkout was the last to claim DIR, the
# crate's roots (src/lib.rs, src/main.rs) are made newer than anything built there (only their
# times change), and every target of the crate is built again from this checkout's sources.
#
#   scripts/claim-target-dir.sh DIR    # the caller holds DIR's lock until its build is done
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 1 ] || { echo "usage: scripts/claim-target-dir.sh TARGET_DIR" >&2; exit 2; }
mkdir -p "$1"
if [ "$(cat "$1/.built-from" 2>/dev/null)" != "$PWD" ]; then
  touch src/lib.rs src/main.rs
  printf '%s\n' "$PWD" >"$1/.built-from"
fi
