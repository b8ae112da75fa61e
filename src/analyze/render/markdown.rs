//! The Markdown for a pull-request comment: the answer unfolded within 2 KB, the rest in
//! `<details>` blocks.

use std::fmt::Write as _;

use super::super::Analysis;
use super::{
    OPERATION_HEADER, OPERATION_LEGEND, code_of, distinct_findings, evidence, operation_rows,
    plan_line,
};

fn md_row(out: &mut String, cells: &[String]) {
    let cells: Vec<String> = cells.iter().map(|c| c.replace('|', "\\|")).collect();
    let _ = writeln!(out, "| {} |", cells.join(" | "));
}

/// The evidence of `edits` in one short paragraph: dependency changes grouped by the operation
/// whose failure comes first, with the objects' counts; other changes in their own sentence.
fn short_evidence(a: &Analysis, edits: &super::super::answer::PlanEdits) -> String {
    let pairs: Vec<&super::super::Pair> = a
        .plans
        .iter()
        .filter(|p| p.plan == edits.plan)
        .flat_map(|p| &p.dependencies)
        .collect();
    let mut by_first: Vec<(&str, Vec<String>)> = Vec::new();
    let mut other = Vec::new();
    for c in &edits.changes {
        let pair = match c.operations.as_slice() {
            [failed, later] => pairs
                .iter()
                .find(|d| d.failed == *failed && d.later == *later),
            _ => None,
        };
        let Some(d) = pair else {
            other.push(c.evidence.clone());
            continue;
        };
        let cell = format!(
            "{} {}/{} ({}/{}){}",
            d.later,
            d.after.failures,
            d.after.objects,
            d.baseline.failures,
            d.baseline.objects,
            if d.concentrated {
                ", all in one namespace: check it first"
            } else {
                ""
            }
        );
        match by_first.iter_mut().find(|(f, _)| *f == d.failed) {
            Some((_, cells)) => cells.push(cell),
            None => by_first.push((&d.failed, vec![cell])),
        }
    }
    let mut text: Vec<String> = by_first
        .into_iter()
        .map(|(first, cells)| {
            format!(
                "objects where each failed after {first} failed (otherwise): {}",
                cells.join(", ")
            )
        })
        .collect();
    text.extend(other);
    text.join("; ")
}

/// The bytes of Markdown a PR comment shows before its first `<details>`, at most.
const VISIBLE_BYTES: usize = 2048;

/// The plan edits in Markdown: per plan, the diff and its evidence; with `fold`, the evidence of
/// every plan in one `<details>` block after the diffs.
fn edits_markdown(a: &Analysis, fold: bool) -> String {
    let mut out = String::new();
    if a.answer.plan_edits.is_empty() {
        return out;
    }
    out.push_str("\n### The plan edits the data asks for\n");
    let mut folded = String::new();
    for edits in &a.answer.plan_edits {
        let _ = writeln!(
            out,
            "\n`{}` (`analyze --suggest FILE` writes the plan):\n",
            edits.plan
        );
        if let Some(diff) = &edits.diff {
            let _ = writeln!(out, "```diff\n{diff}```");
        }
        let evidence = short_evidence(a, edits);
        if fold {
            let _ = writeln!(folded, "- `{}`: {evidence}.", edits.plan);
        } else {
            let _ = writeln!(out, "Evidence: {evidence}.");
        }
    }
    if fold {
        let _ = write!(
            out,
            "\n<details><summary>Evidence for the edits</summary>\n\n{folded}\n</details>\n"
        );
    }
    out
}

/// Where a group summary's notes start (`readiness::summary`).
const NOTE: &str = "; note: ";

