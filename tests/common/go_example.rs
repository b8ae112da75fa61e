//! The Go package's HostedCluster example controller (`sdk/go/examples/hostedcluster`), built
//! once per process with the Go toolchain `scripts/test.sh` checks for: a missing Go is a
//! failure that says so, never a skip. Shared by the system tests and the benches.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The example's binary, built into `target/go/hostedcluster-example`.
pub fn binary() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let out = root.join("target/go/hostedcluster-example");
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
