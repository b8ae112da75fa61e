//! From YAML text to a validated [`ReconcilePlan`], collecting every problem with its location.

use std::collections::HashMap;

use serde_saphyr::{Location, Spanned};

use super::compare;
use super::paths::{Resolved, phased_order, resolve};
use super::raw::{LooseDoc, LooseName, RawOperation, RawPlan};
use super::{
    API_VERSION, Diagnostic, IMPLICIT_GROUP, IntendedDifference, KIND, Operation, PlanHash,
    ReconcilePlan, RolloutGroup,
};
use crate::vocab::{CodePath, OpId, OpSet};

/// Longest accepted plan, group or operation name (a Kubernetes label value's limit).
const MAX_NAME_LEN: usize = 63;

pub(super) fn parse(source: &str, text: &str) -> Result<ReconcilePlan, Vec<Diagnostic>> {
    let raw: RawPlan = serde_saphyr::from_str(text).map_err(|e| vec![syntax(source, text, &e)])?;
    Validator {
        source,
        diagnostics: Vec::new(),
    }
    .validate(raw)
}

/// A YAML or schema error, attributed to the operation it falls in when that can be told.
fn syntax(source: &str, text: &str, error: &serde_saphyr::Error) -> Diagnostic {
    let location = error.location().unwrap_or(Location::UNKNOWN);
    let blank = text.lines().all(|line| {
        let line = line.trim();
        line.is_empty() || line.starts_with('#')
    });
    if blank {
        let mut diagnostic = Diagnostic::new(
            source,
            Location::UNKNOWN,
            None,
            "the file holds no YAML document; a plan is one ReconcilePlan document",
        );
        (diagnostic.line, diagnostic.column) = (1, 1);
        return diagnostic;
    }
    let (_, _, message) = crate::util::yaml::describe(error);
    let operation = operation_at(text, location);
    Diagnostic::new(source, location, operation.as_deref(), message)
}

/// The name of the operation whose mapping contains `at`, read leniently.
fn operation_at(text: &str, at: Location) -> Option<String> {
    if at == Location::UNKNOWN {
        return None;
    }
    let doc: LooseDoc = serde_saphyr::from_str(text).ok()?;
    let spec = doc.spec?;
    let ops = spec.operations?;
    let position = |l: &Location| (l.line(), l.column());
    let index = ops
        .iter()
        .rposition(|op| position(&op.referenced) <= position(&at))?;
    let op = &ops[index];
    // The operation ends where the next one starts, or where a sibling of `operations` starts.
    let end = ops
        .get(index + 1)
        .map(|next| position(&next.referenced))
        .or_else(|| {
            [&spec.legacy, &spec.rollout, &spec.compare]
                .into_iter()
                .flatten()
                .map(|sibling| position(&sibling.referenced))
                .filter(|&start| start > position(&op.referenced))
                .min()
        });
    // Inside the mapping: indented at least as deep as its first key, and before its end.
    let inside = at.column() >= op.referenced.column() && end.is_none_or(|end| position(&at) < end);
    match (&op.value.name, inside) {
        (Some(LooseName::Name(name)), true) => Some(name.clone()),
        _ => None,
    }
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && name.len() <= MAX_NAME_LEN
}

/// A plan name: lowercase DNS label, as it becomes a Kubernetes object and metric label value.
fn valid_plan_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
}

struct Validator<'s> {
    source: &'s str,
    diagnostics: Vec<Diagnostic>,
}

