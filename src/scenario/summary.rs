//! What a simulated run found, computed from the records the engines produced and the
//! simulator's audit. Figures it shares with `analyze` use the same definitions and words (a test
//! compares them on one run).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::population::Planted;
use crate::engine::{ConflictResolution, ReconcileRecord};

/// Counts for one operation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OperationCounts {
    /// Reconciles whose control stopped (first failure) here (`first_failure` in `analyze`).
    pub control_first_failures: u64,
    /// Control failures (`failures_real`).
    pub control_failures: u64,
    /// Times the candidate ran it when the control did not (`unblocked`).
    pub unblocked: u64,
    /// Of those, dry-run succeeded (`unblocked_succeeded`).
    pub unblocked_succeeded: u64,
    /// Of those, dry-run failed (`unblocked_failed`).
    pub unblocked_failed: u64,
    /// Of those, not simulated, `shadow: skip` (`unblocked_not_simulated`).
    pub unblocked_unknown: u64,
    /// Times the control ran it and the candidate blocked it.
    pub newly_blocked: u64,
}

fn op<'a>(
    operations: &'a mut BTreeMap<(String, String), OperationCounts>,
    plan: &str,
    name: &str,
) -> &'a mut OperationCounts {
    operations
        .entry((plan.to_owned(), name.to_owned()))
        .or_default()
}

/// The totals of a run.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// What the population planted.
    pub planted: Planted,
    /// Reconciles per plan (without the cancelled ones).
    pub reconciles: BTreeMap<String, u64>,
    /// Reconciles cut short before they finished, per plan: counted, nothing else of them.
    pub cancelled: BTreeMap<String, u64>,
    /// Reconciles whose control failed, per plan.
    pub control_failed: BTreeMap<String, u64>,
    /// Objects reconciled (kind/namespace/name), per plan.
    pub objects: BTreeMap<String, BTreeSet<String>>,
    /// Objects whose last reconcile's control failed, per plan: at a settled run's end, those
    /// whose failure persists (a transient one was retried until it succeeded).
    pub failing_objects: BTreeMap<String, u64>,
    /// Per plan and operation.
    pub operations: BTreeMap<(String, String), OperationCounts>,
    /// Control steps that met a 409 Conflict.
    pub conflicts: u64,
    /// How conflicts ended, by resolution, over control and candidate steps.
    pub resolutions: BTreeMap<&'static str, u64>,
    /// Mutations the shadow (dry-run user agent) persisted: must be 0.
    pub shadow_persisted: u64,
    /// Dry-run mutating requests the simulator answered.
    pub shadow_dry_runs: u64,
    /// Mutating requests the shadow guard refused: must be 0.
    pub guard_refusals: u64,
    /// Requests the simulator answered.
    pub requests: u64,
    /// Requests a fault rule fired on.
    pub faulted: u64,
    /// Whether the run settled (every object reconciled, then quiet for the settle time)
    /// rather than reaching its `--duration` deadline.
    pub settled: bool,
    /// Wall time of the run.
    pub elapsed: std::time::Duration,
    /// The API server's URL when the run used a real cluster instead of the simulator: then
    /// `shadow_dry_runs` is what the guard sent, and what was persisted is in the cluster's audit
    /// log, not here.
    pub cluster: Option<String>,
    /// The rollouts' timeline (scenario `rollout`).
    pub rollout: Option<super::rollout::Timeline>,
}

impl Summary {
    /// What the shadow sent and what the API server answered.
    fn fmt_requests(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.cluster {
            None => {
                writeln!(
                    f,
                    "shadow: {} dry-run mutations, {} persisted mutations (must be 0), {} guard refusals (must be 0)",
                    self.shadow_dry_runs, self.shadow_persisted, self.guard_refusals
                )?;
                writeln!(
                    f,
                    "API simulator: {} requests, {} with an injected fault",
                    self.requests, self.faulted
                )?;
            }
            Some(url) => {
                writeln!(
                    f,
                    "shadow: {} dry-run mutations sent, {} guard refusals (must be 0); what the cluster persisted is in its audit log (user agent {})",
                    self.shadow_dry_runs,
                    self.guard_refusals,
                    crate::engine::dryrun::USER_AGENT
                )?;
                writeln!(
                    f,
                    "API server: {url} (a real cluster: no injected 503s; the conflict storm is a real second writer)"
                )?;
            }
        }
        Ok(())
    }

    /// Adds one record.
    pub fn add(&mut self, r: &ReconcileRecord) {
        if r.cancelled {
            *self.cancelled.entry(r.plan.clone()).or_default() += 1;
            return;
        }
        *self.reconciles.entry(r.plan.clone()).or_default() += 1;
        self.objects
            .entry(r.plan.clone())
            .or_default()
            .insert(format!(
                "{}/{}/{}",
                r.object.kind,
                r.object.namespace.as_deref().unwrap_or(""),
                r.object.name
            ));
        if r.control_first_failure.is_some() {
            *self.control_failed.entry(r.plan.clone()).or_default() += 1;
        }
        if let Some(first) = &r.control_first_failure {
            op(&mut self.operations, &r.plan, first).control_first_failures += 1;
        }
        for step in r.control.iter().filter(|s| s.outcome == "failed") {
            op(&mut self.operations, &r.plan, &step.operation).control_failures += 1;
        }
        for name in &r.unblocked {
            let outcome = r.candidate_step(name).map(|s| s.outcome);
            let counts = op(&mut self.operations, &r.plan, name);
            counts.unblocked += 1;
            match outcome {
                Some("succeeded") => counts.unblocked_succeeded += 1,
                Some("failed") => counts.unblocked_failed += 1,
                Some(_) | None => counts.unblocked_unknown += 1,
            }
        }
        for name in &r.newly_blocked {
            op(&mut self.operations, &r.plan, name).newly_blocked += 1;
        }
        self.conflicts += r.control.iter().filter(|s| s.conflicts > 0).count() as u64;
        for step in r.control.iter().chain(&r.candidate) {
            if let Some(resolution) = step.conflict {
                *self.resolutions.entry(resolution.as_str()).or_default() += 1;
            }
        }
    }

