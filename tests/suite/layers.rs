//! The crate's layers, held. The layer table is written once, in docs/design.md ("Layers"); this
//! test reads it and parses every file of `src/` with `syn`, then fails when
//!
//! - a module imports (or names by path, in code or inside a macro) a module of its own layer or
//!   of a layer above it, or is missing from the table;
//! - the submodules of one module refer to each other in a cycle (a parent and its children may
//!   use each other: the parent is the module's face, the children its parts);
//! - a file is over 600 lines without a comment saying why ("over 600 lines: ..."), in `src/`
//!   and in the Go module.
//!
//! The checker is a function of the files' text, so the tests at the bottom plant violations in
//! small made-up trees and check that each is caught.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// The longest a file of `src/` may be without saying why.
const MAX_LINES: usize = 600;

/// Which crate a module belongs to: the library, or the binary (`src/main.rs` and `src/cli/`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Krate {
    Lib,
    Bin,
}

/// A module: its crate and its path from the crate root.
type Module = (Krate, Vec<String>);

/// One reference from a file to a module, where it was written.
#[derive(Debug)]
struct Edge {
    from: Module,
    to: Module,
    file: PathBuf,
    line: usize,
}

/// The layer table: each top-level module's layer (the binary's `cli` included).
fn parse_layers(design: &str) -> Result<BTreeMap<String, usize>, String> {
    let section = design
        .split("\n## ")
        .find(|s| s.starts_with("Layers"))
        .ok_or("docs/design.md has no \"## Layers\" section")?;
    // The crate's table comes first; the Go package's is in its own subsection.
    let section = section.split("\n### ").next().unwrap_or_default();
    let mut layers = BTreeMap::new();
    for (n, line) in section.lines().enumerate() {
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').collect();
        if !line.trim_start().starts_with('|') || cells.len() < 2 {
            continue;
        }
        let Ok(layer) = cells[0].trim().parse::<usize>() else {
            continue;
        };
        let names: Vec<&str> = cells[1].split('`').skip(1).step_by(2).collect();
        if names.is_empty() {
            return Err(format!(
                "Layers table, row {}: no `module` in the second column",
                n + 1
            ));
        }
        for name in names {
            if let Some(earlier) = layers.insert(name.to_owned(), layer) {
                return Err(format!(
                    "Layers table: `{name}` is in layers {earlier} and {layer}"
                ));
            }
        }
    }
    if layers.is_empty() {
        return Err("the Layers section of docs/design.md has no table rows".into());
    }
    Ok(layers)
}

/// The module a file of `src/` defines (relative path, `/`-separated).
fn module_of(rel: &str) -> Option<Module> {
    let stem = rel.strip_suffix(".rs")?;
    let mut parts: Vec<String> = stem.split('/').map(str::to_owned).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    match parts.first().map(String::as_str) {
        Some("lib") if parts.len() == 1 => Some((Krate::Lib, Vec::new())),
        Some("main") if parts.len() == 1 => Some((Krate::Bin, Vec::new())),
        Some("cli") => Some((Krate::Bin, parts)),
        Some(_) => Some((Krate::Lib, parts)),
        None => None,
    }
}

/// Collects the module paths a file names: `use` trees, paths in code, and `crate::`/`super::`
/// sequences inside macro invocations.
struct Refs<'a> {
    krate: Krate,
    /// The module of the file, then of each inline `mod` block entered.
    here: Vec<String>,
    known: &'a BTreeSet<Module>,
    found: Vec<(Module, usize)>,
}

