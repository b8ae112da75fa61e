//! The Go package's HostedCluster example controller (`sdk/go/examples/hostedcluster`), built
//! once per process with the Go toolchain `scripts/test.sh` checks for: a missing Go is a
//! failure that says so, never a skip. Shared by the system tests and the benches.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The example's binary, built into `target/go/HARNESS/hostedcluster-example`: one per test or
/// bench binary (HARNESS is its name, `system` or `go_engine_apiserver`), since scripts/test.sh
/// runs them at the same time and a build must not replace a binary another process runs.
pub fn binary() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let exe = std::env::current_exe().expect("the running binary's path");
        let stem = exe.file_stem().and_then(|s| s.to_str()).unwrap_or("tests");
        // cargo names a test binary NAME-HASH.
        let harness = stem.rsplit_once('-').map_or(stem, |(name, _)| name);
        let dir = root.join("target/go").join(harness);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        let out = dir.join("hostedcluster-example");
        let status = Command::new("go")
            .args(["build", "-o"])
            .arg(&out)
            .arg("./examples/hostedcluster")
            .current_dir(root.join("sdk/go"))
            .status()
            .unwrap_or_else(|e| {
                panic!("cannot run go ({e}): the Go controller needs Go; see docs/testing.md")
            });
        assert!(status.success(), "go build of the example failed: {status}");
        out
    })
}
