//! `shadow-reconciler manifests`: write or check the generated parts of `deploy/`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

#[derive(Args)]
pub(super) struct ManifestsArgs {
    /// The repository root: files go to DIR/deploy/...
    #[arg(long, value_name = "DIR", default_value = ".")]
    dir: PathBuf,
    /// Write nothing; exit 1 listing the files that are missing or stale.
    #[arg(long)]
    check: bool,
}

pub(super) fn manifests(args: &ManifestsArgs) -> anyhow::Result<ExitCode> {
    use shadow_reconciler::manifests;
    if args.check {
        let stale = manifests::stale(&args.dir)?;
        for path in &stale {
            eprintln!("stale or missing: {}", path.display());
        }
        if !stale.is_empty() {
            eprintln!("run `shadow-reconciler manifests` to regenerate them");
            return Ok(ExitCode::FAILURE);
        }
        return Ok(ExitCode::SUCCESS);
    }
    for path in manifests::write(&args.dir)? {
        super::out(format_args!("wrote {}\n", path.display()));
    }
    Ok(ExitCode::SUCCESS)
}
