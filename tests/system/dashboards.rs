//! The Grafana dashboards and the Prometheus rules: every expression parses (promql-parser),
//! names only families our registry exports (or recording rules of `rules.yaml`), follows the
//! dashboard conventions, and returns data from a real Prometheus server that scraped a
//! `simulate` run. `promtool check rules` and `promtool test rules` pass.

use crate::common;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use promql_parser::parser::{self, Expr};
use promql_parser::util::{ExprVisitor, walk_expr};
use serde_json::Value;
use shadow_reconciler::telemetry::http::Telemetry;

use common::wait::{wait_for, wait_until};
use common::{Process, free_port};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// What an expression is and where it comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    Dashboard,
    Variable,
    Recording(String),
    Alert,
}

#[derive(Clone, Debug)]
struct Expression {
    origin: String,
    kind: Kind,
    text: String,
}

fn dashboards() -> Vec<(PathBuf, Value)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("dashboards"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 3,
        "overview, drill-down and exporter health: {files:?}"
    );
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let json = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{}: not JSON: {e}", p.display()));
            (p, json)
        })
        .collect()
}

fn rules() -> Value {
    let text = std::fs::read_to_string(root().join("exporters/prometheus/rules.yaml")).unwrap();
    serde_saphyr::from_str(&text).expect("rules.yaml is YAML")
}

/// Every panel, nested rows included.
fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    let mut stack: Vec<&Value> = dashboard["panels"].as_array().unwrap().iter().collect();
    while let Some(panel) = stack.pop() {
        if let Some(children) = panel["panels"].as_array() {
            stack.extend(children);
        }
        out.push(panel);
    }
    out
}

fn expressions() -> Vec<Expression> {
    let mut out = Vec::new();
    for (path, dashboard) in dashboards() {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        for panel in panels(&dashboard) {
            for target in panel["targets"].as_array().into_iter().flatten() {
                if let Some(expr) = target["expr"].as_str() {
                    out.push(Expression {
                        origin: format!("{file}: panel {:?}", panel["title"]),
                        kind: Kind::Dashboard,
                        text: expr.to_owned(),
                    });
                }
            }
        }
        for variable in dashboard["templating"]["list"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if variable["type"] != "query" {
                continue;
            }
            let query = variable["query"]["query"]
                .as_str()
                .or_else(|| variable["query"].as_str())
                .unwrap_or_default();
            // label_values(selector, label): the selector is the expression.
            let selector = query
                .strip_prefix("label_values(")
                .and_then(|rest| rest.rsplit_once(','))
                .map_or(query, |(selector, _)| selector);
            out.push(Expression {
                origin: format!("{file}: variable {:?}", variable["name"]),
                kind: Kind::Variable,
                text: selector.to_owned(),
            });
        }
    }
    for group in rules()["groups"].as_array().unwrap() {
        for rule in group["rules"].as_array().unwrap() {
            let text = rule["expr"].as_str().unwrap().to_owned();
            let (kind, name) = match (rule["record"].as_str(), rule["alert"].as_str()) {
                (Some(record), None) => (Kind::Recording(record.to_owned()), record),
                (None, Some(alert)) => (Kind::Alert, alert),
                _ => panic!("a rule is a recording or an alerting rule: {rule}"),
            };
            out.push(Expression {
                origin: format!("rules.yaml: {name}"),
                kind,
                text,
            });
        }
    }
    out
}

/// Grafana's variables replaced by values the simulated run has.
fn concrete(text: &str) -> String {
    let text = text
        .replace("$__rate_interval", "20s")
        .replace("${__rate_interval}", "20s")
        .replace("$__interval", "5s")
        .replace("$__range", "5m")
        .replace("${plan}", "hostedcluster")
        .replace("$plan", "hostedcluster")
        .replace("${operation}", "SSHKeySync")
        .replace("$operation", "SSHKeySync");
    any_value(&text)
}

/// Every other variable (`$x`, `${x}`, used with `=~`) matching any value.
fn any_value(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, tail) = if let Some(braced) = after.strip_prefix('{') {
            braced.split_once('}').unwrap_or((braced, ""))
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            after.split_at(end)
        };
        if name.is_empty() {
            out.push('$');
        } else {
            out.push_str(".*");
        }
        rest = tail;
    }
    out.push_str(rest);
    out
}

struct Names(BTreeSet<String>);

impl ExprVisitor for Names {
    type Error = ();
    fn pre_visit(&mut self, expr: &Expr) -> Result<bool, ()> {
        match expr {
            Expr::VectorSelector(vs) => self.0.extend(vs.name.clone()),
            Expr::MatrixSelector(ms) => self.0.extend(ms.vs.name.clone()),
            _ => {}
        }
        Ok(true)
    }
}

fn parse(e: &Expression) -> Expr {
    parser::parse(&concrete(&e.text))
        .unwrap_or_else(|error| panic!("{}: {:?} does not parse: {error}", e.origin, e.text))
}

