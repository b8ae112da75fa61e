//! Every path a README or a page of `docs/` names exists: one that still names a moved or deleted
//! file fails here, with its line and the path.
//!
//! What counts as a path: the target of a Markdown link (`[text](target)`, not a URL or an
//! anchor), and a `code span` that looks like a file or directory: no spaces, no placeholder
//! (`{dir}`, `*`, `$`, an upper-case word such as `DIR`), and a file extension, or a `/` after a
//! directory name the repository has (`hostedclusters/status` is a resource, `otlp/backend` a
//! Collector component). It must exist beside the README, from the repository's root, or, as
//! READMEs name files in the directories they describe (`pairs.sql`, `spark/tables.sql`), as the
//! end of some path of the repository. A path under `~/.cache` or `/tmp`, or an absolute path,
//! is the user's machine, not the repository.

use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Directories that are not the project's sources.
const SKIP: &[&str] = &[".git", "target", ".venv", "node_modules", "__pycache__"];

/// The README files, and every path of the repository (relative, with `/`).
fn walk(dir: &Path, readmes: &mut Vec<PathBuf>, paths: &mut Vec<String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        // Not the sources: build output, and what a `simulate` in the checkout wrote (ignored by
        // git, present or not), which must not decide the test.
        if (path.is_dir() && SKIP.contains(&name.as_str())) || name.starts_with("shadow-data") {
            continue;
        }
        paths.push(
            path.strip_prefix(root())
                .unwrap()
                .to_string_lossy()
                .into_owned(),
        );
        if path.is_dir() {
            walk(&path, readmes, paths);
        } else if name == "README.md"
            || (path.extension().is_some_and(|e| e == "md")
                && path.parent() == Some(&root().join("docs")))
        {
            readmes.push(path);
        }
    }
}

/// Files that READMEs name that are not the repository's: the user's, or inside what we build.
const USERS_FILES: &[&str] = &[
    "prometheus.yml", // the user's Prometheus configuration, where our rules are listed
    "shadow-data-report.html", // what `simulate` writes
    "manifest.json",  // Docker's manifest inside the image archive
    "target",         // cargo's build directory: there only once something was built in it
];

/// File extensions that make a code span a file's name.
const EXTENSIONS: &[&str] = &[
    "rs", "go", "py", "sh", "yaml", "yml", "json", "sql", "md", "toml", "tpl", "c", "txt", "mod",
    "sum", "tsv", "html", "css", "js", "jsonl",
];

/// Whether a code span names a path of the repository.
fn looks_like_path(span: &str) -> bool {
    if span.is_empty()
        || span.contains(char::is_whitespace)
        || span.contains("://")
        || span.starts_with(['-', '~', '/', '.'])
        || span.contains([
            '{', '}', '*', '$', '<', '>', '=', '(', ')', '[', ']', '|', ':', ',',
        ])
    {
        return false;
    }
    // A placeholder word: DIR, KEY, FILE, IMAGE (upper case, with digits or _ allowed).
    if span.split(['/', '.', '-']).any(|word| {
        word.len() > 1
            && word
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
            && word.chars().any(|c| c.is_ascii_uppercase())
    }) {
        return false;
    }
    if span.contains('/') || span.starts_with('@') {
        return !span.starts_with('@');
    }
    has_extension(span)
}

/// Whether the last part of `span` ends with one of [`EXTENSIONS`].
fn has_extension(span: &str) -> bool {
    let last = span.rsplit('/').next().unwrap_or_default();
    last.rsplit_once('.')
        .is_some_and(|(stem, ext)| !stem.is_empty() && EXTENSIONS.contains(&ext))
}

