//! The container images of `scripts/image.sh` (docs/image.md): the same bytes from the same
//! commit, a static binary that runs as the image's non-root user, and an SBOM that names what the
//! binary links with the checksums `Cargo.lock` pins.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `scripts/image.sh` with its output in `dir`; the digests it printed, by image.
fn build(dir: &Path) -> BTreeMap<String, String> {
    let output = Command::new("bash")
        .arg(repo().join("scripts/image.sh"))
        .env("SHADOW_RECONCILER_IMAGE_DIR", dir)
        .stderr(Stdio::inherit())
        .output()
        .expect("run scripts/image.sh");
    assert!(
        output.status.success(),
        "scripts/image.sh failed ({}): see above",
        output.status
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| {
            let fields: Vec<&str> = l.split(' ').collect();
            assert_eq!(fields.len(), 4, "scripts/image.sh printed {l:?}");
            (fields[0].to_owned(), fields[2].to_owned())
        })
        .collect()
}

/// The files of an OCI archive, by name.
fn unpack(archive: &Path) -> BTreeMap<String, Vec<u8>> {
    let out = tempfile::tempdir().expect("temp dir");
    let status = Command::new("tar")
        .arg("-xf")
        .arg(archive)
        .arg("-C")
        .arg(out.path())
        .status()
        .expect("run tar");
    assert!(status.success(), "tar -xf {} failed", archive.display());
    let mut files = BTreeMap::new();
    collect(out.path(), out.path(), &mut files);
    files
}

fn collect(root: &Path, dir: &Path, files: &mut BTreeMap<String, Vec<u8>>) {
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(root, &path, files);
        } else {
            let name = path
                .strip_prefix(root)
                .expect("inside")
                .display()
                .to_string();
            files.insert(name, std::fs::read(&path).expect("read"));
        }
    }
}

fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).expect("JSON")
}

/// The image's manifest, config and single layer (uncompressed tar) from the archive's files.
fn image(files: &BTreeMap<String, Vec<u8>>) -> (serde_json::Value, serde_json::Value, Vec<u8>) {
    let blob = |digest: &serde_json::Value| {
        let digest = digest.as_str().expect("a digest");
        files
            .get(&format!(
                "blobs/sha256/{}",
                digest.trim_start_matches("sha256:")
            ))
            .unwrap_or_else(|| panic!("the archive has no blob {digest}"))
            .clone()
    };
    let index = json(&files["index.json"]);
    let manifest = json(&blob(&index["manifests"][0]["digest"]));
    let config = json(&blob(&manifest["config"]["digest"]));
    let layers = manifest["layers"].as_array().expect("layers");
    assert_eq!(layers.len(), 1, "one layer");
    let mut layer = Vec::new();
    flate2::read::GzDecoder::new(&blob(&layers[0]["digest"])[..])
        .read_to_end(&mut layer)
        .expect("gunzip the layer");
    (manifest, config, layer)
}