impl Refs<'_> {
    /// Resolves a path's leading segments to a module of the crates, if it names one.
    fn resolve(&self, segments: &[String], line: usize) -> Option<(Module, usize)> {
        let (krate, mut base, rest): (Krate, Vec<String>, &[String]) =
            match segments.first().map(String::as_str)? {
                "crate" => (self.krate, Vec::new(), &segments[1..]),
                "shadow_reconciler" if self.krate == Krate::Bin => {
                    (Krate::Lib, Vec::new(), &segments[1..])
                }
                "self" => (self.krate, self.here.clone(), &segments[1..]),
                "super" => {
                    let mut base = self.here.clone();
                    let mut rest = segments;
                    while rest.first().is_some_and(|s| s == "super") {
                        base.pop()?;
                        rest = &rest[1..];
                    }
                    (self.krate, base, rest)
                }
                first => {
                    // A child module named without `self::`.
                    let mut child = self.here.clone();
                    child.push(first.to_owned());
                    if !self.known.contains(&(self.krate, child)) {
                        return None;
                    }
                    (self.krate, self.here.clone(), segments)
                }
            };
        // The longest prefix that is a module of the tree.
        let mut target = base.clone();
        for segment in rest {
            base.push(segment.clone());
            if self.known.contains(&(krate, base.clone())) {
                target.clone_from(&base);
            } else {
                break;
            }
        }
        Some(((krate, target), line))
    }

    fn record(&mut self, segments: &[String], line: usize) {
        if let Some(found) = self.resolve(segments, line) {
            self.found.push(found);
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                prefix.push(n.ident.to_string());
                self.record(prefix, n.ident.span().start().line);
                prefix.pop();
            }
            syn::UseTree::Rename(r) => {
                prefix.push(r.ident.to_string());
                self.record(prefix, r.ident.span().start().line);
                prefix.pop();
            }
            syn::UseTree::Glob(g) => self.record(prefix, g.star_token.spans[0].start().line),
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }

    /// String literals holding a path (`"crate::a::b"`), as attributes take them.
    fn string_paths(&mut self, stream: TokenStream) {
        for token in stream {
            match token {
                TokenTree::Group(g) => self.string_paths(g.stream()),
                TokenTree::Literal(lit) => {
                    let text = lit.to_string();
                    let Some(inner) = text.strip_prefix('"').and_then(|t| t.strip_suffix('"'))
                    else {
                        continue;
                    };
                    let segments: Vec<String> = inner.split("::").map(str::to_owned).collect();
                    let is_path = segments.len() > 1
                        && segments.iter().all(|s| {
                            !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_')
                        });
                    if is_path {
                        self.record(&segments, lit.span().start().line);
                    }
                }
                _ => {}
            }
        }
    }

    /// `crate :: a :: b` (and `super`, `self`, `shadow_reconciler`) sequences in a token stream.
    fn tokens(&mut self, stream: TokenStream) {
        let tokens: Vec<TokenTree> = stream.into_iter().collect();
        let mut i = 0;
        while i < tokens.len() {
            if let TokenTree::Group(g) = &tokens[i] {
                self.tokens(g.stream());
                i += 1;
                continue;
            }
            let TokenTree::Ident(first) = &tokens[i] else {
                i += 1;
                continue;
            };
            let name = first.to_string();
            if !matches!(
                name.as_str(),
                "crate" | "super" | "self" | "shadow_reconciler"
            ) {
                i += 1;
                continue;
            }
            let mut segments = vec![name];
            let mut j = i + 1;
            while let (
                Some(TokenTree::Punct(a)),
                Some(TokenTree::Punct(b)),
                Some(TokenTree::Ident(next)),
            ) = (tokens.get(j), tokens.get(j + 1), tokens.get(j + 2))
            {
                if a.as_char() != ':' || b.as_char() != ':' {
                    break;
                }
                segments.push(next.to_string());
                j += 3;
            }
            if segments.len() > 1 {
                self.record(&segments, first.span().start().line);
            }
            i = j;
        }
    }
}

impl<'ast> Visit<'ast> for Refs<'_> {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if let Some(first) = path.segments.first() {
            self.record(&segments, first.ident.span().start().line);
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {
        // `pub(crate)`, `pub(super)`, `pub(in path)`: who may see an item, not a use.
    }

    fn visit_attribute(&mut self, attr: &'ast syn::Attribute) {
        // Paths written as strings: `#[serde(with = "crate::…")]`, `#[schemars(schema_with = …)]`.
        if let syn::Meta::List(list) = &attr.meta {
            self.string_paths(list.tokens.clone());
        }
        syn::visit::visit_attribute(self, attr);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.tokens(mac.tokens.clone());
        syn::visit::visit_macro(self, mac);
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if item.content.is_some() {
            self.here.push(item.ident.to_string());
            syn::visit::visit_item_mod(self, item);
            self.here.pop();
        }
    }
}

