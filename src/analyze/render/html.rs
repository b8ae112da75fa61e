//! A self-contained HTML report for a person deciding whether to enforce: the answer first
//! (summary cards per rollout group, the plan edits as a diff with their evidence), then per plan
//! two charts (failures per operation with Wilson intervals, and what the candidate would have
//! unblocked) and the tables behind them.
//!
//! One file, no script, no external resource (CSP forbids them), inline SVG and CSS following the
//! reader's light or dark preference; checked in headless Chromium by `tests/system/report_browser.rs`.

use std::fmt::Write as _;

use super::super::answer::Answer;
use crate::analyze::{Analysis, PlanReport, Readiness, Verdict, stats};

use super::escape::escape;

/// `name` escaped, with a line-break opportunity between the words of a CamelCase name, so a
/// narrow column breaks `KubeconfigAndPasswordSync` between words, never inside one.
fn breakable(name: &str) -> String {
    let mut out = String::new();
    let mut lower = false;
    for c in name.chars() {
        if c.is_uppercase() && lower {
            out.push_str("<wbr>");
        }
        lower = c.is_lowercase() || c.is_ascii_digit();
        out.push_str(&escape(c.encode_utf8(&mut [0; 4])));
    }
    out
}

/// A readiness as a badge: a symbol and words, so colour is never the only cue.
fn badge(r: Readiness) -> String {
    let (symbol, words) = match r {
        Readiness::Ready => ("\u{2713}", "ready"),
        Readiness::NotReady => ("\u{2717}", "not ready"),
        Readiness::Inconclusive => ("?", "inconclusive"),
    };
    format!(
        "<span class=\"badge {}\"><span aria-hidden=\"true\">{symbol}</span> {words}</span>",
        r.as_str()
    )
}

fn pct(rate: f64) -> String {
    let p = rate * 100.0;
    // Whole percents, except near 0 and 100, where rounding would claim none or all.
    if p > 0.0 && p < 0.1 {
        "<0.1%".to_owned()
    } else if (p > 0.0 && p < 1.0) || (p > 99.0 && p < 100.0) {
        format!("{p:.1}%")
    } else {
        format!("{p:.0}%")
    }
}

/// The report's stylesheet: the reader's light or dark scheme, the charts' colours.
const STYLE: &str = include_str!("report.css");

/// The x position (in chart units) of `rate` on an axis of `max` from `x0` to `x1`.
fn x_of(rate: f64, max: f64, x0: f64, x1: f64) -> f64 {
    x0 + (rate / max).clamp(0.0, 1.0) * (x1 - x0)
}

/// The axis' end: the smallest of a few round values at or above `high`.
fn axis_max(high: f64) -> f64 {
    [0.05, 0.1, 0.2, 0.25, 0.5, 0.75, 1.0]
        .into_iter()
        .find(|m| *m >= high)
        .unwrap_or(1.0)
}

fn legend_verdicts(out: &mut String, confidence: f64, legacy_only: bool) {
    out.push_str("<div class=\"legend\" role=\"list\" aria-label=\"legend\">");
    let none = ("none", "legacy only: no category to judge");
    for (class, words) in [
        ("supported", "supported: the data agrees with its category"),
        ("contradicted", "contradicted"),
        (
            "inconclusive",
            "inconclusive: too few objects, or never failed",
        ),
    ]
    .into_iter()
    .chain(legacy_only.then_some(none))
    {
        let _ = write!(
            out,
            "<span class=\"key\" role=\"listitem\"><span class=\"swatch {class}\"></span>{words}</span>"
        );
    }
    let _ = write!(
        out,
        "<span class=\"key\" role=\"listitem\"><span class=\"swatch whisker\"></span>{:.0}% Wilson interval</span><span class=\"key\" role=\"listitem\">&#9670; no failure observed</span></div>",
        confidence * 100.0
    );
}

/// The width of a character of the charts' 14-unit text, generously (the `DejaVu Sans` font averages less).
const CHAR_W: f64 = 8.6;

/// `name`, cut with an ellipsis to fit `width` chart units.
fn fit(name: &str, width: f64) -> String {
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let room = ((width - 16.0) / CHAR_W).max(4.0) as usize;
    if name.chars().count() <= room {
        name.to_owned()
    } else {
        let mut cut: String = name.chars().take(room - 1).collect();
        cut.push('\u{2026}');
        cut
    }
}

/// Where the failure chart draws.
#[derive(Clone, Copy)]
struct Axis {
    x0: f64,
    x1: f64,
    max: f64,
    name_w: f64,
}

