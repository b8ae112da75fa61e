#!/usr/bin/env bash
# Fetches the real Trino server the tests run exporters/sql/trino with (tests/python/check_sql.py
# --engine trino), once per machine: the server tarball from Maven Central (io.trino:trino-server,
# checked against Maven Central's SHA-1), unpacked into a cache outside the repository, with the
# Java it runs on (Trino 476 needs Java 24 or later: JAVA_HOME, else the newest JDK under
# /usr/lib/jvm that qualifies) written to `java-home` there. Prints the server directory on stdout;
# progress goes to stderr.
#
#   scripts/trino.sh                     # fetch if missing, print the directory
#   SHADOW_RECONCILER_CACHE=DIR ...      # cache root (default ~/.cache/shadow-reconciler)
set -euo pipefail
version=476

die() { echo "scripts/trino.sh: $*" >&2; exit 1; }

java_version() { # JAVA_HOME -> major version, or nothing
  "$1/bin/java" -version 2>&1 | awk -F'"' '/version/ { split($2, v, "."); print v[1]; exit }'
}
java_home=""
for candidate in ${JAVA_HOME:-} /usr/lib/jvm/*; do
  [ -x "$candidate/bin/java" ] || continue
  major=$(java_version "$candidate")
  if [ -n "$major" ] && [ "$major" -ge 24 ]; then
    if [ -z "$java_home" ] || [ "$major" -gt "$(java_version "$java_home")" ]; then
      java_home=$candidate
    fi
  fi
done
[ -n "$java_home" ] || die "Trino $version needs Java 24 or later: none in JAVA_HOME or /usr/lib/jvm (install a JDK 24+, e.g. Temurin 25, and set JAVA_HOME)"

root=${SHADOW_RECONCILER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shadow-reconciler}
dir="$root/trino-server-$version"
if [ -x "$dir/bin/launcher" ] && [ -f "$dir/.complete" ]; then
  echo "$java_home" >"$dir/java-home"
  echo "$dir"
  exit 0
fi
command -v curl >/dev/null || die "curl is needed to fetch Trino from Maven Central"
url="https://repo1.maven.org/maven2/io/trino/trino-server/$version/trino-server-$version.tar.gz"
mkdir -p "$root"
tmp=$(mktemp -d "$root/.fetch-trino-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "fetching Trino $version from Maven Central into $dir (once per machine: about 820 MB)" >&2
curl -fsSL -o "$tmp/server.tar.gz" "$url" || die "cannot download $url"
expected=$(curl -fsSL "$url.sha1" | awk '{ print $1 }') || die "cannot download $url.sha1"
actual=$(sha1sum "$tmp/server.tar.gz" | awk '{ print $1 }')
[ "$expected" = "$actual" ] || die "$url: SHA-1 $actual, Maven Central says $expected"
tar -xzf "$tmp/server.tar.gz" -C "$tmp"
rm -rf "$dir"
mv "$tmp/trino-server-$version" "$dir"
touch "$dir/.complete"
echo "$java_home" >"$dir/java-home"
echo "$dir"
