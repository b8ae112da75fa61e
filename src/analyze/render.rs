//! The analysis as a terminal table, JSON, Markdown, or a self-contained HTML report.

pub mod html;

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

fn pct(rate: f64) -> String {
    format!("{:.1}%", rate * 100.0)
}

/// The numbers behind a detected dependency, in words.
fn evidence(d: &super::Pair) -> String {
    format!(
        "{} failed {} of {} runs after {} failed [{}, {}], baseline {} of {} [{}, {}]",
        d.later,
        d.after.failures,
        d.after.runs,
        d.failed,
        pct(d.after.low),
        pct(d.after.high),
        d.baseline.failures,
        d.baseline.runs,
        pct(d.baseline.low),
        pct(d.baseline.high)
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

fn operation_rows(plan: &PlanReport) -> Vec<Vec<String>> {
    plan.operations
        .iter()
        .zip(&plan.verdicts)
        .map(|(o, v)| {
            vec![
                o.operation.clone(),
                o.category.to_owned(),
                o.executions.to_string(),
                pct(o.failure_rate),
                o.failures_by_class
                    .iter()
                    .map(|(k, v)| format!("{k}:{v}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                o.first_failure.to_string(),
                format!(
                    "{}/{}/{}",
                    o.blocked_in_control,
                    o.blocked_then_run_by_candidate,
                    o.blocked_then_succeeded_in_candidate
                ),
                v.verdict.as_str().to_owned(),
            ]
        })
        .collect()
}

const OPERATION_HEADER: [&str; 8] = [
    "operation",
    "category",
    "executions",
    "failed",
    "by class",
    "first failure",
    "blocked/ran/ok",
    "verdict",
];

fn table(a: &Analysis) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: {} files read, {} skipped, {} rows",
        a.dir.display(),
        a.files_read,
        a.files_skipped.len(),
        a.rows
    );
    for s in &a.files_skipped {
        let _ = writeln!(out, "  skipped {}: {}", s.path.display(), s.error);
    }
    for plan in &a.plans {
        let _ = writeln!(
            out,
            "\nplan {} ({}): {} reconciles, {} guard refusals",
            plan.plan,
            &plan.plan_hash[..12.min(plan.plan_hash.len())],
            plan.reconciles,
            plan.guard_refusals
        );
        columns(&mut out, &OPERATION_HEADER, &operation_rows(plan));
        if plan.dependencies.is_empty() {
            out.push_str("\nno undeclared ordering dependency detected\n");
        } else {
            out.push_str("\ndetected ordering dependencies (not declared in the plan):\n");
            for d in &plan.dependencies {
                let _ = writeln!(out, "  {} -> {}: {}", d.failed, d.later, evidence(d));
            }
        }
        out.push('\n');
        for v in plan
            .verdicts
            .iter()
            .filter(|v| v.verdict != super::Verdict::Supported)
        {
            let _ = writeln!(
                out,
                "{} {}: {}",
                v.operation,
                v.verdict.as_str(),
                v.evidence
            );
        }
        out.push_str("\nreadiness to enforce:\n");
        for g in &plan.readiness {
            let _ = writeln!(out, "  {:<24} {}", g.group, g.readiness.as_str());
            for r in &g.reasons {
                let _ = writeln!(out, "    - {r}");
            }
        }
    }
    let _ = writeln!(out, "\noverall: {}", a.readiness.as_str());
    out
}

fn md_row(out: &mut String, cells: &[String]) {
    let cells: Vec<String> = cells.iter().map(|c| c.replace('|', "\\|")).collect();
    let _ = writeln!(out, "| {} |", cells.join(" | "));
}

fn markdown(a: &Analysis) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Shadow analysis: {}\n", a.readiness.as_str());
    let _ = writeln!(
        out,
        "`{}`: {} files read, {} skipped, {} rows; at least {} samples per verdict, {:.0}% Wilson intervals.\n",
        a.dir.display(),
        a.files_read,
        a.files_skipped.len(),
        a.rows,
        a.min_samples,
        a.confidence * 100.0
    );
    for s in &a.files_skipped {
        let _ = writeln!(out, "- skipped `{}`: {}", s.path.display(), s.error);
    }
    for plan in &a.plans {
        let _ = writeln!(
            out,
            "## Plan `{}`\n\n{} reconciles, plan hash `{}`, {} shadow guard refusals.\n",
            plan.plan, plan.reconciles, plan.plan_hash, plan.guard_refusals
        );
        md_row(&mut out, &OPERATION_HEADER.map(str::to_owned));
        md_row(&mut out, &OPERATION_HEADER.map(|_| "---".to_owned()));
        for row in operation_rows(plan) {
            md_row(&mut out, &row);
        }
        out.push_str("\n### Ordering dependencies\n\n");
        if plan.dependencies.is_empty() {
            out.push_str("None detected.\n");
        }
        for d in &plan.dependencies {
            let _ = writeln!(out, "- **{} → {}**: {}.", d.failed, d.later, evidence(d));
        }
        out.push_str("\n### Verdicts\n\n| operation | claim | verdict | evidence |\n| --- | --- | --- | --- |\n");
        for v in &plan.verdicts {
            md_row(
                &mut out,
                &[
                    v.operation.clone(),
                    v.claim.to_owned(),
                    v.verdict.as_str().to_owned(),
                    v.evidence.clone(),
                ],
            );
        }
        out.push_str("\n### Readiness to enforce\n\n");
        for g in &plan.readiness {
            let _ = writeln!(out, "- `{}`: **{}**", g.group, g.readiness.as_str());
            for r in &g.reasons {
                let _ = writeln!(out, "  - {r}");
            }
        }
        out.push('\n');
    }
    out
}
