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
//! The rollout group names and the dataset's options have one home each too. It fails when
//!
//! - a function outside [`GROUPS`] parses `PLAN/GROUP` itself: it splits text on `/` while it
//!   speaks of plans and groups (the names are parsed by `GroupRef`'s one parser and resolved by
//!   `flag::resolve`, the one resolver);
//! - a second set of the dataset's defaults is written: literal values for two or more of the
//!   carrier's fields ([`DATASET_CARRIER`]'s, read from its declaration) anywhere but its
//!   `Default`, or a literal default on a `--parquet-*` option (the command line takes its
//!   defaults from the carrier's).
//!
//! The tests at the bottom plant each in made-up files and check that it is caught.

use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// The carrier's name and the one file outside `src/flag/` that builds it from parts.
const CARRIER: &str = "FlagSpec";
const CONVERSION: &str = "src/cli/options.rs";

/// The flag's answer for one object, declared in `src/flag/`: an outcome, not settings.
const OUTCOME: &str = "Evaluation";

/// The home of rollout group names: their parser and their resolver.
const GROUPS: &str = "src/flag/groups.rs";

/// The carrier of the dataset's options, whose `Default` is the one set of their defaults.
const DATASET_CARRIER: &str = "SinkOptions";
const DATASET_FILE: &str = "src/dataset/open.rs";

/// The methods that cut text at a separator.
const SPLITS: &[&str] = &[
    "split",
    "rsplit",
    "split_once",
    "rsplit_once",
    "splitn",
    "rsplitn",
];

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

/// The field names of the dataset's carrier, from its declaration.
fn dataset_fields(files: &[(String, String)]) -> Vec<String> {
    let mut fields = Vec::new();
    for (_, text) in files.iter().filter(|(p, _)| p == DATASET_FILE) {
        let Ok(parsed) = syn::parse_file(text) else {
            continue;
        };
        for item in parsed.items {
            if let syn::Item::Struct(s) = item
                && s.ident == DATASET_CARRIER
            {
                fields.extend(
                    s.fields
                        .iter()
                        .filter_map(|f| f.ident.as_ref().map(ToString::to_string)),
                );
            }
        }
    }
    fields
}

/// Whether an expression is a value written down: literals only (`64 << 20`,
/// `Duration::from_secs(60)`, `PathBuf::from("spool")`), nothing read from elsewhere.
fn written_down(expr: &syn::Expr) -> bool {
    match expr {
        syn::Expr::Lit(_) => true,
        syn::Expr::Paren(e) => written_down(&e.expr),
        syn::Expr::Unary(e) => written_down(&e.expr),
        syn::Expr::Binary(e) => written_down(&e.left) && written_down(&e.right),
        syn::Expr::Cast(e) => written_down(&e.expr),
        syn::Expr::Call(call) => {
            matches!(&*call.func, syn::Expr::Path(_))
                && !call.args.is_empty()
                && call.args.iter().all(written_down)
        }
        syn::Expr::MethodCall(call) => {
            written_down(&call.receiver) && call.args.iter().all(written_down)
        }
        _ => false,
    }
}

/// Whether a method call cuts text at `/`.
#[derive(Default)]
struct SlashSplits {
    found: bool,
    idents: Vec<String>,
}

impl<'ast> Visit<'ast> for SlashSplits {
    fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
        let slash = call.args.iter().any(|arg| match arg {
            syn::Expr::Lit(lit) => match &lit.lit {
                syn::Lit::Char(c) => c.value() == '/',
                syn::Lit::Str(s) => s.value() == "/",
                _ => false,
            },
            _ => false,
        });
        self.found |= slash && SPLITS.iter().any(|m| call.method == m);
        syn::visit::visit_expr_method_call(self, call);
    }

    fn visit_ident(&mut self, ident: &'ast proc_macro2::Ident) {
        self.idents.push(ident.to_string().to_lowercase());
    }
}

struct Finder<'a> {
    file: &'a str,
    /// The carrier's parts (exempt in `src/flag/` only).
    parts: &'a [String],
    /// The dataset carrier's fields.
    dataset: &'a [String],
    /// Inside the dataset carrier's `Default`.
    in_dataset_default: bool,
    problems: Vec<String>,
}

