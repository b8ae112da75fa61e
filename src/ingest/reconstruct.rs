//! Reconstruction: operation spans are buffered under their parent until the reconcile span
//! arrives (or a timeout evicts them); then the control run is what the spans show, replayed
//! through the legacy model (or, for a reconcile span in mode `enforce`, the phased model with
//! its enforced groups), and the candidate is evaluated by the phased model: a step with a
//! candidate `dry-run` span takes that span's outcome (an in-process engine ran it), one the
//! control ran is `reused`, any other is `not-simulated` (outcome `unknown`): the sidecar
//! executes nothing itself.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

use super::convention::{Convention, Role, RunFacts, SpanFacts};
use super::rebuild::{Child, Policies, Side, build};
use crate::engine::ReconcileRecord;
use crate::flag::{FlagDecision, Reason};
use crate::model::Policy;
use crate::plan::{PlanHash, ReconcilePlan};
use crate::vocab::{Mode, OpId};

/// Bounds on what is buffered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Operation spans waiting for their reconcile span, at most.
    pub max_buffered_spans: usize,
    /// How long an operation span waits for its reconcile span.
    pub timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_buffered_spans: 100_000,
            timeout: Duration::from_secs(30),
        }
    }
}

/// What one request's spans became.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Reconcile and operation spans used (operations buffered count when their reconcile came).
    pub accepted: u64,
    /// Spans the convention does not cover (other child spans), ignored.
    pub ignored: u64,
    /// Spans refused: malformed, an unknown plan, an unknown operation name.
    pub rejected: u64,
    /// Of the rejected: operation spans naming an operation the plan does not have.
    pub unknown_operations: u64,
    /// Operation spans that arrived after their reconcile span was reconstructed.
    pub late: u64,
    /// Operation spans evicted (the buffer was full, or their reconcile span never came).
    pub evicted: u64,
}

impl Counts {
    fn add(&mut self, other: &Self) {
        self.accepted += other.accepted;
        self.ignored += other.ignored;
        self.rejected += other.rejected;
        self.unknown_operations += other.unknown_operations;
        self.late += other.late;
        self.evicted += other.evicted;
    }
}

/// The result of one request.
#[derive(Debug, Default)]
pub struct Batch {
    /// The reconciles reconstructed.
    pub records: Vec<ReconcileRecord>,
    /// What happened to the spans.
    pub counts: Counts,
    /// Why spans were rejected (the first few reasons, for the partial-success message).
    pub reasons: Vec<String>,
}

impl Batch {
    fn reject(&mut self, n: u64, reason: impl FnOnce() -> String) {
        self.counts.rejected += n;
        if self.reasons.len() < 5 {
            self.reasons.push(reason());
        }
    }
}

struct Group {
    arrived: Instant,
    children: Vec<Child>,
}

struct PlanPolicies {
    plan: Arc<ReconcilePlan>,
    control: Policy,
    candidate: Policy,
    /// The phased model with every operation enforced (a span's empty candidate groups).
    every: Policy,
    /// Phased policies by the groups a reconcile span names (mode `enforce`, or its own
    /// candidate groups); a handful in practice, cleared if it ever grows past
    /// [`MAX_POLICIES`].
    by_groups: HashMap<Vec<String>, Policy>,
}

/// Phased policies kept per plan for the groups named by reconcile spans.
const MAX_POLICIES: usize = 64;

impl PlanPolicies {
    fn phased(&mut self, groups: &[String]) -> Result<Policy, String> {
        if let Some(policy) = self.by_groups.get(groups) {
            return Ok(policy.clone());
        }
        let policy = Policy::phased(self.plan.clone(), groups).map_err(|e| e.to_string())?;
        if self.by_groups.len() >= MAX_POLICIES {
            self.by_groups.clear();
        }
        self.by_groups.insert(groups.to_vec(), policy.clone());
        Ok(policy)
    }