/// Every violation of the layers in `files` (relative path under `src/`, text), as messages.
fn check(files: &[(String, String)], layers: &BTreeMap<String, usize>) -> Vec<String> {
    let mut problems = Vec::new();
    let mut known = BTreeSet::new();
    for (rel, _) in files {
        if let Some(module) = module_of(rel) {
            known.insert(module);
        }
    }
    let mut edges = Vec::new();
    for (rel, text) in files {
        let Some((krate, here)) = module_of(rel) else {
            continue;
        };
        let lines = text.lines().count();
        let explained = text.lines().any(|l| {
            let l = l.trim_start();
            l.starts_with("//") && l.to_lowercase().contains("over 600 lines")
        });
        if lines > MAX_LINES && !explained {
            problems.push(format!(
                "src/{rel}: {lines} lines, over {MAX_LINES}, and no comment saying why (\"over 600 lines: ...\")"
            ));
        }
        let file = match syn::parse_file(text) {
            Ok(file) => file,
            Err(e) => {
                let at = e.span().start();
                problems.push(format!(
                    "src/{rel}:{}:{}: cannot parse: {e}",
                    at.line,
                    at.column + 1
                ));
                continue;
            }
        };
        let mut refs = Refs {
            krate,
            here: here.clone(),
            known: &known,
            found: Vec::new(),
        };
        refs.visit_file(&file);
        for ((to_krate, to), line) in refs.found {
            edges.push(Edge {
                from: (krate, here.clone()),
                to: (to_krate, to),
                file: Path::new("src").join(rel),
                line,
            });
        }
    }
    // Every top-level module has a layer.
    for (krate, path) in &known {
        if let Some(top) = path.first()
            && !layers.contains_key(top)
        {
            let _ = krate;
            problems.push(format!(
                "module `{top}` is not in the Layers table of docs/design.md"
            ));
        }
    }
    problems.sort();
    problems.dedup();
    // The crate root holds only the module declarations: naming it (`use crate::*`, `use crate
    // as c`) would hide which modules a file uses.
    for edge in &edges {
        if edge.to.1.is_empty() && !edge.from.1.is_empty() {
            problems.push(format!(
                "{}:{}: uses the crate root itself; name the module instead",
                edge.file.display(),
                edge.line
            ));
        }
    }
    // Between top-level modules: only downward.
    for edge in &edges {
        let (Some(from), Some(to)) = (edge.from.1.first(), edge.to.1.first()) else {
            continue;
        };
        if edge.from.0 == edge.to.0 && from == to {
            continue;
        }
        let (Some(&lf), Some(&lt)) = (layers.get(from), layers.get(to)) else {
            continue;
        };
        if lt >= lf {
            problems.push(format!(
                "{}:{}: `{from}` (layer {lf}) uses `{to}` (layer {lt}): a module may use only layers below its own",
                edge.file.display(),
                edge.line
            ));
        }
    }
    problems.extend(sibling_cycles(&edges));
    problems
}

/// Within a module: the children of each module form no cycle.
fn sibling_cycles(edges: &[Edge]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut graph: BTreeMap<Module, BTreeMap<Module, (PathBuf, usize)>> = BTreeMap::new();
    for edge in edges {
        if edge.from.0 != edge.to.0 {
            continue;
        }
        let (a, b) = (&edge.from.1, &edge.to.1);
        let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
        if common == 0 || common == a.len() || common == b.len() {
            continue; // top-level modules (held by their layers), one module, a parent and its descendant
        }
        let from = (edge.from.0, a[..=common].to_vec());
        let to = (edge.to.0, b[..=common].to_vec());
        graph
            .entry(from)
            .or_default()
            .entry(to)
            .or_insert((edge.file.clone(), edge.line));
    }
    for cycle in cycles(&graph) {
        let steps: Vec<String> = cycle
            .windows(2)
            .map(|w| {
                let (file, line) = &graph[&w[0]][&w[1]];
                format!(
                    "{} -> {} ({}:{line})",
                    w[0].1.join("::"),
                    w[1].1.join("::"),
                    file.display()
                )
            })
            .collect();
        problems.push(format!("import cycle: {}", steps.join(", ")));
    }
    problems
}