impl Validator<'_> {
    fn error(&mut self, at: Location, operation: Option<&str>, message: impl Into<String>) {
        self.diagnostics
            .push(Diagnostic::new(self.source, at, operation, message));
    }

    fn validate(mut self, raw: RawPlan) -> Result<ReconcilePlan, Vec<Diagnostic>> {
        if raw.api_version.value != API_VERSION {
            self.error(
                raw.api_version.referenced,
                None,
                format!(
                    "apiVersion is {:?}; expected {API_VERSION:?}",
                    raw.api_version.value
                ),
            );
        }
        if raw.kind.value != KIND {
            self.error(
                raw.kind.referenced,
                None,
                format!("kind is {:?}; expected {KIND:?}", raw.kind.value),
            );
        }
        let name = raw.metadata.name;
        if !valid_plan_name(&name.value) {
            self.error(
                name.referenced,
                None,
                format!(
                    "metadata.name {:?} is not a valid plan name: use lowercase letters, digits and \
                     '-', start with a letter, at most {MAX_NAME_LEN} characters",
                    name.value
                ),
            );
        }

        let spec = raw.spec;
        if spec.operations.value.is_empty() {
            self.error(
                spec.operations.referenced,
                None,
                "the plan has no operations; list at least one under spec.operations",
            );
        }
        let ops = &spec.operations.value;
        let by_name = self.index_names(ops);
        let resolved: Vec<Resolved> = ops
            .iter()
            .map(|op| {
                resolve(&op.value, &mut |at, op, message| {
                    self.error(at, op, message);
                })
            })
            .collect();
        let phased_order = phased_order(&resolved);
        let mut position = vec![usize::MAX; ops.len()];
        for (pos, id) in phased_order.iter().enumerate() {
            position[id.index()] = pos;
        }

        let depends_on = self.dependencies(ops, &resolved, &by_name, &position);
        let legacy_order = self.legacy_order(&spec.legacy.order, &by_name, ops, &resolved);
        let groups_declared = spec.rollout.as_ref().is_some_and(|r| !r.groups.is_empty());
        let groups = match spec.rollout {
            Some(rollout) if groups_declared => self.groups(rollout.groups, &by_name, &resolved),
            _ => vec![RolloutGroup {
                name: IMPLICIT_GROUP.to_owned(),
                description: Some("every operation (the plan declares no rollout groups)".into()),
                operations: phased_order.iter().copied().collect(),
            }],
        };
        let intended: Vec<Vec<IntendedDifference>> = {
            let mut error = |at, op: Option<&str>, message: String| self.error(at, op, message);
            ops.iter()
                .zip(&resolved)
                .map(|(op, r)| compare::intended(&op.value, r.only, &mut error))
                .collect()
        };
        let volatile = compare::volatile(
            spec.compare.map(|c| c.volatile).unwrap_or_default(),
            &mut |at, op, message| self.error(at, op, message),
        );

        if !self.diagnostics.is_empty() {
            return Err(self.diagnostics);
        }
        let operations = operations(spec.operations.value, depends_on, resolved, intended);
        let mut plan = ReconcilePlan {
            source: self.source.to_owned(),
            name: name.value,
            description: raw.metadata.description,
            operations,
            by_name,
            phased_order,
            legacy_order,
            groups,
            groups_declared,
            volatile,
            hash: PlanHash([0; 32]),
        };
        plan.hash = PlanHash::of(&plan);
        Ok(plan)
    }

    /// Checks names and maps each to its first occurrence.
    fn index_names(&mut self, ops: &[Spanned<RawOperation>]) -> HashMap<String, OpId> {
        let mut by_name: HashMap<String, OpId> = HashMap::with_capacity(ops.len());
        for (i, op) in ops.iter().enumerate() {
            let name = &op.value.name;
            if !valid_name(&name.value) {
                self.error(
                    name.referenced,
                    Some(&name.value),
                    format!(
                        "{:?} is not a valid operation name: start with a letter, then letters, \
                         digits, '-', '_' or '.', at most {MAX_NAME_LEN} characters",
                        name.value
                    ),
                );
            }
            if let Some(&first) = by_name.get(&name.value) {
                let first_at = ops[first.index()].value.name.referenced;
                self.error(
                    name.referenced,
                    Some(&name.value),
                    format!(
                        "duplicate operation name; it is first defined at line {}",
                        first_at.line()
                    ),
                );
            } else {
                by_name.insert(name.value.clone(), OpId::from_index(i));
            }
        }
        by_name
    }

    fn dependencies(
        &mut self,
        ops: &[Spanned<RawOperation>],
        resolved: &[Resolved],
        by_name: &HashMap<String, OpId>,
        position: &[usize],
    ) -> Vec<OpSet> {
        let mut edges: Vec<Vec<(OpId, Location)>> = vec![Vec::new(); ops.len()];
        for (i, op) in ops.iter().enumerate() {
            let name = op.value.name.value.as_str();
            if resolved[i].only == Some(CodePath::Legacy) {
                continue; // reported by `resolve`
            }
            let deps = op
                .value
                .depends_on
                .as_ref()
                .map_or(&[][..], |d| &d.value[..]);
            for dep in deps {
                match by_name.get(&dep.value) {
                    None => self.error(
                        dep.referenced,
                        Some(name),
                        format!(
                            "dependsOn names {:?}, which is not an operation of this plan",
                            dep.value
                        ),
                    ),
                    Some(&target) if edges[i].iter().any(|(t, _)| *t == target) => self.error(
                        dep.referenced,
                        Some(name),
                        format!("dependsOn lists {:?} twice", dep.value),
                    ),
                    Some(&target) if resolved[target.index()].only == Some(CodePath::Legacy) => {
                        self.error(
                            dep.referenced,
                            Some(name),
                            format!(
                                "dependsOn names {:?}, which runs in the legacy loop alone (`only: legacy`): the phased model never runs it",
                                dep.value
                            ),
                        );
                    }
                    Some(&target) => edges[i].push((target, dep.referenced)),
                }
            }
        }
        let in_cycle = self.cycles(ops, &edges);
        for (i, op_edges) in edges.iter().enumerate() {
            for &(target, at) in op_edges {
                if in_cycle[i] && in_cycle[target.index()] {
                    continue;
                }
                if position[target.index()] >= position[i] {
                    let (op, dep) = (&ops[i].value, &ops[target.index()].value);
                    let phase = |i: usize| resolved[i].phase;
                    self.error(
                        at,
                        Some(&op.name.value),
                        format!(
                            "depends on {:?}, which does not come earlier in phased order \
                             ({:?} is in phase {}, this operation in phase {}); move it to an \
                             earlier phase or list it first",
                            dep.name.value,
                            dep.name.value,
                            phase(target.index()),
                            phase(i)
                        ),
                    );
                }
            }
        }
        edges
            .into_iter()
            .map(|e| e.into_iter().map(|(t, _)| t).collect())
            .collect()
    }

    /// Reports every dependency cycle once; returns which operations are on one.
    fn cycles(
        &mut self,
        ops: &[Spanned<RawOperation>],
        edges: &[Vec<(OpId, Location)>],
    ) -> Vec<bool> {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            New,
            Active,
            Done,
        }
        let mut mark = vec![Mark::New; ops.len()];
        let mut in_cycle = vec![false; ops.len()];
        for root in 0..ops.len() {
            if mark[root] != Mark::New {
                continue;
            }
            // Iterative depth-first search; `path` holds (node, next edge to follow).
            let mut path: Vec<(usize, usize)> = vec![(root, 0)];
            mark[root] = Mark::Active;
            while let Some(&mut (node, ref mut next)) = path.last_mut() {
                let Some(&(target, at)) = edges[node].get(*next) else {
                    mark[node] = Mark::Done;
                    path.pop();
                    continue;
                };
                *next += 1;
                let t = target.index();
                match mark[t] {
                    Mark::New => {
                        mark[t] = Mark::Active;
                        path.push((t, 0));
                    }
                    Mark::Active => {
                        let start = path.iter().position(|&(n, _)| n == t).unwrap_or(0);
                        let mut names: Vec<&str> = path[start..]
                            .iter()
                            .map(|&(n, _)| ops[n].value.name.value.as_str())
                            .collect();
                        names.push(&ops[t].value.name.value);
                        for &(n, _) in &path[start..] {
                            in_cycle[n] = true;
                        }
                        let message = format!("dependency cycle: {}", names.join(" -> "));
                        self.error(at, Some(&ops[node].value.name.value), message);
                    }
                    Mark::Done => {}
                }
            }
        }
        in_cycle
    }

    fn legacy_order(
        &mut self,
        order: &Spanned<Vec<Spanned<String>>>,
        by_name: &HashMap<String, OpId>,
        ops: &[Spanned<RawOperation>],
        resolved: &[Resolved],
    ) -> Vec<OpId> {
        let mut seen = vec![false; ops.len()];
        let mut legacy = Vec::with_capacity(ops.len());
        for entry in &order.value {
            match by_name.get(&entry.value) {
                None => self.error(
                    entry.referenced,
                    Some(&entry.value),
                    format!(
                        "legacy.order names {:?}, which is not an operation of this plan",
                        entry.value
                    ),
                ),
                Some(&id) if seen[id.index()] => self.error(
                    entry.referenced,
                    Some(&entry.value),
                    "legacy.order lists this operation twice; it must list every operation of the legacy path exactly once",
                ),
                Some(&id) if resolved[id.index()].only == Some(CodePath::Phased) => {
                    seen[id.index()] = true;
                    self.error(
                        entry.referenced,
                        Some(&entry.value),
                        "legacy.order names an operation with `only: phased`: the legacy loop does not run it; remove it from legacy.order or drop `only`",
                    );
                }
                Some(&id) => {
                    seen[id.index()] = true;
                    legacy.push(id);
                }
            }
        }
        for (i, op) in ops.iter().enumerate() {
            let name = &op.value.name.value;
            if !seen[i]
                && resolved[i].only != Some(CodePath::Phased)
                && by_name.get(name) == Some(&OpId::from_index(i))
            {
                self.error(
                    order.referenced,
                    Some(name),
                    "missing from legacy.order, which must list every operation of the legacy path exactly once (mark one the legacy loop does not have `only: phased`)",
                );
            }
        }
        legacy
    }

    fn groups(
        &mut self,
        groups: Vec<Spanned<super::raw::RawGroup>>,
        by_name: &HashMap<String, OpId>,
        resolved: &[Resolved],
    ) -> Vec<RolloutGroup> {
        let mut owner: HashMap<OpId, String> = HashMap::new();
        let mut names: HashMap<String, u64> = HashMap::new();
        let mut result = Vec::with_capacity(groups.len());
        for group in groups {
            let group = group.value;
            let gname = group.name.value;
            if !valid_name(&gname) {
                self.error(
                    group.name.referenced,
                    None,
                    format!("rollout group name {gname:?} is not valid: start with a letter, then letters, digits, '-', '_' or '.'"),
                );
            }
            if let Some(line) = names.get(&gname) {
                self.error(
                    group.name.referenced,
                    None,
                    format!(
                        "duplicate rollout group {gname:?}; it is first defined at line {line}"
                    ),
                );
            }
            names
                .entry(gname.clone())
                .or_insert(group.name.referenced.line());
            if group.operations.value.is_empty() {
                self.error(
                    group.operations.referenced,
                    None,
                    format!("rollout group {gname:?} has no operations"),
                );
            }
            let mut members = OpSet::new();
            for entry in group.operations.value {
                let Some(&id) = by_name.get(&entry.value) else {
                    self.error(
                        entry.referenced,
                        Some(&entry.value),
                        format!("rollout group {gname:?} names {:?}, which is not an operation of this plan", entry.value),
                    );
                    continue;
                };
                if resolved[id.index()].only == Some(CodePath::Legacy) {
                    self.error(
                        entry.referenced,
                        Some(&entry.value),
                        format!("rollout group {gname:?} names an operation with `only: legacy`; groups are the phased model's, which never runs it"),
                    );
                    continue;
                }
                match owner.get(&id) {
                    Some(other) if *other == gname => self.error(
                        entry.referenced,
                        Some(&entry.value),
                        format!("rollout group {gname:?} lists this operation twice"),
                    ),
                    Some(other) => self.error(
                        entry.referenced,
                        Some(&entry.value),
                        format!("rollout groups overlap: this operation is in {other:?} and {gname:?}; an operation belongs to at most one group"),
                    ),
                    None => {
                        owner.insert(id, gname.clone());
                        members.insert(id);
                    }
                }
            }
            result.push(RolloutGroup {
                name: gname,
                description: group.description,
                operations: members,
            });
        }
        result
    }
}

/// The validated operations, from their raw form and what validation resolved.
fn operations(
    raw: Vec<Spanned<RawOperation>>,
    depends_on: Vec<OpSet>,
    resolved: Vec<Resolved>,
    intended: Vec<Vec<IntendedDifference>>,
) -> Vec<Operation> {
    raw.into_iter()
        .zip(depends_on)
        .zip(resolved)
        .zip(intended)
        .enumerate()
        .map(|(i, (((op, depends_on), r), intended))| {
            let op = op.value;
            Operation {
                id: OpId::from_index(i),
                name: op.name.value,
                description: op.description,
                phase: r.phase,
                category: r.category,
                gate: r.gate,
                depends_on,
                shadow: r.shadow,
                retry_on_conflict: r.retry_on_conflict,
                only: r.only,
                intended,
            }
        })
        .collect()
}