/// The Markdown for a PR comment: the answer first (overall readiness, one row per rollout
/// group, then the plan edits that fix what is not ready, as diffs, with their evidence once),
/// the next steps and the details folded in `<details>` blocks.
#[must_use]
pub fn markdown(a: &Analysis) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## Shadow analysis: {}\n\n| rollout group | readiness | why |\n| --- | --- | --- |",
        a.answer.readiness.as_str()
    );
    // What enforcing changes besides the readiness (the notes of a group's summary) is said
    // once per plan under the table, in the words of the plan's widest note, not in every row.
    let mut notes: Vec<(&str, &str)> = Vec::new();
    for g in &a.answer.groups {
        let (why, note) = g
            .why
            .split_once(NOTE)
            .map_or((g.why.as_str(), None), |(why, note)| (why, Some(note)));
        if let Some(note) = note {
            match notes.iter_mut().find(|(plan, _)| *plan == g.plan) {
                Some((_, widest)) if widest.len() < note.len() => *widest = note,
                Some(_) => {}
                None => notes.push((&g.plan, note)),
            }
        }
        md_row(
            &mut out,
            &[
                format!("{}/{}", g.plan, g.group),
                g.readiness.as_str().to_owned(),
                format!(
                    "{why}{}",
                    if g.fixed_by_plan_edit {
                        ": edits below"
                    } else {
                        ""
                    }
                ),
            ],
        );
    }
    // Besides the table and the diffs (always unfolded): the notes and the clusters' line.
    let mut extras = String::new();
    if !notes.is_empty() {
        extras.push('\n');
        for (plan, note) in notes {
            let _ = writeln!(extras, "Note, `{plan}`: {note} (see the findings).");
        }
    }
    if let Some(line) = super::clusters_line(a) {
        let _ = writeln!(extras, "\n{line}");
    }
    // What a PR comment shows unfolded stays within 2 KB: when the evidence would push it over,
    // the evidence is folded under the diffs instead of inline; when even then the notes would,
    // they are folded too, after the evidence.
    let inline = edits_markdown(a, false);
    let folded = edits_markdown(a, true);
    let folded_visible = folded.find("<details>").unwrap_or(folded.len());
    // The visible part ends with the newline that opens the next `<details>` block: one byte more.
    if out.len() + extras.len() + inline.len() < VISIBLE_BYTES {
        out.push_str(&extras);
        out.push_str(&inline);
    } else if out.len() + extras.len() + folded_visible <= VISIBLE_BYTES {
        out.push_str(&extras);
        out.push_str(&folded);
    } else {
        out.push_str(&folded);
        if !extras.is_empty() {
            let _ = write!(
                out,
                "\n<details><summary>Notes</summary>\n{extras}\n</details>\n"
            );
        }
    }
    if !a.answer.next_steps.is_empty() {
        out.push_str("\n<details><summary>Next steps (the evidence still missing)</summary>\n\n");
        for s in &a.answer.next_steps {
            let _ = writeln!(
                out,
                "- `{}` (groups: {}; operations: {}): {}",
                s.plan,
                s.groups.join(", "),
                s.operations.join(", "),
                s.step
            );
        }
        out.push_str("\n</details>\n");
    }
    out.push_str("\n<details><summary>Details: data, figures, operations, dependencies, verdicts, findings</summary>\n\n");
    details(&mut out, a);
    out.push_str("</details>\n");
    out
}

fn details(out: &mut String, a: &Analysis) {
    let _ = writeln!(
        out,
        "`{}`: {} files read, {} skipped, {} rows; at least {} objects per verdict, {:.0}% Wilson intervals.\n",
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
            "### Plan `{}`\n\n{}; plan hash `{}`, {} shadow guard refusals{}.\n",
            plan.plan,
            plan_line(plan),
            plan.plan_hash.short(),
            plan.guard_refusals,
            super::cancelled_clause(plan)
        );
        md_row(out, &OPERATION_HEADER.map(str::to_owned));
        md_row(out, &OPERATION_HEADER.map(|_| "---".to_owned()));
        for row in operation_rows(plan) {
            md_row(out, &row);
        }
        let _ = writeln!(out, "\n{OPERATION_LEGEND}.");
        out.push_str("\n#### Ordering dependencies\n\n");
        if plan.dependencies.is_empty() {
            out.push_str("None detected.\n");
        }
        for d in &plan.dependencies {
            let _ = writeln!(out, "- **{} → {}**: {}.", d.failed, d.later, evidence(d));
        }
        if !plan.conflicts.is_empty() {
            out.push_str("\n#### Conflicts (409) the control met\n\n");
            for r in &plan.conflicts {
                let _ = writeln!(out, "- {}.", super::super::conflicts::sentence(r));
            }
        }
        out.push_str("\n#### Verdicts\n\n| operation | claim | verdict | reason | objects | evidence |\n| --- | --- | --- | --- | --- | --- |\n");
        for v in &plan.verdicts {
            md_row(
                out,
                &[
                    v.operation.clone(),
                    v.claim.to_owned(),
                    v.verdict.as_str().to_owned(),
                    v.reason.as_str().to_owned(),
                    v.objects.to_string(),
                    v.evidence.clone(),
                ],
            );
        }
        out.push_str("\n#### Findings (each once, with the groups it concerns)\n\n");
        for (f, groups) in distinct_findings(plan) {
            let _ = writeln!(
                out,
                "- `{}` {} ({})",
                code_of(f.code),
                f.evidence,
                groups.join(", ")
            );
        }
        out.push('\n');
    }
}