/// One cycle per strongly connected part of `graph` that has one, each closed (first = last).
fn cycles(graph: &BTreeMap<Module, BTreeMap<Module, (PathBuf, usize)>>) -> Vec<Vec<Module>> {
    let mut found = Vec::new();
    let mut done: BTreeSet<Module> = BTreeSet::new();
    for start in graph.keys() {
        if done.contains(start) {
            continue;
        }
        // Depth-first search from `start` for a path back to a node on the current stack.
        let mut stack: Vec<(Module, Vec<Module>)> = vec![(start.clone(), next(graph, start))];
        let mut on_stack: Vec<Module> = vec![start.clone()];
        while let Some((node, mut rest)) = stack.pop() {
            if let Some(child) = rest.pop() {
                stack.push((node, rest));
                if let Some(at) = on_stack.iter().position(|m| *m == child) {
                    let mut cycle = on_stack[at..].to_vec();
                    cycle.push(child);
                    found.push(cycle);
                    continue;
                }
                if done.contains(&child) {
                    continue;
                }
                on_stack.push(child.clone());
                let children = next(graph, &child);
                stack.push((child, children));
            } else {
                on_stack.pop();
                done.insert(node);
            }
        }
    }
    found
}

fn next(graph: &BTreeMap<Module, BTreeMap<Module, (PathBuf, usize)>>, m: &Module) -> Vec<Module> {
    graph
        .get(m)
        .map(|t| t.keys().cloned().collect())
        .unwrap_or_default()
}

/// The `.rs` files under `dir`, relative to it.
fn sources(dir: &Path) -> Vec<(String, String)> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path
                    .strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                files.push((rel, text));
            }
        }
    }
    files.sort();
    files
}

/// The Go package's layer table: the "### The Go package" subsection of "## Layers".
fn parse_go_layers(design: &str) -> Result<BTreeMap<String, usize>, String> {
    let section = design
        .split("\n## ")
        .find(|s| s.starts_with("Layers"))
        .and_then(|s| s.split("\n### ").find(|s| s.starts_with("The Go package")))
        .ok_or("docs/design.md has no \"### The Go package\" subsection under \"## Layers\"")?;
    parse_layers(&format!("\n## Layers\n{section}"))
}

/// The module's own packages a Go file imports (paths relative to the module), with their lines.
fn go_imports(text: &str, module: &str) -> Vec<(String, usize)> {
    let prefix = format!("\"{module}/");
    let mut found = Vec::new();
    let mut in_block = false;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.starts_with("import (") {
            in_block = true;
            continue;
        }
        if in_block && line == ")" {
            in_block = false;
            continue;
        }
        let spec = if in_block {
            line
        } else if let Some(rest) = line.strip_prefix("import ") {
            rest
        } else {
            continue;
        };
        if let Some(at) = spec.find(&prefix) {
            let path = &spec[at + prefix.len()..];
            if let Some(end) = path.find('"') {
                found.push((path[..end].to_owned(), n + 1));
            }
        }
    }
    found
}

/// Every violation of the Go layers: `files` are (package dir relative to the module, file name,
/// text) of the module's non-test files.
fn check_go(
    files: &[(String, String, String)],
    module: &str,
    layers: &BTreeMap<String, usize>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for (package, name, text) in files {
        let lines = text.lines().count();
        let explained = text.lines().any(|l| {
            let l = l.trim_start();
            l.starts_with("//") && l.to_lowercase().contains("over 600 lines")
        });
        if lines > MAX_LINES && !explained {
            problems.push(format!(
                "sdk/go/{package}/{name}: {lines} lines, over {MAX_LINES}, and no comment saying why (\"over 600 lines: ...\")"
            ));
        }
        let Some(&own) = layers.get(package) else {
            problems.push(format!(
                "sdk/go/{package}: package not in the Go table of docs/design.md"
            ));
            continue;
        };
        for (import, line) in go_imports(text, module) {
            match layers.get(&import) {
                Some(&theirs) if theirs < own => {}
                Some(&theirs) => problems.push(format!(
                    "sdk/go/{package}/{name}:{line}: `{package}` (layer {own}) imports `{import}` (layer {theirs}): a package may import only layers below its own"
                )),
                None => problems.push(format!(
                    "sdk/go/{package}/{name}:{line}: imports `{import}`, which is not in the Go table of docs/design.md"
                )),
            }
        }
    }
    problems
}

