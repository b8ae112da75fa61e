#!/usr/bin/env python3
"""Writes an SPDX 2.3 (JSON) software bill of materials for an image's binary, the same bytes from
the same inputs (its time is SOURCE_DATE_EPOCH):

  sbom.py cargo --metadata FILE --lock Cargo.lock --name NAME --version V --out FILE
      the Rust packages the binary links: the package's normal dependencies, transitively, for
      x86_64 Linux (`cargo metadata --filter-platform`), with Cargo.lock's checksums; build and
      dev dependencies are not in the binary and not listed.
  sbom.py go --binary FILE --name NAME --version V --out FILE
      the Go modules the binary was built from (`go version -m`), with go.sum's h1 hashes.

Used by scripts/image.sh; see docs/image.md.
"""

import argparse
import datetime
import hashlib
import json
import os
import subprocess
import sys
import tomllib


def die(message):
    print(f"scripts/sbom.py: {message}", file=sys.stderr)
    sys.exit(2)


def spdx_id(text):
    return "SPDXRef-Package-" + "".join(c if c.isalnum() or c in ".-" else "-" for c in text)


def cargo_packages(metadata_path, lock_path):
    with open(metadata_path, encoding="utf-8") as f:
        metadata = json.load(f)
    with open(lock_path, "rb") as f:
        lock = tomllib.load(f)
    checksums = {(p["name"], p["version"]): p.get("checksum") for p in lock.get("package", [])}
    packages = {p["id"]: p for p in metadata["packages"]}
    nodes = {n["id"]: n for n in metadata["resolve"]["nodes"]}
    root = metadata["resolve"]["root"] or metadata["workspace_members"][0]
    seen, stack = {root}, [root]
    while stack:
        for dep in nodes[stack.pop()]["deps"]:
            if any(k["kind"] is None for k in dep["dep_kinds"]) and dep["pkg"] not in seen:
                seen.add(dep["pkg"])
                stack.append(dep["pkg"])
    out = []
    for pid in sorted(seen - {root}, key=lambda i: (packages[i]["name"], packages[i]["version"])):
        p = packages[pid]
        entry = {
            "name": p["name"],
            "version": p["version"],
            "purl": f"pkg:cargo/{p['name']}@{p['version']}",
            "license": p.get("license") or "NOASSERTION",
        }
        checksum = checksums.get((p["name"], p["version"]))
        if checksum:
            entry["sha256"] = checksum
        out.append(entry)
    return out


def go_packages(binary):
    try:
        text = subprocess.run(
            ["go", "version", "-m", binary], check=True, capture_output=True, text=True
        ).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        die(f"go version -m {binary}: {e}")
    out = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[0] == "dep":
            entry = {
                "name": fields[1],
                "version": fields[2],
                "purl": f"pkg:golang/{fields[1]}@{fields[2]}",
                "license": "NOASSERTION",
            }
            if len(fields) >= 4 and fields[3].startswith("h1:"):
                entry["goSum"] = fields[3]
            out.append(entry)
    if not out:
        die(f"go version -m {binary} lists no modules: is it a Go binary built in module mode?")
    return sorted(out, key=lambda e: (e["name"], e["version"]))


def document(name, version, kind, packages, epoch):
    created = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc)
    created = created.strftime("%Y-%m-%dT%H:%M:%SZ")
    root = spdx_id(f"{name}-{version}")
    content = json.dumps(packages, sort_keys=True).encode()
    namespace = f"https://shadow-reconciler.io/spdx/{name}-{version}-{hashlib.sha256(content).hexdigest()[:16]}"
    spdx_packages = [
        {
            "SPDXID": root,
            "name": name,
            "versionInfo": version,
            "downloadLocation": "NOASSERTION",
            "filesAnalyzed": False,
            "licenseConcluded": "NOASSERTION",
            "licenseDeclared": "Apache-2.0",
            "primaryPackagePurpose": "APPLICATION",
        }
    ]
    relationships = [
        {"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES", "relatedSpdxElement": root}
    ]
    for p in packages:
        ident = spdx_id(f"{p['name']}-{p['version']}")
        entry = {
            "SPDXID": ident,
            "name": p["name"],
            "versionInfo": p["version"],
            "downloadLocation": "NOASSERTION",
            "filesAnalyzed": False,
            "licenseConcluded": "NOASSERTION",
            "licenseDeclared": p["license"] if kind == "cargo" else "NOASSERTION",
            "externalRefs": [
                {"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl", "referenceLocator": p["purl"]}
            ],
            "primaryPackagePurpose": "LIBRARY",
        }
        if "sha256" in p:
            entry["checksums"] = [{"algorithm": "SHA256", "checksumValue": p["sha256"]}]
        if "goSum" in p:
            entry["comment"] = f"go.sum {p['goSum']}"
        spdx_packages.append(entry)
        relationships.append(
            {"spdxElementId": root, "relationshipType": "DEPENDS_ON", "relatedSpdxElement": ident}
        )
    return {
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": f"{name}-{version}",
        "documentNamespace": namespace,
        "creationInfo": {"created": created, "creators": ["Tool: shadow-reconciler scripts/sbom.py"]},
        "packages": spdx_packages,
        "relationships": relationships,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kind", choices=["cargo", "go"])
    p.add_argument("--metadata")
    p.add_argument("--lock")
    p.add_argument("--binary")
    p.add_argument("--name", required=True)
    p.add_argument("--version", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is None or not epoch.isdigit():
        die("SOURCE_DATE_EPOCH must be set to the commit's time (seconds since 1970)")
    if args.kind == "cargo":
        if not (args.metadata and args.lock):
            die("cargo needs --metadata and --lock")
        packages = cargo_packages(args.metadata, args.lock)
    else:
        if not args.binary:
            die("go needs --binary")
        packages = go_packages(args.binary)
    doc = document(args.name, args.version, args.kind, packages, int(epoch))
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{args.out}: {len(packages)} packages", file=sys.stderr)


if __name__ == "__main__":
    main()
