//! The `analyze` command, and the Parquet and flag options shared by `simulate` and `run` (binary
//! only).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use shadow_reconciler::analyze::{self, render::Format};
use shadow_reconciler::dataset::{HealthCounters, ParquetSink, SinkConfig};
use shadow_reconciler::flag::watch::Target;
use shadow_reconciler::flag::{FlagSpec, GroupRef, LiveFlag, Ramp};
use shadow_reconciler::plan::{self, ReconcilePlan};

/// The flag's options: its defaults and the ConfigMap that overrides them.
#[derive(Args)]
pub struct FlagArgs {
    /// Namespace of the flag ConfigMap [default: `POD_NAMESPACE` from the environment, else
    /// shadow-reconciler].
    #[arg(long, value_name = "NAMESPACE")]
    pub flag_namespace: Option<String>,
    /// Name of the flag ConfigMap.
    #[arg(long, value_name = "NAME", default_value = "shadow-reconciler-flag")]
    pub flag_name: String,
    /// Watch no flag ConfigMap: the command line decides alone.
    #[arg(long)]
    pub no_flag_watch: bool,
    /// Share of objects (percent, 0 to 100) that get --mode; the others get the mode below it
    /// (enforce -> shadow -> off). An object's UID decides, so it stays on one side.
    #[arg(long, value_name = "PERCENT", default_value = "100", value_parser = parse_ramp)]
    pub ramp_percent: Ramp,
    /// Let an object's `shadow-reconciler.io/mode` annotation choose its mode.
    #[arg(long)]
    pub allow_object_override: bool,
}

impl FlagArgs {
    /// The ConfigMap to watch, unless --no-flag-watch.
    pub fn target(&self) -> Option<Target> {
        (!self.no_flag_watch).then(|| Target {
            namespace: self.flag_namespace.clone().unwrap_or_else(|| {
                std::env::var("POD_NAMESPACE")
                    .ok()
                    .filter(|ns| !ns.is_empty())
                    .unwrap_or_else(|| "shadow-reconciler".to_owned())
            }),
            name: self.flag_name.clone(),
        })
    }
}

/// The command line's flag for `run`: --mode, --enforce, --candidate, --ramp-percent and
/// --allow-object-override, with every group checked against `plans`.
pub fn flag_defaults(
    args: &crate::RunArgs,
    plans: Vec<std::sync::Arc<ReconcilePlan>>,
) -> anyhow::Result<LiveFlag> {
    let groups = |option: &str, names: &[String]| -> anyhow::Result<Vec<GroupRef>> {
        names
            .iter()
            .map(|n| {
                GroupRef::parse(n)
                    .with_context(|| format!("--{option} {n:?}: expected GROUP or PLAN/GROUP"))
            })
            .collect()
    };
    let candidate = groups("candidate", &args.candidate)?;
    let spec = FlagSpec {
        mode: args.mode,
        enforced_groups: groups("enforce", &args.enforce)?,
        candidate_groups: (!candidate.is_empty()).then_some(candidate),
        ramp: args.flag.ramp_percent,
        allow_object_override: args.flag.allow_object_override,
    };
    LiveFlag::new(spec, plans).map_err(|error| {
        let option = match error.field() {
            shadow_reconciler::flag::Field::CandidateGroups => "--candidate",
            _ => "--enforce",
        };
        anyhow::anyhow!("{option} {:?}: {}", error.value(), error.message())
    })
}

fn parse_ramp(s: &str) -> Result<Ramp, String> {
    s.parse::<f64>()
        .ok()
        .and_then(Ramp::from_percent)
        .ok_or_else(|| format!("{s:?} is not a percentage from 0 to 100 with at most two decimals"))
}

