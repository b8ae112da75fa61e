//! What `simulate` keeps of the records while it runs: the summary's counters and, per object,
//! the shape of its last outcome. Nothing grows with the number of reconciles: the records
//! themselves go to the other sinks (Parquet, metrics, traces) and are dropped.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::Settings;
use super::summary::Summary;
use crate::engine::{ReconcileRecord, Sink};

/// A sink that adds every record to a [`Summary`] and tracks progress for the settle decision.
#[derive(Debug)]
pub struct Tally {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    summary: Summary,
    records: u64,
    /// Per (plan, namespace, name): whether its last reconcile's control failed.
    failing: HashMap<(String, String, String), bool>,
    /// When a record last arrived.
    last_record: Option<Instant>,
    /// When an object was first seen or its outcome last changed.
    last_change: Option<Instant>,
    /// The objects reconciled (not cut short) since [`Tally::mark`], per plan.
    since_mark: HashMap<String, std::collections::HashSet<(String, String)>>,
}

/// A snapshot of a run's progress: O(1) to take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Records so far.
    pub records: u64,
    /// Distinct objects reconciled so far (over every plan).
    pub objects: usize,
    /// When a record last arrived.
    pub last_record: Option<Instant>,
    /// When an object was first reconciled, or last went from failing to succeeding or back. A
    /// failure retried is not a change, whatever failed this time: the controller's backoff
    /// repeats it for as long as the cause stays.
    pub last_change: Option<Instant>,
}

impl Default for Tally {
    fn default() -> Self {
        Self::new()
    }
}

