#!/usr/bin/env bash
# Builds Helm, which renders and lints deploy/helm/shadow-reconciler in the tests, once per machine
# from the Go module proxy (tools/helm/go.mod pins the release), into a cache outside the
# repository keyed by that module graph. Prints the binary's path on stdout; progress goes to
# stderr.
#
#   scripts/helm.sh                      # build if missing, print the binary's path
#   SHADOW_RECONCILER_CACHE=DIR ...      # cache root (default ~/.cache/shadow-reconciler)
set -euo pipefail
cd "$(dirname "$0")/.."
module=tools/helm

die() { echo "scripts/helm.sh: $*" >&2; exit 1; }
command -v go >/dev/null || die "the Go toolchain is not installed (go >= 1.26 is needed to build Helm from the Go module proxy)"

version=$(awk '$1 == "helm.sh/helm/v4" { print $2 }' "$module/go.mod")
[ -n "$version" ] || die "$module/go.mod: no requirement on helm.sh/helm/v4"
root=${SHADOW_RECONCILER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shadow-reconciler}
stamp=$(cat "$module/go.mod" "$module/go.sum" | sha256sum | cut -c1-16)
dir="$root/helm-$version-$stamp"
if [ -x "$dir/helm" ]; then
  echo "$dir/helm"
  exit 0
fi

mkdir -p "$root"
tmp=$(mktemp -d "$root/.build-helm-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "building Helm $version from the Go module proxy into $dir (once per machine)" >&2
start=$(date +%s)
(cd "$module" && go mod download) || die "downloading the modules of $module/go.mod failed (is the Go module proxy reachable? GOPROXY=$(go env GOPROXY))"
(cd "$module" && go build -trimpath -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$version" -o "$tmp/helm" helm.sh/helm/v4/cmd/helm) ||
  die "go build of Helm failed (command: cd $module && go build -trimpath helm.sh/helm/v4/cmd/helm)"
"$tmp/helm" version >/dev/null || die "the built Helm does not run"
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
echo "built Helm $version in $(( $(date +%s) - start )) s" >&2
echo "$dir/helm"
