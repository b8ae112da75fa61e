//! The engine's settings have one carrier. The mode with its rollout groups, ramp and annotation
//! override is a `flag::FlagSpec`, held by the process's `LiveFlag` that every engine reads; the
//! command line becomes one in one place. This test parses every file of `src/` and fails when
//!
//! - a second type carries them: a struct with a `Mode` field and a ramp, an override switch or
//!   rollout groups beside it (the command line's own argument structs, `#[derive(Args)]` or
//!   `Parser`, are the input, not a carrier);
//! - a `FlagSpec` is built from parts outside the flag module anywhere but the command line's
//!   one conversion (`src/cli/options.rs`): a second conversion, or a value built to be dropped.
//!
//! The flag module's own parts of the carrier are not second carriers: the types `FlagSpec`'s
//! fields hold (one rollout group's mode and ramp) and the flag's answer for one object
//! ([`OUTCOME`]: the mode it decided and the groups enforced for it).
//!
//! The tests at the bottom plant each in made-up files and check that it is caught.

use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// The carrier's name and the one file outside `src/flag/` that builds it from parts.
const CARRIER: &str = "FlagSpec";
const CONVERSION: &str = "src/cli/options.rs";

/// The flag's answer for one object, declared in `src/flag/`: an outcome, not settings.
const OUTCOME: &str = "Evaluation";

/// Field names that, beside a `Mode`, make a struct carry the engine's settings.
const SETTINGS_FIELDS: &[&str] = &[
    "ramp",
    "ramp_percent",
    "allow_object_override",
    "enforced_groups",
    "enforce_groups",
    "candidate_groups",
];

fn last_segment(ty: &syn::Type) -> Option<String> {
    match ty {
        syn::Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        syn::Type::Reference(r) => last_segment(&r.elem),
        _ => None,
    }
}

fn is_clap_args(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("derive") && {
            let mut clap = false;
            let _ = a.parse_nested_meta(|m| {
                clap |= m
                    .path
                    .segments
                    .last()
                    .is_some_and(|s| s.ident == "Args" || s.ident == "Parser");
                Ok(())
            });
            clap
        }
    })
}

/// Every type named in a type, generic arguments included (`Vec<GroupRamp>` names both).
fn type_names(ty: &syn::Type, out: &mut Vec<String>) {
    match ty {
        syn::Type::Path(p) => {
            for segment in &p.path.segments {
                out.push(segment.ident.to_string());
                if let syn::PathArguments::AngleBracketed(args) = &segment.arguments {
                    for arg in &args.args {
                        if let syn::GenericArgument::Type(t) = arg {
                            type_names(t, out);
                        }
                    }
                }
            }
        }
        syn::Type::Reference(r) => type_names(&r.elem, out),
        _ => {}
    }
}

/// The types the carrier's fields hold, from its declaration in `src/flag/`.
fn carrier_parts(files: &[(String, String)]) -> Vec<String> {
    let mut parts = Vec::new();
    for (_, text) in files.iter().filter(|(p, _)| p.starts_with("src/flag/")) {
        let Ok(parsed) = syn::parse_file(text) else {
            continue;
        };
        for item in parsed.items {
            if let syn::Item::Struct(s) = item
                && s.ident == CARRIER
            {
                for field in &s.fields {
                    type_names(&field.ty, &mut parts);
                }
            }
        }
    }
    parts
}

struct Finder<'a> {
    file: &'a str,
    /// The carrier's parts (exempt in `src/flag/` only).
    parts: &'a [String],
    problems: Vec<String>,
}

impl<'ast> Visit<'ast> for Finder<'_> {
    fn visit_item_struct(&mut self, item: &'ast syn::ItemStruct) {
        let fields: Vec<(String, Option<String>)> = item
            .fields
            .iter()
            .map(|f| {
                (
                    f.ident
                        .as_ref()
                        .map(ToString::to_string)
                        .unwrap_or_default(),
                    last_segment(&f.ty),
                )
            })
            .collect();
        let has_mode = fields.iter().any(|(_, ty)| ty.as_deref() == Some("Mode"));
        let settings: Vec<&str> = fields
            .iter()
            .filter(|(name, ty)| {
                SETTINGS_FIELDS.contains(&name.as_str()) || ty.as_deref() == Some("Ramp")
            })
            .map(|(name, _)| name.as_str())
            .collect();
        let flag_part = self.file.starts_with("src/flag/")
            && (item.ident == OUTCOME || self.parts.iter().any(|p| item.ident == p));
        if has_mode
            && !settings.is_empty()
            && item.ident != CARRIER
            && !flag_part
            && !is_clap_args(&item.attrs)
        {
            self.problems.push(format!(
                "{}: struct {} carries the engine's mode with {}: a second settings type; use flag::{CARRIER} (held by the LiveFlag the engines read)",
                self.file,
                item.ident,
                settings.join(", ")
            ));
        }
        syn::visit::visit_item_struct(self, item);
    }

    fn visit_expr_struct(&mut self, expr: &'ast syn::ExprStruct) {
        let built_here = expr
            .path
            .segments
            .last()
            .is_some_and(|s| s.ident == CARRIER);
        // `FlagSpec { mode, ..FlagSpec::default() }` in a controller's own code would count too;
        // in `src/` only the flag module and the command line's conversion build one.
        if built_here && !self.file.starts_with("src/flag/") && self.file != CONVERSION {
            self.problems.push(format!(
                "{}: builds a {CARRIER} from parts: only {CONVERSION} converts the command line into one (a second conversion, or a value built to be dropped)",
                self.file
            ));
        }
        syn::visit::visit_expr_struct(self, expr);
    }
}