/// One operation's row of the failure chart, centred on `mid`: its name, phase and category, a
/// bar (a diamond at 0) coloured by `verdict`, the interval's whisker and the counts.
#[allow(clippy::too_many_arguments)]
fn failure_row(
    out: &mut String,
    plan: &PlanReport,
    o: &crate::analyze::OperationReport,
    verdict: Option<Verdict>,
    interval: &stats::Interval,
    confidence: f64,
    axis: &Axis,
    mid: f64,
) {
    let Axis {
        x0,
        x1,
        max,
        name_w,
    } = *axis;
    // An operation of the legacy path only has no category to judge.
    let verdict = verdict.map_or("none (legacy only)", Verdict::as_str);
    let class = if verdict.starts_with("none") {
        "v-none".to_owned()
    } else {
        format!("v-{verdict}")
    };
    let tip = format!(
        "{}: failed in {} of {} objects ({}, {:.0}% interval {}-{}); verdict {}",
        o.operation,
        o.failed_objects,
        plan.objects,
        pct(interval.rate),
        confidence * 100.0,
        pct(interval.low),
        pct(interval.high),
        verdict
    );
    let _ = write!(
        out,
        "<g class=\"row\"><title>{}</title><text x=\"0\" y=\"{:.1}\">{}</text><text class=\"muted\" x=\"{name_w}\" y=\"{:.1}\">{}, {}</text>",
        escape(&tip),
        mid + 5.0,
        escape(&fit(&o.operation, name_w)),
        mid + 5.0,
        o.phase
            .map_or_else(|| "legacy".to_owned(), |p| p.to_string()),
        o.category.unwrap_or("no category")
    );
    let end = x_of(interval.rate, max, x0, x1);
    if o.failed_objects == 0 {
        let _ = write!(
            out,
            "<path class=\"bar {class}\" d=\"M{x0:.1} {:.1} l7 7 l-7 7 l-7 -7 z\"/>",
            mid - 7.0
        );
    } else {
        let _ = write!(
            out,
            "<rect class=\"bar {class}\" x=\"{x0:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"18\"/>",
            mid - 9.0,
            (end - x0).max(2.0)
        );
    }
    let (lo, hi) = (
        x_of(interval.low, max, x0, x1),
        x_of(interval.high, max, x0, x1),
    );
    let _ = writeln!(
        out,
        "<path class=\"whisker\" fill=\"none\" d=\"M{lo:.1} {mid:.1} H{hi:.1} M{lo:.1} {:.1} v10 M{hi:.1} {:.1} v10\"/><text x=\"{:.1}\" y=\"{:.1}\">{} <tspan class=\"muted\">({}/{})</tspan></text></g>",
        mid - 5.0,
        mid - 5.0,
        hi + 10.0,
        mid + 5.0,
        pct(interval.rate),
        o.failed_objects,
        plan.objects
    );
}

