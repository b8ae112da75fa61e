//! `shadow-reconciler analyze`: verdicts, ordering dependencies and readiness from recorded
//! Parquet data; and the analysis `simulate` runs on the data it wrote.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use shadow_reconciler::analyze::{self, render::Format};
use shadow_reconciler::plan::ReconcilePlan;

use super::options::{LoadedPlan, load_plans};
use super::out;

/// Options of `analyze`.
#[derive(Args)]
pub struct AnalyzeArgs {
    #[allow(clippy::doc_markdown)] // clap help text: the URLs are shown as written
    /// The dataset: a directory (it holds table=reconciles/ and table=steps/), or an object
    /// store's prefix: s3://BUCKET/PREFIX, gs://BUCKET/PREFIX, az://CONTAINER/PREFIX (credentials
    /// from the cloud's standard environment).
    pub dir: String,
    /// A plan to judge (repeatable); the shipped plans are used for plans not given.
    #[arg(long = "plan", value_name = "FILE")]
    pub plans: Vec<PathBuf>,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Also write the HTML report here; `-`: on stdout, instead of the report in --format,
    /// which goes to stderr (through `kubectl exec` from a pod that can write no file).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Write the suggested plan (the analysed plan with the findings applied) here: the plan given
    /// with --plan, or the only plan in the data. `-`: on stdout, as --html -.
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
    /// Only this cluster's data (repeatable; default: every cluster in the dataset). With several
    /// clusters, each one's readiness is also reported beside the fleet's.
    #[arg(long = "cluster", value_name = "NAME")]
    pub clusters: Vec<String>,
    /// Only the reconciles that started at this time or later (RFC 3339, `2026-12-05T06:00:00Z`):
    /// the data since a change, such as a rollout step's start.
    #[arg(long, value_name = "TIME", value_parser = parse_since)]
    pub since: Option<i64>,
    /// Confidence of the Wilson intervals (0.5 to 0.9999).
    #[arg(long, default_value_t = 0.99, value_parser = parse_confidence)]
    pub confidence: f64,
    /// Warnings (skipped files) on stderr: auto (human on a terminal, JSON otherwise), human or
    /// json.
    #[arg(long, default_value = "auto")]
    pub log_format: shadow_reconciler::telemetry::logging::LogFormat,
}

