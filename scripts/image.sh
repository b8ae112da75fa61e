#!/usr/bin/env bash
# Builds the container images without a daemon, as OCI image-layout archives that are the same
# bytes (the same digest) from the same commit, each with an SPDX SBOM. docs/image.md explains them.
#
#   scripts/image.sh                       # both images into target/image/
#   scripts/image.sh shadow-reconciler     # only the tool's image
#   scripts/image.sh example-controller    # only the Go example controller's image
#   SHADOW_RECONCILER_IMAGE_DIR=DIR ...    # where the archives go (default target/image)
#   SHADOW_RECONCILER_IMAGE_TARGET_DIR=DIR # cargo's target directory of the static build
#                                          # (default target/image-build; scripts/test.sh keeps
#                                          # one per machine, so the dependencies build once)
#
# For each IMAGE it writes IMAGE.oci.tar (load it with `docker load -i`, `podman load -i`,
# `ctr -n k8s.io images import`, or push it with `skopeo copy oci-archive:IMAGE.oci.tar
# docker://REGISTRY/NAME:TAG`), IMAGE.spdx.json (also inside the image) and IMAGE.digest,
# and prints `IMAGE REFERENCE DIGEST ARCHIVE` per image on stdout; progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

die() { echo "scripts/image.sh: $*" >&2; exit 1; }

images=("$@")
[ ${#images[@]} -gt 0 ] || images=(shadow-reconciler example-controller)
for image in "${images[@]}"; do
  case $image in
    shadow-reconciler | example-controller) ;;
    *) die "unknown image '$image' (known: shadow-reconciler, example-controller)" ;;
  esac
done
[ "$(uname -m)" = x86_64 ] || die "the images are built for linux/amd64; this machine is $(uname -m)"

out=${SHADOW_RECONCILER_IMAGE_DIR:-$root/target/image}
mkdir -p "$out"

# Every timestamp in an image is the commit's: the same commit gives the same bytes.
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH=$(git -C "$root" log -1 --format=%ct 2>/dev/null) ||
    die "not a git checkout: set SOURCE_DATE_EPOCH to the source's time (seconds since 1970)"
