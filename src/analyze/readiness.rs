//! Readiness per rollout group: the findings that stop it (with the plan change that fixes each)
//! or leave it open (with what evidence is missing and how to get it), and one sentence.

use std::fmt::Write as _;

use super::counts::{PlanCounts, flag};
use super::writes::WriteReport;
use super::{Finding, FindingCode, GroupReport, Pair, Readiness, Reason, Verdict, VerdictReport};
use crate::plan::ReconcilePlan;
use crate::vocab::OpId;

/// How to test a classification that was never exercised.
/// How a not-ready summary points at `--suggest` (the Markdown replaces it with the edits).
pub(super) const SUGGEST_HINT: &str =
    "; `analyze --suggest FILE` writes the plan changes that fix them";

const NOT_EXERCISED: &str = "enforcing changes nothing observed so far for an operation that never failed; to test its classification, make it fail where that is safe and record the shadow there: a fault scenario in staging (remove or break an input it reads), or `shadow-reconciler simulate --scenario mixed --plan PLAN` for the reference reconcilers; then analyze again";
/// How to get more objects.
const TOO_FEW: &str = "keep recording until enough objects have tested it (more objects, or a fault scenario in staging), then analyze again";
/// What a retry-resolved failure leaves open.
const RESOLVED_BY_RETRY: &str = "enforcing retries these conflicts, which the shadow says would have succeeded; the category is tested only by a failure the retry does not resolve (e.g. in staging, a status write rejected by an admission webhook)";

fn finding(code: FindingCode, operations: &[&str], evidence: String) -> Finding {
    Finding {
        code,
        operations: operations.iter().map(|&o| o.to_owned()).collect(),
        evidence,
        fix: None,
        next_step: None,
        objects_needed: None,
    }
}

fn dependency_finding(d: &Pair) -> Finding {
    let mut f = finding(
        FindingCode::UndeclaredDependency,
        &[&d.failed, &d.later],
        format!(
            "{} failed in {} of {} objects after {} failed (Wilson {:.1}%-{:.1}%), baseline {} of {} ({:.1}%-{:.1}%){}",
            d.later,
            d.after.failures,
            d.after.objects,
            d.failed,
            d.after.low * 100.0,
            d.after.high * 100.0,
            d.baseline.failures,
            d.baseline.objects,
            d.baseline.low * 100.0,
            d.baseline.high * 100.0,
            if d.concentrated {
                "; every such failure comes from one namespace, so a cause shared there would look the same: check it before applying the fix"
            } else {
                ""
            }
        ),
    );
    f.fix = Some(format!("add {} to {}'s dependsOn", d.failed, d.later));
    f
}

/// The findings about one member's verdict (contradictions are covered by the dependencies,
/// except a non-critical operation's harm, whose fix is its category).
fn verdict_finding(v: &VerdictReport) -> Option<Finding> {
    let op = v.operation.as_str();
    let evidence = format!("{op}: {}", v.evidence);
    let (code, next) = match v.reason {
        Reason::HarmsLater => {
            let mut f = finding(FindingCode::HarmsLater, &[op], evidence);
            f.fix = Some(format!(
                "make {op} critical (keeping it non-critical with the added dependsOn is the alternative)"
            ));
            return Some(f);
        }
        Reason::TooFewObjects => (FindingCode::TooFewObjects, TOO_FEW),
        Reason::NotExercised => (FindingCode::NotExercised, NOT_EXERCISED),
        Reason::ResolvedByRetry => (FindingCode::ResolvedByRetry, RESOLVED_BY_RETRY),
        Reason::UndeclaredDependency
        | Reason::FailureHarmless
        | Reason::NothingToBlock
        | Reason::Exercised => return None,
    };
    let mut f = finding(code, &[op], evidence);
    f.next_step = Some(next.to_owned());
    f.objects_needed = (code == FindingCode::TooFewObjects).then_some(v.objects_needed);
    Some(f)
}

