//! The suggested plan: the analysed plan's own text, with each detected dependency added to the
//! later operation's `dependsOn`, each contradicted non-critical classification made critical,
//! and each write difference the plan does not declare added to the operation's
//! `intendedDifferences`, every change preceded by a comment giving the evidence. The author's
//! comments and layout stay. The result passes validation, and recorded over the same world it
//! raises none of the findings it was made for (`tests/suite/suggestions.rs`).

use std::fmt::Write as _;

use super::{PlanReport, Verdict};
use crate::plan::ReconcilePlan;

/// Why a suggestion could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SuggestError {
    /// The plan text has an operation entry the editor cannot find.
    #[error(
        "{source_name}: cannot find the entry of operation {operation} (expected a line `- name: {operation}`)"
    )]
    NoEntry {
        /// The plan's source.
        source_name: String,
        /// The operation.
        operation: String,
    },
    /// The edited plan does not validate (a bug in the editor: the original text is unchanged).
    #[error("the suggested plan does not pass validation: {0}")]
    Invalid(#[from] crate::plan::PlanError),
}

/// What the suggestion changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Suggestion {
    /// The new plan text.
    pub text: String,
    /// One line per change.
    pub changes: Vec<String>,
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

fn unquote(value: &str) -> &str {
    let v = value.trim();
    let v = v.split(" #").next().unwrap_or(v).trim();
    v.trim_matches(|c| c == '"' || c == '\'')
}

/// The line range of an operation's entry and the indentation of its keys.
fn entry(lines: &[String], operation: &str) -> Option<(usize, usize, usize)> {
    let start = lines.iter().position(|l| {
        l.trim_start()
            .strip_prefix("- name:")
            .is_some_and(|v| unquote(v) == operation)
    })?;
    let dash = indent_of(&lines[start]);
    let key = dash + 2;
    let mut end = start + 1;
    let mut last_content = start;
    while end < lines.len() {
        let l = &lines[end];
        let t = l.trim_start();
        if !t.is_empty() && !t.starts_with('#') {
            if indent_of(l) <= dash {
                break;
            }
            last_content = end;
        }
        end += 1;
    }
    Some((start, last_content + 1, key))
}

fn comment(indent: usize, text: &str) -> String {
    format!("{}# analyze: {text}", " ".repeat(indent))
}

fn set_critical(lines: &mut Vec<String>, op: &str, why: &str) -> Option<()> {
    let (start, end, key) = entry(lines, op)?;
    let at = (start..end)
        .find(|&i| indent_of(&lines[i]) == key && lines[i].trim_start().starts_with("category:"));
    if let Some(i) = at {
        lines[i] = format!("{}category: critical", " ".repeat(key));
        lines.insert(i, comment(key, why));
    } else {
        lines.insert(end, format!("{}category: critical", " ".repeat(key)));
        lines.insert(end, comment(key, why));
    }
    Some(())
}

fn add_dependency(lines: &mut Vec<String>, op: &str, on: &str, why: &str) -> Option<()> {
    let (start, end, key) = entry(lines, op)?;
    let at = (start..end)
        .find(|&i| indent_of(&lines[i]) == key && lines[i].trim_start().starts_with("dependsOn:"));
    let pad = " ".repeat(key);
    let Some(i) = at else {
        lines.insert(end, format!("{pad}dependsOn: [{on}]"));
        lines.insert(end, comment(key, why));
        return Some(());
    };
    let value = lines[i].trim_start()["dependsOn:".len()..]
        .trim()
        .to_owned();
    if let Some(inner) = value.strip_prefix('[').and_then(|v| v.split(']').next()) {
        let mut names: Vec<String> = inner
            .split(',')
            .map(|s| unquote(s).to_owned())
            .filter(|s| !s.is_empty())
            .collect();
        names.push(on.to_owned());
        lines[i] = format!("{pad}dependsOn: [{}]", names.join(", "));
        lines.insert(i, comment(key, why));
    } else {
        // A block sequence: append an item after the last one.
        let mut last = i;
        while last + 1 < end && lines[last + 1].trim_start().starts_with("- ") {
            last += 1;
        }
        let item_pad = if last > i {
            " ".repeat(indent_of(&lines[last]))
        } else {
            format!("{pad}  ")
        };
        lines.insert(last + 1, format!("{item_pad}- {on}"));
        lines.insert(last + 1, format!("{item_pad}# analyze: {why}"));
    }
    Some(())
}