/// The names an expression selects that are neither exported nor recorded.
fn unknown_names(expr: &Expr, exported: &BTreeSet<String>) -> Vec<String> {
    let mut names = Names(BTreeSet::new());
    walk_expr(&mut names, expr).unwrap();
    names
        .0
        .into_iter()
        .filter(|n| !exported.contains(n))
        .collect()
}

/// Every family name a scrape can show: the registry's, histogram series, recording rules.
fn exported() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for family in Telemetry::new().family_names() {
        for suffix in ["", "_bucket", "_sum", "_count"] {
            names.insert(format!("{family}{suffix}"));
        }
    }
    for e in expressions() {
        if let Kind::Recording(name) = e.kind {
            names.insert(name);
        }
    }
    names
}

#[test]
fn every_expression_parses_and_names_only_exported_families() {
    let exported = exported();
    let all = expressions();
    assert!(all.len() > 30, "{} expressions", all.len());
    for e in &all {
        let unknown = unknown_names(&parse(e), &exported);
        assert!(
            unknown.is_empty(),
            "{}: {:?} names {unknown:?}",
            e.origin,
            e.text
        );
    }
    // The check can fail: a misspelt family is caught.
    let typo = Expression {
        origin: "test".into(),
        kind: Kind::Dashboard,
        text: "sum(rate(shadow_reconciler_operation_total[$__rate_interval]))".into(),
    };
    assert_eq!(
        unknown_names(&parse(&typo), &exported),
        ["shadow_reconciler_operation_total"]
    );
}

#[test]
fn dashboards_follow_the_conventions() {
    for (path, dashboard) in dashboards() {
        let file = path.display();
        let variables = dashboard["templating"]["list"].as_array().unwrap();
        assert!(
            variables
                .iter()
                .any(|v| v["type"] == "datasource" && v["query"] == "prometheus"),
            "{file}: a Prometheus datasource variable"
        );
        let all = panels(&dashboard);
        assert!(all.iter().any(|p| p["type"] == "row"), "{file}: rows");
        for panel in all.iter().filter(|p| p["type"] != "row") {
            let title = &panel["title"];
            let unit = panel["fieldConfig"]["defaults"]["unit"].as_str();
            assert!(
                unit.is_some_and(|u| !u.is_empty()),
                "{file}: panel {title} has no unit"
            );
            assert_eq!(
                panel["datasource"]["uid"], "${datasource}",
                "{file}: panel {title} uses the datasource variable"
            );
            for target in panel["targets"].as_array().into_iter().flatten() {
                let expr = target["expr"].as_str().unwrap_or_default();
                for window in expr.split('[').skip(1) {
                    let window = window.split(']').next().unwrap_or_default();
                    assert!(
                        window.starts_with("$__rate_interval") || window.starts_with("$__range"),
                        "{file}: panel {title}: window [{window}] is not $__rate_interval in {expr}"
                    );
                }
            }
        }
    }
}

fn tool(name: &str) -> PathBuf {
    let path = Path::new("/usr/bin").join(name);
    assert!(
        path.exists(),
        "{name} is not installed: run `bash scripts/test.sh`, which installs Debian's prometheus package"
    );
    path
}