impl Tally {
    /// An empty tally.
    #[must_use]
    pub fn new() -> Self {
        Self {
            state: Mutex::new(State {
                summary: Summary::default(),
                records: 0,
                failing: HashMap::new(),
                last_record: None,
                last_change: None,
                since_mark: HashMap::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The progress so far.
    #[must_use]
    pub fn progress(&self) -> Progress {
        let state = self.lock();
        Progress {
            records: state.records,
            objects: state.failing.len(),
            last_record: state.last_record,
            last_change: state.last_change,
        }
    }

    /// Forgets the objects reconciled so far, for [`reconciled_since_mark`](Self::reconciled_since_mark).
    pub fn mark(&self) {
        self.lock().since_mark.clear();
    }

    /// Distinct objects of `plan` reconciled (not cut short) since the last [`mark`](Self::mark).
    #[must_use]
    pub fn reconciled_since_mark(&self, plan: &str) -> usize {
        self.lock()
            .since_mark
            .get(plan)
            .map_or(0, std::collections::HashSet::len)
    }

    /// Whether a record of `plan` arrived.
    #[must_use]
    pub fn saw_plan(&self, plan: &str) -> bool {
        self.lock().summary.reconciles.contains_key(plan)
    }

    /// The summary's counters so far (the caller adds what the records do not say).
    #[must_use]
    pub fn summary(&self) -> Summary {
        self.lock().summary.clone()
    }
}

impl Sink for Tally {
    fn record(&self, record: &ReconcileRecord) {
        let now = Instant::now();
        let failed = record.control_error.is_some();
        let mut state = self.lock();
        state.summary.add(record);
        state.records += 1;
        state.last_record = Some(now);
        if record.cancelled {
            // Says nothing of the object's outcome.
            return;
        }
        let key = (
            record.plan.clone(),
            record.object.namespace.clone().unwrap_or_default(),
            record.object.name.clone(),
        );
        state
            .since_mark
            .entry(key.0.clone())
            .or_default()
            .insert((key.1.clone(), key.2.clone()));
        let before = state.failing.insert(key, failed);
        if before != Some(failed) {
            state.last_change = Some(now);
            let failing = state
                .summary
                .failing_objects
                .entry(record.plan.clone())
                .or_default();
            match (before, failed) {
                (Some(true), false) => *failing -= 1,
                (None | Some(false), true) => *failing += 1,
                _ => {}
            }
        }
    }
}

/// Waits until every object was reconciled at least once and no object's outcome changed
/// (first reconcile, failing to succeeding or back) for the settle time (true), or until the
/// deadline (false); draws the progress bar meanwhile. Each check reads a few counters: its cost
/// does not grow with the reconciles.
pub(super) async fn wait_until_settled(
    tally: &Tally,
    settings: &Settings,
    objects: usize,
    started: Instant,
    deadline: Instant,
) -> bool {
    let terminal = settings.progress && std::io::stderr().is_terminal();
    loop {
        let now = Instant::now();
        let progress = tally.progress();
        let quiet = now.saturating_duration_since(progress.last_change.unwrap_or(started));
        let all_seen = progress.objects >= objects;
        if terminal {
            draw_progress(&progress, settings, objects, quiet, started);
        }
        let settled = all_seen && quiet >= settings.settle;
        if settled || now >= deadline {
            if terminal {
                eprintln!();
            }
            return settled;
        }
        let tick = Duration::from_millis(100).min(deadline - now);
        tokio::time::sleep(tick).await;
    }
}

fn draw_progress(
    progress: &Progress,
    settings: &Settings,
    objects: usize,
    quiet: Duration,
    started: Instant,
) {
    let width = 30;
    let filled = (progress.objects * width)
        .checked_div(objects)
        .unwrap_or(width)
        .min(width);
    // Once every object was reconciled, what is waited for is quiet: say so.
    let phase = if progress.objects >= objects {
        format!(
            "settling: {:.1} of {:.1} s without a changed outcome",
            quiet.as_secs_f64().min(settings.settle.as_secs_f64()),
            settings.settle.as_secs_f64()
        )
    } else {
        "reconciling".to_owned()
    };
    eprint!(
        "\r\x1b[2K[{}{}] {}/{} objects reconciled, {} reconciles, {:.0} s; {phase}",
        "#".repeat(filled),
        ".".repeat(width - filled),
        progress.objects,
        objects,
        progress.records,
        started.elapsed().as_secs_f64()
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::ObjectKey;
    use crate::vocab::Mode;

    fn record(plan: &str, name: &str, failed: bool) -> ReconcileRecord {
        ReconcileRecord {
            object: ObjectKey {
                kind: "HostedCluster".into(),
                namespace: Some("team-0".into()),
                name: name.into(),
                uid: None,
            },
            plan: plan.into(),
            plan_hash: crate::plan::PlanHash::default(),
            mode: Mode::Shadow,
            flag: None,
            started_at: std::time::SystemTime::UNIX_EPOCH,
            duration: std::time::Duration::ZERO,
            control: Vec::new(),
            candidate: Vec::new(),
            unblocked: Vec::new(),
            newly_blocked: Vec::new(),
            changed: Vec::new(),
            control_first_failure: failed.then(|| "SSHKeySync".into()),
            control_error: failed.then(|| "secret not found".into()),
            candidate_error: None,
            trace_id: None,
            guard_refusals: 0,
            dry_run_requests: 0,
            write_differences: Vec::new(),
            cancelled: false,
            comparison_skipped: None,
        }
    }

    #[test]
    fn a_retried_failure_is_not_a_change_a_recovery_is() {
        let tally = Tally::new();
        assert_eq!(tally.progress().objects, 0);
        assert!(tally.progress().last_change.is_none());
        tally.record(&record("hostedcluster", "a", true));
        tally.record(&record("hostedcluster", "b", false));
        let first = tally.progress();
        assert_eq!((first.records, first.objects), (2, 2));
        assert!(tally.saw_plan("hostedcluster"));
        assert!(!tally.saw_plan("addon-install-progression"));
        // Retries of the same failure, and a success repeated: records, no change.
        std::thread::sleep(std::time::Duration::from_millis(2));
        tally.record(&record("hostedcluster", "a", true));
        tally.record(&record("hostedcluster", "b", false));
        let retried = tally.progress();
        assert_eq!(retried.records, 4);
        assert_eq!(retried.last_change, first.last_change);
        assert!(retried.last_record > first.last_record);
        assert_eq!(tally.summary().failing_objects["hostedcluster"], 1);
        // Recovery and a new failure are changes, and move the failing count.
        tally.record(&record("hostedcluster", "a", false));
        assert!(tally.progress().last_change > first.last_change);
        assert_eq!(tally.summary().failing_objects["hostedcluster"], 0);
        tally.record(&record("hostedcluster", "b", true));
        tally.record(&record("hostedcluster", "c", true));
        let summary = tally.summary();
        assert_eq!(summary.failing_objects["hostedcluster"], 2);
        assert_eq!(summary.reconciles["hostedcluster"], 7);
        assert_eq!(summary.objects["hostedcluster"].len(), 3);
        // The same name in another plan is another object.
        tally.record(&record("addon-install-progression", "a", false));
        assert_eq!(tally.progress().objects, 4);
    }
}