fn summary(readiness: Readiness, findings: &[Finding], min_samples: u64) -> String {
    let mut text = judgement(readiness, findings, min_samples);
    let of = |code: FindingCode| -> Vec<&str> {
        findings
            .iter()
            .filter(|f| f.code == code)
            .flat_map(|f| f.operations.iter().map(String::as_str))
            .collect()
    };
    let mut notes: Vec<String> = Vec::new();
    let newly = of(FindingCode::NewlyBlocked);
    if !newly.is_empty() {
        notes.push(format!(
            "blocks {}, which the legacy loop ran",
            newly.join(", ")
        ));
    }
    let intended = of(FindingCode::IntendedWrites);
    if !intended.is_empty() {
        notes.push(format!("writes as declared for {}", intended.join(", ")));
    }
    let phased = of(FindingCode::PhasedOnly);
    if !phased.is_empty() {
        notes.push(format!("adds {}", phased.join(", ")));
    }
    let legacy = of(FindingCode::LegacyOnly);
    if !legacy.is_empty() {
        notes.push(format!("drops {}", legacy.join(", ")));
    }
    if let Some((last, rest)) = notes.split_last() {
        let joined = if rest.is_empty() {
            last.clone()
        } else {
            format!("{} and {last}", rest.join(", "))
        };
        let _ = write!(text, "; note: enforcing {joined}");
    }
    text
}

fn judgement(readiness: Readiness, findings: &[Finding], min_samples: u64) -> String {
    let count = |code| findings.iter().filter(|f| f.code == code).count();
    match readiness {
        Readiness::Ready => format!(
            "ready: every member's classification held in at least {min_samples} objects, and nothing in the data stops it"
        ),
        Readiness::NotReady => {
            let fixes = findings
                .iter()
                .filter(|f| f.fix.is_some() && f.code.edits_plan())
                .count();
            let mut parts = Vec::new();
            for (code, what) in [
                (FindingCode::UndeclaredDependency, "undeclared dependencies"),
                (
                    FindingCode::HarmsLater,
                    "non-critical operations whose failure harms later ones",
                ),
                (FindingCode::GuardRefusals, "shadow guard refusals"),
                (
                    FindingCode::UnexpectedWrites,
                    "operations whose candidate code writes differently, undeclared",
                ),
            ] {
                let n = count(code);
                if n > 0 {
                    parts.push(format!("{n} {what}"));
                }
            }
            format!(
                "not ready: {}{}",
                parts.join(", "),
                if fixes > 0 { SUGGEST_HINT } else { "" }
            )
        }
        Readiness::Inconclusive => {
            let mut parts = Vec::new();
            if let Some(plan) = findings
                .iter()
                .find(|f| f.code == FindingCode::TooFewObjects && f.operations.is_empty())
            {
                parts.push(plan.evidence.clone());
            }
            let few: Vec<&Finding> = findings
                .iter()
                .filter(|f| f.code == FindingCode::TooFewObjects && !f.operations.is_empty())
                .collect();
            if let Some(most) = few.iter().filter_map(|f| f.objects_needed).max() {
                parts.push(format!(
                    "{} tested in too few objects (up to {most} more needed)",
                    plural(few.len(), "member")
                ));
            }
            let never = count(FindingCode::NotExercised);
            if never > 0 {
                parts.push(format!(
                    "{} never exercised (no failure observed: enforcing changes nothing seen so far for them)",
                    plural(never, "member")
                ));
            }
            if let Some(f) = findings.iter().find(|f| f.code == FindingCode::RunsNotKept) {
                parts.push(f.evidence.clone());
            }
            let retried = count(FindingCode::ResolvedByRetry);
            if retried > 0 {
                parts.push(format!(
                    "{} failed only where the candidate's retry resolved the conflict",
                    plural(retried, "member")
                ));
            }
            format!("inconclusive: {}", parts.join("; "))
        }
    }
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// Readiness of every rollout group of `plan`, and of `all`.
pub(super) fn groups(
    plan: &ReconcilePlan,
    c: &PlanCounts,
    (objects, min_samples): (u64, u64),
    verdicts: &[VerdictReport],
    dependencies: &[Pair],
    (writes, noise): (&[WriteReport], &[super::noise::NoiseReport]),
) -> Vec<GroupReport> {
    let mut groups: Vec<(String, Vec<OpId>)> = plan
        .groups()
        .iter()
        .map(|g| (g.name().to_owned(), g.operations().as_slice().to_vec()))
        .collect();
    if !groups.iter().any(|(g, _)| g == "all") {
        groups.push(("all".to_owned(), plan.phased_order().to_vec()));
    }
    groups
        .into_iter()
        .map(|(group, ops)| {
            let names: Vec<&str> = ops.iter().map(|&o| plan.name_of(o)).collect();
            let member = |op: &str| names.contains(&op);
            let mut findings = blocking_findings(plan, c, &ops, dependencies);
            findings.extend(path_findings(plan, c, &names, writes));
            findings.extend(noise_findings(&names, noise));
            for v in verdicts.iter().filter(|v| member(&v.operation)) {
                findings.extend(verdict_finding(v));
            }
            if c.runs_not_kept > 0 {
                let mut f = finding(
                    FindingCode::RunsNotKept,
                    &[],
                    format!(
                        "{} distinct failing runs of objects were left out of the ordering pairs by the memory bound ({} kept), so some objects' first observations may be missing",
                        c.runs_not_kept, c.signatures
                    ),
                );
                f.next_step = Some(
                    "analyse a shorter period (one directory per day or week) so every run is kept"
                        .to_owned(),
                );
                findings.push(f);
            }
            if objects < min_samples {
                let mut f = finding(
                    FindingCode::TooFewObjects,
                    &[],
                    format!(
                        "the plan's data covers {objects} objects; {min_samples} needed before any claim can be judged"
                    ),
                );
                f.objects_needed = Some(min_samples - objects);
                f.next_step = Some(TOO_FEW.to_owned());
                findings.push(f);
            }
            // Stopping findings first, then what is open, then notices.
            findings.sort_by_key(|f| (!blocking(f), notice(f)));
            let readiness = if findings.iter().any(blocking) {
                Readiness::NotReady
            } else if findings.iter().all(notice)
                && verdicts
                    .iter()
                    .filter(|v| member(&v.operation))
                    .all(|v| v.verdict == Verdict::Supported)
            {
                Readiness::Ready
            } else {
                Readiness::Inconclusive
            };
            GroupReport {
                group,
                operations: names.into_iter().map(str::to_owned).collect(),
                readiness,
                summary: summary(readiness, &findings, min_samples),
                findings,
            }
        })
        .collect()
}

/// Whether a finding stops a group.
fn blocking(f: &Finding) -> bool {
    matches!(
        f.code,
        FindingCode::UndeclaredDependency
            | FindingCode::HarmsLater
            | FindingCode::GuardRefusals
            | FindingCode::UnexpectedWrites
    )
}

/// Whether a finding only tells what enforcing changes: the candidate blocking operations the
/// control ran is what a gate or a dependency asks for, and writes the plan declares different
/// are what it intends, not a contradiction of the plan.
fn notice(f: &Finding) -> bool {
    matches!(
        f.code,
        FindingCode::NewlyBlocked
            | FindingCode::IntendedWrites
            | FindingCode::PhasedOnly
            | FindingCode::LegacyOnly
            | FindingCode::NoisyFields
            | FindingCode::UnstableWrites
    )
}

/// The noise the calibration found in a group's members: fields that vary from one run of the
/// same code to the next (the fix: `compare.volatile`), and objects written in one run only.
fn noise_findings(members: &[&str], noise: &[super::noise::NoiseReport]) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    for n in noise
        .iter()
        .filter(|n| members.contains(&n.operation.as_str()))
    {
        let code = if n.volatile.is_some() {
            FindingCode::NoisyFields
        } else {
            FindingCode::UnstableWrites
        };
        if let Some(f) = out
            .iter_mut()
            .find(|f| f.code == code && f.operations[0] == n.operation)
        {
            let _ = write!(f.evidence, "; {}", sentence_rest(&n.text, &n.operation));
            continue;
        }
        let mut f = finding(code, &[&n.operation], n.text.clone());
        if code == FindingCode::UnstableWrites {
            f.fix = Some(format!(
                "make {}'s writes the same from one run to the next where it can (its order, a name it draws); until then, a write difference of it says nothing",
                n.operation
            ));
        }
        out.push(f);
    }
    for f in out
        .iter_mut()
        .filter(|f| f.code == FindingCode::NoisyFields)
    {
        let patterns = super::noise::volatile(
            &noise
                .iter()
                .filter(|n| n.operation == f.operations[0])
                .cloned()
                .collect::<Vec<_>>(),
        );
        let quoted: Vec<String> = patterns.iter().map(|p| format!("'{p}'")).collect();
        f.fix = Some(format!(
            "declare them in the plan's compare.volatile: [{}], so the comparison sets them aside",
            quoted.join(", ")
        ));
    }
    out
}

