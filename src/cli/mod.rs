//! The `shadow-reconciler` command line: one file per subcommand (its arguments and what it
//! runs), `options` for what several share. The work is in the library; this tree parses,
//! dispatches, prints and maps results to exit codes. It may use every module of the library
//! and nothing uses it (the top layer, see docs/design.md).

mod analyze;
mod budget;
mod election;
mod ingest;
mod manifests;
mod options;
mod parquet;
mod plan;
mod rollout;
mod run;
mod sim;
mod simulate;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit code when a signal interrupted the command (128 + SIGINT, as shells report it).
const EXIT_INTERRUPTED: u8 = 130;

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
    Plan(plan::PlanCommand),
    /// Run the control and candidate models side by side and print what the candidate changes.
    #[command(
        after_help = "Examples:\n  shadow-reconciler simulate\n  shadow-reconciler simulate --scenario missing-secrets --hosted-clusters 50 --addons 0\n  shadow-reconciler simulate --mode enforce --enforce-group hostedcluster/non-critical-syncs\n  shadow-reconciler simulate --plan my-hostedcluster.yaml --parquet-dir data\n  shadow-reconciler simulate --kubeconfig kind.kubeconfig --context kind-shadow\n  shadow-reconciler simulate --model-only --failure-rate 0.1 --candidate-group non-critical-syncs"
    )]
    Simulate(simulate::SimulateArgs),
    /// The embedded Kubernetes API simulator.
    #[command(subcommand)]
    Sim(sim::SimCommand),
    /// Run the reference controllers against a real cluster (kubeconfig or in-cluster).
    #[command(
        after_help = "Examples:\n  shadow-reconciler run --kubeconfig ~/.kube/config --parquet-dir data\n  shadow-reconciler run --reconciler hostedcluster --namespace clusters --no-flag-watch\n  shadow-reconciler run --mode enforce --enforce-group non-critical-syncs --ramp-percent 5\n  shadow-reconciler run --listen 0.0.0.0:8080 --log-format json    (in a pod)"
    )]
    Run(run::RunArgs),
    /// Judge the plan from recorded Parquet data: verdicts per operation, ordering dependencies,
    /// readiness per rollout group. Exit 0 ready, 1 not ready, 3 inconclusive, 2 bad input.
    #[command(
        after_help = "Examples:\n  shadow-reconciler analyze shadow-data\n  shadow-reconciler analyze shadow-data --format markdown > comment.md\n  shadow-reconciler analyze data --plan my-hostedcluster.yaml --suggest corrected.yaml\n  shadow-reconciler analyze data --group hostedcluster/non-critical-syncs && echo ready"
    )]
    Analyze(analyze::AnalyzeArgs),
    /// Receive a controller's reconcile spans over OTLP (gRPC 4317, HTTP 4318), rebuild each
    /// reconcile, evaluate the plan's candidate on it, and record it like the engine does.
    #[command(
        after_help = "Examples:\n  shadow-reconciler ingest --plan hostedcluster --parquet-dir data\n  shadow-reconciler ingest --plan deploy/plans/hostedcluster.yaml --candidate-group non-critical-syncs\n  (cd sdk/go && OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317 go run ./examples/hostedcluster --plan ../../deploy/plans/hostedcluster.yaml)    (the Go controller, from the repository)"
    )]
    Ingest(ingest::IngestArgs),
    /// Write the generated parts of deploy/ (CRDs, Prometheus rules, plan copies, the Helm chart's
    /// generated templates), or check them.
    #[command(
        after_help = "Examples:\n  shadow-reconciler manifests\n  shadow-reconciler manifests --check"
    )]
    Manifests(manifests::ManifestsArgs),
}

/// Parses the command line, runs the subcommand, and maps its result to the exit code (an error
/// prints `error: ...` and exits 2).
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Plan(plan::PlanCommand::Check { files }) => Ok(plan::check_plans(&files)),
        Command::Simulate(args) => simulate::simulate(&args),
        Command::Sim(sim::SimCommand::Serve(args)) => sim::serve(&args),
        Command::Sim(sim::SimCommand::Populate(args)) => sim::populate(&args),
        Command::Run(args) => run::run(&args),
        Command::Analyze(args) => analyze::analyze(&args),
        Command::Manifests(args) => manifests::manifests(&args),
        Command::Ingest(args) => ingest::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(EXIT_INVALID)
        }
    }
}

/// Ctrl-C or SIGTERM.
pub(crate) fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    // Registered now, not when first polled: a SIGTERM that arrives before the caller awaits
    // (while it prints that it waits, or finishes other work) is kept, not lost. Once a handler
    // is installed the signal's default action (ending the process) no longer applies, so a lost
    // one would be ignored for good.
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).ok();
    let mut interrupt = signal(SignalKind::interrupt()).ok();
    async move {
        tokio::select! {
            () = received(term.as_mut()) => {}
            () = received(interrupt.as_mut()) => {}
        }
    }
}

/// The next delivery of a registered signal; never, when it could not be registered.
async fn received(signal: Option<&mut tokio::signal::unix::Signal>) {
    match signal {
        Some(signal) => {
            signal.recv().await;
        }
        None => std::future::pending().await,
    }
}

/// Writes to stdout. A closed stdout (`| head -1`) ends the output quietly, as Unix tools do: the
/// rest of the command (writing data, its exit code) goes on; nothing more is printed.
pub(crate) fn out(text: impl std::fmt::Display) {
    use std::io::Write as _;
    use std::sync::atomic::{AtomicBool, Ordering};
    static CLOSED: AtomicBool = AtomicBool::new(false);
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    if let Err(error) = write!(stdout, "{text}").and_then(|()| stdout.flush()) {
        CLOSED.store(true, Ordering::Relaxed);
        if error.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!(
                "warning: cannot write to stdout: {error}; the rest of the output is dropped"
            );
        }
    }
}