/// The Go module's non-test files: (package dir, file name, text).
fn go_sources(root: &Path) -> Vec<(String, String, String)> {
    let mut files = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "go") && !name.ends_with("_test.go") {
                let package = d
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                files.push((package, name, text));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn the_go_package_keeps_its_layers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let design = std::fs::read_to_string(root.join("docs/design.md")).unwrap();
    let layers = parse_go_layers(&design).unwrap_or_else(|e| panic!("docs/design.md: {e}"));
    let go_mod = std::fs::read_to_string(root.join("sdk/go/go.mod")).unwrap();
    let module = go_mod
        .lines()
        .find_map(|l| l.strip_prefix("module "))
        .expect("sdk/go/go.mod names its module")
        .trim();
    let files = go_sources(&root.join("sdk/go"));
    assert!(
        files.len() > 10,
        "only {} Go files found under sdk/go",
        files.len()
    );
    let problems = check_go(&files, module, &layers);
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
    // The check can fail: the same files with one upward import planted.
    let mut planted = files.clone();
    let plan = planted
        .iter_mut()
        .find(|(p, _, _)| p == "plan")
        .expect("a plan package");
    plan.2 = plan
        .2
        .replacen("import (", &format!("import (\n\t\"{module}/shadow\""), 1);
    let problems = check_go(&planted, module, &layers);
    assert!(
        problems.len() == 1 && problems[0].contains("`plan` (layer 1) imports `shadow` (layer 3)"),
        "{problems:#?}"
    );
    // And a file grown past the size rule.
    let mut long = files.clone();
    let plan = long
        .iter_mut()
        .find(|(p, _, _)| p == "plan")
        .expect("a plan package");
    plan.2.push_str(&"// .\n".repeat(MAX_LINES));
    let problems = check_go(&long, module, &layers);
    assert!(
        problems.len() == 1 && problems[0].contains("over 600, and no comment saying why"),
        "{problems:#?}"
    );
}

fn repository_layers() -> BTreeMap<String, usize> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let design = std::fs::read_to_string(root.join("docs/design.md")).unwrap();
    parse_layers(&design).unwrap_or_else(|e| panic!("docs/design.md: {e}"))
}

#[test]
fn src_keeps_its_layers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = sources(&root.join("src"));
    assert!(
        files.len() > 50,
        "only {} files found under src/",
        files.len()
    );
    let layers = repository_layers();
    let problems = check(&files, &layers);
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn every_layered_module_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = sources(&root.join("src"));
    let tops: BTreeSet<String> = files
        .iter()
        .filter_map(|(rel, _)| module_of(rel)?.1.first().cloned())
        .collect();
    for name in repository_layers().keys() {
        assert!(
            tops.contains(name),
            "the Layers table names `{name}`, which src/ does not have"
        );
    }
}

/// A made-up crate: vocab (0) < plan (1) < engine (2) < cli (3).
fn tiny(extra: &[(&str, &str)]) -> (Vec<(String, String)>, BTreeMap<String, usize>) {
    let mut files: Vec<(String, String)> = vec![
        (
            "lib.rs".into(),
            "pub mod vocab; pub mod plan; pub mod engine;".into(),
        ),
        (
            "main.rs".into(),
            "mod cli; fn main() { cli::main() }".into(),
        ),
        (
            "cli/mod.rs".into(),
            "use shadow_reconciler::engine::Engine; pub fn main() {}".into(),
        ),
        ("vocab/mod.rs".into(), "pub struct OpId;".into()),
        (
            "plan/mod.rs".into(),
            "use crate::vocab::OpId; mod a; mod b;".into(),
        ),
        ("plan/a.rs".into(), "use super::b::B; pub struct A;".into()),
        ("plan/b.rs".into(), "pub struct B;".into()),
        (
            "engine/mod.rs".into(),
            "use crate::plan::Plan; pub struct Engine;".into(),
        ),
    ];
    for (path, text) in extra {
        files.retain(|(p, _)| p != path);
        files.push(((*path).into(), (*text).into()));
    }
    let layers = parse_layers(
        "# x\n\n## Layers\n\n| layer | modules | what |\n|---|---|---|\n| 3 | `cli` | top |\n| 2 | `engine` | e |\n| 1 | `plan` | p |\n| 0 | `vocab` | v |\n",
    )
    .unwrap();
    (files, layers)
}

#[test]
fn a_clean_tree_passes() {
    let (files, layers) = tiny(&[]);
    assert_eq!(check(&files, &layers), Vec::<String>::new());
}

