//! `shadow-reconciler plan`: validate plan files.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use shadow_reconciler::plan::ReconcilePlan;

use super::EXIT_INVALID;

#[derive(Subcommand)]
pub(super) enum PlanCommand {
    /// Validate plans and print a summary of each; exit 2 if any is invalid.
    #[command(
        after_help = "Examples:\n  shadow-reconciler plan check deploy/plans/*.yaml\n  shadow-reconciler plan check my-hostedcluster.yaml"
    )]
    Check {
        /// Plan files (YAML).
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

pub(super) fn check_plans(files: &[PathBuf]) -> ExitCode {
    let mut invalid = 0;
    for file in files {
        match ReconcilePlan::load(file) {
            Ok(plan) => super::out(format_args!("{}\n", plan.summary())),
            Err(error) => {
                invalid += 1;
                let error = anyhow::Error::from(error);
                eprintln!("{error:#}");
            }
        }
    }
    if invalid == 0 {
        ExitCode::SUCCESS
    } else {
        eprintln!("{invalid} of {} plans invalid", files.len());
        ExitCode::from(EXIT_INVALID)
    }
}
