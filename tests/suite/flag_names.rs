//! One flag vocabulary across the commands: the same concept has the same option name wherever
//! it applies, the old spellings are gone from `--help` (still accepted as hidden aliases), and
//! every command's `--help` ends with examples that name the command itself.

use std::collections::BTreeSet;
use std::process::Command;

/// Every command that takes options, as its words after the binary's name.
const COMMANDS: &[&[&str]] = &[
    &["simulate"],
    &["run"],
    &["analyze"],
    &["ingest"],
    &["manifests"],
    &["plan", "check"],
    &["sim", "serve"],
    &["sim", "populate"],
];

/// Each shared concept's option, and the commands that must offer it.
const CONCEPTS: &[(&str, &[&str])] = &[
    ("--enforce-group", &["simulate", "run"]),
    ("--candidate-group", &["simulate", "run", "ingest"]),
    ("--plan", &["simulate", "analyze", "ingest"]),
    ("--kubeconfig", &["simulate", "run", "sim populate"]),
    ("--context", &["simulate", "run", "sim populate"]),
    ("--namespace", &["run"]),
    ("--log-format", &["simulate", "run", "analyze", "ingest"]),
    ("--parquet-dir", &["simulate", "run", "ingest"]),
    ("--listen", &["simulate", "run", "ingest"]),
    ("--seed", &["simulate", "sim serve", "sim populate"]),
];

/// Spellings replaced by the names above: accepted, never shown.
const RETIRED: &[(&str, &str)] = &[
    ("--enforce", "--enforce-group or --candidate-group"),
    ("--candidate", "--candidate-group"),
    ("--with-plan", "--plan"),
];

