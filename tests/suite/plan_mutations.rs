//! A few hundred mutated plans (lines deleted, duplicated, cut, re-indented, values replaced by
//! other YAML values, a second document, a huge name): validation never panics, every problem is
//! a sentence about the plan at `file:line:column` (no YAML library's internal wording), and the
//! output stays bounded whatever the input echoes.

use shadow_reconciler::plan::{PlanError, ReconcilePlan};
use shadow_reconciler::util::Rng;

/// Words of the YAML library's own API or of Rust types: never in a diagnostic.
const LIBRARY_WORDS: &[&str] = &[
    "Option<",
    "from_str",
    "DuplicateKeyPolicy",
    "budget breached",
    "u32",
    "u64",
    "externally tagged",
    "scalar",
    "Nodes {",
    "serde",
    "invalid type: ",
];

const VALUES: &[&str] = &[
    "~",
    "[]",
    "{}",
    "\"x\"",
    "-1",
    "1.5",
    "true",
    "yes",
    "0x10",
    "&a x",
    "*a",
    "!!binary x",
    "{a: 1}",
    "[a, b]",
    "",
    "'unterminated",
    "|\n  block",
];

fn mutate(base: &[&str], rng: &mut Rng) -> String {
    let mut lines: Vec<String> = base.iter().map(|l| (*l).to_owned()).collect();
    let k = rng.below(lines.len());
    match rng.below(8) {
        0 => {
            lines.remove(k);
        }
        1 => lines.insert(k, lines[k].clone()),
        2 | 3 => {
            if let Some((key, _)) = lines[k].clone().split_once(':') {
                lines[k] = format!("{key}: {}", VALUES[rng.below(VALUES.len())]);
            }
        }
        4 => {
            let cut = rng.below(lines[k].len() + 1);
            lines[k].truncate(cut);
        }
        5 => lines[k].insert(0, ' '),
        6 => lines.extend(["---".to_owned(), "a: 1".to_owned()]),
        _ => {
            // A huge value where a name goes: echoed values must stay bounded.
            if let Some((key, _)) = lines[k].clone().split_once(':') {
                lines[k] = format!("{key}: {}", "N".repeat(1 << 20));
            }
        }
    }
    lines.join("\n") + "\n"
}

#[test]
fn mutated_plans_get_sentences_about_the_plan_and_bounded_output() {
    let base_text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/plans/hostedcluster.yaml"
    ))
    .expect("the shipped plan");
    let base: Vec<&str> = base_text.lines().collect();
    let mut rng = Rng::new(7);
    let (mut invalid, mut largest) = (0, 0);
    for case in 0..300 {
        let text = mutate(&base, &mut rng);
        let Err(error) = ReconcilePlan::from_yaml("plans/mutated.yaml", &text) else {
            continue;
        };
        let PlanError::Invalid { diagnostics } = &error else {
            panic!("case {case}: not a validation error: {error}");
        };
        invalid += 1;
        let rendered = error.to_string();
        largest = largest.max(rendered.len());
        assert!(
            rendered.len() < 64 * 1024,
            "case {case}: {} bytes of diagnostics",
            rendered.len()
        );
        for d in diagnostics {
            let line = d.to_string();
            assert!(
                line.starts_with("plans/mutated.yaml:"),
                "case {case}: {line}"
            );
            for word in LIBRARY_WORDS {
                assert!(
                    !d.message.contains(word),
                    "case {case}: library wording {word:?} in {line}"
                );
            }
        }
    }
    assert!(
        invalid >= 150,
        "only {invalid} of 300 mutations were invalid"
    );
    eprintln!("{invalid} invalid plans of 300; the largest report {largest} bytes");
}