fi
export SOURCE_DATE_EPOCH
revision=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)
if [ -n "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  echo "scripts/image.sh: the work tree has uncommitted changes: the image is of them, labelled $revision-dirty" >&2
  revision=$revision-dirty
fi
version=$(awk -F'"' '/^version *=/ { print $2; exit }' Cargo.toml)
cargo_home=${CARGO_HOME:-$HOME/.cargo}
# The CA bundle the tool verifies object stores and OTLP/HTTPS collectors against (it reads the
# system's roots; a scratch image has none): Debian's, from this machine. It is an input of the
# image: a machine with another ca-certificates version builds another digest.
ca_bundle=${SHADOW_RECONCILER_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
[ -r "$ca_bundle" ] || die "no CA bundle at $ca_bundle (Debian's package ca-certificates; or set SHADOW_RECONCILER_CA_BUNDLE)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# /etc/passwd and /etc/group with the image's user, so tools that look the user up find it.
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$work/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$work/group"

labels=(
  --label "org.opencontainers.image.source=https://github.com/shadow-reconciler/shadow-reconciler"
  --label "org.opencontainers.image.revision=$revision"
  --label "org.opencontainers.image.version=$version"
  --label "org.opencontainers.image.licenses=Apache-2.0"
)

build_tool() {
  local target=x86_64-unknown-linux-gnu
  # A separate target directory keeps the static build's flags from invalidating the tests'
  # builds. It may be outside the checkout (SHADOW_RECONCILER_IMAGE_TARGET_DIR), shared by
  # checkouts: their dependencies are the same artifacts, each checkout's crate its own.
  local target_dir=${SHADOW_RECONCILER_IMAGE_TARGET_DIR:-$root/target/image-build}
  mkdir -p "$target_dir" || die "cannot create the target directory $target_dir"
  target_dir=$(cd "$target_dir" && pwd -P)
  local bin="$work/shadow-reconciler"
  echo "building the static shadow-reconciler binary (release, $target, glibc linked statically, in $target_dir)" >&2
  # Paths of this checkout, of the target directory and of the cargo home are remapped, in Rust
  # and in the C of the dependencies (aws-lc, ring), so that two checkouts build the same bytes,
  # wherever their target directory is: it reads as the default, /build/target/image-build.
  # The checkout's own remap goes through a rustc wrapper, not RUSTFLAGS: cargo rebuilds every
  # crate when RUSTFLAGS change, and the flags must stay the same for checkouts at other paths
  # to reuse a shared target directory's dependencies.
  local remap="--remap-path-prefix=$cargo_home=/cargo"
  local cremap="-ffile-prefix-map=$cargo_home=/cargo"
  case $target_dir/ in
    "$root"/*) ;;
    *)
      remap="$remap --remap-path-prefix=$target_dir=/build/target/image-build"
      cremap="$cremap -ffile-prefix-map=$target_dir=/build/target/image-build"
      ;;
  esac
  local wrapper="$target_dir/.rustc-remap"
  # shellcheck disable=SC2016 # expanded by the wrapper, at each call
  printf '%s\n' '#!/bin/sh' '# Written by scripts/image.sh: remaps the checkout being built to /build.' \
    'exec ${SHADOW_RECONCILER_INNER_RUSTC_WRAPPER:+"$SHADOW_RECONCILER_INNER_RUSTC_WRAPPER"} "$@" "--remap-path-prefix=$SHADOW_RECONCILER_IMAGE_SOURCE=/build"' \
    >"$wrapper.new" && chmod 755 "$wrapper.new" && mv "$wrapper.new" "$wrapper" ||
    die "cannot write $wrapper"
  # The build and the copy of its binary under one lock: another checkout sharing the target
  # directory writes its binary to the same path.
  (
    flock 9
    # A build from another checkout than the last one builds this crate again (see the script).
    bash "$root/scripts/claim-target-dir.sh" "$target_dir" || die "cannot claim $target_dir"
    # The C compilers of the dependencies see a fixed SOURCE_DATE_EPOCH (their __DATE__), not the
    # commit's: their build scripts rerun when it changes, and the binary must not depend on it.
    SOURCE_DATE_EPOCH=315532800 SHADOW_RECONCILER_IMAGE_SOURCE=$root SHADOW_RECONCILER_INNER_RUSTC_WRAPPER=${RUSTC_WRAPPER:-} \
      RUSTC_WRAPPER=$wrapper \
      CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-C target-feature=+crt-static $remap" \
      CFLAGS_x86_64_unknown_linux_gnu="$cremap" CXXFLAGS_x86_64_unknown_linux_gnu="$cremap" \
      cargo build --release --locked --target "$target" --target-dir "$target_dir" --bin shadow-reconciler >&2 ||
      die "cargo build of the static binary failed (command above)"
    cp "$target_dir/$target/release/shadow-reconciler" "$bin"
  ) 9>"$target_dir/.scripts-image.lock" || exit 1
  # A static binary has no interpreter: it runs FROM scratch.
  if readelf -l "$bin" | grep -q 'Requesting program interpreter'; then
    die "$bin is dynamically linked; the image needs a static binary"
  fi
  cargo metadata --format-version 1 --locked --filter-platform "$target" >"$work/metadata.json" ||
    die "cargo metadata failed"
  python3 scripts/sbom.py cargo --metadata "$work/metadata.json" --lock Cargo.lock \
    --name shadow-reconciler --version "$version" --out "$out/shadow-reconciler.spdx.json"
  local ref=${SHADOW_RECONCILER_IMAGE:-ghcr.io/shadow-reconciler/shadow-reconciler:$version}
  local digest
  digest=$(python3 scripts/oci_image.py --name "$ref" --out "$out/shadow-reconciler.oci.tar" \
    --entrypoint '["/usr/local/bin/shadow-reconciler"]' --user 65532:65532 "${labels[@]}" \
    --label "org.opencontainers.image.title=shadow-reconciler" \
    --env PATH=/usr/local/bin --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    --expose 8080/tcp \
    --file "$bin:usr/local/bin/shadow-reconciler:0755" \
    --file "$ca_bundle:etc/ssl/certs/ca-certificates.crt:0644" \
    --file "$work/passwd:etc/passwd:0644" --file "$work/group:etc/group:0644" \
    --file "$out/shadow-reconciler.spdx.json:usr/share/doc/shadow-reconciler/sbom.spdx.json:0644" \
    --dir tmp:1777 --dir home/nonroot:0755:65532 --dir var/lib/shadow-reconciler/data:0755:65532)
  echo "$digest" >"$out/shadow-reconciler.digest"
  echo "shadow-reconciler $ref $digest $out/shadow-reconciler.oci.tar"
}

build_example() {
  command -v go >/dev/null || die "the Go toolchain is not installed (go >= 1.26 builds the example controller)"
  local bin="$work/example-controller"
  echo "building the Go example controller (sdk/go/examples/hostedcluster, static)" >&2
  (cd sdk/go && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 GOFLAGS=-mod=readonly \
    go build -trimpath -buildvcs=false -ldflags '-s -w -buildid=' -o "$bin" ./examples/hostedcluster) ||
    die "go build of sdk/go/examples/hostedcluster failed"
  python3 scripts/sbom.py go --binary "$bin" --name example-controller --version "$version" \
    --out "$out/example-controller.spdx.json"
  local ref=${SHADOW_RECONCILER_EXAMPLE_IMAGE:-ghcr.io/shadow-reconciler/example-controller:$version}
  local digest
  digest=$(python3 scripts/oci_image.py --name "$ref" --out "$out/example-controller.oci.tar" \
    --entrypoint '["/usr/local/bin/example-controller"]' --user 65532:65532 "${labels[@]}" \
    --label "org.opencontainers.image.title=example-controller" \
    --env PATH=/usr/local/bin \
    --file "$bin:usr/local/bin/example-controller:0755" \
    --file "deploy/plans/hostedcluster.yaml:etc/shadow-reconciler/plans/hostedcluster.yaml:0644" \
    --file "$work/passwd:etc/passwd:0644" --file "$work/group:etc/group:0644" \
    --file "$out/example-controller.spdx.json:usr/share/doc/example-controller/sbom.spdx.json:0644" \
    --dir tmp:1777 --dir home/nonroot:0755:65532)
  echo "$digest" >"$out/example-controller.digest"
  echo "example-controller $ref $digest $out/example-controller.oci.tar"
}

for image in "${images[@]}"; do
  case $image in
    shadow-reconciler) build_tool ;;
    example-controller) build_example ;;
  esac
done
