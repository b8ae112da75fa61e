//! The real-cluster quickstart of deploy/README.md, run as written: the block after the
//! `<!-- quickstart -->` marker goes to bash (`-euo pipefail`) on a real kube-apiserver, with
//! `kubectl` and `shadow-reconciler` on `PATH` and `KUBECONFIG` naming the admin's kubeconfig, in a
//! directory where `deploy/` is the repository's. Every command must succeed; then the data it
//! left must be what the quickstart says: a run log, committed Parquet that `analyze` reads, the
//! example HostedCluster reconciled. Then the rollout runbook's `kubectl patch` commands
//! (docs/flag.md) run on the flag ConfigMap the quickstart applied, each leaving a flag that
//! `run` accepts.

use crate::common;

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

/// The `kubectl ... patch` commands of docs/flag.md's rollout runbook (inline code spans).
fn runbook_patches() -> Vec<String> {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/flag.md"))
        .expect("read docs/flag.md");
    let runbook = doc
        .split_once("## Rollout runbook")
        .expect("docs/flag.md has the rollout runbook")
        .1;
    let runbook = runbook.split("\n## ").next().unwrap_or(runbook);
    runbook
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| span.starts_with("kubectl ") && span.contains(" patch "))
        .map(str::to_owned)
        .collect()
}

/// Runs each runbook patch on the cluster and checks the flag it leaves with `run`'s parser.
fn runbook_patches_leave_valid_flags(plane: &ControlPlane, path: &str) {
    use shadow_reconciler::flag::{FlagSpec, LiveFlag};
    let patches = runbook_patches();
    assert!(patches.len() >= 2, "{patches:?}");
    let shipped = vec![
        common::shipped("hostedcluster"),
        common::shipped("addon-install-progression"),
    ];
    let flag = LiveFlag::new(FlagSpec::default(), shipped).expect("the defaults are valid");
    for patch in patches {
        let out = Command::new("bash")
            .args(["-euo", "pipefail", "-c", &patch])
            .env("PATH", path)
            .env("KUBECONFIG", plane.kubeconfig())
            .output()
            .expect("run bash");
        assert!(
            out.status.success(),
            "{patch}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let json = plane.kubectl(&[
            "-n",
            "shadow-reconciler",
            "get",
            "configmap",
            "shadow-reconciler-flag",
            "-o",
            "json",
        ]);
        let cm: k8s_openapi::api::core::v1::ConfigMap =
            serde_json::from_str(&json).expect("a ConfigMap");
        let spec = flag
            .parse(&cm)
            .unwrap_or_else(|e| panic!("{patch}: the flag is refused: {e}"));
        let key = |name: &str| {
            patch
                .split(&format!("\"{name}\":\""))
                .nth(1)
                .and_then(|rest| rest.split('"').next())
        };
        let mode = key("mode");
        let groups = key("groups");
        assert!(
            mode.is_some() || groups.is_some(),
            "{patch}: each runbook patch sets a mode or per-group ramps"
        );
        if let Some(mode) = mode {
            assert_eq!(spec.mode.to_string(), mode, "{patch}");
        }
        if let Some(groups) = groups {
            let got: Vec<String> = spec
                .groups
                .iter()
                .map(|g| g.to_string().trim_end_matches('%').to_owned())
                .collect();
            let want: Vec<&str> = groups.split(',').map(str::trim).collect();
            assert_eq!(got, want, "{patch}: the groups the flag gives");
        }
    }
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
        .env("PATH", &path)
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
        stdout.contains("analyze exit code 3 (0 ready, 1 not ready, 3 inconclusive)"),
        "two objects are too few for a verdict:\n{stdout}"
    );
    assert!(log.contains("controllers started"), "{log}");
    runbook_patches_leave_valid_flags(&plane, &path);
}
