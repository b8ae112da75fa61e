//! One figure, one answer: from one run's data, every format (`analyze`'s JSON, its text table,
//! Markdown and HTML, and `simulate`'s own summary) shows every operation of the plan, each row
//! with the same figures, and every total a format prints is the sum of the rows the JSON holds.
//! Over the default scenarios and `--same-code`; the SQL is held to the JSON by
//! `tests/system/exporters.rs`.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_shadow-reconciler")
}

fn run(args: &[&str]) -> String {
    let out = Command::new(bin()).args(args).output().unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1 | 3)),
        "{args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The integers of a line, in order.
fn numbers(line: &str) -> Vec<u64> {
    line.split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect()
}

/// The figures of a plan line (`N reconciles of M objects, control failed in F; unblocked by
/// the candidate: U (D dry-run, S would have succeeded; X not simulated); newly blocked: B`).
fn figures(line: &str) -> Vec<u64> {
    let at = line
        .find(" reconciles of ")
        .unwrap_or_else(|| panic!("no plan line in {line:?}"));
    let start = line[..at]
        .rfind(|c: char| !c.is_ascii_digit())
        .map_or(0, |j| j + 1);
    let end = line[start..]
        .find("newly blocked: ")
        .map(|i| start + i + "newly blocked: ".len())
        .unwrap();
    let tail: String = line[end..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    numbers(&format!("{} {tail}", &line[start..end]))
}

fn sum(ops: &[Value], field: &str) -> u64 {
    ops.iter().map(|o| o[field].as_u64().unwrap()).sum()
}

/// The rows of the text table of `plan`: cells by the header's column starts.
fn text_rows(text: &str, plan: &str) -> Vec<Vec<String>> {
    let section = text
        .split("\nplan ")
        .find(|s| s.starts_with(&format!("{plan} (")))
        .unwrap_or_else(|| panic!("no section of plan {plan} in the text:\n{text}"));
    let mut lines = section.lines().skip_while(|l| !l.starts_with("operation "));
    let header = lines.next().unwrap();
    let starts: Vec<usize> = header
        .char_indices()
        .filter(|&(i, c)| {
            c != ' '
                && (i == 0
                    || header.as_bytes()[i - 1] == b' '
                        && header.as_bytes()[i.saturating_sub(2)] == b' ')
        })
        .map(|(i, _)| i)
        .collect();
    lines
        .take_while(|l| !l.starts_with('('))
        .map(|l| {
            (0..starts.len())
                .map(|k| {
                    let end = starts.get(k + 1).copied().unwrap_or(l.len()).min(l.len());
                    l.get(starts[k].min(l.len())..end)
                        .unwrap_or("")
                        .trim()
                        .to_owned()
                })
                .collect()
        })
        .collect()
}

/// The rows of the Markdown operation table of `plan`.
fn markdown_rows(md: &str, plan: &str) -> Vec<Vec<String>> {
    let section = md
        .split("### Plan `")
        .find(|s| s.starts_with(&format!("{plan}`")))
        .unwrap_or_else(|| panic!("no Markdown section of plan {plan}"));
    section
        .lines()
        .skip_while(|l| !l.starts_with("| operation |"))
        .skip(2)
        .take_while(|l| l.starts_with("| "))
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().replace("\\|", "|"))
                .collect()
        })
        .collect()
}

/// The rows of the HTML "Every operation's counts" table of the `index`-th plan.
fn html_rows(html: &str, index: usize) -> Vec<Vec<String>> {
    let table = html
        .split("<summary>Every operation's counts</summary>")
        .nth(index + 1)
        .unwrap()
        .split("</tbody>")
        .next()
        .unwrap();
    table
        .split("<tr>")
        .skip(2)
        .map(|row| {
            row.split("<td>")
                .skip(1)
                .map(|c| {
                    c.split("</td>")
                        .next()
                        .unwrap()
                        .replace("&amp;", "&")
                        .replace("&lt;", "<")
                        .replace("&gt;", ">")
                })
                .collect()
        })
        .collect()
}

