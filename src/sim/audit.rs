//! The audit: every request the simulator answered, and totals by user agent.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;

/// One answered request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditRecord {
    /// Order of arrival, from 1.
    pub seq: u64,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `discovery`.
    pub verb: &'static str,
    /// The request path.
    pub path: String,
    /// `plural` or `plural.group`, for resource requests.
    pub resource: Option<String>,
    /// The namespace in the path.
    pub namespace: Option<String>,
    /// The object name in the path.
    pub name: Option<String>,
    /// The `User-Agent` header.
    pub user_agent: String,
    /// The request asked for `dryRun=All`.
    pub dry_run: bool,
    /// The HTTP status code answered.
    pub code: u16,
    /// Whether the request changed stored state.
    pub persisted: bool,
    /// The fault rules that fired on it.
    pub faults: Vec<String>,
}

impl AuditRecord {
    /// Whether the verb mutates (create, update, patch, delete).
    #[must_use]
    pub fn is_mutation(&self) -> bool {
        matches!(self.verb, "create" | "update" | "patch" | "delete")
    }
}

/// Totals per user agent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentTotals {
    /// Every request.
    pub requests: u64,
    /// Mutating requests that changed stored state.
    pub persisted_mutations: u64,
    /// Mutating requests with `dryRun=All`.
    pub dry_run_mutations: u64,
    /// Requests answered with a status code of 400 or more.
    pub errors: u64,
    /// Requests a fault rule fired on.
    pub faulted: u64,
}

/// The audit log: the most recent records (bounded) and exact totals.
#[derive(Debug)]
pub struct Audit {
    records: VecDeque<AuditRecord>,
    capacity: usize,
    next_seq: u64,
    totals: BTreeMap<String, AgentTotals>,
}

impl Audit {
    /// An audit keeping the last `capacity` records.
    #[must_use]
    pub fn new(capacity: usize) -> Self {
        Self {
            records: VecDeque::new(),
            capacity: capacity.max(1),
            next_seq: 1,
            totals: BTreeMap::new(),
        }
    }

    /// Adds a record (its `seq` is assigned here).
    pub fn push(&mut self, mut record: AuditRecord) {
        record.seq = self.next_seq;
        self.next_seq += 1;
        let totals = self.totals.entry(record.user_agent.clone()).or_default();
        totals.requests += 1;
        if record.is_mutation() && record.persisted {
            totals.persisted_mutations += 1;
        }
        if record.is_mutation() && record.dry_run {
            totals.dry_run_mutations += 1;
        }
        totals.errors += u64::from(record.code >= 400);
        totals.faulted += u64::from(!record.faults.is_empty());
        if self.records.len() == self.capacity {
            self.records.pop_front();
        }
        self.records.push_back(record);
    }

    /// The retained records, oldest first.
    pub fn records(&self) -> impl Iterator<Item = &AuditRecord> {
        self.records.iter()
    }

    /// Totals per user agent (exact, whatever the capacity).
    #[must_use]
    pub fn totals(&self) -> &BTreeMap<String, AgentTotals> {
        &self.totals
    }

    /// Persisted mutations of one user agent.
    #[must_use]
    pub fn persisted_mutations(&self, user_agent: &str) -> u64 {
        self.totals
            .get(user_agent)
            .map_or(0, |t| t.persisted_mutations)
    }

    /// Requests answered so far.
    #[must_use]
    pub fn len(&self) -> u64 {
        self.next_seq - 1
    }

    /// Whether no request was answered.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.next_seq == 1
    }
}

impl fmt::Display for Audit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} requests answered", self.len())?;
        writeln!(
            f,
            "{:<40} {:>9} {:>10} {:>9} {:>7} {:>8}",
            "user agent", "requests", "persisted", "dry-run", "errors", "faulted"
        )?;
        for (agent, t) in &self.totals {
            writeln!(
                f,
                "{:<40} {:>9} {:>10} {:>9} {:>7} {:>8}",
                agent, t.requests, t.persisted_mutations, t.dry_run_mutations, t.errors, t.faulted
            )?;
        }
        Ok(())
    }
}