/// Options of `analyze`.
#[derive(Args)]
pub struct AnalyzeArgs {
    /// The dataset directory (it holds table=reconciles/ and table=steps/).
    pub dir: PathBuf,
    /// A plan to judge (repeatable); the shipped plans are used for plans not given.
    #[arg(long = "plan", value_name = "FILE")]
    pub plans: Vec<PathBuf>,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Also write the HTML report here.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Write the suggested plan (the analysed plan with the findings applied) here: the plan given
    /// with --plan, or the only plan in the data.
    #[arg(long, value_name = "FILE")]
    pub suggest: Option<PathBuf>,
    /// Fewer objects than this make a verdict inconclusive (each object counts once, however
    /// often it was reconciled).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub min_samples: u64,
    /// Gate on these rollout groups only (`PLAN/GROUP`, or `GROUP` in every plan that has it;
    /// repeatable): the exit code is their worst readiness instead of every group's.
    #[arg(long = "group", value_name = "PLAN/GROUP")]
    pub groups: Vec<String>,
    /// Confidence of the Wilson intervals (0.5 to 0.9999).
    #[arg(long, default_value_t = 0.99, value_parser = parse_confidence)]
    pub confidence: f64,
    /// Warnings (skipped files) on stderr: auto (human on a terminal, JSON otherwise), human or
    /// json.
    #[arg(long, default_value = "auto")]
    pub log_format: shadow_reconciler::telemetry::logging::LogFormat,
}

fn parse_confidence(s: &str) -> Result<f64, String> {
    let c: f64 = s
        .parse()
        .map_err(|e| format!("{s:?} is not a number: {e}"))?;
    if (0.5..=0.9999).contains(&c) {
        Ok(c)
    } else {
        Err(format!("{c} is outside 0.5 to 0.9999"))
    }
}

/// A plan and the text it was parsed from (the suggestion edits the text).
pub struct LoadedPlan {
    /// The plan.
    pub plan: ReconcilePlan,
    /// Its YAML.
    pub text: String,
}

/// `--plan SPEC`: a shipped plan's name, else a plan file.
pub fn shipped_or_file(spec: &str) -> anyhow::Result<ReconcilePlan> {
    match plan::embedded::load(spec) {
        Some(plan) => Ok(plan),
        None => ReconcilePlan::load(std::path::Path::new(spec)).with_context(|| {
            format!(
                "--plan {spec:?} is neither a shipped plan ({}) nor a valid plan file",
                plan::embedded::NAMES.join(", ")
            )
        }),
    }
}

/// The given plan files, then every shipped plan whose name none of them has.
pub fn load_plans(files: &[PathBuf]) -> anyhow::Result<Vec<LoadedPlan>> {
    let mut plans = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("--plan {}: cannot read it", file.display()))?;
        let plan = ReconcilePlan::from_yaml(&file.display().to_string(), &text)?;
        plans.push(LoadedPlan { plan, text });
    }
    for name in plan::embedded::NAMES {
        if !plans.iter().any(|p| p.plan.name() == name) {
            let (file, text) = plan::embedded::text(name).context("a shipped plan")?;
            let plan = ReconcilePlan::from_yaml(file, text)?;
            plans.push(LoadedPlan {
                plan,
                text: text.to_owned(),
            });
        }
    }
    Ok(plans)
}