/// A percent cell (`12%`, `0.35%`, `<0.1%`) against a rate: equal at the shown precision.
fn same_percent(cell: &str, rate: f64) -> bool {
    let Some(digits) = cell.strip_suffix('%') else {
        return false;
    };
    if let Some(below) = digits.strip_prefix('<') {
        return rate * 100.0 < below.parse::<f64>().unwrap();
    }
    let decimals = digits.split('.').nth(1).map_or(0, str::len);
    let half = 0.5 * 10f64.powi(-i32::try_from(decimals).unwrap());
    (digits.parse::<f64>().unwrap() - rate * 100.0).abs() <= half + 1e-9
}

/// One row of a table against the JSON's operation: the same operation, category cell and
/// figures.
fn check_row(format: &str, row: &[String], op: &Value, verdicts: &BTreeMap<&str, &str>) {
    let name = op["operation"].as_str().unwrap();
    let what = format!("{format}: row of {name}: {row:?} against {op}");
    assert_eq!(row.len(), 9, "{what}");
    assert_eq!(row[0], name, "{what}");
    let category = match (op["category"].as_str(), op["only"].as_str()) {
        (Some(c), Some("phased")) => format!("{c}, phased only"),
        (Some(c), _) => c.to_owned(),
        (None, _) => "legacy only".to_owned(),
    };
    assert_eq!(row[1], category, "{what}");
    assert_eq!(row[2], op["executions"].to_string(), "{what}");
    assert!(
        same_percent(&row[3], op["failure_rate"].as_f64().unwrap()),
        "{what}"
    );
    let classes: Vec<String> = op["failures_by_class"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| format!("{k}:{v}"))
        .collect();
    assert_eq!(row[4], classes.join(" "), "{what}");
    assert_eq!(row[5], op["failed_objects"].to_string(), "{what}");
    assert_eq!(row[6], op["first_failure"].to_string(), "{what}");
    assert_eq!(
        row[7],
        format!(
            "{}/{}/{}",
            op["blocked_in_control"],
            op["blocked_then_run_by_candidate"],
            op["blocked_then_succeeded_in_candidate"]
        ),
        "{what}"
    );
    let verdict = verdicts.get(name).copied().unwrap_or("none (legacy only)");
    assert_eq!(row[8], verdict, "{what}");
}

/// The outputs of one run: `simulate`'s summary, and `analyze`'s JSON, text, Markdown and HTML.
struct Outputs {
    summary: String,
    json: Value,
    text: String,
    markdown: String,
    html: String,
}

fn outputs(dir: &Path, extra: &[&str]) -> Outputs {
    let data = dir.join("data");
    let data_arg = data.to_str().unwrap();
    let mut args = vec![
        "simulate",
        "--hosted-clusters",
        "40",
        "--addons",
        "12",
        "--duration",
        "300",
        "-q",
        "--parquet-dir",
        data_arg,
    ];
    args.extend_from_slice(extra);
    Outputs {
        summary: run(&args),
        json: serde_json::from_str(&run(&["analyze", data_arg, "--format", "json"])).unwrap(),
        text: run(&["analyze", data_arg]),
        markdown: run(&["analyze", data_arg, "--format", "markdown"]),
        html: run(&["analyze", data_arg, "--format", "html"]),
    }
}