/// Adds `declaration` (a YAML flow mapping) to `op`'s `intendedDifferences`, creating the list
/// when the operation has none.
fn add_intended(lines: &mut Vec<String>, op: &str, declaration: &str, why: &str) -> Option<()> {
    let (start, end, key) = entry(lines, op)?;
    let at = (start..end).find(|&i| {
        indent_of(&lines[i]) == key && lines[i].trim_start().starts_with("intendedDifferences:")
    });
    let pad = " ".repeat(key);
    let Some(i) = at else {
        lines.insert(end, format!("{pad}  - {declaration}"));
        lines.insert(end, format!("{pad}intendedDifferences:"));
        lines.insert(end, comment(key, why));
        return Some(());
    };
    let value = lines[i].trim_start()["intendedDifferences:".len()..].trim();
    if value.starts_with('[') {
        // A flow sequence on one line: the new entry goes before its closing bracket.
        let close = lines[i].rfind(']')?;
        let inner = lines[i][..close].trim_end().ends_with('[');
        let sep = if inner { "" } else { ", " };
        lines[i] = format!(
            "{}{sep}{declaration}{}",
            &lines[i][..close],
            &lines[i][close..]
        );
        lines.insert(i, comment(key, why));
        return Some(());
    }
    // A block sequence: after its last line (anything indented deeper than the key).
    let mut last = i;
    let mut item_indent = None;
    while last + 1 < end {
        let l = &lines[last + 1];
        let t = l.trim_start();
        if !t.is_empty() && !t.starts_with('#') && indent_of(l) <= key {
            break;
        }
        if t.starts_with("- ") && item_indent.is_none() {
            item_indent = Some(indent_of(l));
        }
        last += 1;
    }
    let item_pad = " ".repeat(item_indent.unwrap_or(key + 2));
    lines.insert(last + 1, format!("{item_pad}- {declaration}"));
    lines.insert(last + 1, format!("{item_pad}# analyze: {why}"));
    Some(())
}

/// Adds `patterns` to the plan's `compare.volatile`, creating what is missing (`compare:` as the
/// last key of `spec`).
fn add_volatile(lines: &mut Vec<String>, patterns: &[String], why: &str) -> Option<()> {
    let items: Vec<String> = patterns
        .iter()
        .map(|p| format!("'{}'", p.replace('\'', "''")))
        .collect();
    let spec = lines.iter().position(|l| l.trim_end() == "spec:")?;
    let key = lines[spec + 1..]
        .iter()
        .find(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|l| indent_of(l))?;
    let pad = " ".repeat(key);
    // The end of spec: the next line indented no deeper than `spec:` itself.
    let end = lines[spec + 1..]
        .iter()
        .position(|l| {
            let t = l.trim_start();
            !t.is_empty() && !t.starts_with('#') && indent_of(l) <= indent_of(&lines[spec])
        })
        .map_or(lines.len(), |i| spec + 1 + i);
    let compare = (spec + 1..end)
        .find(|&i| indent_of(&lines[i]) == key && lines[i].trim_start().starts_with("compare:"));
    let Some(compare) = compare else {
        let mut at = end;
        while at > spec + 1 && lines[at - 1].trim().is_empty() {
            at -= 1;
        }
        lines.insert(at, format!("{pad}  volatile: [{}]", items.join(", ")));
        lines.insert(at, format!("{pad}compare:"));
        lines.insert(at, comment(key, why));
        return Some(());
    };
    let inner = (compare + 1..end)
        .take_while(|&i| {
            let t = lines[i].trim_start();
            t.is_empty() || t.starts_with('#') || indent_of(&lines[i]) > key
        })
        .find(|&i| lines[i].trim_start().starts_with("volatile:"));
    let Some(i) = inner else {
        lines.insert(
            compare + 1,
            format!("{pad}  volatile: [{}]", items.join(", ")),
        );
        lines.insert(compare + 1, comment(key + 2, why));
        return Some(());
    };
    let value = lines[i].trim_start()["volatile:".len()..].trim().to_owned();
    let vpad = " ".repeat(indent_of(&lines[i]));
    if value.starts_with('[') {
        let close = lines[i].rfind(']')?;
        let empty = lines[i][..close].trim_end().ends_with('[');
        let sep = if empty { "" } else { ", " };
        lines[i] = format!(
            "{}{sep}{}{}",
            &lines[i][..close],
            items.join(", "),
            &lines[i][close..]
        );
        lines.insert(i, format!("{vpad}# analyze: {why}"));
    } else {
        // A block sequence: after its last item.
        let mut last = i;
        while last + 1 < end && lines[last + 1].trim_start().starts_with("- ") {
            last += 1;
        }
        let item_pad = if last > i {
            " ".repeat(indent_of(&lines[last]))
        } else {
            format!("{vpad}  ")
        };
        for item in items.iter().rev() {
            lines.insert(last + 1, format!("{item_pad}- {item}"));
        }
        lines.insert(last + 1, format!("{item_pad}# analyze: {why}"));
    }
    Some(())
}