/// The findings of a group whose members are `members` about the two code paths: per member,
/// its unexpected write differences (they stop the group) and its intended ones (a notice), what
/// a member of the phased path only did (a notice); and, in every group, what the legacy loop's
/// own operations did, which enforcing (the phased model) drops.
fn path_findings(
    plan: &ReconcilePlan,
    c: &PlanCounts,
    members: &[&str],
    writes: &[WriteReport],
) -> Vec<Finding> {
    use crate::vocab::CodePath;
    let mut out: Vec<Finding> = Vec::new();
    for op in plan.operations() {
        let (code, what) = match op.only() {
            Some(CodePath::Phased) if members.contains(&op.name()) => (
                FindingCode::PhasedOnly,
                "runs in the phased reconcile only, which enforcing adds",
            ),
            Some(CodePath::Legacy) => (
                FindingCode::LegacyOnly,
                "runs in the legacy loop only, which enforcing (the phased model) drops",
            ),
            _ => continue,
        };
        let i = op.id().index();
        let count = |flag: u8| c.objects.values().filter(|o| o.has(i, flag)).count();
        let mut evidence = format!(
            "{} {what}: it ran in {} objects and failed in {}",
            op.name(),
            count(flag::EXECUTED),
            count(flag::FAILED)
        );
        for w in writes.iter().filter(|w| w.operation == op.name()) {
            let _ = write!(evidence, "; {}", sentence_rest(&w.text, &w.operation));
        }
        out.push(finding(code, &[op.name()], evidence));
    }
    // The declarations of each operation's unexpected differences, for its finding's fix.
    let mut declarations: Vec<(String, Vec<String>)> = Vec::new();
    let mut add = |code: FindingCode, w: &WriteReport| {
        if code == FindingCode::UnexpectedWrites
            && let Some(declaration) = &w.declaration
        {
            match declarations.iter_mut().find(|(op, _)| *op == w.operation) {
                Some((_, list)) => list.push(declaration.clone()),
                None => declarations.push((w.operation.clone(), vec![declaration.clone()])),
            }
        }
        if let Some(f) = out
            .iter_mut()
            .find(|f| f.code == code && f.operations[0] == w.operation)
        {
            let _ = write!(f.evidence, "; {}", sentence_rest(&w.text, &w.operation));
            return;
        }
        out.push(finding(code, &[&w.operation], w.text.clone()));
    };
    for w in writes
        .iter()
        .filter(|w| w.only.is_none() && members.contains(&w.operation.as_str()))
    {
        add(
            if w.intended {
                FindingCode::IntendedWrites
            } else {
                FindingCode::UnexpectedWrites
            },
            w,
        );
    }
    for (op, list) in declarations {
        if let Some(f) = out
            .iter_mut()
            .find(|f| f.code == FindingCode::UnexpectedWrites && f.operations[0] == op)
        {
            let entries: Vec<String> = list.iter().map(|d| format!("`- {d}`")).collect();
            f.fix = Some(format!(
                "declare it in {op}'s intendedDifferences: {}, if the phased code of {op} is meant to write so (if not, the phased code has a regression to fix)",
                entries.join(" and ")
            ));
        }
    }
    out
}

