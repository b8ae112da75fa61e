#!/usr/bin/env bash
# Builds SeaweedFS (`weed`), the S3-compatible server the tests write the dataset to over
# loopback, once per machine, from the Go module proxy (tools/seaweedfs/go.mod pins it), into a
# cache outside the repository keyed by that module graph. Prints the binary's path on stdout;
# progress goes to stderr.
#
#   scripts/seaweedfs.sh                 # build if missing, print the binary's path
#   SHADOW_RECONCILER_CACHE=DIR ...      # cache root (default ~/.cache/shadow-reconciler)
set -euo pipefail
cd "$(dirname "$0")/.."
module=tools/seaweedfs

die() { echo "scripts/seaweedfs.sh: $*" >&2; exit 1; }
command -v go >/dev/null || die "the Go toolchain is not installed (go >= 1.26 is needed to build SeaweedFS from the Go module proxy)"

version=$(awk '$1 == "github.com/seaweedfs/seaweedfs" { print $2 }' "$module/go.mod")
[ -n "$version" ] || die "$module/go.mod: no requirement on github.com/seaweedfs/seaweedfs"
root=${SHADOW_RECONCILER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shadow-reconciler}
stamp=$(cat "$module/go.mod" "$module/go.sum" | sha256sum | cut -c1-16)
dir="$root/seaweedfs-$stamp"
if [ -x "$dir/weed" ]; then
  echo "$dir/weed"
  exit 0
fi

mkdir -p "$root"
tmp=$(mktemp -d "$root/.build-seaweedfs-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "building SeaweedFS $version from the Go module proxy into $dir" >&2
echo "(once per machine: about 1 GB of modules and several minutes of compiling on 2 cores)" >&2
start=$(date +%s)
(cd "$module" && go mod download) || die "downloading the modules of $module/go.mod failed (is the Go module proxy reachable? GOPROXY=$(go env GOPROXY))"
(cd "$module" && go build -trimpath -ldflags "-s -w" -o "$tmp/weed" github.com/seaweedfs/seaweedfs/weed) ||
  die "go build of SeaweedFS failed (command: cd $module && go build -trimpath github.com/seaweedfs/seaweedfs/weed)"
"$tmp/weed" version >/dev/null || die "the built weed does not run"
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
echo "built SeaweedFS $version in $(( $(date +%s) - start )) s" >&2
echo "$dir/weed"