/// Applies the report's findings to the plan's text (`text` is what `plan` was parsed from).
pub fn suggest(
    plan: &ReconcilePlan,
    text: &str,
    report: &PlanReport,
) -> Result<Suggestion, SuggestError> {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let mut changes = Vec::new();
    let missing = |operation: &str| SuggestError::NoEntry {
        source_name: plan.source().to_owned(),
        operation: operation.to_owned(),
    };
    for v in &report.verdicts {
        let harms_others = report.dependencies.iter().any(|d| d.failed == v.operation);
        if v.verdict == Verdict::Contradicted && v.claim == "non-critical" && harms_others {
            let why = format!("was non-critical; contradicted: {}", v.evidence);
            set_critical(&mut lines, &v.operation, &why).ok_or_else(|| missing(&v.operation))?;
            changes.push(format!(
                "{}: category non-critical -> critical",
                v.operation
            ));
        }
    }
    for d in &report.dependencies {
        let why = format!(
            "depends on {}: failed in {} of {} objects after it failed (Wilson {:.1}%-{:.1}%), baseline {} of {} ({:.1}%-{:.1}%)",
            d.failed,
            d.after.failures,
            d.after.objects,
            d.after.low * 100.0,
            d.after.high * 100.0,
            d.baseline.failures,
            d.baseline.objects,
            d.baseline.low * 100.0,
            d.baseline.high * 100.0
        );
        add_dependency(&mut lines, &d.later, &d.failed, &why).ok_or_else(|| missing(&d.later))?;
        changes.push(format!("{}: dependsOn += {}", d.later, d.failed));
    }
    for w in &report.writes {
        let Some(declaration) = &w.declaration else {
            continue;
        };
        let why = format!(
            "declares what the phased code writes differently (keep it only if that is meant): {}",
            w.text
        );
        add_intended(&mut lines, &w.operation, declaration, &why)
            .ok_or_else(|| missing(&w.operation))?;
        changes.push(format!(
            "{}: intendedDifferences += {declaration}",
            w.operation
        ));
    }
    let volatile = super::noise::volatile(&report.noise);
    if !volatile.is_empty() {
        let mut ops: Vec<&str> = report.noise.iter().map(|n| n.operation.as_str()).collect();
        ops.dedup();
        let why = format!(
            "the calibration (each operation's code against itself, mode calibrate) found these fields differ from one run to the next, in {}",
            ops.join(", ")
        );
        add_volatile(&mut lines, &volatile, &why).ok_or_else(|| SuggestError::NoEntry {
            source_name: plan.source().to_owned(),
            operation: "compare.volatile (expected a line `spec:`)".to_owned(),
        })?;
        changes.push(format!("compare.volatile += {}", volatile.join(", ")));
    }
    let mut text = String::new();
    if !changes.is_empty() {
        let _ = writeln!(
            text,
            "# Suggested by `shadow-reconciler analyze` from {} reconciles recorded under plan hash {}.",
            report.reconciles, report.plan_hash
        );
    }
    for line in &lines {
        text.push_str(line);
        text.push('\n');
    }
    ReconcilePlan::from_yaml(plan.source(), &text)?;
    Ok(Suggestion { text, changes })
}

/// The edits alone, for a short review: the changed lines other than added comments, each run
/// of them after the `- name:` line of the operation it belongs to (the evidence the comments
/// carry is given once, elsewhere).
#[must_use]
pub fn edits(original: &str, suggested: &str) -> String {
    let ops = line_ops(original, suggested);
    let mut out = String::new();
    let mut name: Option<&str> = None;
    let mut printed_name: Option<&str> = None;
    for (kind, line) in ops {
        if kind == ' ' {
            if line.trim_start().starts_with("- name:") {
                name = Some(line);
            }
            continue;
        }
        if kind == '+' && line.trim_start().starts_with('#') {
            continue;
        }
        if let Some(n) = name
            && printed_name != Some(n)
        {
            let _ = writeln!(out, " {n}");
            printed_name = Some(n);
        }
        let _ = writeln!(out, "{kind}{line}");
    }
    out
}

/// The line operations turning `original` into `suggested`: `' '` kept, `'-'` removed, `'+'`
/// added (removals before additions).
fn line_ops<'t>(original: &'t str, suggested: &'t str) -> Vec<(char, &'t str)> {
    let (a, b): (Vec<&str>, Vec<&str>) = (original.lines().collect(), suggested.lines().collect());
    // lcs[i][j]: the longest common subsequence of a[i..] and b[j..].
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut ops: Vec<(char, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            ops.push((' ', a[i]));
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] > lcs[i + 1][j]) {
            ops.push(('+', b[j]));
            j += 1;
        } else {
            ops.push(('-', a[i]));
            i += 1;
        }
    }
    ops
}

#[cfg(test)]
mod tests {
    #[test]
    fn edits_show_a_changed_line_as_removed_then_added() {
        let original = "  - name: A\r\n    category: non-critical\r\n  - name: B\r\n";
        let suggested = "  - name: A\n    # why\n    category: critical\n  - name: B\n";
        assert_eq!(
            super::edits(original, suggested),
            "   - name: A\n-    category: non-critical\n+    category: critical\n"
        );
        assert_eq!(super::edits(original, original), "");
    }

    #[test]
    fn edits_show_changes_under_their_operation_without_comments() {
        let original = "ops:\n  - name: A\n    phase: 1\n  - name: B\n    phase: 2\n";
        let suggested = "ops:\n  - name: A\n    phase: 1\n  - name: B\n    phase: 2\n    # why\n    dependsOn: [A]\n";
        assert_eq!(
            super::edits(original, suggested),
            "   - name: B\n+    dependsOn: [A]\n"
        );
    }
}
