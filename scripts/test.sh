#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what the tests need (idempotently), then runs
# every test target, the benchmarks in test mode, the doc examples, and checks the shipped plans.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v cargo >/dev/null || { echo "scripts/test.sh: cargo is not installed" >&2; exit 1; }

# Space: a run writes about 6 GiB (target/, the image build, the test node's images and pods,
# Parquet, SeaweedFS, Prometheus), and the test node's kubelet and SeaweedFS refuse work on a
# nearly full disk (DiskPressure below 2% free, no new volumes below 1%): said first, not guessed
# from the failures it causes later.
for dir in . "${TMPDIR:-/tmp}"; do
  free_gib=$(df -P -BG "$dir" | awk 'NR == 2 { sub("G", "", $4); print $4 }')
  if [ "${free_gib:-0}" -lt 15 ]; then
    echo "scripts/test.sh: warning: only ${free_gib} GiB free on the filesystem of $dir; the suite needs about 6 GiB and the test node and SeaweedFS refuse work on a nearly full disk: tests may fail for want of space" >&2
  fi
done

# What the tests need beyond the Rust toolchain, installed idempotently from Debian's packages.
install_debian() { # package command
  command -v "$2" >/dev/null && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/test.sh: $2 is missing; install Debian's package $1 (as root: apt-get install $1)" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$1" >/dev/null
  command -v "$2" >/dev/null || { echo "scripts/test.sh: installing $1 did not provide $2" >&2; exit 1; }
}
install_debian prometheus promtool   # promtool checks our metrics exposition
install_debian prometheus prometheus # a real server scrapes a running simulate
install_debian openssl openssl       # the real control plane's certificates and keys
install_debian gcc gcc               # go test -race (cgo) for the Go package
install_debian chromium chromium     # renders the HTML report for tests/system/report_browser.rs
install_debian curl curl             # deploy/README.md's quickstart uses it (tests/system/quickstart.rs)
install_debian openjdk-17-jre-headless java # pyspark runs exporters/sql/spark (tests/system/exporters.rs)
# The test node of tests/system/node_deploy.rs (tests/common/node.rs): a container runtime, the pods'
# network, and the tools the images are built with (scripts/image.sh).
install_debian containerd containerd
install_debian runc runc
install_debian iproute2 ip
install_debian binutils readelf      # scripts/image.sh checks that the binary is static
# Packages without a command: asked of dpkg. A font that has the report's symbols, and the CNI
# plugins (bridge, host-local) of the test node's pod network.
install_package() { # package
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed" && return 0
  [ "$(id -u)" -eq 0 ] || { echo "scripts/test.sh: install Debian's package $1 (as root: apt-get install $1)" >&2; exit 1; }
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$1" >/dev/null
}
install_package fonts-dejavu-core
install_package containernetworking-plugins

