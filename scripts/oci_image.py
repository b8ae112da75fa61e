#!/usr/bin/env python3
"""Writes a container image as an OCI image-layout archive, without a daemon, byte for byte the
same from the same inputs: one layer, every file owned by root except where told, every time
SOURCE_DATE_EPOCH, gzip without a name or time. The archive also carries Docker's manifest.json,
so `docker load`, `podman load`, `ctr images import` and `skopeo copy oci-archive:` all take it.

  oci_image.py --name REF --out ARCHIVE --entrypoint JSON [--user UID:GID] [--label K=V ...]
               [--env K=V ...] [--file SRC:DST[:MODE]] [--dir DST[:MODE[:UID]]] ...

Prints the manifest's digest (what a registry and `crictl images --digests` show) on stdout.
Used by scripts/image.sh; see docs/image.md.
"""

import argparse
import datetime
import gzip
import hashlib
import io
import json
import os
import sys
import tarfile


def die(message):
    print(f"scripts/oci_image.py: {message}", file=sys.stderr)
    sys.exit(2)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--name", required=True, help="image reference, e.g. localhost/x:1.0")
    p.add_argument("--out", required=True, help="the archive to write")
    p.add_argument("--entrypoint", required=True, help="JSON array")
    p.add_argument("--user", default="65532:65532")
    p.add_argument("--label", action="append", default=[])
    p.add_argument("--env", action="append", default=[])
    p.add_argument("--file", action="append", default=[], help="SRC:DST[:MODE]")
    p.add_argument("--dir", action="append", default=[], help="DST[:MODE[:UID]]")
    p.add_argument("--expose", action="append", default=[], help="PORT/PROTO")
    return p.parse_args()


def main():
    args = parse_args()
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is None or not epoch.isdigit():
        die("SOURCE_DATE_EPOCH must be set to the commit's time (seconds since 1970)")
    mtime = int(epoch)
    try:
        entrypoint = json.loads(args.entrypoint)
    except json.JSONDecodeError as e:
        die(f"--entrypoint is not a JSON array: {e}")
    if ":" not in args.name.rsplit("/", 1)[-1]:
        die(f"--name {args.name}: give a tag (NAME:TAG)")

    entries = {}  # path -> (TarInfo, bytes or None)

    def add_dir(path, mode=0o755, uid=0):
        parts = path.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            p = "/".join(parts[:i])
            if p in entries and i < len(parts):
                continue
            info = tarfile.TarInfo(p)
            info.type = tarfile.DIRTYPE
            info.mode = mode if i == len(parts) else 0o755
            info.uid = info.gid = uid if i == len(parts) else 0
            info.mtime = mtime
            if p not in entries or i == len(parts):
                entries[p] = (info, None)

    for spec in args.dir:
        parts = spec.split(":")
        mode = int(parts[1], 8) if len(parts) > 1 and parts[1] else 0o755
        uid = int(parts[2]) if len(parts) > 2 else 0
        add_dir(parts[0], mode, uid)
    for spec in args.file:
        parts = spec.split(":")
        if len(parts) < 2:
            die(f"--file {spec}: expected SRC:DST[:MODE]")
        src, dst = parts[0], parts[1].strip("/")
        mode = int(parts[2], 8) if len(parts) > 2 else 0o644
        try:
            with open(src, "rb") as f:
                data = f.read()
        except OSError as e:
            die(f"--file {spec}: cannot read {src}: {e.strerror}")
        if "/" in dst:
            parent = dst.rsplit("/", 1)[0]
            if parent not in entries:
                add_dir(parent)
        info = tarfile.TarInfo(dst)
        info.size = len(data)
        info.mode = mode
        info.mtime = mtime
        entries[dst] = (info, data)

    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w", format=tarfile.PAX_FORMAT) as t:
        for path in sorted(entries):
            info, data = entries[path]
            info.uname = info.gname = ""
            t.addfile(info, io.BytesIO(data) if data is not None else None)
    raw = layer.getvalue()
    diff_id = "sha256:" + hashlib.sha256(raw).hexdigest()
    compressed = gzip.compress(raw, compresslevel=9, mtime=0)

    blobs = {}

    def blob(data):
        digest = hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return "sha256:" + digest, len(data)

    created = datetime.datetime.fromtimestamp(mtime, datetime.timezone.utc)
    created = created.strftime("%Y-%m-%dT%H:%M:%SZ")
    labels = dict(kv.split("=", 1) for kv in args.label)
    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": created,
        "config": {
            "User": args.user,
            "Entrypoint": entrypoint,
            "Env": args.env,
            "WorkingDir": "/",
            "Labels": labels,
            "ExposedPorts": {p: {} for p in args.expose},
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": created, "created_by": "scripts/oci_image.py"}],
    }
    layer_digest, layer_size = blob(compressed)
    config_digest, config_size = blob(json.dumps(config, sort_keys=True).encode())
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": config_digest,
            "size": config_size,
        },
        "layers": [
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                "digest": layer_digest,
                "size": layer_size,
            }
        ],
        "annotations": {k: v for k, v in labels.items() if k.startswith("org.opencontainers.")},
    }
    manifest_digest, manifest_size = blob(json.dumps(manifest, sort_keys=True).encode())
    tag = args.name.rsplit(":", 1)[1]
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": manifest_digest,
                "size": manifest_size,
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {
                    "io.containerd.image.name": args.name,
                    "org.opencontainers.image.ref.name": tag,
                },
            }
        ],
    }
    docker_manifest = [
        {
            "Config": "blobs/sha256/" + config_digest.split(":")[1],
            "RepoTags": [args.name],
            "Layers": ["blobs/sha256/" + layer_digest.split(":")[1]],
        }
    ]

    tmp = args.out + ".tmp"
    with open(tmp, "wb") as out, tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as t:

        def put(name, data):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = mtime
            t.addfile(info, io.BytesIO(data))

        put("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        put("index.json", json.dumps(index, sort_keys=True).encode())
        put("manifest.json", json.dumps(docker_manifest, sort_keys=True).encode())
        for digest in sorted(blobs):
            put("blobs/sha256/" + digest, blobs[digest])
    os.replace(tmp, args.out)
    print(manifest_digest)


if __name__ == "__main__":
    main()