/// Runs the analysis and prints it; the exit code is the readiness (0, 1 or 3).
pub fn analyze(args: &AnalyzeArgs) -> anyhow::Result<ExitCode> {
    shadow_reconciler::telemetry::logging::init(args.log_format);
    let plans = load_plans(&args.plans)?;
    let settings = analyze::Settings {
        min_samples: args.min_samples,
        confidence: args.confidence,
        ..analyze::Settings::default()
    };
    let only: Vec<ReconcilePlan> = plans.iter().map(|p| p.plan.clone()).collect();
    let analysis = analyze::analyze(&args.dir, &only, &settings)?;
    // Resolve --group before printing: a misspelt group is a usage error, not a verdict.
    let mut gated = Vec::new();
    for selector in &args.groups {
        gated.extend(analysis.groups(selector)?);
    }
    out(analyze::render::render(&analysis, args.format));
    if let Some(path) = &args.html {
        write(path, &analyze::render::render(&analysis, Format::Html))?;
        eprintln!("HTML report: {}", path.display());
    }
    if let Some(path) = &args.suggest {
        // The plan given with --plan, or the only one analysed.
        let report = match (args.plans.len(), analysis.plans.as_slice()) {
            (1, _) => analysis
                .plans
                .iter()
                .find(|r| r.plan == plans[0].plan.name()),
            (_, [only]) => Some(only),
            _ => None,
        }
        .with_context(|| {
            format!(
                "--suggest: which plan? The data holds {}; pass that plan with --plan FILE",
                analysis
                    .plans
                    .iter()
                    .map(|r| r.plan.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
        let loaded = plans
            .iter()
            .find(|p| p.plan.name() == report.plan)
            .context("the analysed plan was loaded")?;
        let suggestion = analyze::suggest::suggest(&loaded.plan, &loaded.text, report)?;
        write(path, &suggestion.text)?;
        eprintln!(
            "suggested plan: {} ({} changes{})",
            path.display(),
            suggestion.changes.len(),
            if suggestion.changes.is_empty() {
                String::new()
            } else {
                format!(": {}", suggestion.changes.join("; "))
            }
        );
    }
    if gated.is_empty() {
        return Ok(ExitCode::from(analysis.readiness.exit_code()));
    }
    for (plan, group) in &gated {
        eprintln!("group {}/{}: {}", plan.plan, group.group, group.summary);
    }
    let worst = gated
        .iter()
        .map(|(_, g)| g.readiness)
        .max()
        .unwrap_or(analyze::Readiness::Inconclusive);
    Ok(ExitCode::from(worst.exit_code()))
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// Parquet options of `simulate` and `run`.
// The field names are the flag names (`--parquet-max-rows`), which share their prefix on purpose.
#[allow(clippy::struct_field_names)]
#[derive(Args, Clone)]
pub struct ParquetArgs {
    /// Records per row group are counted in step rows; a file closes at this many step rows.
    #[arg(long, default_value_t = 262_144, value_parser = at_least_one)]
    pub parquet_max_rows: usize,
    /// A file also closes at this many MiB of buffered data.
    #[arg(long, default_value_t = 64, value_parser = at_least_one)]
    pub parquet_max_mib: usize,
    /// A file also closes this many seconds after its first record.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub parquet_max_age: u64,
    /// Records in flight between the engine and the writer before new ones are dropped.
    #[arg(long, default_value_t = 10_000, value_parser = at_least_one)]
    pub parquet_capacity: usize,
    /// How long a shutdown waits for the writer to flush, in seconds.
    #[arg(long, default_value_t = 10)]
    pub parquet_grace: u64,
}

/// A count that must be at least 1 (`--parquet-max-rows 0` would write a file per record).
fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("not a whole number: {e}")),
    }
}

impl ParquetArgs {
    /// Starts a sink into `dir` with these options, once `dir` is known to take files (created
    /// if missing): a directory that cannot be written fails the command at start-up, naming
    /// the path and the cause, instead of at its first write. `/readyz` then follows the sink:
    /// not ready while its writes fail.
    pub fn start(
        &self,
        dir: &Path,
        health: Option<HealthCounters>,
        telemetry: &shadow_reconciler::telemetry::http::Telemetry,
    ) -> anyhow::Result<std::sync::Arc<ParquetSink>> {
        writable_dir(dir)?;
        let sink = std::sync::Arc::new(self.start_unchecked(dir, health));
        let watched = std::sync::Arc::downgrade(&sink);
        telemetry.add_sink_check(move || watched.upgrade().and_then(|s| s.failing()));
        Ok(sink)
    }

    fn start_unchecked(&self, dir: &Path, health: Option<HealthCounters>) -> ParquetSink {
        let mut config = SinkConfig::new(dir);
        config.capacity = self.parquet_capacity;
        config.writer.max_file_rows = self.parquet_max_rows;
        config.writer.row_group_rows = config
            .writer
            .row_group_rows
            .min(config.writer.max_file_rows);
        config.writer.max_file_bytes = self.parquet_max_mib << 20;
        config.writer.max_file_age = Duration::from_secs(self.parquet_max_age);
        ParquetSink::start(config, health)
    }

    /// The shutdown grace.
    pub const fn grace(&self) -> Duration {
        Duration::from_secs(self.parquet_grace)
    }
}

/// Flushes and closes the sink, reporting what it wrote.
pub fn finish(sink: &ParquetSink, grace: Duration) -> anyhow::Result<()> {
    let stats = sink.shutdown(grace).with_context(|| {
        format!(
            "cannot complete the Parquet dataset in {}",
            sink.dir().display()
        )
    })?;
    eprintln!(
        "parquet: {} records accepted, {} written to {} in {} files ({} dropped, {} write errors, {} lost)",
        stats.accepted,
        stats.written,
        sink.dir().display(),
        stats.files,
        stats.dropped,
        stats.errors,
        stats.lost
    );
    if let Some(error) = sink.last_error() {
        eprintln!("parquet: the last write error: {error}");
    }
    if stats.lost > 0 {
        anyhow::bail!(
            "{} accepted records were not written to {}{}",
            stats.lost,
            sink.dir().display(),
            sink.last_error()
                .map_or_else(String::new, |e| format!(": {e}"))
        );
    }
    Ok(())
}

/// Removes an earlier simulation's tables (and report) from `dir`, so the analysis that follows
/// covers this run alone.
pub fn replace_simulated_data(dir: &Path) -> anyhow::Result<()> {
    for table in shadow_reconciler::dataset::Table::ALL {
        let path = dir.join(format!("table={}", table.as_str()));
        if path.exists() {
            std::fs::remove_dir_all(&path)
                .with_context(|| format!("cannot remove the earlier data in {}", path.display()))?;
        }
    }
    let report = dir.join(REPORT);
    if report.exists() {
        std::fs::remove_file(&report)
            .with_context(|| format!("cannot remove {}", report.display()))?;
    }
    Ok(())
}

/// The HTML report's name in the dataset directory.
pub const REPORT: &str = "report.html";

/// `simulate`'s ending: the analysis table on stdout, the HTML report next to the data.
pub fn analyze_simulated(dir: &Path, plans: &[LoadedPlan]) -> anyhow::Result<()> {
    let plans: Vec<ReconcilePlan> = plans.iter().map(|p| p.plan.clone()).collect();
    let analysis = analyze::analyze(dir, &plans, &analyze::Settings::default())?;
    out("\n");
    out(analyze::render::render(&analysis, Format::Table));
    let report = dir.join(REPORT);
    write(&report, &analyze::render::render(&analysis, Format::Html))?;
    out(format_args!("HTML report: {}\n", report.display()));
    Ok(())
}

/// The cluster to talk to: `kubeconfig` (with `context`, else its current one) when given, else
/// kube's inference (`KUBECONFIG`, `~/.kube/config`, or the pod's service account).
pub async fn cluster_config(
    kubeconfig: Option<&std::path::Path>,
    context: Option<&str>,
) -> anyhow::Result<kube::Config> {
    let options = kube::config::KubeConfigOptions {
        context: context.map(str::to_owned),
        ..kube::config::KubeConfigOptions::default()
    };
    match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path).map_err(|e| {
                // kube's message repeats the path and its cause; say each once.
                if let kube::config::KubeconfigError::Parse(yaml) = &e {
                    return anyhow::anyhow!(
                        "cannot read the kubeconfig {}",
                        shadow_reconciler::yaml::located(path, yaml)
                    );
                }
                let mut cause: &dyn std::error::Error = &e;
                while let Some(inner) = cause.source() {
                    cause = inner;
                }
                let hint = if path.exists() {
                    ""
                } else {
                    " (no cluster at hand? `shadow-reconciler simulate` runs everything on the \
                     embedded simulator, and `shadow-reconciler sim serve --kubeconfig-out FILE` \
                     serves it for `run`)"
                };
                anyhow::anyhow!(
                    "cannot read the kubeconfig {}: {cause}{hint}",
                    path.display()
                )
            })?;
            kube::Config::from_custom_kubeconfig(file, &options)
                .await
                .with_context(|| format!("cannot use the kubeconfig {}", path.display()))
        }
        None if context.is_some() => kube::Config::from_kubeconfig(&options)
            .await
            .context("cannot use the kubeconfig's context (from KUBECONFIG or ~/.kube/config)"),
        None => kube::Config::infer()
            .await
            .context("cannot find a cluster: pass --kubeconfig, set KUBECONFIG, or run in a pod"),
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

/// Creates `dir` if missing and checks that a file can be written there.
fn writable_dir(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() && !dir.is_dir() {
        anyhow::bail!(
            "--parquet-dir {}: this is a file, not a directory; give a directory (it is created if missing)",
            dir.display()
        );
    }
    std::fs::create_dir_all(dir).with_context(|| {
        format!(
            "--parquet-dir {}: cannot create the directory",
            dir.display()
        )
    })?;
    if !dir.is_dir() {
        anyhow::bail!("--parquet-dir {}: not a directory", dir.display());
    }
    let probe = dir.join(format!(".write-check-{}", std::process::id()));
    std::fs::write(&probe, b"")
        .with_context(|| format!("--parquet-dir {}: cannot write a file there", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}