#[test]
#[allow(clippy::too_many_lines)] // one build checked part by part
fn the_images_are_the_same_bytes_from_the_same_commit_and_run_as_non_root() {
    let (a, b) = (
        tempfile::tempdir().expect("temp dir"),
        tempfile::tempdir().expect("temp dir"),
    );
    let first = build(a.path());
    let second = build(b.path());
    assert_eq!(
        first.keys().map(String::as_str).collect::<Vec<_>>(),
        ["example-controller", "shadow-reconciler"]
    );
    assert_eq!(first, second, "two builds of one commit gave other digests");
    for name in first.keys() {
        for file in [
            format!("{name}.oci.tar"),
            format!("{name}.spdx.json"),
            format!("{name}.digest"),
        ] {
            let (x, y) = (
                std::fs::read(a.path().join(&file)).expect("read"),
                std::fs::read(b.path().join(&file)).expect("read"),
            );
            assert!(x == y, "{file} differs between two builds of one commit");
        }
    }

    let files = unpack(&a.path().join("shadow-reconciler.oci.tar"));
    let (manifest, config, layer) = image(&files);
    let index = json(&files["index.json"]);
    assert_eq!(
        index["manifests"][0]["digest"], first["shadow-reconciler"],
        "the digest printed is the manifest's"
    );
    assert!(
        files.contains_key("manifest.json"),
        "docker load needs manifest.json"
    );
    assert_eq!(
        manifest["mediaType"],
        "application/vnd.oci.image.manifest.v1+json"
    );
    assert_eq!(config["config"]["User"], "65532:65532");
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!(["/usr/local/bin/shadow-reconciler"])
    );
    let revision = config["config"]["Labels"]["org.opencontainers.image.revision"]
        .as_str()
        .expect("a revision label");
    assert!(revision.len() >= 40, "revision label {revision:?}");

    // The layer: the binary, and files a non-root user cannot change.
    let root = tempfile::tempdir().expect("temp dir");
    let mut untar = Command::new("tar")
        .args(["-x", "--no-same-owner", "-C"])
        .arg(root.path())
        .stdin(Stdio::piped())
        .spawn()
        .expect("run tar");
    std::io::Write::write_all(&mut untar.stdin.take().expect("stdin"), &layer).expect("untar");
    assert!(
        untar.wait().expect("tar").success(),
        "the layer is not a tar"
    );
    let listing = Command::new("tar")
        .args(["-tvf", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            std::io::Write::write_all(&mut c.stdin.take().expect("stdin"), &layer)?;
            c.wait_with_output()
        })
        .expect("tar -tv");
    let listing = String::from_utf8_lossy(&listing.stdout);
    for line in listing.lines() {
        let owner = line.split_whitespace().nth(1).unwrap_or_default();
        let path = line.split_whitespace().last().unwrap_or_default();
        let writable_by_us = ["home/nonroot/", "var/lib/shadow-reconciler/data/"];
        assert!(
            owner == "0/0" || writable_by_us.contains(&path),
            "{path} is owned by {owner} in the image"
        );
    }
    let binary = root.path().join("usr/local/bin/shadow-reconciler");
    let elf = Command::new("readelf")
        .arg("-l")
        .arg(&binary)
        .output()
        .expect("readelf");
    assert!(
        !String::from_utf8_lossy(&elf.stdout).contains("program interpreter"),
        "the binary asks for a dynamic loader: it would not run FROM scratch"
    );
    // It runs, as the image's user, with nothing of this machine's libraries.
    let version = Command::new("setpriv")
        .args(["--reuid=65532", "--regid=65532", "--clear-groups"])
        .arg(&binary)
        .arg("--version")
        .env_clear()
        .output()
        .expect("run the image's binary");
    assert!(
        String::from_utf8_lossy(&version.stdout).contains(env!("CARGO_PKG_VERSION")),
        "the image's binary printed {:?} {:?}",
        String::from_utf8_lossy(&version.stdout),
        String::from_utf8_lossy(&version.stderr)
    );

    // The SBOM in the image is the one next to it, and names the linked crates with the
    // checksums of Cargo.lock, and no dev-dependency.
    let sbom = std::fs::read(
        root.path()
            .join("usr/share/doc/shadow-reconciler/sbom.spdx.json"),
    )
    .expect("the SBOM in the image");
    assert_eq!(
        sbom,
        std::fs::read(a.path().join("shadow-reconciler.spdx.json")).expect("read")
    );
    let sbom = json(&sbom);
    assert_eq!(sbom["spdxVersion"], "SPDX-2.3");
    let lock = std::fs::read_to_string(repo().join("Cargo.lock")).expect("Cargo.lock");
    let packages: BTreeMap<String, &serde_json::Value> = sbom["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| (p["name"].as_str().unwrap_or_default().to_owned(), p))
        .collect();
    for linked in [
        "kube-client",
        "k8s-openapi",
        "parquet",
        "opentelemetry_sdk",
        "aws-lc-sys",
    ] {
        let package = packages
            .get(linked)
            .unwrap_or_else(|| panic!("the SBOM does not list {linked}"));
        let checksum = package["checksums"][0]["checksumValue"]
            .as_str()
            .unwrap_or_else(|| panic!("{linked} has no checksum in the SBOM"));
        assert!(
            lock.contains(&format!(
                "name = \"{linked}\"\nversion = \"{}\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\nchecksum = \"{checksum}\"",
                package["versionInfo"].as_str().unwrap_or_default()
            )),
            "{linked}'s checksum in the SBOM is not Cargo.lock's"
        );
    }
    for dev_only in ["criterion", "proptest", "etcd-bin-vendored"] {
        assert!(
            !packages.contains_key(dev_only),
            "the SBOM lists {dev_only}, a dev-dependency the binary does not link"
        );
    }

    // The Go image: its SBOM lists the modules the binary was built from.
    let go = json(&std::fs::read(a.path().join("example-controller.spdx.json")).expect("read"));
    let modules: Vec<&str> = go["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    for module in ["sigs.k8s.io/controller-runtime", "k8s.io/client-go"] {
        assert!(
            modules.contains(&module),
            "the Go SBOM does not list {module}"
        );
    }
}