/// Horizontal bars: per operation, the share of objects in which it failed, coloured by its
/// verdict, with the Wilson interval as a whisker; operations in phased order.
fn failure_chart(out: &mut String, plan: &PlanReport, confidence: f64, id: &str) {
    let z = stats::z_for(confidence);
    let rows: Vec<(
        &crate::analyze::OperationReport,
        Option<Verdict>,
        stats::Interval,
    )> = plan
        .operations
        .iter()
        .map(|o| {
            (
                o,
                super::verdict_of(plan, &o.operation).map(|v| v.verdict),
                stats::wilson(o.failed_objects, plan.objects, z),
            )
        })
        .collect();
    let longest = rows
        .iter()
        .map(|(o, ..)| o.operation.chars().count())
        .max()
        .unwrap_or(8);
    // The name column fits the longest name (about 8.6 units a character at 14 units), up to a
    // third of the width; longer names are cut with an ellipsis (whole in the row's tooltip).
    #[allow(clippy::cast_precision_loss)]
    let name_w = (longest as f64).mul_add(CHAR_W, 16.0).clamp(120.0, 330.0);
    let (width, row_h, top) = (1000.0_f64, 30.0_f64, 34.0_f64);
    let x0 = name_w + 150.0;
    let x1 = width - 190.0;
    let max = axis_max(rows.iter().map(|(.., i)| i.high).fold(0.0, f64::max));
    #[allow(clippy::cast_precision_loss)]
    let plot_h = row_h * rows.len() as f64;
    let height = top + plot_h + 62.0;
    let _ = writeln!(
        out,
        "<figure class=\"chart\" id=\"{id}\"><figcaption id=\"{id}-t\">Where {} failed: share of its {} objects per operation<span class=\"note\">An object counts once however often it was reconciled; bars in phased order (then the legacy loop's own operations), coloured by the verdict on the operation's category.</span></figcaption>",
        escape(&plan.plan),
        plan.objects
    );
    legend_verdicts(out, confidence, rows.iter().any(|(_, v, _)| v.is_none()));
    let _ = writeln!(
        out,
        "<svg class=\"chart\" viewBox=\"0 0 {width} {height}\" role=\"img\" aria-labelledby=\"{id}-t\"><title>Share of objects in which each operation of {} failed</title>",
        escape(&plan.plan)
    );
    // Column titles (the y axis) and the x axis title.
    let _ = writeln!(
        out,
        "<text class=\"axis-title\" x=\"0\" y=\"20\" font-weight=\"600\">operation</text><text class=\"axis-title\" x=\"{name_w}\" y=\"20\" font-weight=\"600\">phase, category</text>"
    );
    let ticks = 5;
    for t in 0..=ticks {
        let rate = max * f64::from(t) / f64::from(ticks);
        let x = x_of(rate, max, x0, x1);
        let _ = writeln!(
            out,
            "<line class=\"grid\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{top}\" y2=\"{:.1}\"/><text class=\"muted\" x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            top + plot_h,
            top + plot_h + 20.0,
            pct(rate)
        );
    }
    let _ = writeln!(
        out,
        "<line class=\"axis\" x1=\"{x0:.1}\" x2=\"{x0:.1}\" y1=\"{top}\" y2=\"{:.1}\"/><text class=\"axis-title\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-weight=\"600\">objects in which it failed (% of {})</text>",
        top + plot_h,
        f64::midpoint(x0, x1),
        top + plot_h + 48.0,
        plan.objects
    );
    let axis = Axis {
        x0,
        x1,
        max,
        name_w,
    };
    for (i, (o, verdict, interval)) in rows.iter().enumerate() {
        #[allow(clippy::cast_precision_loss)]
        let mid = top + row_h * i as f64 + row_h / 2.0;
        failure_row(out, plan, o, *verdict, interval, confidence, &axis, mid);
    }
    out.push_str("</svg></figure>\n");
}

/// The column of an unblocked cell: the control's first failure, or `none` (it failed nowhere).
fn first_failure(u: &crate::analyze::Unblocked) -> &str {
    u.first_failure.as_deref().unwrap_or("none")
}

