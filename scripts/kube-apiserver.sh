#!/usr/bin/env bash
# Builds the real kube-apiserver and kubectl the tests run against, once per machine, from the Go
# module proxy (tools/kube-apiserver/go.mod pins the version), into a cache outside the repository
# keyed by that version. Prints the cache directory on stdout; progress goes to stderr.
#
#   scripts/kube-apiserver.sh            # build if missing, print the directory
#   scripts/kube-apiserver.sh --node     # the test node's kubelet, kube-controller-manager and
#                                        # kube-scheduler instead (tests/common/node.rs)
#   SHADOW_RECONCILER_CACHE=DIR ...      # cache root (default ~/.cache/shadow-reconciler)
set -euo pipefail
cd "$(dirname "$0")/.."
module=tools/kube-apiserver

die() { echo "scripts/kube-apiserver.sh: $*" >&2; exit 1; }
command -v go >/dev/null || die "the Go toolchain is not installed (go >= 1.26 is needed to build kube-apiserver from the Go module proxy)"

what=apiserver
commands=(kube-apiserver kubectl)
case "${1:-}" in
  "") ;;
  --node) what=node; commands=(kubelet kube-controller-manager kube-scheduler) ;;
  *) die "unknown argument '$1' (usage: scripts/kube-apiserver.sh [--node])" ;;
esac

version=$(awk '$1 == "k8s.io/kubernetes" { print $2 }' "$module/go.mod")
[ -n "$version" ] || die "$module/go.mod: no requirement on k8s.io/kubernetes"
root=${SHADOW_RECONCILER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shadow-reconciler}
dir="$root/kube-$what-$version"
# The build is keyed by the version and by the exact module graph (go.sum) it was built from.
stamp=$(cat "$module/go.mod" "$module/go.sum" | sha256sum | cut -c1-16)

built() {
  for command in "${commands[@]}"; do [ -x "$dir/$command" ] || return 1; done
  [ "$(cat "$dir/stamp" 2>/dev/null)" = "$stamp" ]
}
if built; then
  echo "$dir"
  exit 0
fi

mkdir -p "$root"
tmp=$(mktemp -d "$root/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
minor=${version#v1.}
minor=${minor%%.*}
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
ldflags="$ldflags -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"

echo "building ${commands[*]} $version from the Go module proxy into $dir" >&2
echo "(once per machine: about 800 MB of modules and several minutes of compiling on 2 cores)" >&2
start=$(date +%s)
(cd "$module" && go mod download) || die "downloading the modules of $module/go.mod failed (is the Go module proxy reachable? GOPROXY=$(go env GOPROXY))"
# go build -v names each package as it is compiled: count them so the first build shows progress.
(cd "$module" && go build -v -trimpath -ldflags "$ldflags" -o "$tmp/" \
    "${commands[@]/#/k8s.io/kubernetes/cmd/}" 2>&1) |
  awk -v start="$start" '
    /^[a-z0-9.]+\.[a-z]+\// || /^[a-z]+(\/|$)/ { n++; if (n % 250 == 0) { printf "  %d packages compiled (%d s)\n", n, systime() - start > "/dev/stderr" } ; next }
    { print > "/dev/stderr"; failed = 1 }
    END { exit failed }' ||
  die "go build of ${commands[*]} $version failed (command: cd $module && go build -trimpath ${commands[*]/#/k8s.io/kubernetes/cmd/})"
"$tmp/${commands[0]}" --version >/dev/null || die "the built ${commands[0]} does not run"
echo "$stamp" >"$tmp/stamp"
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
echo "built ${commands[*]} $version in $(( $(date +%s) - start )) s" >&2
echo "$dir"