    /// The control and candidate policies of a reconcile span's run facts.
    fn for_run(&mut self, run: &RunFacts) -> Result<(Mode, Policy, Option<Policy>), String> {
        if let Some(hash) = &run.plan_hash
            && PlanHash::from_hex(hash).as_ref() != Some(self.plan.hash())
        {
            return Err(format!(
                "a reconcile span carries plan hash {hash} but plan {:?} loaded here has {}: the controller and the sidecar load different versions of the plan",
                self.plan.name(),
                self.plan.hash().to_hex()
            ));
        }
        let mode = match run.mode.as_deref() {
            None => Mode::Shadow,
            Some(text) => text
                .parse::<Mode>()
                .map_err(|e| format!("a reconcile span's shadow_reconciler.mode: {e}"))?,
        };
        let candidate = match &run.candidate_groups {
            Some(groups) if groups.is_empty() => self.every.clone(),
            Some(groups) => self.phased(groups)?,
            None => self.candidate.clone(),
        };
        Ok(match mode {
            // Calibrate: the control, and its own code's dry runs paired with it (their writes'
            // differences are the comparison's noise); no candidate.
            Mode::Off | Mode::Calibrate => (mode, self.control.clone(), None),
            Mode::Shadow => (mode, self.control.clone(), Some(candidate)),
            Mode::Enforce => {
                let groups = run.enforced_groups.clone().unwrap_or_default();
                (mode, self.phased(&groups)?, Some(candidate))
            }
        })
    }
}

/// Buffers spans and reconstructs reconciles. One per process, behind a lock.
pub struct Assembler {
    convention: Convention,
    limits: Limits,
    plans: Vec<PlanPolicies>,
    groups: HashMap<SpanKey, Group>,
    arrival: VecDeque<SpanKey>,
    buffered: usize,
    done: HashSet<SpanKey>,
    done_order: VecDeque<SpanKey>,
    operation_names: HashSet<String>,
    total: Counts,
}

/// A span's identity: its trace id and span id (span ids are unique within a trace only).
type SpanKey = ([u8; 16], [u8; 8]);

/// Reconcile span ids remembered after reconstruction, to tell late spans from orphans.
const REMEMBERED: usize = 65_536;

impl std::fmt::Debug for Assembler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Assembler")
            .field("buffered", &self.buffered)
            .field("groups", &self.groups.len())
            .finish_non_exhaustive()
    }
}

impl Assembler {
    /// An assembler for `plans`; the candidate of each evaluates `candidate_groups` of it (every
    /// group when none of them is the plan's), as [`flag::resolve`](crate::flag::resolve) gives
    /// them or as written (`GROUP` names the group in every plan that has it).
    pub fn new(
        plans: &[Arc<ReconcilePlan>],
        candidate_groups: &[crate::flag::GroupRef],
        convention: Convention,
        limits: Limits,
    ) -> Result<Self, crate::plan::LookupError> {
        let mut out = Vec::new();
        let mut names = HashSet::new();
        for plan in plans {
            let groups: Vec<String> = candidate_groups
                .iter()
                .filter_map(|g| g.in_plan(plan).map(str::to_owned))
                .collect();
            let candidate = if groups.is_empty() {
                Policy::phased_all_groups(plan.clone())
            } else {
                Policy::phased(plan.clone(), &groups)?
            };
            names.extend(plan.operations().iter().map(|o| o.name().to_owned()));
            out.push(PlanPolicies {
                plan: plan.clone(),
                control: Policy::sequential(plan.clone()),
                candidate,
                every: Policy::phased_all_groups(plan.clone()),
                by_groups: HashMap::new(),
            });
        }
        Ok(Self {
            convention,
            limits,
            plans: out,
            groups: HashMap::new(),
            arrival: VecDeque::new(),
            buffered: 0,
            done: HashSet::new(),
            done_order: VecDeque::new(),
            operation_names: names,
            total: Counts::default(),
        })
    }

    /// Operation spans buffered now.
    #[must_use]
    pub const fn buffered(&self) -> usize {
        self.buffered
    }

    /// Everything counted since the start.
    #[must_use]
    pub const fn total(&self) -> &Counts {
        &self.total
    }

