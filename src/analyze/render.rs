//! The analysis as a terminal table, JSON, Markdown, or a self-contained HTML report.

mod escape;
pub mod html;
mod markdown;
mod rollouts;

pub use markdown::markdown;

use std::fmt::Write as _;

use super::{Analysis, PlanReport};

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned text for a terminal.
    Table,
    /// The stable JSON document (`docs/analyze.md`).
    Json,
    /// Markdown, for a pull request or a wiki.
    Markdown,
    /// A self-contained HTML page with charts.
    Html,
}

/// Renders `analysis` in `format`.
#[must_use]
pub fn render(analysis: &Analysis, format: Format) -> String {
    match format {
        Format::Table => table(analysis),
        Format::Json => json(analysis),
        Format::Markdown => markdown(analysis),
        Format::Html => html::render(analysis),
    }
}

/// The JSON document, pretty-printed.
///
/// # Panics
/// Never: the analysis holds only strings, numbers and lists.
#[must_use]
pub fn json(analysis: &Analysis) -> String {
    let mut text = serde_json::to_string_pretty(analysis).expect("the analysis serializes");
    text.push('\n');
    text
}

/// A rate as a percentage with one decimal, or as many as it takes to show two significant
/// digits of what the rounding would hide: 5 failures in 13,111 read "0.038%", never "0.0%",
/// and 13,106 of 13,111 read "99.962%", never "100.0%".
pub(super) fn pct(rate: f64) -> String {
    let p = rate * 100.0;
    let hidden = |gap: f64| gap > 0.0 && gap < 0.05;
    // Decimals up to the gap's first significant digit, and one more.
    let digits = |gap: f64| {
        let (mut decimals, mut unit) = (1, 1.0);
        while decimals < 12 && gap < unit {
            unit /= 10.0;
            decimals += 1;
        }
        decimals
    };
    if hidden(p) {
        format!("{p:.*}%", digits(p))
    } else if hidden(100.0 - p) {
        format!("{p:.*}%", digits(100.0 - p))
    } else {
        format!("{p:.1}%")
    }
}

/// The numbers behind a detected dependency, in words.
pub(super) fn evidence(d: &super::Pair) -> String {
    format!(
        "{} failed in {} of {} objects after {} failed [{}, {}], baseline {} of {} [{}, {}]{}",
        d.later,
        d.after.failures,
        d.after.objects,
        d.failed,
        pct(d.after.low),
        pct(d.after.high),
        d.baseline.failures,
        d.baseline.objects,
        pct(d.baseline.low),
        pct(d.baseline.high),
        if d.concentrated {
            "; every such failure in one namespace"
        } else {
            ""
        }
    )
}

/// A plan's shared figures in one line: `analyze` and `simulate`'s summary both print them
/// through this, so the words are the same by construction.
#[must_use]
pub fn figures_line(
    reconciles: u64,
    objects: u64,
    control_failed: u64,
    [unblocked, succeeded, not_simulated, newly_blocked]: [u64; 4],
) -> String {
    format!(
        "{reconciles} reconciles of {objects} objects, control failed in {control_failed}; unblocked by the candidate: {unblocked} ({} dry-run, {succeeded} would have succeeded; {not_simulated} not simulated); newly blocked: {newly_blocked}",
        unblocked - not_simulated
    )
}

/// `; 3 reconciles cancelled before they finished (left out)`, or nothing when none was.
#[must_use]
pub fn cancelled_words(cancelled: u64) -> String {
    match cancelled {
        0 => String::new(),
        1 => "; 1 reconcile cancelled before it finished (left out)".to_owned(),
        n => format!("; {n} reconciles cancelled before they finished (left out)"),
    }
}

/// `; 40 reconciles not compared (the shadow's budget was spent: 38; paused under load: 2)`,
/// or nothing when every reconcile was compared.
#[must_use]
pub fn skipped_words(skipped: super::counts::Skipped) -> String {
    let mut reasons = Vec::new();
    if skipped.budget > 0 {
        reasons.push(format!("the shadow's budget was spent: {}", skipped.budget));
    }
    if skipped.paused > 0 {
        reasons.push(format!("paused under load: {}", skipped.paused));
    }
    if skipped.sampled_out > 0 {
        reasons.push(format!(
            "outside the paired sample: {}",
            skipped.sampled_out
        ));
    }
    match skipped.total() {
        0 => String::new(),
        1 => format!("; 1 reconcile not compared ({})", reasons.join("; ")),
        n => format!("; {n} reconciles not compared ({})", reasons.join("; ")),
    }
}