# A real kube-apiserver (and kubectl), built from the Go module proxy once per machine and cached
# under ~/.cache/shadow-reconciler; etcd comes with the Rust dev-dependencies (etcd-bin-vendored).
# The tests of tests/system/control_plane.rs, conformance.rs, e2e_engine.rs and e2e_run.rs run on them.
command -v go >/dev/null || { echo "scripts/test.sh: the Go toolchain (go >= 1.26) is needed to build kube-apiserver for the tests; install it and rerun" >&2; exit 1; }
SHADOW_RECONCILER_KUBE_BIN_DIR=$(bash scripts/kube-apiserver.sh)
export SHADOW_RECONCILER_KUBE_BIN_DIR
# The test node's kubelet, kube-controller-manager and kube-scheduler, from the same module.
SHADOW_RECONCILER_KUBE_NODE_BIN_DIR=$(bash scripts/kube-apiserver.sh --node)
export SHADOW_RECONCILER_KUBE_NODE_BIN_DIR
# A real OpenTelemetry Collector (tools/otelcol: the components of the shipped configuration),
# built from the Go module proxy once per machine; tests/system/collector.rs runs it.
SHADOW_RECONCILER_OTELCOL=$(bash scripts/otelcol.sh)
export SHADOW_RECONCILER_OTELCOL
# SeaweedFS, the S3-compatible server tests/system/object_store.rs writes the dataset to on loopback,
# built from the Go module proxy once per machine (tools/seaweedfs).
SHADOW_RECONCILER_WEED=$(bash scripts/seaweedfs.sh)
export SHADOW_RECONCILER_WEED
# Helm (tools/helm), which renders deploy/helm for tests/system/deploy.rs, built once per machine.
SHADOW_RECONCILER_HELM=$(bash scripts/helm.sh)
export SHADOW_RECONCILER_HELM
# A real Trino server (476, from Maven Central, on a Java 24+ JDK of the machine) for
# exporters/sql/trino, fetched once per machine.
SHADOW_RECONCILER_TRINO=$(bash scripts/trino.sh)
export SHADOW_RECONCILER_TRINO
# Two cargo target directories per machine and toolchain, shared by the checkouts: their
# dependencies build once per machine, this crate again when another checkout built there last
# (scripts/claim-target-dir.sh, below). Directories of other toolchains are removed, and one is
# emptied when it passes 8 GiB (old versions of dependencies accumulate there).
cache=${SHADOW_RECONCILER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shadow-reconciler}
toolchain_key=$(rustc -vV | sha256sum | cut -c1-16)
machine_target_dir() { # NAME -> the directory
  local dir=$cache/$1-$toolchain_key old
  for old in "$cache/$1"-*; do
    [ -e "$old" ] && [ "$old" != "$dir" ] && rm -rf "$old"
  done
  if [ -d "$dir" ] && [ "$(du -sm "$dir" | cut -f1)" -gt 8192 ]; then
    rm -rf "$dir"
  fi
  mkdir -p "$dir"
  echo "$dir"
}
# The images' static release build (scripts/image.sh, for tests/system/image.rs and
# node_deploy.rs): its dependencies take about 8 minutes of both cores.
SHADOW_RECONCILER_IMAGE_TARGET_DIR=${SHADOW_RECONCILER_IMAGE_TARGET_DIR:-$(machine_target_dir image-build)}
export SHADOW_RECONCILER_IMAGE_TARGET_DIR
# The tests' own build (`cargo test` below), whose dependencies take about 8 minutes of both cores
# at the dev profile's opt-level 1. Without incremental state (CARGO_INCREMENTAL=0): it adds
# 1.5 GiB and does not speed up a build of the crate from scratch, which is what a new checkout
# does. A CARGO_TARGET_DIR set by the caller is used as it is.
if [ -z "${CARGO_TARGET_DIR:-}" ]; then
  CARGO_TARGET_DIR=$(machine_target_dir test-build)
  export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
fi
mkdir -p "$CARGO_TARGET_DIR"
export CARGO_TARGET_DIR

# pyarrow and DuckDB, the readers analysts use, read our Parquet in the tests: a venv with the
# pinned versions of scripts/requirements.txt, built once per machine and version of that file
# (under the cache root; .venv links to it, for the commands the docs show).
command -v python3 >/dev/null || install_debian python3-venv python3
venv=$cache/venv-$(cat scripts/requirements.txt | sha256sum | cut -c1-16)-py$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
mkdir -p "$cache"
(
  flock 9 # another checkout may be building the same venv
  if ! cmp -s scripts/requirements.txt "$venv/requirements.txt" 2>/dev/null; then
    rm -rf "$venv"
    python3 -m venv "$venv" 2>/dev/null || { install_debian python3-venv python3 && rm -rf "$venv" && python3 -m venv "$venv"; }
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r scripts/requirements.txt
    cp scripts/requirements.txt "$venv/requirements.txt"
  fi
) 9>"$cache/.venv.lock"
if [ ! -L .venv ] || [ "$(readlink .venv)" != "$venv" ]; then
  rm -rf .venv
  ln -s "$venv" .venv
fi
export SHADOW_RECONCILER_PYTHON="$venv/bin/python"

# The time of each stage, on stderr, so that a slow run says where its time went.
stage() { echo "scripts/test.sh: $1 ($(($(date +%s) - started)) s since the start)" >&2; }
started=$(($(date +%s) - SECONDS))
stage "set-up done"

