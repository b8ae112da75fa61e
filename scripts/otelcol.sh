#!/usr/bin/env bash
# Builds the real OpenTelemetry Collector the tests run the shipped configuration with
# (exporters/otel-collector/config.yaml), once per machine, from the Go module proxy
# (tools/otelcol/go.mod pins every Collector module at one release), into a cache outside the
# repository keyed by that module graph. Prints the binary's path on stdout; progress goes to
# stderr.
#
#   scripts/otelcol.sh                   # build if missing, print the binary's path
#   SHADOW_RECONCILER_CACHE=DIR ...      # cache root (default ~/.cache/shadow-reconciler)
set -euo pipefail
cd "$(dirname "$0")/.."
module=tools/otelcol

die() { echo "scripts/otelcol.sh: $*" >&2; exit 1; }
command -v go >/dev/null || die "the Go toolchain is not installed (go >= 1.26 is needed to build the OpenTelemetry Collector from the Go module proxy)"

version=$(awk '$1 == "go.opentelemetry.io/collector/otelcol" { print $2 }' "$module/go.mod")
[ -n "$version" ] || die "$module/go.mod: no requirement on go.opentelemetry.io/collector/otelcol"
root=${SHADOW_RECONCILER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shadow-reconciler}
stamp=$(cat "$module/go.mod" "$module/go.sum" "$module/main.go" | sha256sum | cut -c1-16)
dir="$root/otelcol-$version-$stamp"
if [ -x "$dir/otelcol-shadow" ]; then
  echo "$dir/otelcol-shadow"
  exit 0
fi

mkdir -p "$root"
tmp=$(mktemp -d "$root/.build-otelcol-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "building the OpenTelemetry Collector $version from the Go module proxy into $dir" >&2
echo "(once per machine: about 300 MB of modules and a few minutes of compiling on 2 cores)" >&2
start=$(date +%s)
(cd "$module" && go mod download) || die "downloading the modules of $module/go.mod failed (is the Go module proxy reachable? GOPROXY=$(go env GOPROXY))"
(cd "$module" && go build -trimpath -ldflags "-s -w" -o "$tmp/otelcol-shadow" .) ||
  die "go build of the Collector failed (command: cd $module && go build -trimpath .)"
"$tmp/otelcol-shadow" components >/dev/null || die "the built Collector does not run"
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
echo "built the OpenTelemetry Collector $version in $(( $(date +%s) - start )) s" >&2
echo "$dir/otelcol-shadow"