/// Whether `path`, named in a README of `dir`, exists: beside it, from the root, or as the end of
/// one of the repository's `paths`. A `/` path without an extension whose first directory the
/// repository does not have is a name of something else (a resource, a component, a domain).
fn exists(path: &str, dir: &Path, paths: &[String]) -> bool {
    if USERS_FILES.contains(&path) || dir.join(path).exists() || root().join(path).exists() {
        return true;
    }
    let first = path.split('/').next().unwrap_or_default();
    if path.contains('/') && !has_extension(path) {
        let known_dir = paths
            .iter()
            .any(|p| p.split('/').any(|part| part == first) && root().join(p).is_dir());
        if !known_dir {
            return true;
        }
    }
    if path.contains('/')
        && first.contains('.')
        && !first.starts_with('.')
        && !paths.iter().any(|p| p.split('/').any(|part| part == first))
    {
        return true; // a domain: helm.sh/chart, k8s.io/api
    }
    let suffix = format!("/{path}");
    paths.iter().any(|p| p == path || p.ends_with(&suffix))
}

/// The paths `line` names: link targets and path-like code spans.
fn named_paths(line: &str) -> Vec<String> {
    let mut paths = Vec::new();
    // [text](target)
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        let target = after[..end].split('#').next().unwrap_or_default();
        if !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:") {
            paths.push(target.to_owned());
        }
        rest = &after[end..];
    }
    // `span`
    for (i, span) in line.split('`').enumerate() {
        if i % 2 == 1 && looks_like_path(span) {
            paths.push(span.trim_end_matches('/').to_owned());
        }
    }
    paths
}

#[test]
fn every_path_a_readme_names_exists() {
    let (mut found, mut paths) = (Vec::new(), Vec::new());
    walk(root(), &mut found, &mut paths);
    assert!(
        found.len() > 10,
        "found only {} README.md files under {}",
        found.len(),
        root().display()
    );
    let mut missing = Vec::new();
    let mut checked = 0;
    for readme in &found {
        let dir = readme.parent().unwrap();
        let text = std::fs::read_to_string(readme).unwrap();
        let mut in_fence = false;
        for (n, line) in text.lines().enumerate() {
            // Code blocks are commands and output, checked where they are run.
            if line.trim_start().starts_with("```") {
                in_fence = !in_fence;
                continue;
            }
            if in_fence {
                continue;
            }
            for path in named_paths(line) {
                checked += 1;
                if !exists(&path, dir, &paths) {
                    missing.push(format!(
                        "{}:{}: `{path}` is not in the repository (neither beside the README, nor from its root, nor as the end of any path)",
                        readme.strip_prefix(root()).unwrap().display(),
                        n + 1
                    ));
                }
            }
        }
    }
    assert!(checked > 100, "only {checked} paths found in the READMEs");
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

#[test]
fn the_path_rules_see_paths_and_skip_placeholders() {
    for path in [
        "scripts/test.sh",
        "deploy/plans/",
        "rules.yaml",
        "tests/system/conformance.rs",
    ] {
        assert!(looks_like_path(path), "{path}");
    }
    for not in [
        "{dir}/table=writes",
        "~/.cache/shadow-reconciler/image-build-KEY",
        "DIR/.shadow-reconciler.lock",
        "@kubernetes-models/prometheus-operator",
        "go test ./...",
        "--plan FILE",
        "plan::embedded",
        "1.0",
    ] {
        assert!(!looks_like_path(not), "{not}");
    }
    assert_eq!(
        named_paths(
            "see [docs](../docs/image.md#x), `scripts/image.sh` and [site](https://x.io/a)"
        ),
        ["../docs/image.md", "scripts/image.sh"]
    );
}

/// The README says that each directory of its "Where things are" table has a README (but `src/`,
/// whose module docs say it): each one does.
#[test]
fn every_directory_of_the_readmes_table_has_a_readme() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let table = readme
        .split_once("## Where things are")
        .map(|(_, rest)| rest.split("\n## ").next().unwrap_or_default())
        .expect("README.md has a section \"Where things are\"");
    let mut dirs = Vec::new();
    for line in table.lines().filter(|l| l.starts_with("| [")) {
        let first = line.split(" | ").next().unwrap_or_default();
        for path in named_paths(first) {
            dirs.push(path.trim_end_matches('/').to_owned());
        }
    }
    assert!(dirs.len() >= 8, "only {dirs:?} found in the table");
    let missing: Vec<_> = dirs
        .iter()
        .filter(|d| d.as_str() != "src" && !root().join(d).join("README.md").is_file())
        .collect();
    assert!(missing.is_empty(), "no README.md in {missing:?}");
}