impl Finder<'_> {
    /// A function that splits text at `/` while speaking of plans and groups parses group names.
    fn check_group_parser(&mut self, name: &syn::Ident, body: &dyn Fn(&mut SlashSplits)) {
        if self.file == GROUPS {
            return;
        }
        let mut splits = SlashSplits::default();
        body(&mut splits);
        let speaks = |word: &str| splits.idents.iter().any(|i| i.contains(word));
        if splits.found && speaks("plan") && speaks("group") {
            self.problems.push(format!(
                "{}: fn {name} splits text at `/` while it speaks of plans and groups: a second parser of rollout group names; parse them with `GroupRef` (its `FromStr`) and resolve them with `flag::resolve` ({GROUPS})",
                self.file
            ));
        }
    }

    /// Literal values for two or more of the dataset carrier's fields: a second set of defaults.
    fn check_dataset_defaults(&mut self, what: &str, written: &[String]) {
        if written.len() >= 2 && !self.in_dataset_default {
            self.problems.push(format!(
                "{}: {what} writes down {}: a second set of the dataset's defaults; take them from {DATASET_CARRIER}::default() ({DATASET_FILE})",
                self.file,
                written.join(", ")
            ));
        }
    }
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
        if is_clap_args(&item.attrs) {
            self.check_clap_defaults(item);
        }
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
        let written: Vec<String> = expr
            .fields
            .iter()
            .filter_map(|f| match &f.member {
                syn::Member::Named(name) if written_down(&f.expr) => Some(name.to_string()),
                _ => None,
            })
            .filter(|name| self.dataset.contains(name))
            .collect();
        let what = expr
            .path
            .segments
            .last()
            .map_or_else(String::new, |s| format!("a {} built here", s.ident));
        self.check_dataset_defaults(&what, &written);
        syn::visit::visit_expr_struct(self, expr);
    }

    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        let default_of_carrier =
            item.trait_.as_ref().is_some_and(|(_, path, _)| {
                path.segments.last().is_some_and(|s| s.ident == "Default")
            }) && last_segment(&item.self_ty).as_deref() == Some(DATASET_CARRIER);
        let outer = self.in_dataset_default;
        self.in_dataset_default = outer || (default_of_carrier && self.file == DATASET_FILE);
        syn::visit::visit_item_impl(self, item);
        self.in_dataset_default = outer;
    }

    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        self.check_group_parser(&item.sig.ident, &|v| v.visit_item_fn(item));
        syn::visit::visit_item_fn(self, item);
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        self.check_group_parser(&item.sig.ident, &|v| v.visit_impl_item_fn(item));
        syn::visit::visit_impl_item_fn(self, item);
    }
}

impl Finder<'_> {
    /// A `--parquet-*` option with a literal default: the command line's own set of defaults.
    fn check_clap_defaults(&mut self, item: &syn::ItemStruct) {
        for field in &item.fields {
            let Some(name) = field.ident.as_ref().map(ToString::to_string) else {
                continue;
            };
            if !name.starts_with("parquet_") {
                continue;
            }
            for attr in field.attrs.iter().filter(|a| a.path().is_ident("arg")) {
                let _ = attr.parse_nested_meta(|meta| {
                    let key = meta.path.get_ident().map(ToString::to_string).unwrap_or_default();
                    if meta.input.peek(syn::Token![=]) {
                        let value: syn::Expr = meta.value()?.parse()?;
                        if (key == "default_value" || key == "default_value_t")
                            && written_down(&value)
                        {
                            self.problems.push(format!(
                                "{}: --{} writes its default down: a second set of the dataset's defaults; take it from {DATASET_CARRIER}::default() ({DATASET_FILE})",
                                self.file,
                                name.replace('_', "-")
                            ));
                        }
                    } else if !meta.input.is_empty() && !meta.input.peek(syn::Token![,]) {
                        // `value_parser!(..)`-like content after a path: skip its tokens.
                        let _: proc_macro2::TokenStream = meta.input.parse()?;
                    }
                    Ok(())
                });
            }
        }
    }
}

/// The problems of `files` (path from the repository root, text).
fn check(files: &[(String, String)]) -> Vec<String> {
    let parts = carrier_parts(files);
    let dataset = dataset_fields(files);
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
            dataset: &dataset,
            in_dataset_default: false,
            problems: Vec::new(),
        };
        finder.visit_file(&parsed);
        problems.extend(finder.problems);
    }
    problems
}