fn help(words: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args(words)
        .arg("--help")
        .output()
        .expect("run the binary");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{words:?} --help: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// The exit code and stderr of the binary run with `args`.
fn run(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args(args)
        .output()
        .expect("run the binary");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The long options a help text defines (the option column, not mentions in prose).
fn options(help: &str) -> BTreeSet<String> {
    help.lines()
        .filter_map(|line| {
            let line = line.trim_start();
            let line = line
                .strip_prefix('-')
                .filter(|rest| !rest.starts_with('-'))
                .map_or(line, |rest| rest.split_once(", ").map_or(line, |(_, l)| l));
            let name = line.strip_prefix("--")?;
            let end = name
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .unwrap_or(name.len());
            Some(format!("--{}", &name[..end]))
        })
        .collect()
}

#[test]
fn shared_concepts_have_one_name_everywhere() {
    let defined: Vec<(String, BTreeSet<String>)> = COMMANDS
        .iter()
        .map(|words| (words.join(" "), options(&help(words))))
        .collect();
    for (command, names) in &defined {
        assert!(
            names.contains("--help"),
            "{command}: no options read from --help: {names:?}"
        );
        for (retired, instead) in RETIRED {
            assert!(
                !names.contains(*retired),
                "{command} --help still shows {retired}; the name is {instead}"
            );
        }
    }
    for (option, commands) in CONCEPTS {
        for command in *commands {
            let names = &defined.iter().find(|(c, _)| c == command).unwrap().1;
            assert!(
                names.contains(*option),
                "{command} has no {option}: {names:?}"
            );
        }
    }
}

#[test]
fn every_help_ends_with_examples_of_its_command() {
    for words in COMMANDS {
        let text = help(words);
        let examples = text
            .split_once("\nExamples:\n")
            .unwrap_or_else(|| panic!("{words:?} --help has no Examples section:\n{text}"))
            .1;
        let invocation = format!("shadow-reconciler {}", words.join(" "));
        let lines: Vec<&str> = examples
            .lines()
            .filter(|l| l.trim_start().starts_with(&invocation))
            .collect();
        assert!(
            !lines.is_empty(),
            "{words:?}: no example runs `{invocation}`:\n{examples}"
        );
        // Every option an example uses is one the command defines.
        let defined = options(&text);
        for line in lines {
            for word in line.split_whitespace().filter(|w| w.starts_with("--")) {
                assert!(
                    defined.contains(word),
                    "{words:?}: the example `{}` uses {word}, which the command does not define",
                    line.trim()
                );
            }
        }
    }
}

#[test]
fn retired_spellings_still_work_as_aliases() {
    // The alias reaches the same check as the new name: an unknown group, named by the new name.
    let (code, stderr) = run(&["run", "--mode", "enforce", "--enforce", "no-such-group"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--enforce-group \"no-such-group\""),
        "{stderr}"
    );
    let (code, stderr) = run(&["run", "--candidate", "no-such-group"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--candidate-group \"no-such-group\""),
        "{stderr}"
    );
    let (code, stderr) = run(&["simulate", "--model-only", "--enforce", "nope"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("no plan here has a rollout group \"nope\""),
        "{stderr}"
    );
    // simulate's old --enforce meant the candidate's groups, with --model-only only.
    let (code, stderr) = run(&["simulate", "--enforce", "hostedcluster/non-critical-syncs"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--model-only"), "{stderr}");
    let (code, stderr) = run(&[
        "ingest",
        "--plan",
        "hostedcluster",
        "--candidate",
        "no-such-group",
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--candidate-group \"no-such-group\""),
        "{stderr}"
    );
    let (code, stderr) = run(&["simulate", "--with-plan", "/nonexistent/plan.yaml"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("/nonexistent/plan.yaml"), "{stderr}");
}

#[test]
fn options_that_do_nothing_are_errors_that_say_why() {
    for command in ["run", "simulate"] {
        let group = if command == "run" {
            "non-critical-syncs"
        } else {
            "hostedcluster/non-critical-syncs"
        };
        let (code, stderr) = run(&[command, "--enforce-group", group, "--no-flag-watch"]);
        assert_eq!(code, Some(2), "{command}: {stderr}");
        assert!(
            stderr.contains("--enforce-group does nothing with --mode shadow and --no-flag-watch"),
            "{command}: {stderr}"
        );
    }
    // With --model-only, the options of the simulated cluster do nothing.
    for option in [
        &["--hosted-clusters", "5"][..],
        &["--mode", "enforce"],
        &["--enforce-group", "hostedcluster/non-critical-syncs"],
        &["--duration", "5"],
        &["--parquet-dir", "x"],
        &["--ramp-percent", "50"],
        &["--no-flag-watch"],
        &["--flag-name", "f"],
        &["--parquet-max-rows", "10"],
        &["--parquet-grace", "1"],
    ] {
        let mut args = vec!["simulate", "--model-only"];
        args.extend_from_slice(option);
        let (code, stderr) = run(&args);
        assert_eq!(code, Some(2), "{option:?}: {stderr}");
        assert!(
            stderr.contains("cannot be used with") && stderr.contains(option[0]),
            "{option:?}: {stderr}"
        );
    }
    // --model-only simulates one plan.
    let (code, stderr) = run(&[
        "simulate",
        "--model-only",
        "--plan",
        "hostedcluster",
        "--plan",
        "addon-install-progression",
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--model-only simulates one plan"),
        "{stderr}"
    );
}

/// A group value is `GROUP` (in every plan that has it) or `PLAN/GROUP` in every command that
/// takes one, checked and worded the same way.
#[test]
fn group_values_have_one_syntax_everywhere() {
    let commands: [(&[&str], &str); 6] = [
        (&["run"], "--candidate-group"),
        (&["run", "--mode", "enforce"], "--enforce-group"),
        (&["simulate"], "--candidate-group"),
        (&["simulate", "--mode", "enforce"], "--enforce-group"),
        (&["simulate", "--model-only"], "--candidate-group"),
        (&["ingest", "--plan", "hostedcluster"], "--candidate-group"),
    ];
    for (command, option) in commands {
        for (value, says) in [
            (
                "hostedcluster/nope",
                "plan \"hostedcluster\" has no rollout group \"nope\"",
            ),
            ("nope", "no plan here has a rollout group \"nope\""),
            ("a/b/c", "expected GROUP or PLAN/GROUP"),
        ] {
            let mut args = command.to_vec();
            args.extend([option, value]);
            let (code, stderr) = run(&args);
            assert_eq!(code, Some(2), "{args:?}: {stderr}");
            assert!(
                stderr.contains(&format!("{option} {value:?}: {says}")),
                "{args:?}: {stderr}"
            );
        }
    }
    // GROUP alone is accepted where PLAN/GROUP is: a small simulate run with one.
    let dir = tempfile::tempdir().expect("temp dir");
    let out = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args([
            "simulate",
            "--quiet",
            "--hosted-clusters",
            "2",
            "--addons",
            "0",
            "--no-parquet",
            "--candidate-group",
            "non-critical-syncs",
        ])
        .current_dir(dir.path())
        .output()
        .expect("run simulate");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