/// [`cancelled_words`] and [`skipped_words`] of a plan: the reconciles its figures leave out.
#[must_use]
pub fn cancelled_clause(plan: &PlanReport) -> String {
    cancelled_words(plan.cancelled) + &skipped_words(plan.comparisons_skipped)
}

/// A plan's figures in one line ([`figures_line`]).
#[must_use]
pub fn plan_line(plan: &PlanReport) -> String {
    let sum = |f: fn(&super::OperationReport) -> u64| plan.operations.iter().map(f).sum::<u64>();
    figures_line(
        plan.reconciles,
        plan.objects,
        sum(|o| o.first_failure),
        [
            sum(|o| o.unblocked),
            sum(|o| o.unblocked_succeeded),
            sum(|o| o.unblocked_not_simulated),
            sum(|o| o.newly_blocked),
        ],
    )
}

/// Rows of cells as aligned columns.
fn columns(out: &mut String, header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |out: &mut String, cells: &mut dyn Iterator<Item = &str>| {
        let mut text = String::new();
        for (cell, w) in cells.zip(&widths) {
            let _ = write!(text, "{cell:<w$}  ");
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(out, &mut header.iter().copied());
    for row in rows {
        line(out, &mut row.iter().map(String::as_str));
    }
}

/// The verdict on an operation's category, when it has one (an operation of the legacy path
/// only has no category to judge).
pub(super) fn verdict_of<'p>(
    plan: &'p PlanReport,
    operation: &str,
) -> Option<&'p super::VerdictReport> {
    plan.verdicts.iter().find(|v| v.operation == operation)
}

/// An operation's category as the tables show it, with the code path it alone belongs to.
pub(super) fn category_cell(o: &super::OperationReport) -> String {
    match (o.category, o.only) {
        (Some(c), Some(crate::vocab::CodePath::Phased)) => format!("{c}, phased only"),
        (Some(c), _) => c.to_owned(),
        (None, _) => "legacy only".to_owned(),
    }
}