#[test]
fn an_upward_import_fails() {
    let (files, layers) = tiny(&[("vocab/mod.rs", "use crate::plan::Plan; pub struct OpId;")]);
    let problems = check(&files, &layers);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].starts_with("src/vocab/mod.rs:1: `vocab` (layer 0) uses `plan` (layer 1)"),
        "{}",
        problems[0]
    );
}

#[test]
fn upward_paths_in_code_and_macros_fail() {
    let (files, layers) = tiny(&[(
        "plan/b.rs",
        "pub struct B;\nfn f() { let _ = crate::engine::Engine; }\nfn g() { println!(\"{}\", crate::engine::NAME); }",
    )]);
    let problems = check(&files, &layers);
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(
        problems
            .iter()
            .all(|p| p.contains("`plan` (layer 1) uses `engine` (layer 2)")),
        "{problems:#?}"
    );
    assert!(
        problems[0].starts_with("src/plan/b.rs:2:") && problems[1].starts_with("src/plan/b.rs:3:"),
        "{problems:#?}"
    );
}

#[test]
fn a_same_layer_import_and_the_binary_are_checked() {
    let (files, mut layers) = tiny(&[
        (
            "engine/mod.rs",
            "use crate::plan::Plan; use crate::other::X;",
        ),
        ("other.rs", ""),
    ]);
    layers.insert("other".into(), 2);
    let problems = check(&files, &layers);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].contains("`engine` (layer 2) uses `other` (layer 2)"),
        "{problems:#?}"
    );

    // The binary sits on top; the library may not reach it, and it is layered like the rest.
    let (files, mut layers) = tiny(&[]);
    layers.insert("cli".into(), 1);
    let problems = check(&files, &layers);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("`cli` (layer 1) uses `engine` (layer 2)")),
        "{problems:#?}"
    );
}

#[test]
fn root_globs_aliases_and_attribute_paths_are_checked() {
    for text in [
        "use crate::*;",
        "use crate as c; fn f() { let _ = c::engine::Engine; }",
    ] {
        let (files, layers) = tiny(&[("plan/b.rs", text)]);
        let problems = check(&files, &layers);
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with("src/plan/b.rs:1: uses the crate root")),
            "{text}: {problems:#?}"
        );
    }
    let (files, layers) = tiny(&[(
        "plan/b.rs",
        "#[derive(Deserialize)]\npub struct B {\n    #[serde(with = \"crate::engine::codec\")]\n    x: u8,\n}",
    )]);
    let problems = check(&files, &layers);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].starts_with("src/plan/b.rs:3: `plan` (layer 1) uses `engine` (layer 2)"),
        "{}",
        problems[0]
    );
}

#[test]
fn a_cycle_between_siblings_fails() {
    let (files, layers) = tiny(&[("plan/b.rs", "use super::a::A; pub struct B;")]);
    let problems = check(&files, &layers);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].starts_with("import cycle: plan::a -> plan::b"),
        "{}",
        problems[0]
    );
    // A parent and its children may use each other.
    let (files, layers) = tiny(&[("plan/b.rs", "use super::OpIdAlias; pub struct B;")]);
    assert_eq!(check(&files, &layers), Vec::<String>::new());
}

#[test]
fn unlisted_modules_and_long_files_fail() {
    let (files, layers) = tiny(&[("stray.rs", "pub fn f() {}")]);
    assert_eq!(
        check(&files, &layers),
        vec!["module `stray` is not in the Layers table of docs/design.md".to_owned()]
    );
    let long = "fn f() {}\n".repeat(MAX_LINES + 1);
    let (files, layers) = tiny(&[("plan/b.rs", &long)]);
    let problems = check(&files, &layers);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].starts_with("src/plan/b.rs: 601 lines"),
        "{}",
        problems[0]
    );
    let explained = format!("// Over 600 lines: one table.\n{long}");
    let (files, layers) = tiny(&[("plan/b.rs", &explained)]);
    assert_eq!(check(&files, &layers), Vec::<String>::new());
    // The reason is a comment, not any text that happens to say it.
    let in_a_string = format!("const WHY: &str = \"over 600 lines\";\n{long}");
    let (files, layers) = tiny(&[("plan/b.rs", &in_a_string)]);
    assert_eq!(check(&files, &layers).len(), 1);
}