/// What the candidate ran that the control skipped: unblocked operation (rows) x the control's
/// first failure (columns), shaded by how often, with a colour scale.
fn unblocked_chart(out: &mut String, plan: &PlanReport, id: &str) {
    let in_plan_order = |names: &mut Vec<&str>| {
        names.sort_by_key(|n| plan.operations.iter().position(|o| o.operation == *n));
        names.dedup();
    };
    let mut rows: Vec<&str> = plan
        .unblocked
        .iter()
        .map(|u| u.operation.as_str())
        .collect();
    let mut cols: Vec<&str> = plan.unblocked.iter().map(first_failure).collect();
    in_plan_order(&mut rows);
    in_plan_order(&mut cols);
    let caption = "What the candidate would have run that the control skipped";
    if rows.is_empty() {
        let _ = writeln!(
            out,
            "<h3>{caption}</h3><p>Nothing: in this data, the candidate ran no operation the control had skipped.</p>"
        );
        return;
    }
    let most = plan
        .unblocked
        .iter()
        .map(|u| u.unblocked)
        .max()
        .unwrap_or(1)
        .max(1);
    let _ = writeln!(
        out,
        "<figure class=\"chart\" id=\"{id}\"><figcaption id=\"{id}-t\">{caption}<span class=\"note\">Each cell: reconciles in which the control's first failure (column) skipped the operation (row) and the candidate ran it; in brackets, how many of those dry runs succeeded.</span></figcaption>\n<div class=\"legend\" role=\"list\" aria-label=\"legend\"><span class=\"key\" role=\"listitem\">reconciles: 0 <span class=\"ramp\"></span> {most}</span><span class=\"key\" role=\"listitem\">empty cell: never</span></div>"
    );
    let _ = write!(
        out,
        "<div class=\"scroll\"><table class=\"heat\" aria-labelledby=\"{id}-t\"><thead><tr><th scope=\"col\">ran by the candidate \u{2193}<br>first failure in the control \u{2192}</th>"
    );
    for c in &cols {
        let _ = write!(out, "<th scope=\"col\">{}</th>", breakable(c));
    }
    out.push_str("</tr></thead><tbody>\n");
    for r in &rows {
        let _ = write!(out, "<tr><th scope=\"row\">{}</th>", breakable(r));
        for c in &cols {
            match plan
                .unblocked
                .iter()
                .find(|u| u.operation == *r && first_failure(u) == *c)
            {
                Some(u) => {
                    #[allow(clippy::cast_precision_loss)]
                    let v = u.unblocked as f64 / most as f64;
                    let _ = write!(
                        out,
                        "<td class=\"cell\" style=\"--v:{v:.3}\" title=\"{} ran in {} reconciles after {} failed first; {} dry runs succeeded\">{} <small>({} ok)</small></td>",
                        escape(r),
                        u.unblocked,
                        escape(c),
                        u.succeeded,
                        u.unblocked,
                        u.succeeded
                    );
                }
                None => out.push_str("<td class=\"cell\" style=\"--v:0\"></td>"),
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table></div></figure>\n");
}

fn answer_section(out: &mut String, answer: &Answer) {
    out.push_str("<section id=\"answer\"><h2>Readiness to enforce</h2>\n");
    let mut plan = "";
    for g in &answer.groups {
        if g.plan != plan {
            if !plan.is_empty() {
                out.push_str("</div>\n");
            }
            plan = &g.plan;
            let _ = write!(
                out,
                "<p class=\"plan-label\">plan <b>{}</b></p><div class=\"cards\">",
                escape(plan)
            );
        }
        let _ = write!(
            out,
            "<article class=\"card {}\"><h4>{}</h4>{}<p>{}{}</p></article>",
            g.readiness.as_str(),
            escape(&g.group),
            badge(g.readiness),
            escape(&g.why),
            if g.fixed_by_plan_edit {
                "; see the plan edit below"
            } else {
                ""
            }
        );
    }
    if !plan.is_empty() {
        out.push_str("</div>\n");
    }
    for edits in &answer.plan_edits {
        let _ = writeln!(
            out,
            "<h3>The plan edit the data asks for: {}</h3><p class=\"note\"><code>shadow-reconciler analyze DIR --plan FILE --suggest NEW</code> writes the whole plan with these lines and the evidence as comments.</p>",
            escape(&edits.plan)
        );
        if let Some(diff) = &edits.diff {
            out.push_str("<pre class=\"diff\">");
            for line in diff.lines() {
                // One block per line (no newline between them, which would add an empty line).
                let class = match line.chars().next() {
                    Some('+') => "add",
                    Some('-') => "del",
                    _ => "ctx",
                };
                let _ = write!(out, "<span class=\"{class}\">{}</span>", escape(line));
            }
            out.push_str("</pre>\n");
        }
        out.push_str("<p><b>Evidence</b></p><ul class=\"evidence\">");
        for c in &edits.changes {
            let _ = write!(
                out,
                "<li><b>{}</b>: {} <span class=\"groups\">(stops {})</span></li>",
                escape(&c.change),
                escape(&c.evidence),
                escape(&c.groups.join(", "))
            );
        }
        out.push_str("</ul>\n");
    }
    if !answer.next_steps.is_empty() {
        out.push_str("<h3>Next steps: the evidence still missing</h3><ul>");
        for s in &answer.next_steps {
            let _ = write!(
                out,
                "<li><b>{}</b> <span class=\"groups\">(groups: {}; operations: {})</span>: {}</li>",
                escape(&s.plan),
                escape(&s.groups.join(", ")),
                escape(&s.operations.join(", ")),
                escape(&s.step)
            );
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</section>\n");
}

fn verdict_table(out: &mut String, plan: &PlanReport) {
    out.push_str("<h3>Verdicts on each operation's category</h3><table><thead><tr><th>operation</th><th>category</th><th>verdict</th><th>reason</th><th>objects</th><th>evidence</th></tr></thead><tbody>\n");
    for v in &plan.verdicts {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td class=\"verdict-{}\">{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
            escape(&v.operation),
            v.claim,
            v.verdict.as_str(),
            v.verdict.as_str(),
            v.reason.as_str(),
            v.objects,
            escape(&v.evidence)
        );
    }
    out.push_str("</tbody></table>\n");
}

fn plan_details(out: &mut String, plan: &PlanReport) {
    let _ = write!(
        out,
        "<details><summary>Every operation's counts</summary><table><thead><tr>"
    );
    for h in super::OPERATION_HEADER {
        let _ = write!(out, "<th>{h}</th>");
    }
    out.push_str("</tr></thead><tbody>");
    for row in super::operation_rows(plan) {
        out.push_str("<tr>");
        for cell in row {
            let _ = write!(out, "<td>{}</td>", escape(&cell));
        }
        out.push_str("</tr>");
    }
    let _ = writeln!(
        out,
        "</tbody></table><p class=\"note\">{}.</p></details>",
        escape(super::OPERATION_LEGEND)
    );
    out.push_str(&super::super::conflicts::html(&plan.conflicts, escape));
    let _ = write!(
        out,
        "<details><summary>Ordering dependencies detected ({})</summary>",
        plan.dependencies.len()
    );
    if plan.dependencies.is_empty() {
        out.push_str("<p>None.</p>");
    }
    out.push_str("<ul>");
    for d in &plan.dependencies {
        let _ = write!(
            out,
            "<li><b>{} &rarr; {}</b>{}: {}.</li>",
            escape(&d.failed),
            escape(&d.later),
            if d.declared { " (declared)" } else { "" },
            escape(&super::evidence(d))
        );
    }
    out.push_str("</ul></details>\n<details><summary>Findings (each once, with the groups it concerns)</summary><ul>");
    for (f, groups) in super::distinct_findings(plan) {
        let _ = write!(
            out,
            "<li><code>{}</code> {} <span class=\"groups\">({})</span></li>",
            super::code_of(f.code),
            escape(&f.evidence),
            escape(&groups.join(", "))
        );
    }
    out.push_str("</ul></details>\n");
}

fn plan_section(out: &mut String, plan: &PlanReport, confidence: f64, index: usize) {
    let hash = plan.plan_hash.short();
    let _ = writeln!(
        out,
        "<section class=\"plan\"><h2>Plan {}: the data</h2><p>{}.</p><p class=\"note\">Plan hash <code title=\"{}\">{hash}</code>; {} shadow guard refusals.</p>",
        escape(&plan.plan),
        escape(&(super::plan_line(plan) + &super::cancelled_clause(plan))),
        plan.plan_hash,
        plan.guard_refusals
    );
    failure_chart(out, plan, confidence, &format!("failures-{index}"));
    unblocked_chart(out, plan, &format!("unblocked-{index}"));
    verdict_table(out, plan);
    plan_details(out, plan);
    out.push_str("</section>\n");
}

/// The whole page.
#[must_use]
pub fn render(a: &Analysis) -> String {
    let mut out = String::new();
    let reconciles: u64 = a.plans.iter().map(|p| p.reconciles).sum();
    let objects: u64 = a.plans.iter().map(|p| p.objects).sum();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\"><title>Shadow analysis: {}</title><style>{STYLE}</style></head><body><main>\n<header><h1>Shadow analysis {}</h1><p class=\"sub\">{} plans, {reconciles} reconciles of {objects} objects; data <code>{}</code> ({} files read, {} skipped, {} rows); {:.0}% Wilson intervals; a verdict needs {} objects.</p></header>\n",
        a.readiness.as_str(),
        badge(a.readiness),
        a.plans.len(),
        escape(&a.dir.display().to_string()),
        a.files_read,
        a.files_skipped.len(),
        a.rows,
        a.confidence * 100.0,
        a.min_samples
    );
    answer_section(&mut out, &a.answer);
    if let Some(line) = super::clusters_line(a) {
        let _ = writeln!(out, "<p class=\"note\">{}</p>", escape(&line));
    }
    super::rollouts::html(&mut out, &a.rollouts);
    for (i, plan) in a.plans.iter().enumerate() {
        plan_section(&mut out, plan, a.confidence, i);
    }
    out.push_str("<footer><h2>How to read this</h2><p class=\"note\">A rollout group is <b>ready</b> to enforce when every member's category held in enough objects and nothing in the data stops it, <b>not ready</b> when the data shows harm (an undeclared dependency, a non-critical failure that breaks later operations, shadow guard refusals), and <b>inconclusive</b> otherwise (Argo Rollouts would say Successful, Failed, Inconclusive). An operation's verdict on its category is <b>supported</b>, <b>contradicted</b> or <b>inconclusive</b>. docs/analyze.md defines every figure.</p></footer>\n</main></body></html>\n");
    out
}