pub(super) fn operation_rows(plan: &PlanReport) -> Vec<Vec<String>> {
    plan.operations
        .iter()
        .map(|o| {
            vec![
                o.operation.clone(),
                category_cell(o),
                o.executions.to_string(),
                pct(o.failure_rate),
                o.failures_by_class
                    .iter()
                    .map(|(k, v)| format!("{k}:{v}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                o.failed_objects.to_string(),
                o.first_failure.to_string(),
                format!(
                    "{}/{}/{}",
                    o.blocked_in_control,
                    o.blocked_then_run_by_candidate,
                    o.blocked_then_succeeded_in_candidate
                ),
                verdict_of(plan, &o.operation)
                    .map_or("none (legacy only)", |v| v.verdict.as_str())
                    .to_owned(),
            ]
        })
        .collect()
}

pub(super) const OPERATION_HEADER: [&str; 9] = [
    "operation",
    "category",
    "executions",
    "failed",
    "by class",
    "failed in (objects)",
    "first failure",
    "blocked/ran/ok",
    "verdict",
];

fn table(a: &Analysis) -> String {
    table_styled(a, false)
}

/// `word` in the colour of `readiness` (green ready, red not ready, yellow inconclusive) when
/// `colour`, else as it is.
fn paint(word: &str, readiness: super::Readiness, colour: bool) -> String {
    if !colour {
        return word.to_owned();
    }
    let code = match readiness {
        super::Readiness::Ready => "32",
        super::Readiness::NotReady => "31",
        super::Readiness::Inconclusive => "33",
    };
    format!("\x1b[{code}m{word}\x1b[0m")
}

/// Whether a terminal table gets colour: on a terminal, unless `NO_COLOR` is set to anything
/// non-empty (no-color.org).
#[must_use]
pub fn colour_wanted(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(std::ffi::OsStr::is_empty)
}

/// What the operation table's columns mean, printed under it in every format.
pub const OPERATION_LEGEND: &str = "every operation of the plan, the phased path's in phased order, then the legacy loop's own (legacy only: no category to judge); executions: real (control) and dry-run (candidate) runs; failed: failed executions; failed in (objects): objects where it failed at least once; first failure: reconciles whose control stopped there first; blocked/ran/ok: control runs in which its failure skipped later steps / of those, steps the candidate ran / of those, that succeeded; verdict: whether the data supports its category";

pub(super) use super::answer::distinct_findings;

/// A finding's code as the JSON spells it.
pub(super) fn code_of(code: super::FindingCode) -> String {
    serde_json::to_value(code)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// With data of several clusters, each one's readiness judged on its own data, in one line
/// (`None` for one cluster's data: the answer is that cluster's).
pub(super) fn clusters_line(a: &Analysis) -> Option<String> {
    if a.clusters.len() < 2 {
        return None;
    }
    let each: Vec<String> = a
        .clusters
        .iter()
        .map(|c| {
            let stopped: Vec<String> = c
                .groups
                .iter()
                .filter(|g| g.readiness == super::Readiness::NotReady)
                .map(|g| format!("{}/{}", g.plan, g.group))
                .collect();
            format!(
                "{} {} ({} objects{})",
                c.cluster,
                c.readiness.as_str(),
                c.objects,
                if stopped.is_empty() {
                    String::new()
                } else {
                    format!("; not ready: {}", stopped.join(", "))
                }
            )
        })
        .collect();
    Some(format!(
        "per cluster, each judged on its own data: {}",
        each.join("; ")
    ))
}

/// The answer as text: every group's readiness, the plan edits with their evidence, the next
/// steps.
fn answer_text(out: &mut String, a: &Analysis, colour: bool) {
    let answer = &a.answer;
    let _ = writeln!(
        out,
        "readiness to enforce: {}",
        paint(answer.readiness.as_str(), answer.readiness, colour)
    );
    let rows: Vec<Vec<String>> = answer
        .groups
        .iter()
        .map(|g| {
            vec![
                format!("{}/{}", g.plan, g.group),
                g.readiness.as_str().to_owned(),
                format!(
                    "{}{}",
                    g.why,
                    if g.fixed_by_plan_edit {
                        " (plan edit below)"
                    } else {
                        ""
                    }
                ),
            ]
        })
        .collect();
    let mut table = String::new();
    columns(&mut table, &["rollout group", "readiness", "why"], &rows);
    for (i, line) in table.lines().enumerate() {
        // Colour the readiness word of each row (the header is row 0).
        let line = match i.checked_sub(1).and_then(|r| answer.groups.get(r)) {
            Some(g) if colour => line.replacen(
                &format!(" {} ", g.readiness.as_str()),
                &format!(" {} ", paint(g.readiness.as_str(), g.readiness, true)),
                1,
            ),
            _ => line.to_owned(),
        };
        let _ = writeln!(out, "  {line}");
    }
    if let Some(line) = clusters_line(a) {
        let _ = writeln!(out, "{line}");
    }
    for edits in &answer.plan_edits {
        let _ = writeln!(
            out,
            "\nthe plan edits that fix {} (`analyze --suggest FILE` writes the whole plan):",
            edits.plan
        );
        if let Some(diff) = &edits.diff {
            for line in diff.lines() {
                let _ = writeln!(out, "  {line}");
            }
        }
        out.push_str("  evidence:\n");
        for c in &edits.changes {
            let _ = writeln!(
                out,
                "  - {}: {} [stops: {}]",
                c.change,
                c.evidence,
                c.groups.join(", ")
            );
        }
    }
    if !answer.next_steps.is_empty() {
        out.push_str("\nnext steps (the evidence still missing):\n");
        for s in &answer.next_steps {
            let _ = writeln!(
                out,
                "  - {} (groups: {}; operations: {}): {}",
                s.plan,
                s.groups.join(", "),
                s.operations.join(", "),
                s.step
            );
        }
    }
}

/// The terminal table, with the readiness and verdict words coloured when `colour`: the answer
/// first ([`super::answer`]), then the details of each plan.
#[must_use]
pub fn table_styled(a: &Analysis, colour: bool) -> String {
    let mut out = String::new();
    answer_text(&mut out, a, colour);
    let _ = writeln!(
        out,
        "\ndetails\n{}: {} files read, {} skipped, {} rows",
        a.dir.display(),
        a.files_read,
        a.files_skipped.len(),
        a.rows
    );
    for s in &a.files_skipped {
        let _ = writeln!(out, "  skipped {}: {}", s.path.display(), s.error);
    }
    if !a.unknown_plans.is_empty() {
        let found: Vec<String> = a
            .unknown_plans
            .iter()
            .map(|(plan, rows)| format!("{plan} ({rows} rows)"))
            .collect();
        let _ = writeln!(
            out,
            "  not analysed, no plan given for them: {}; pass each plan file with --plan FILE",
            found.join(", ")
        );
    }
    for plan in &a.plans {
        let _ = writeln!(
            out,
            "\nplan {} ({}): {}; {} guard refusals{}",
            plan.plan,
            plan.plan_hash.short(),
            plan_line(plan),
            plan.guard_refusals,
            cancelled_clause(plan)
        );
        columns(&mut out, &OPERATION_HEADER, &operation_rows(plan));
        let _ = writeln!(out, "({OPERATION_LEGEND})");
        if plan.dependencies.is_empty() {
            out.push_str("\nno undeclared ordering dependency detected\n");
        } else {
            out.push_str("\ndetected ordering dependencies (not declared in the plan):\n");
            for d in &plan.dependencies {
                let _ = writeln!(out, "  {} -> {}: {}", d.failed, d.later, evidence(d));
            }
        }
        if !plan.conflicts.is_empty() {
            out.push_str(
                "\nconflicts (409) the control met, and the candidate's re-evaluations of them:\n",
            );
            for r in &plan.conflicts {
                let _ = writeln!(out, "  {}", super::conflicts::sentence(r));
            }
        }
        out.push('\n');
        for v in plan
            .verdicts
            .iter()
            .filter(|v| v.verdict != super::Verdict::Supported)
        {
            let tone = if v.verdict == super::Verdict::Contradicted {
                super::Readiness::NotReady
            } else {
                super::Readiness::Inconclusive
            };
            let _ = writeln!(
                out,
                "{} {} [{}]: {}",
                v.operation,
                paint(v.verdict.as_str(), tone, colour),
                v.reason.as_str(),
                v.evidence
            );
        }
        out.push_str("\nfindings (each once, with the groups it concerns):\n");
        for (f, groups) in distinct_findings(plan) {
            let _ = writeln!(
                out,
                "  - [{}] {} [groups: {}]",
                code_of(f.code),
                f.evidence,
                groups.join(", ")
            );
        }
    }
    let _ = writeln!(
        out,
        "\noverall: {}",
        paint(a.readiness.as_str(), a.readiness, colour)
    );
    out
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use super::pct;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(super::colour_wanted(true, None));
        assert!(super::colour_wanted(true, Some(OsStr::new(""))));
        assert!(!super::colour_wanted(true, Some(OsStr::new("1"))));
        assert!(!super::colour_wanted(false, None));
    }

    #[test]
    fn a_rate_never_rounds_to_none_or_all() {
        assert_eq!(pct(5.0 / 13_111.0), "0.038%");
        assert_eq!(pct(13_106.0 / 13_111.0), "99.962%");
        assert_eq!(pct(0.0), "0.0%");
        assert_eq!(pct(1.0), "100.0%");
        assert_eq!(pct(0.25), "25.0%");
    }

    #[test]
    fn paint_wraps_only_when_asked() {
        use super::super::Readiness;
        assert_eq!(
            super::paint("not-ready", Readiness::NotReady, false),
            "not-ready"
        );
        assert_eq!(
            super::paint("not-ready", Readiness::NotReady, true),
            "\x1b[31mnot-ready\x1b[0m"
        );
        assert_eq!(
            super::paint("ready", Readiness::Ready, true),
            "\x1b[32mready\x1b[0m"
        );
    }
}