tests() {
  set -euo pipefail
  # Both shared target directories claimed for this checkout before the build (under their
  # locks): the image's claim, if it came later, in the middle of the tests, would make this
  # build's crate stale for the cargo commands that follow it.
  bash scripts/claim-target-dir.sh "$CARGO_TARGET_DIR"
  mkdir -p "$SHADOW_RECONCILER_IMAGE_TARGET_DIR"
  flock "$SHADOW_RECONCILER_IMAGE_TARGET_DIR/.scripts-image.lock" \
    bash scripts/claim-target-dir.sh "$SHADOW_RECONCILER_IMAGE_TARGET_DIR"
  # Every test target, the system harness included (tests/system: the real node, kube-apiserver,
  # Spark, Trino, the Collector, the Go controllers, crash loops, the image build), which only this
  # switch builds: a plain `cargo test` is the fast loop of docs/testing.md.
  cargo test --locked --all-targets --features system-tests --no-run
  stage "the build done"
  # Beside the test harnesses, which keep both cores busy: the benchmarks in test mode (a smoke
  # run each; most of their time is spent waiting for fresh control planes) and the Go modules,
  # vetted and tested with the race detector (sdk/go holds the Go engine, its models held to the
  # Rust ones by the shared vectors of tests/data/*-vectors.json; the Go example controller is also
  # built and run by tests/system/go_controller.rs, and OCM's controller adopted, its own module
  # sdk/go/examples/ocm, by tests/system/ocm_controller.rs). Each one's output is shown when it
  # ends.
  local logs
  logs=$(mktemp -d)
  # The real node's test (tests/system/node_deploy.rs), the longest and the one that waits most
  # (for pods, Leases, a rollout's steps), from the start in a harness process of its own, so that
  # the other tests fill its waits; the main run skips it. It builds the images first, which the
  # image test then finds built.
  (cargo test --locked --features system-tests --test system -- node_deploy:: >"$logs/node_deploy" 2>&1) &
  local node=$!
  # (`--bench '*'`: `--benches` would also run the library's and the binary's unit tests again.)
  (cargo test --locked --bench '*' --features system-tests >"$logs/benchmarks" 2>&1) &
  local benches=$!
  (
    for mod in sdk/go sdk/go/examples/ocm; do
      (cd "$mod" && go vet ./... && go test -race -count=1 ./...)
    done
    (cd tools/otelcol && go vet ./...) # the Collector's main: no tests of its own, run by tests/system/collector.rs
  ) >"$logs/go" 2>&1 &
  local go=$!
  local failed=""
  # --no-fail-fast: a failure in one harness does not hide the others' results.
  cargo test --locked --no-fail-fast --lib --bins --tests --examples --features system-tests -- --skip node_deploy:: ||
    failed="$failed cargo-test"
  stage "the test harnesses done"
  # PID NAME TITLE: waits for a job beside the harnesses, prints its log, notes its failure.
  collect() {
    wait "$1" || failed="$failed $2"
    echo "--- $3:" >&2
    cat "$logs/$2" >&2
  }
  collect "$node" node_deploy "the real node's test (cargo test --test system -- node_deploy::)"
  collect "$benches" benchmarks "the benchmarks in test mode (cargo test --bench '*')"
  collect "$go" go "the Go modules (go vet, go test -race)"
  rm -rf "$logs"
  if [ -n "$failed" ]; then
    echo "scripts/test.sh: failed:$failed (their output above)" >&2
    exit 1
  fi
  stage "the node, the benchmarks and the Go modules done"
  # With the features of the build above, so that cargo reuses it instead of compiling the crate
  # again (a feature is part of every artifact's fingerprint).
  cargo test --locked --doc --features system-tests
  # The binary the tests ran (`cargo run` would compile the dependencies again: without the
  # dev-dependencies, some of their features differ).
  "$CARGO_TARGET_DIR/debug/shadow-reconciler" plan check deploy/plans/*.yaml
}
# From the build to the last test a run holds its target directory's lock: the tests run the
# binaries cargo puts there by name (debug/shadow-reconciler), which another checkout's build in
# the same directory would replace. Two runs on one machine take turns (the test node's lock
# would make them wait for each other anyway). `flock -o`: the servers the tests start do not
# inherit the lock.
export started
lock=$CARGO_TARGET_DIR/.tests.lock
flock -n -o "$lock" true || echo "scripts/test.sh: another run holds $lock; waiting for it" >&2
flock -o "$lock" bash -c "$(declare -f stage tests); tests"
echo "scripts/test.sh: everything passed in $((SECONDS / 60)) min $((SECONDS % 60)) s" >&2