    /// Takes one export request's spans; returns the reconciles completed by it.
    pub fn ingest(&mut self, request: &ExportTraceServiceRequest, now: Instant) -> Batch {
        let mut batch = Batch::default();
        let mut reconciles = Vec::new();
        for resource_spans in &request.resource_spans {
            let resource = resource_spans
                .resource
                .as_ref()
                .map_or(&[][..], |r| r.attributes.as_slice());
            for span in resource_spans.scope_spans.iter().flat_map(|s| &s.spans) {
                match self.convention.read(span, resource) {
                    Err(malformed) => batch.reject(1, || malformed.as_str().to_owned()),
                    Ok(facts) => self.take(facts, now, &mut batch, &mut reconciles),
                }
            }
        }
        for (facts, plan) in reconciles {
            self.reconstruct(&facts, plan, &mut batch);
        }
        self.expire(now, &mut batch);
        self.total.add(&batch.counts);
        batch
    }

    fn take(
        &mut self,
        facts: SpanFacts,
        now: Instant,
        batch: &mut Batch,
        reconciles: &mut Vec<(SpanFacts, usize)>,
    ) {
        match &facts.role {
            // A reconcile span seen before (an exporter's retry): counted late, not recorded twice.
            Role::Reconcile { .. } if self.done.contains(&(facts.trace_id, facts.span_id)) => {
                batch.counts.late += 1;
            }
            Role::Reconcile { plan, .. } => match self.plan_index(plan.as_deref()) {
                Ok(index) => reconciles.push((facts, index)),
                Err(reason) => batch.reject(1, || reason),
            },
            Role::Operation { name, explicit, .. }
                if !*explicit && !self.operation_names.contains(name) =>
            {
                batch.counts.ignored += 1;
            }
            Role::Operation { .. } if facts.parent.is_none() => {
                batch.reject(1, || "an operation span without a parent".to_owned());
            }
            Role::Operation {
                name,
                explicit,
                failure,
                idle,
                policy,
                execution,
                conflicts,
                retried,
                reevaluated,
                writes,
            } => {
                let side = match Side::of(policy.as_deref(), execution.as_deref()) {
                    Ok(side) => side,
                    Err(reason) => return batch.reject(1, || reason),
                };
                let parent = (facts.trace_id, facts.parent.unwrap_or_default());
                if self.done.contains(&parent) {
                    batch.counts.late += 1;
                    return;
                }
                let group = self.groups.entry(parent).or_insert_with(|| {
                    self.arrival.push_back(parent);
                    Group {
                        arrived: now,
                        children: Vec::new(),
                    }
                });
                group.children.push(Child {
                    name: name.clone(),
                    explicit: *explicit,
                    failure: failure.clone(),
                    idle: *idle,
                    side,
                    conflicts: *conflicts,
                    retried: *retried,
                    reevaluated: *reevaluated,
                    writes: writes.clone(),
                    start: facts.start,
                    end: facts.end,
                });
                self.buffered += 1;
                while self.buffered > self.limits.max_buffered_spans {
                    self.evict_oldest(batch);
                }
            }
        }
    }

    fn plan_index(&self, named: Option<&str>) -> Result<usize, String> {
        let loaded = || {
            self.plans
                .iter()
                .map(|p| p.plan.name())
                .collect::<Vec<_>>()
                .join(", ")
        };
        match named {
            Some(name) => self
                .plans
                .iter()
                .position(|p| p.plan.name() == name)
                .ok_or_else(|| {
                    format!(
                        "a reconcile span names plan {name:?}, which is not loaded (loaded: {})",
                        loaded()
                    )
                }),
            None if self.plans.len() == 1 => Ok(0),
            None => Err(format!(
                "a reconcile span names no plan (attribute shadow_reconciler.plan) and several are loaded: {}",
                loaded()
            )),
        }
    }

    fn evict_oldest(&mut self, batch: &mut Batch) {
        while let Some(parent) = self.arrival.pop_front() {
            if let Some(group) = self.groups.remove(&parent) {
                self.buffered -= group.children.len();
                batch.counts.evicted += group.children.len() as u64;
                return;
            }
        }
    }

