//! The real-cluster quickstart of deploy/README.md, run as written: the block after the
//! `<!-- quickstart -->` marker goes to bash (`-euo pipefail`) on a real kube-apiserver, with
//! `kubectl` and `shadow-reconciler` on `PATH` and `KUBECONFIG` naming the admin's kubeconfig, in a
//! directory where `deploy/` is the repository's. Every command must succeed; then the data it
//! left must be what the quickstart says: a run log, committed Parquet that `analyze` reads, the
//! example HostedCluster reconciled.

mod common;

use std::path::Path;
use std::process::Command;

use common::apiserver::{ControlPlane, kube_bin_dir};

/// The shell block that follows the quickstart marker in deploy/README.md.
fn quickstart_block() -> String {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/README.md"))
            .expect("read deploy/README.md");
    let after = readme
        .split_once("<!-- quickstart:")
        .expect("deploy/README.md has a quickstart marker")
        .1;
    let body = after
        .split_once("```sh\n")
        .expect("a ```sh block follows the marker")
        .1;
    body.split_once("\n```")
        .expect("the block is closed")
        .0
        .to_owned()
}

#[test]
fn the_quickstart_runs_as_written_on_a_real_cluster() {
    let block = quickstart_block();
    assert!(
        block.contains("shadow-reconciler run") && block.contains("shadow-reconciler analyze"),
        "{block}"
    );
    let plane = ControlPlane::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).expect("bin dir");
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_shadow-reconciler"),
        bin.join("shadow-reconciler"),
    )
    .expect("link the binary");
    std::os::unix::fs::symlink(kube_bin_dir().join("kubectl"), bin.join("kubectl"))
        .expect("link kubectl");
    let work = dir.path().join("work");
    std::fs::create_dir(&work).expect("work dir");
    std::os::unix::fs::symlink(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy"),
        work.join("deploy"),
    )
    .expect("link deploy/");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &block])
        .current_dir(&work)
        .env("PATH", path)
        .env("KUBECONFIG", plane.kubeconfig())
        .env("NO_COLOR", "1")
        .env_remove("POD_NAMESPACE")
        .env_remove("RUST_LOG")
        .output()
        .expect("run bash");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let log = std::fs::read_to_string(work.join("run.log")).unwrap_or_default();
    assert!(
        out.status.success(),
        "the quickstart failed ({}):\n{block}\n--- stdout\n{stdout}\n--- stderr\n{}\n--- run.log\n{log}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // The metrics line it greps for, and the analysis of the data `run` committed on SIGTERM.
    assert!(
        stdout.contains("shadow_reconciler_reconciles_total{"),
        "{stdout}"
    );
    assert!(stdout.contains("readiness to enforce:"), "{stdout}");
    assert!(
        stdout.contains("analyze: exit 3 (1 not ready, 3 inconclusive)"),
        "two objects are too few for a verdict:\n{stdout}"
    );
    assert!(log.contains("controllers started"), "{log}");
}
