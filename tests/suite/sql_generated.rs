//! The SQL of the three engines is generated: each query's DuckDB, Spark and Trino files from one
//! source (`exporters/sql/source/`, by `exporters/sql/generate.py`) and the pairs' unrolled
//! rounds by `generate_pairs.py`. A file edited by hand, or a source edited without
//! regenerating, fails here with the files named; the planted edit checks that it can.

use std::path::Path;
use std::process::Command;

fn python() -> Command {
    // The generators use the standard library only: the system's python3 (scripts/test.sh
    // installs it), not the tests' venv.
    Command::new("python3")
}

fn check(sql: &Path, script: &str) -> std::process::Output {
    python()
        .arg(sql.join(script))
        .arg("--check")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap_or_else(|e| panic!("python3 {script}: {e} (scripts/test.sh installs python3)"))
}

#[test]
fn the_committed_sql_is_what_the_generators_write() {
    let sql = Path::new(env!("CARGO_MANIFEST_DIR")).join("exporters/sql");
    for script in ["generate.py", "generate_pairs.py"] {
        let out = check(&sql, script);
        assert!(
            out.status.success(),
            "{script} --check: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Every engine's file of a source exists (generated), and the sources are what the engines'
    // files share: no query is left hand-written in one dialect only.
    let sources: Vec<String> = std::fs::read_dir(sql.join("source"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(sources.len() >= 6, "{sources:?}");
    for engine in ["duckdb", "spark", "trino"] {
        for entry in std::fs::read_dir(sql.join(engine)).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            let generated = sources.contains(&name) || name == "pairs.sql";
            let by_hand = name == "tables.sql" || name == "README.md";
            assert!(
                generated || by_hand,
                "exporters/sql/{engine}/{name} has no source in exporters/sql/source/"
            );
        }
    }
}

#[test]
fn a_generated_file_edited_by_hand_is_caught() {
    let sql = Path::new(env!("CARGO_MANIFEST_DIR")).join("exporters/sql");
    let copy = tempfile::tempdir().unwrap();
    let status = Command::new("cp")
        .arg("-r")
        .arg(&sql)
        .arg(copy.path())
        .status()
        .unwrap();
    assert!(status.success());
    let copied = copy.path().join("sql");
    let edited = copied.join("trino/operations.sql");
    let text = std::fs::read_to_string(&edited).unwrap();
    std::fs::write(&edited, text.replacen("count_if(", "count_if( ", 1)).unwrap();
    let out = check(&copied, "generate.py");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("trino/operations.sql") && !stderr.contains("spark/operations.sql"),
        "{stderr}"
    );
    // Regenerating puts it back.
    let out = python()
        .arg(copied.join("generate.py"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(check(&copied, "generate.py").status.success());
    assert_eq!(
        std::fs::read_to_string(&edited).unwrap(),
        std::fs::read_to_string(sql.join("trino/operations.sql")).unwrap()
    );
}