/// Every `.rs` file under `dir`, in path order, as (path relative to `root`, text); also the
/// walk of `poll_loops.rs`.
pub(crate) fn rust_files(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
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

/// The dataset carrier's declaration, for the planted files below.
const CARRIER_DECLARATION: &str = "pub struct SinkOptions { pub cluster: String, pub max_file_rows: usize, \
     pub max_file_bytes: usize, pub capacity: usize }\n\
     impl Default for SinkOptions { fn default() -> Self { Self { cluster: String::new(), \
     max_file_rows: 262_144, max_file_bytes: 64 << 20, capacity: 10_000 } } }";

#[test]
fn a_second_group_parser_is_caught() {
    let files = vec![
        (
            "src/analyze/select.rs".to_owned(),
            "fn groups(selector: &str) { let (plan, group) = match selector.split_once('/') { \
             Some((p, g)) => (Some(p), g), None => (None, selector) }; }"
                .to_owned(),
        ),
        // The home of the names parses them; an API group's version is not a rollout group.
        (
            GROUPS.to_owned(),
            "impl GroupRef { fn parse(s: &str) { let (plan, group) = s.split_once('/').unwrap(); } }"
                .to_owned(),
        ),
        (
            "src/sim/store.rs".to_owned(),
            "fn version(v: &str) { let group = v.rsplit_once('/').map_or(\"\", |(g, _)| g); }"
                .to_owned(),
        ),
        // A parser written as a method, with `\"/\"`, is one too.
        (
            "src/ingest/reconstruct.rs".to_owned(),
            "impl Assembler { fn candidate(&self, plan_name: &str, names: &[String]) { \
             for n in names { let mut parts = n.splitn(2, \"/\"); let group = parts.next(); } } }"
                .to_owned(),
        ),
    ];
    let problems = check(&files);
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(
        problems[0].starts_with("src/analyze/select.rs: fn groups splits text at `/`"),
        "{problems:#?}"
    );
    assert!(
        problems[1].starts_with("src/ingest/reconstruct.rs: fn candidate splits text at `/`"),
        "{problems:#?}"
    );
}

#[test]
fn a_second_set_of_dataset_defaults_is_caught() {
    let files = vec![
        (DATASET_FILE.to_owned(), CARRIER_DECLARATION.to_owned()),
        // A writer configuration with defaults of its own.
        (
            "src/dataset/writer.rs".to_owned(),
            "impl WriterConfig { pub fn new(dir: PathBuf) -> Self { Self { dir, \
             max_file_rows: 262_144, max_file_bytes: 64 << 20 } } }"
                .to_owned(),
        ),
        // The command line's own defaults.
        (
            "src/cli/parquet.rs".to_owned(),
            "#[derive(Args)] pub struct ParquetArgs { \
             #[arg(long, default_value_t = 262_144, value_parser = at_least_one)] pub parquet_max_rows: usize, \
             #[arg(long, default_value_t = SinkOptions::default().capacity, value_parser = clap::value_parser!(usize).range(1..))] pub parquet_capacity: usize, \
             #[arg(long, default_value = \"64\")] pub parquet_max_mib: usize }"
                .to_owned(),
        ),
        // Values derived from the carrier, and one literal among other fields, are not a set.
        (
            "src/dataset/sink.rs".to_owned(),
            "fn config(o: &SinkOptions) -> SinkConfig { SinkConfig { capacity: o.capacity, \
             max_file_rows: o.max_file_rows.min(10), backoff: Duration::from_secs(1), cluster: \"x\".into() } }"
                .to_owned(),
        ),
    ];
    let problems = check(&files);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(
        problems[0].starts_with(
            "src/dataset/writer.rs: a Self built here writes down max_file_rows, max_file_bytes"
        ),
        "{problems:#?}"
    );
    assert!(
        problems[1].starts_with("src/cli/parquet.rs: --parquet-max-rows writes its default down"),
        "{problems:#?}"
    );
    assert!(
        problems[2].starts_with("src/cli/parquet.rs: --parquet-max-mib writes its default down"),
        "{problems:#?}"
    );
    // The carrier's own `Default` is the one set; in another file it would be a second.
    let elsewhere = vec![
        (DATASET_FILE.to_owned(), CARRIER_DECLARATION.to_owned()),
        ("src/util/mod.rs".to_owned(), CARRIER_DECLARATION.to_owned()),
    ];
    let problems = check(&elsewhere);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(problems[0].starts_with("src/util/mod.rs: a Self built here writes down"));
}