#[test]
fn promtool_checks_and_unit_tests_the_rules() {
    let dir = root().join("exporters/prometheus");
    for args in [
        vec!["check", "rules", "rules.yaml"],
        vec!["test", "rules", "rules_test.yaml"],
    ] {
        let out = Command::new(tool("promtool"))
            .args(&args)
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "promtool {args:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// GET over HTTP/1.0 (no chunked encoding): the body, whatever the status (Prometheus explains
/// a refused query in its JSON body).
fn get(addr: &str, path_and_query: &str) -> Option<String> {
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    write!(
        stream,
        "GET {path_and_query} HTTP/1.0\r\nHost: {addr}\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The series an instant query returns now.
/// How many series `expr` returns: `None` if Prometheus did not answer (it may be busy), an
/// error if it refused the expression.
fn query(prometheus: &str, expr: &str) -> Result<Option<usize>, String> {
    let Some(body) = get(prometheus, &format!("/api/v1/query?query={}", encode(expr))) else {
        return Ok(None);
    };
    let json: Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
    if json["status"] != "success" {
        return Err(format!("{expr}: {body}"));
    }
    Ok(Some(json["data"]["result"].as_array().map_or(1, Vec::len)))
}

/// An alert's condition without its thresholds: what the alert compares must have data even
/// when it does not fire (a healthy run fires none).
fn without_thresholds(expr: Expr) -> Expr {
    match expr {
        Expr::Binary(mut b) => {
            let number = |e: &Expr| matches!(e, Expr::NumberLiteral(_));
            if b.op.is_comparison_operator() && number(&b.rhs) {
                without_thresholds(*b.lhs)
            } else if b.op.is_comparison_operator() && number(&b.lhs) {
                without_thresholds(*b.rhs)
            } else {
                b.lhs = Box::new(without_thresholds(*b.lhs));
                b.rhs = Box::new(without_thresholds(*b.rhs));
                Expr::Binary(b)
            }
        }
        Expr::Paren(mut p) => {
            p.expr = Box::new(without_thresholds(*p.expr));
            Expr::Paren(p)
        }
        other => other,
    }
}

#[test]
fn every_expression_returns_data_from_prometheus_after_a_simulate_run() {
    let prometheus_bin = tool("prometheus");
    let dir = tempfile::tempdir().unwrap();
    // Two simulated runs, serving /metrics on after they end: the default scenario, and the
    // rollout scenario (whose driver feeds the rollout row and alerts).
    let simulate = |name: &str, args: &[&str]| {
        let addr = format!("127.0.0.1:{}", free_port());
        let stdout = std::fs::File::create(dir.path().join(format!("{name}.out"))).unwrap();
        let stderr = std::fs::File::create(dir.path().join(format!("{name}.err"))).unwrap();
        let process = Process(
            Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
                .arg("simulate")
                .args(args)
                // A bound for a broken run, not a speed target: on a loaded machine the
                // default 60 s can end a run before its rollouts start.
                .args(["--duration", "600"])
                .args(["--serve", "--listen", &addr, "--parquet-dir"])
                .arg(dir.path().join(name))
                .stdout(stdout)
                .stderr(stderr)
                .spawn()
                .unwrap(),
        );
        (addr, process)
    };
    let (sim_addr, _simulate) = simulate("simulate", &["--hosted-clusters", "40", "--addons", "6"]);
    let (rollout_addr, _rollout) = simulate("rollout", &["--scenario", "rollout"]);
    let prom_port = free_port();
    let prom_addr = format!("127.0.0.1:{prom_port}");
    let config = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\nscrape_configs:\n  - job_name: shadow-reconciler\n    static_configs:\n      - targets: ['{sim_addr}', '{rollout_addr}']\n",
        root().join("exporters/prometheus/rules.yaml").display()
    );
    std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
    let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
    let _prometheus = Process(
        Command::new(prometheus_bin)
            .arg(format!(
                "--config.file={}",
                dir.path().join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address={prom_addr}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    // Wait for the runs to end (their summaries are printed).
    // Eleven minutes for both.
    let started = Instant::now();
    for name in ["simulate", "rollout"] {
        let err = dir.path().join(format!("{name}.err"));
        wait_for(
            &format!("{name} to finish"),
            Duration::from_mins(11).saturating_sub(started.elapsed()),
            Duration::from_millis(500),
            || {
                let said = std::fs::read_to_string(&err).unwrap_or_default();
                if said.contains("run finished; still serving") {
                    Ok(())
                } else {
                    Err(format!("its stderr: {said}"))
                }
            },
        );
    }
    every_expression_answers(&prom_addr, &dir.path().join("prometheus.log"));
}

/// Waits until the Prometheus at `prom_addr` scrapes both runs, then until every expression of
/// the dashboards and rules has returned data once; panics with what never did.
fn every_expression_answers(prom_addr: &str, log: &Path) {
    // Prometheus scrapes both runs every second (a scrape slower than that, on a loaded
    // machine, reads as down until the next one) and evaluates the rules as often. A bound for a
    // broken setup only.
    let prometheus_log = || std::fs::read_to_string(log).unwrap_or_default();
    let up = wait_until(
        "Prometheus scraping both runs",
        Duration::from_mins(2),
        Duration::from_millis(500),
        || match query(prom_addr, "up{job=\"shadow-reconciler\"} == 1") {
            Ok(Some(2)) => Ok(()),
            other => Err(format!("{other:?} targets up")),
        },
    );
    if let Err(e) = up {
        panic!("{e}\nPrometheus's log:\n{}", prometheus_log());
    }
    // Every expression must return data once (a recording rule's first evaluation, a range
    // vector's second sample may come a few intervals later).
    let all = expressions();
    let mut empty: Vec<(String, String)> = all
        .iter()
        .map(|e| {
            let text = match &e.kind {
                Kind::Alert => without_thresholds(parse(e)).to_string(),
                Kind::Recording(name) => name.clone(),
                Kind::Dashboard | Kind::Variable => concrete(&e.text),
            };
            (e.origin.clone(), text)
        })
        .collect();
    let answered = wait_until(
        "every expression returning data",
        Duration::from_mins(2),
        Duration::from_secs(1),
        || {
            let mut still = Vec::new();
            for (origin, text) in std::mem::take(&mut empty) {
                match query(prom_addr, &text) {
                    Ok(None | Some(0)) => still.push((origin, text)),
                    Ok(Some(_)) => {}
                    Err(error) => panic!("{origin}: {error}"),
                }
            }
            empty = still;
            if empty.is_empty() {
                Ok(())
            } else {
                Err(String::new())
            }
        },
    );
    assert!(
        answered.is_ok(),
        "{} of {} expressions returned no data:\n{}",
        empty.len(),
        all.len(),
        empty
            .iter()
            .map(|(origin, text)| format!("{origin}: {text}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