/// Every operation of the plan has its row in the JSON, marked with its code path; the totals
/// every format prints (and the JSON's own matrix) are the sums of those rows.
fn check_totals(o: &Outputs, plan: &Value, what: &str) {
    let name = plan["plan"].as_str().unwrap();
    let ops = plan["operations"].as_array().unwrap();
    let shipped = crate::common::shipped(name);
    let mut listed: Vec<&str> = ops
        .iter()
        .map(|o| o["operation"].as_str().unwrap())
        .collect();
    listed.sort_unstable();
    let mut all: Vec<&str> = shipped
        .operations()
        .iter()
        .map(shadow_reconciler::plan::Operation::name)
        .collect();
    all.sort_unstable();
    assert_eq!(listed, all, "{what}: the JSON lists every operation");
    for op in ops {
        let id = shipped.lookup(op["operation"].as_str().unwrap()).unwrap();
        let only = shipped.operation(id).only();
        assert_eq!(
            op["only"].as_str(),
            only.map(shadow_reconciler::vocab::CodePath::as_str),
            "{op}"
        );
    }
    let matrix = plan["unblocked"].as_array().unwrap();
    let dry_run = sum(ops, "unblocked") - sum(ops, "unblocked_not_simulated");
    assert_eq!(
        sum(matrix, "unblocked"),
        dry_run,
        "{what}: the matrix adds up"
    );
    assert_eq!(
        sum(matrix, "succeeded"),
        sum(ops, "unblocked_succeeded"),
        "{what}: the matrix adds up"
    );
    let expected = vec![
        plan["reconciles"].as_u64().unwrap(),
        plan["objects"].as_u64().unwrap(),
        sum(ops, "first_failure"),
        sum(ops, "unblocked"),
        dry_run,
        sum(ops, "unblocked_succeeded"),
        sum(ops, "unblocked_not_simulated"),
        sum(ops, "newly_blocked"),
    ];
    let simulated = o
        .summary
        .lines()
        .find(|l| l.starts_with(&format!("  {name}: ")))
        .unwrap_or_else(|| panic!("no summary line of {name}:\n{}", o.summary));
    let text_line = o
        .text
        .lines()
        .find(|l| l.starts_with(&format!("plan {name} (")))
        .unwrap();
    let md_line = o
        .markdown
        .split(&format!("### Plan `{name}`\n\n"))
        .nth(1)
        .and_then(|s| s.lines().next())
        .unwrap();
    let html_line = o
        .html
        .split(&format!("<h2>Plan {name}: the data</h2><p>"))
        .nth(1)
        .and_then(|s| s.split("</p>").next())
        .unwrap();
    for (format, line) in [
        ("simulate", simulated),
        ("text", text_line),
        ("markdown", md_line),
        ("html", html_line),
    ] {
        assert_eq!(figures(line), expected, "{what}: {format}'s line {line:?}");
    }
}

/// Every table (text, Markdown, HTML) has a row per operation with the JSON's figures, and the
/// HTML's failure chart a row per operation.
fn check_tables(o: &Outputs, plan: &Value, index: usize, what: &str) {
    let name = plan["plan"].as_str().unwrap();
    let ops = plan["operations"].as_array().unwrap();
    let verdicts: BTreeMap<&str, &str> = plan["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["operation"].as_str().unwrap(),
                v["verdict"].as_str().unwrap(),
            )
        })
        .collect();
    for (format, rows) in [
        ("text", text_rows(&o.text, name)),
        ("markdown", markdown_rows(&o.markdown, name)),
        ("html", html_rows(&o.html, index)),
    ] {
        assert_eq!(rows.len(), ops.len(), "{what}: {format} rows {rows:?}");
        for (row, op) in rows.iter().zip(ops) {
            check_row(format, row, op, &verdicts);
        }
    }
    let section = o
        .html
        .split(&format!("<h2>Plan {name}: the data</h2>"))
        .nth(1)
        .unwrap();
    let chart = section.split("</svg>").next().unwrap();
    assert_eq!(
        chart.matches("<g class=\"row\">").count(),
        ops.len(),
        "{what}: a chart row per operation"
    );
}

#[test]
fn every_format_gives_every_operation_the_same_figures() {
    for extra in [
        &[][..],
        &["--scenario", "healthy"],
        &["--scenario", "missing-secrets"],
        &["--scenario", "conflict-storm"],
        &["--same-code"],
    ] {
        let dir = tempfile::tempdir().unwrap();
        let o = outputs(dir.path(), extra);
        for (index, plan) in o.json["plans"].as_array().unwrap().iter().enumerate() {
            let what = format!("{extra:?} {}", plan["plan"]);
            check_totals(&o, plan, &what);
            check_tables(&o, plan, index, &what);
            if extra == ["--same-code"] {
                // Identical code compared everywhere, the server's allocations included (the
                // private endpoint Service, generated names, owner UIDs): no difference.
                let noise: Vec<_> = plan["writes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|w| w["only"].is_null())
                    .collect();
                assert!(
                    noise.is_empty(),
                    "{what}: noise from identical code: {noise:#?}"
                );
            }
        }
    }
}