/// A write report's sentence without its leading `Operation: `, to join several of one
/// operation.
fn sentence_rest<'t>(text: &'t str, operation: &str) -> &'t str {
    text.strip_prefix(operation)
        .and_then(|rest| rest.strip_prefix(": "))
        .unwrap_or(text)
}

/// The group findings that do not come from verdicts: guard refusals and the dependencies that
/// start or end in it (which stop it), newly blocked operations (a notice).
fn blocking_findings(
    plan: &ReconcilePlan,
    c: &PlanCounts,
    ops: &[OpId],
    dependencies: &[Pair],
) -> Vec<Finding> {
    let member = |op: &str| ops.iter().any(|&o| plan.name_of(o) == op);
    let mut findings = Vec::new();
    if c.guard_refusals > 0 {
        let mut f = finding(
            FindingCode::GuardRefusals,
            &[],
            format!(
                "the shadow guard refused {} mutating requests of the candidate that lacked dryRun=All",
                c.guard_refusals
            ),
        );
        f.fix = Some("an operation wrote outside the dry-run client: fix its reconciler code, or declare it `shadow: skip`".to_owned());
        findings.push(f);
    }
    for d in dependencies
        .iter()
        .filter(|d| member(&d.failed) || member(&d.later))
    {
        findings.push(dependency_finding(d));
    }
    for &op in ops {
        let counts = &c.ops[op.index()];
        let name = plan.name_of(op);
        if counts.newly_blocked > 0 {
            let objects = c
                .objects
                .values()
                .filter(|o| o.has(op.index(), flag::NEWLY_BLOCKED))
                .count();
            let mut f = finding(
                FindingCode::NewlyBlocked,
                &[name],
                format!(
                    "{name} ran in the control and was blocked in the candidate in {} reconciles of {objects} objects: enforcing stops running it where the legacy loop ran it",
                    counts.newly_blocked
                ),
            );
            f.fix = Some(format!(
                "if {name} does not need the operation that blocked it, give it `gate: none` (or drop that dependsOn); if it does, the blocking is what the plan intends and nothing needs to change"
            ));
            findings.push(f);
        }
    }
    findings
}
