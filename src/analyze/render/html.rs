//! A self-contained HTML report: inline SVG charts drawn with `plotters`, inline CSS, no script and
//! no network request, so it opens anywhere (an air-gapped laptop, a CI artifact).

use std::fmt::Write as _;

use plotters::prelude::*;

use crate::analyze::{Analysis, PlanReport, Readiness, Verdict};

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const RED: RGBColor = RGBColor(0xc6, 0x28, 0x28);
const GREEN: RGBColor = RGBColor(0x2e, 0x7d, 0x32);
const AMBER: RGBColor = RGBColor(0xef, 0x9a, 0x00);
const BLUE: RGBColor = RGBColor(0x15, 0x65, 0xc0);

const fn verdict_color(v: Verdict) -> RGBColor {
    match v {
        Verdict::Supported => GREEN,
        Verdict::Contradicted => RED,
        Verdict::Inconclusive => AMBER,
    }
}

const fn readiness_color(r: Readiness) -> RGBColor {
    match r {
        Readiness::Ready => GREEN,
        Readiness::NotReady => RED,
        Readiness::Inconclusive => AMBER,
    }
}

/// Horizontal bars: one per operation, its failure rate, coloured by its verdict.
fn failure_rates(plan: &PlanReport) -> Result<String, String> {
    let n = plan.operations.len();
    let height = u32::try_from(70 + 24 * n).unwrap_or(u32::MAX);
    let max = plan
        .operations
        .iter()
        .map(|o| o.failure_rate)
        .fold(0.05_f64, f64::max)
        .min(1.0);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "failure rate per operation (colour: verdict)",
                ("sans-serif", 16),
            )
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(230)
            .build_cartesian_2d(0.0..max * 1.05, (0..n).into_segmented())
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n.max(1))
            .y_label_formatter(&|y| match y {
                // Top to bottom in phased order.
                SegmentValue::CenterOf(i) | SegmentValue::Exact(i) if *i < n => {
                    plan.operations[n - 1 - *i].operation.clone()
                }
                SegmentValue::CenterOf(_) | SegmentValue::Exact(_) | SegmentValue::Last => {
                    String::new()
                }
            })
            .x_label_formatter(&|x| format!("{:.0}%", x * 100.0))
            .draw()
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(plan.operations.iter().zip(&plan.verdicts).enumerate().map(
                |(i, (o, v))| {
                    let row = n - 1 - i;
                    let mut bar = Rectangle::new(
                        [
                            (0.0, SegmentValue::Exact(row)),
                            (o.failure_rate, SegmentValue::Exact(row + 1)),
                        ],
                        verdict_color(v.verdict).filled(),
                    );
                    bar.set_margin(4, 4, 0, 0);
                    bar
                },
            ))
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// The matrix of the control's first failure (rows) x operations the candidate unblocked
/// (columns): cell shade is how often, the label how often it would have succeeded.
fn unblocked_matrix(plan: &PlanReport) -> Result<String, String> {
    let mut rows: Vec<&str> = plan
        .unblocked
        .iter()
        .map(|u| u.first_failure.as_str())
        .collect();
    rows.dedup();
    let mut cols: Vec<&str> = Vec::new();
    for o in &plan.operations {
        if plan.unblocked.iter().any(|u| u.operation == o.operation) {
            cols.push(&o.operation);
        }
    }
    if rows.is_empty() {
        return Ok(String::new());
    }
    let cell = 34;
    let (left, top) = (230, 200);
    let width = u32::try_from(left + cell * cols.len() + 20).unwrap_or(u32::MAX);
    let height = u32::try_from(top + cell * rows.len() + 20).unwrap_or(u32::MAX);
    let most = plan
        .unblocked
        .iter()
        .map(|u| u.unblocked)
        .max()
        .unwrap_or(1)
        .max(1);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let font = ("sans-serif", 12).into_font();
        let to_i32 = |v: usize| i32::try_from(v).unwrap_or(i32::MAX);
        for (r, name) in rows.iter().enumerate() {
            root.draw(&Text::new(
                (*name).to_owned(),
                (4, to_i32(top + r * cell + cell / 3)),
                font.clone(),
            ))
            .map_err(|e| e.to_string())?;
        }
        let vertical = font.clone().transform(FontTransform::Rotate270);
        for (c, name) in cols.iter().enumerate() {
            root.draw(&Text::new(
                (*name).to_owned(),
                (to_i32(left + c * cell + cell / 3), to_i32(top - 6)),
                vertical.clone(),
            ))
            .map_err(|e| e.to_string())?;
        }
        for u in &plan.unblocked {
            let r = rows.iter().position(|x| *x == u.first_failure).unwrap_or(0);
            let c = cols.iter().position(|x| *x == u.operation).unwrap_or(0);
            let (x, y) = (to_i32(left + c * cell), to_i32(top + r * cell));
            #[allow(clippy::cast_precision_loss)]
            let shade = 0.15 + 0.85 * (u.unblocked as f64 / most as f64);
            root.draw(&Rectangle::new(
                [(x, y), (x + to_i32(cell) - 2, y + to_i32(cell) - 2)],
                BLUE.mix(shade).filled(),
            ))
            .map_err(|e| e.to_string())?;
            root.draw(&Text::new(
                format!("{}", u.succeeded),
                (x + 4, y + 10),
                ("sans-serif", 11).into_font().color(&BLACK),
            ))
            .map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// One coloured tile per rollout group.
fn readiness_tiles(plan: &PlanReport) -> Result<String, String> {
    let width = 220;
    let total = u32::try_from(20 + width * plan.readiness.len()).unwrap_or(u32::MAX);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (total.max(240), 80)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        for (i, g) in plan.readiness.iter().enumerate() {
            let x = i32::try_from(10 + width * i).unwrap_or(i32::MAX);
            root.draw(&Rectangle::new(
                [(x, 10), (x + i32::try_from(width).unwrap_or(0) - 10, 70)],
                readiness_color(g.readiness).filled(),
            ))
            .map_err(|e| e.to_string())?;
            let font = ("sans-serif", 14).into_font().color(&WHITE);
            root.draw(&Text::new(g.group.clone(), (x + 8, 22), font.clone()))
                .map_err(|e| e.to_string())?;
            root.draw(&Text::new(g.readiness.as_str(), (x + 8, 46), font))
                .map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;font-size:13px}.supported{color:#2e7d32}.contradicted{color:#c62828;font-weight:bold}.inconclusive{color:#b26a00}.ready{color:#2e7d32}.not-ready{color:#c62828;font-weight:bold}svg{max-width:100%;height:auto}";

fn chart(out: &mut String, title: &str, svg: Result<String, String>) {
    let _ = writeln!(out, "<h3>{}</h3>", escape(title));
    match svg {
        Ok(svg) if svg.is_empty() => out.push_str("<p>Nothing to show.</p>\n"),
        Ok(svg) => {
            // plotters writes an XML declaration first; inline SVG must not have one.
            let start = svg.find("<svg").unwrap_or(0);
            out.push_str(&svg[start..]);
            out.push('\n');
        }
        Err(e) => {
            let _ = writeln!(out, "<p>chart not drawn: {}</p>", escape(&e));
        }
    }
}

fn plan_section(out: &mut String, plan: &PlanReport) {
    let _ = writeln!(
        out,
        "<h2>Plan {}</h2><p>{}; plan hash <code>{}</code>, {} shadow guard refusals.</p>",
        escape(&plan.plan),
        escape(&super::plan_line(plan)),
        escape(&plan.plan_hash),
        plan.guard_refusals
    );
    chart(out, "Readiness to enforce", readiness_tiles(plan));
    out.push_str("<ul>");
    for g in &plan.readiness {
        let _ = write!(
            out,
            "<li><b>{}</b>: <span class=\"{}\">{}</span><ul>",
            escape(&g.group),
            g.readiness.as_str(),
            escape(&g.summary)
        );
        for f in &g.findings {
            let _ = write!(out, "<li>{}</li>", escape(&super::finding_line(f)));
        }
        out.push_str("</ul></li>");
    }
    out.push_str("</ul>\n");
    chart(out, "Failure rates", failure_rates(plan));
    chart(
        out,
        "First failed operation (rows) x operation the candidate unblocked (columns); label: would have succeeded",
        unblocked_matrix(plan),
    );
    out.push_str("<h3>Verdicts</h3><table><tr><th>operation</th><th>claim</th><th>verdict</th><th>reason</th><th>objects</th><th>evidence</th></tr>\n");
    for v in &plan.verdicts {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td class=\"{}\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&v.operation),
            v.claim,
            v.verdict.as_str(),
            v.verdict.as_str(),
            v.reason.as_str(),
            v.objects,
            escape(&v.evidence)
        );
    }
    out.push_str("</table>\n<h3>Detected ordering dependencies</h3>\n");
    if plan.dependencies.is_empty() {
        out.push_str("<p>None.</p>\n");
    }
    for d in &plan.dependencies {
        let _ = writeln!(
            out,
            "<p><b>{} &rarr; {}</b>: {}.</p>",
            escape(&d.failed),
            escape(&d.later),
            escape(&super::evidence(d))
        );
    }
}

/// The whole page.
#[must_use]
pub fn render(a: &Analysis) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>shadow-reconciler analysis</title><style>{STYLE}</style></head><body>\n<h1>Shadow analysis: <span class=\"{}\">{}</span></h1>\n<p><code>{}</code>: {} files read, {} skipped, {} rows; verdicts need {} objects; {:.0}% Wilson intervals.</p>\n",
        a.readiness.as_str(),
        a.readiness.as_str(),
        escape(&a.dir.display().to_string()),
        a.files_read,
        a.files_skipped.len(),
        a.rows,
        a.min_samples,
        a.confidence * 100.0
    );
    for plan in &a.plans {
        plan_section(&mut out, plan);
    }
    out.push_str("</body></html>\n");
    out
}