fn parse_since(s: &str) -> Result<i64, String> {
    let t: k8s_openapi::jiff::Timestamp = s
        .parse()
        .map_err(|e| format!("{s:?} is not an RFC 3339 time such as 2026-12-05T06:00:00Z: {e}"))?;
    Ok(t.as_microsecond())
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

/// `-`: standard output.
fn is_stdout(path: &Path) -> bool {
    path == Path::new("-")
}

/// Whether `--html -` or `--suggest -` takes stdout from the report.
fn stdout_taken(args: &AnalyzeArgs) -> bool {
    [&args.html, &args.suggest]
        .into_iter()
        .flatten()
        .any(|p| is_stdout(p))
}

/// Runs the analysis and prints it; the exit code is the readiness (0, 1 or 3).
pub fn analyze(args: &AnalyzeArgs) -> anyhow::Result<ExitCode> {
    shadow_reconciler::telemetry::logging::init(args.log_format);
    if args
        .html
        .as_deref()
        .zip(args.suggest.as_deref())
        .is_some_and(|(h, s)| is_stdout(h) && is_stdout(s))
    {
        anyhow::bail!("--html - and --suggest - both want stdout: send one of them to a file");
    }
    let plans = load_plans(&args.plans)?;
    let settings = analyze::Settings {
        min_samples: args.min_samples,
        confidence: args.confidence,
        clusters: args.clusters.clone(),
        since_us: args.since,
        ..analyze::Settings::default()
    };
    let selectors = super::options::parse_groups("group", &args.groups)?;
    let only: Vec<ReconcilePlan> = plans.iter().map(|p| p.plan.clone()).collect();
    let location = shadow_reconciler::dataset::Location::parse(&args.dir)?;
    let mut analysis = analyze::analyze_at(&location, &only, &settings)?;
    attach_diffs(&mut analysis, &plans);
    // Resolve --group before printing: a misspelt group is a usage error, not a verdict.
    let mut gated = Vec::new();
    for selector in &selectors {
        gated.extend(analysis.groups(selector)?);
    }
    let report = if args.format == Format::Table {
        analyze::render::table_styled(&analysis, colour() && !stdout_taken(args))
    } else {
        analyze::render::render(&analysis, args.format)
    };
    if stdout_taken(args) {
        eprint!("{report}");
    } else {
        out(report);
    }
    if let Some(path) = &args.html {
        let html = analyze::render::render(&analysis, Format::Html);
        if is_stdout(path) {
            out(html);
        } else {
            write(path, &html)?;
            eprintln!("HTML report: {}", path.display());
        }
    }
    if let Some(path) = &args.suggest {
        suggest(path, args, &plans, &analysis)?;
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

/// `--suggest`: the analysed plan with the findings applied, to `path` (`-`: stdout), or a
/// line saying there is nothing to suggest.
fn suggest(
    path: &Path,
    args: &AnalyzeArgs,
    plans: &[LoadedPlan],
    analysis: &analyze::Analysis,
) -> anyhow::Result<()> {
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
    if suggestion.changes.is_empty() {
        // Nothing written: a copy of the plan would read like a suggestion.
        eprintln!(
            "suggested plan: nothing to suggest, the data asks for no change to plan {} ({} not written)",
            report.plan,
            path.display()
        );
    } else {
        if is_stdout(path) {
            out(&suggestion.text);
        } else {
            write(path, &suggestion.text)?;
        }
        eprintln!(
            "suggested plan: {} ({} changes: {})",
            if is_stdout(path) {
                "on stdout".to_owned()
            } else {
                path.display().to_string()
            },
            suggestion.changes.len(),
            suggestion.changes.join("; ")
        );
    }
    Ok(())
}

/// Adds to the answer the diff of each analysed plan's suggested edits. Every analysed plan was
/// loaded with its text (`load_plans` adds the shipped ones not given).
fn attach_diffs(analysis: &mut analyze::Analysis, loaded: &[LoadedPlan]) {
    let mut diffs = Vec::new();
    for report in &analysis.plans {
        let Some(plan) = loaded.iter().find(|p| p.plan.name() == report.plan) else {
            continue;
        };
        let Ok(suggestion) = analyze::suggest::suggest(&plan.plan, &plan.text, report) else {
            continue;
        };
        let edits = analyze::suggest::edits(&plan.text, &suggestion.text);
        if !edits.is_empty() {
            diffs.push((report.plan.clone(), edits));
        }
    }
    for (plan, diff) in diffs {
        analysis.answer.set_diff(&plan, diff);
    }
}

/// Colour for the terminal table: stdout is a terminal and `NO_COLOR` is not set.
fn colour() -> bool {
    use std::io::IsTerminal as _;
    analyze::render::colour_wanted(
        std::io::stdout().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    )
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// `simulate`'s ending: the analysis table on stdout, the HTML report at `html`.
pub fn analyze_simulated(
    dir: &Path,
    html: &Path,
    plans: &[LoadedPlan],
) -> anyhow::Result<analyze::Readiness> {
    let only: Vec<ReconcilePlan> = plans.iter().map(|p| p.plan.clone()).collect();
    let mut analysis = analyze::analyze(dir, &only, &analyze::Settings::default())?;
    attach_diffs(&mut analysis, plans);
    out("\n");
    out(analyze::render::table_styled(&analysis, colour()));
    write(html, &analyze::render::render(&analysis, Format::Html))?;
    out(format_args!("HTML report: {}\n", html.display()));
    Ok(analysis.readiness)
}