    /// Operations unblocked by the candidate, over every plan.
    #[must_use]
    pub fn unblocked(&self) -> u64 {
        self.operations.values().map(|c| c.unblocked).sum()
    }
    /// Of those, how many dry-ran successfully.
    #[must_use]
    pub fn unblocked_succeeded(&self) -> u64 {
        self.operations
            .values()
            .map(|c| c.unblocked_succeeded)
            .sum()
    }
    /// Operations the candidate newly blocked, over every plan.
    #[must_use]
    pub fn newly_blocked(&self) -> u64 {
        self.operations.values().map(|c| c.newly_blocked).sum()
    }

    /// The sum of `f` over the operations of `plan`.
    fn plan_sum(&self, plan: &str, f: fn(&OperationCounts) -> u64) -> u64 {
        self.operations
            .iter()
            .filter(|((p, _), _)| p == plan)
            .map(|(_, c)| f(c))
            .sum()
    }

    /// A plan's figures in one line, in the words (and with the figures) of `analyze`'s plan
    /// line on the same data.
    #[must_use]
    pub fn plan_line(&self, plan: &str) -> String {
        crate::analyze::render::figures_line(
            self.reconciles.get(plan).copied().unwrap_or(0),
            self.objects.get(plan).map_or(0, |o| o.len() as u64),
            self.control_failed.get(plan).copied().unwrap_or(0),
            [
                self.plan_sum(plan, |c| c.unblocked),
                self.plan_sum(plan, |c| c.unblocked_succeeded),
                self.plan_sum(plan, |c| c.unblocked_unknown),
                self.plan_sum(plan, |c| c.newly_blocked),
            ],
        )
    }
    /// Per plan, the objects failing at the end of the run, of those reconciled.
    fn failing_line(&self) -> Option<String> {
        let failing: Vec<String> = self
            .objects
            .iter()
            .map(|(plan, objects)| {
                format!(
                    "{plan} {} of {}",
                    self.failing_objects.get(plan).copied().unwrap_or(0),
                    objects.len()
                )
            })
            .collect();
        (!failing.is_empty()).then(|| {
            format!(
                "objects failing at the end (their last reconcile failed): {}",
                failing.join(", ")
            )
        })
    }

    /// Conflicts the candidate's retry would have resolved.
    #[must_use]
    pub fn would_be_retry_successes(&self) -> u64 {
        self.resolutions
            .get(ConflictResolution::WouldHaveSucceeded.as_str())
            .copied()
            .unwrap_or(0)
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.planted;
        writeln!(
            f,
            "simulated cluster: {} HostedClusters ({} missing an SSH key, {} an audit-webhook secret, {} a pull secret, {} with an unparseable release image), {} add-ons; {:.1} s, {}",
            p.hosted_clusters,
            p.missing_ssh_key,
            p.missing_audit_webhook,
            p.missing_pull_secret,
            p.bad_release_image,
            p.addons,
            self.elapsed.as_secs_f64(),
            if self.settled {
                "settled"
            } else {
                "ended by the deadline (--duration) before it settled: the counts are of a run cut short"
            }
        )?;
        for plan in self.reconciles.keys() {
            let cancelled = crate::analyze::render::cancelled_words(
                self.cancelled.get(plan).copied().unwrap_or(0),
            );
            writeln!(f, "  {plan}: {}{cancelled}", self.plan_line(plan))?;
        }
        if let Some(line) = self.failing_line() {
            writeln!(f, "{line}")?;
        }
        let resolutions: Vec<String> = self
            .resolutions
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        writeln!(
            f,
            "conflicts: {} control steps met 409 ({}); the candidate's retry would have succeeded {} times",
            self.conflicts,
            if resolutions.is_empty() {
                "none".to_owned()
            } else {
                resolutions.join(", ")
            },
            self.would_be_retry_successes()
        )?;
        self.fmt_requests(f)?;
        if let Some(timeline) = &self.rollout {
            write!(f, "{timeline}")?;
        }
        writeln!(f)?;
        writeln!(f, "{}", crate::model::COUNTS_LEGEND)?;
        writeln!(
            f,
            "{:<26} {:<28} {:>13} {:>16} {:>9} {:>13} {:>13} {:>13}",
            "plan",
            "operation",
            "first failure",
            "control failures",
            "unblocked",
            "would succeed",
            "not simulated",
            "newly blocked"
        )?;
        for ((plan, op), c) in &self.operations {
            if *c == OperationCounts::default() {
                continue;
            }
            writeln!(
                f,
                "{plan:<26} {op:<28} {:>13} {:>16} {:>9} {:>13} {:>13} {:>13}",
                c.control_first_failures,
                c.control_failures,
                c.unblocked,
                c.unblocked_succeeded,
                c.unblocked_unknown,
                c.newly_blocked
            )?;
        }
        Ok(())
    }
}
