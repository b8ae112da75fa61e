//! The `shadow-reconciler` command: argument parsing and dispatch; the work is in the library.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use shadow_reconciler::plan::{self, ReconcilePlan};
use shadow_reconciler::simulate;

/// Exit code for invalid input (a bad plan, an unknown group); clap uses it for usage errors too.
const EXIT_INVALID: u8 = 2;

#[derive(Parser)]
#[command(name = "shadow-reconciler", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Work with ReconcilePlan files.
    #[command(subcommand)]
    Plan(PlanCommand),
    /// Run the control and candidate models side by side and print what the candidate changes.
    Simulate(SimulateArgs),
}

#[derive(Subcommand)]
enum PlanCommand {
    /// Validate plans and print a summary of each; exit 2 if any is invalid.
    Check {
        /// Plan files (YAML).
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

#[derive(Args)]
struct SimulateArgs {
    /// A shipped plan (`hostedcluster`, `addon-install-progression`) or a plan file.
    #[arg(long, default_value = "hostedcluster")]
    plan: String,
    /// Reconciles to simulate.
    #[arg(long, default_value_t = 10_000)]
    reconciles: u64,
    /// Probability that an operation fails in a reconcile.
    #[arg(long, default_value_t = 0.05, value_parser = parse_probability)]
    failure_rate: f64,
    /// Seed of the random draws (same seed, same numbers).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Rollout group enforced in the candidate (repeatable); default: every group.
    #[arg(long = "enforce", value_name = "GROUP")]
    enforce: Vec<String>,
}

fn parse_probability(s: &str) -> Result<f64, String> {
    let p: f64 = s
        .parse()
        .map_err(|e| format!("{s:?} is not a number: {e}"))?;
    if (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err(format!("{p} is not a probability; use a value from 0 to 1"))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Plan(PlanCommand::Check { files }) => Ok(check_plans(&files)),
        Command::Simulate(args) => simulate(args),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(EXIT_INVALID)
        }
    }
}

fn check_plans(files: &[PathBuf]) -> ExitCode {
    let mut invalid = 0;
    for file in files {
        match ReconcilePlan::load(file) {
            Ok(plan) => println!("{}", plan.summary()),
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

fn simulate(args: SimulateArgs) -> anyhow::Result<ExitCode> {
    let plan = match plan::embedded::load(&args.plan) {
        Some(plan) => plan,
        None => ReconcilePlan::load(&args.plan).with_context(|| {
            format!(
                "--plan {:?} is neither a shipped plan nor a valid plan file",
                args.plan
            )
        })?,
    };
    let settings = simulate::Settings {
        reconciles: args.reconciles,
        failure_rate: args.failure_rate,
        seed: args.seed,
        candidate_groups: (!args.enforce.is_empty()).then_some(args.enforce),
    };
    let summary = simulate::run(Arc::new(plan), settings).context("--enforce")?;
    print!("{summary}");
    Ok(ExitCode::SUCCESS)
}
