//! The Go code in the docs is compiled code: each Go code block names, on its first line, the
//! file of the repository it is taken from (`// sdk/go/...`), and must appear there verbatim.
//! The files themselves are built, vetted and tested by scripts/test.sh.

use std::path::Path;

fn blocks(markdown: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in markdown.lines() {
        match (&mut current, line.trim_start()) {
            (None, fence) if fence.starts_with("```go") => current = Some(Vec::new()),
            (Some(_), "```") => out.push(current.take().unwrap_or_default().join("\n")),
            (Some(lines), _) => lines.push(line),
            (None, _) => {}
        }
    }
    out
}

#[test]
fn every_go_block_of_the_docs_is_an_excerpt_of_a_compiled_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    for doc in [
        "docs/ingest.md",
        "docs/client-go.md",
        "README.md",
        "sdk/go/README.md",
    ] {
        let text = std::fs::read_to_string(root.join(doc)).unwrap_or_else(|e| panic!("{doc}: {e}"));
        for block in blocks(&text) {
            let (first, body) = block.split_once('\n').unwrap_or((&block, ""));
            let source = first
                .trim()
                .strip_prefix("// ")
                .filter(|p| Path::new(p).extension().is_some_and(|e| e == "go"))
                .unwrap_or_else(|| {
                    panic!("{doc}: a Go block must start with `// <file>.go`, found {first:?}")
                });
            let code = std::fs::read_to_string(root.join(source))
                .unwrap_or_else(|e| panic!("{doc}: the block names {source}: {e}"));
            assert!(
                code.contains(body),
                "{doc}: this block is not an excerpt of {source}:\n{body}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 3, "only {checked} Go blocks found in the docs");
}

/// The adoption of OCM's controller is shown whole: every line of `adopt.go` after its imports.
#[test]
fn the_client_go_page_shows_the_whole_ocm_glue() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let glue =
        std::fs::read_to_string(root.join("sdk/go/examples/ocm/adopt.go")).expect("adopt.go");
    let body = glue
        .split_once("\n)\n")
        .map(|(_, rest)| rest.trim_matches('\n'))
        .expect("adopt.go has an import block");
    let page = std::fs::read_to_string(root.join("docs/client-go.md")).expect("docs/client-go.md");
    assert!(
        blocks(&page)
            .iter()
            .any(|b| b.strip_prefix("// sdk/go/examples/ocm/adopt.go\n") == Some(body)),
        "docs/client-go.md does not show adopt.go whole after its imports"
    );
}