    fn expire(&mut self, now: Instant, batch: &mut Batch) {
        while let Some(parent) = self.arrival.front().copied() {
            match self.groups.get(&parent) {
                Some(group) if now.duration_since(group.arrived) < self.limits.timeout => break,
                Some(_) => self.evict_oldest(batch),
                None => {
                    self.arrival.pop_front();
                }
            }
        }
    }

    fn remember(&mut self, key: SpanKey) {
        if self.done.insert(key) {
            self.done_order.push_back(key);
        }
        while self.done_order.len() > REMEMBERED {
            if let Some(old) = self.done_order.pop_front() {
                self.done.remove(&old);
            }
        }
    }

    fn reconstruct(&mut self, facts: &SpanFacts, index: usize, batch: &mut Batch) {
        let Role::Reconcile { object, run, .. } = &facts.role else {
            return;
        };
        let key = (facts.trace_id, facts.span_id);
        let children = self
            .groups
            .remove(&key)
            .map(|g| g.children)
            .unwrap_or_default();
        self.buffered -= children.len();
        self.remember(key);
        let policies = &mut self.plans[index];
        let (mode, control, candidate) = match policies.for_run(run) {
            // A skipped comparison: the control ran alone, nothing of the candidate to rebuild.
            Ok((mode, control, _)) if run.comparison_skipped.is_some() => (mode, control, None),
            Ok(policies) => policies,
            Err(reason) => {
                let n = 1 + children.len() as u64;
                return batch.reject(n, || reason);
            }
        };
        let plan = policies.plan.clone();
        // The last span of each operation and run (a controller may retry within one
        // reconcile).
        let mut seen: HashMap<OpId, Child> = HashMap::new();
        let mut dry: HashMap<OpId, Child> = HashMap::new();
        for child in children {
            match plan.lookup(&child.name) {
                Some(op) => {
                    batch.counts.accepted += 1;
                    let map = match child.side {
                        Side::Control => &mut seen,
                        Side::DryRun => &mut dry,
                        Side::Derived => continue,
                    };
                    let replace = map.get(&op).is_none_or(|c| c.end <= child.end);
                    if replace {
                        map.insert(op, child);
                    }
                }
                None if child.explicit => {
                    batch.counts.unknown_operations += 1;
                    let name = child.name.clone();
                    let plan_name = plan.name().to_owned();
                    batch.reject(1, || {
                        format!("operation {name:?} is not in plan {plan_name:?}")
                    });
                }
                None => batch.counts.ignored += 1,
            }
        }
        batch.counts.accepted += 1;
        let flag = run
            .flag_reason
            .as_deref()
            .and_then(Reason::parse)
            .map(|reason| FlagDecision {
                reason,
                version: run.flag_version.clone(),
                enforced_groups: if mode == Mode::Enforce {
                    run.enforced_groups.clone().unwrap_or_default()
                } else {
                    Vec::new()
                },
            });
        let policies = Policies {
            mode,
            control,
            candidate,
            flag,
        };
        if run.cancelled {
            // Cut short: counted, its steps no evidence.
            batch.records.push(crate::engine::cancelled_record(
                &plan,
                crate::engine::ObjectKey {
                    kind: object.kind.clone(),
                    namespace: object.namespace.clone(),
                    name: object.name.clone(),
                    uid: object.uid.clone(),
                },
                (policies.mode, policies.flag),
                std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_nanos(facts.start),
                std::time::Duration::from_nanos(facts.end.saturating_sub(facts.start)),
                Some(opentelemetry::trace::TraceId::from_bytes(facts.trace_id).to_string()),
            ));
            return;
        }
        let mut record = build(&plan, &policies, facts, object, &seen, &dry);
        record.dry_run_requests = run.dry_run_requests.unwrap_or(0);
        record.guard_refusals = run.guard_refusals.unwrap_or(0);
        record.comparison_skipped = run.comparison_skipped;
        batch.records.push(record);
    }
}