/// The problems of `files` (path from the repository root, text).
fn check(files: &[(String, String)]) -> Vec<String> {
    let parts = carrier_parts(files);
    let mut problems = Vec::new();
    for (path, text) in files {
        let parsed = match syn::parse_file(text) {
            Ok(parsed) => parsed,
            Err(e) => {
                problems.push(format!("{path}: cannot parse: {e}"));
                continue;
            }
        };
        let mut finder = Finder {
            file: path,
            parts: &parts,
            problems: Vec::new(),
        };
        finder.visit_file(&parsed);
        problems.extend(finder.problems);
    }
    problems
}

fn rust_files(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let relative = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            out.push((relative, std::fs::read_to_string(&path).unwrap()));
        }
    }
}

#[test]
fn the_engines_settings_have_one_carrier_and_one_conversion() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), root, &mut files);
    assert!(
        files.iter().any(|(p, _)| p == CONVERSION) && files.len() > 50,
        "the walk found {} files of src/",
        files.len()
    );
    let problems = check(&files);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The carrier exists, and the conversion builds it.
    let conversion = &files.iter().find(|(p, _)| p == CONVERSION).unwrap().1;
    assert!(
        conversion.contains(&format!("{CARRIER} {{")),
        "{CONVERSION} no longer builds the {CARRIER}"
    );
}

#[test]
fn a_second_settings_type_is_caught() {
    let files = vec![(
        "src/engine/settings.rs".to_owned(),
        "pub struct EngineSettings { pub mode: crate::vocab::Mode, pub ramp: Ramp, pub other: u8 }\n\
         pub struct Record { pub mode: Mode, pub plan: String }\n\
         #[derive(clap::Args)] pub struct RunArgs { mode: Mode, enforce_groups: Vec<String> }\n\
         pub struct Override<'a> { mode: &'a Mode, allow_object_override: bool }"
            .to_owned(),
    )];
    let problems = check(&files);
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(problems[0].contains("struct EngineSettings carries the engine's mode with ramp"));
    assert!(problems[1].contains("struct Override carries"));
}

#[test]
fn a_second_conversion_is_caught() {
    let files = vec![
        (
            "src/scenario/mod.rs".to_owned(),
            "fn f(s: &Settings) -> FlagSpec { crate::flag::FlagSpec { mode: s.mode, ..FlagSpec::default() } }"
                .to_owned(),
        ),
        (
            CONVERSION.to_owned(),
            "fn g() -> FlagSpec { FlagSpec { mode: Mode::Off, ..FlagSpec::default() } }".to_owned(),
        ),
        (
            "src/flag/mod.rs".to_owned(),
            "impl Default for FlagSpec { fn default() -> Self { Self { mode: Mode::Shadow } } }\n\
             fn parse() -> FlagSpec { FlagSpec { mode: Mode::Off } }"
                .to_owned(),
        ),
    ];
    let problems = check(&files);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(problems[0].starts_with("src/scenario/mod.rs: builds a FlagSpec from parts"));
}

#[test]
fn the_carriers_parts_are_exempt_in_the_flag_module_only() {
    let part = "pub struct GroupRamp { pub group: GroupRef, pub mode: Mode, pub ramp: Ramp }\n\
                pub struct Evaluation { pub mode: Mode, pub enforced_groups: Vec<String> }";
    let files = vec![
        (
            "src/flag/mod.rs".to_owned(),
            format!("pub struct FlagSpec {{ pub mode: Mode, pub groups: Vec<GroupRamp> }}\n{part}"),
        ),
        ("src/engine/mod.rs".to_owned(), part.to_owned()),
    ];
    let problems = check(&files);
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(
        problems
            .iter()
            .all(|p| p.starts_with("src/engine/mod.rs: struct "))
    );
}
