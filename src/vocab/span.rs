//! The names of the span convention (`docs/ingest.md`): the attributes and the event the Rust
//! engine's traces carry, the Go package's spans carry, and `ingest` reads. Written once here;
//! the Go package holds the same names, checked against `tests/data/span-vectors.json`, which
//! `tests/suite/span_vectors.rs` generates from [`ALL`].

/// A reconcile span's plan (on the span or its resource).
pub const PLAN: &str = "shadow_reconciler.plan";
/// The plan's content hash (64 hex digits), checked by `ingest` against the plan it loaded.
pub const PLAN_HASH: &str = "shadow_reconciler.plan.hash";
/// Marks a span as a reconcile span, whatever its name.
pub const RECONCILE: &str = "shadow_reconciler.reconcile";
/// The reconcile's mode (`off`, `shadow`, `enforce`).
pub const MODE: &str = "shadow_reconciler.mode";
/// Mode `enforce`: the rollout groups the control enforced.
pub const ENFORCED_GROUPS: &str = "shadow_reconciler.enforced_groups";
/// The rollout groups the candidate evaluated (absent: the sidecar's default; empty: every one).
pub const CANDIDATE_GROUPS: &str = "shadow_reconciler.candidate_groups";
/// The operations the candidate would have unblocked (the Rust engine: how many; Go: their
/// names).
pub const UNBLOCKED: &str = "shadow_reconciler.unblocked";
/// Dry-run requests the candidate made in the reconcile.
pub const DRY_RUN_REQUESTS: &str = "shadow_reconciler.dry_run_requests";
/// Writes the dry-run guard refused in the reconcile (must be 0).
pub const GUARD_REFUSALS: &str = "shadow_reconciler.guard_refusals";
/// On a reconcile span: the reconcile was cut short before it finished (the process's shutdown,
/// its context cancelled). It is recorded as cancelled: never a failure, never a write
/// difference; its operation spans are not read.
pub const CANCELLED: &str = "shadow_reconciler.cancelled";
/// On a reconcile span: the control ran alone, its comparison skipped for this reason (`budget`:
/// the shadow's request budget was spent; `paused`: the shadow stood aside under load;
/// `sampled-out`: the comparison would pair code and the object is outside the paired sample).
pub const COMPARISON_SKIPPED: &str = "shadow_reconciler.comparison_skipped";
/// An operation span's operation name.
pub const OPERATION: &str = "shadow_reconciler.operation";
/// Which run an operation span belongs to: `control` (the default) or `candidate`.
pub const POLICY: &str = "shadow_reconciler.policy";
/// How a candidate operation executed (`dry-run`, `reused`, `not-simulated`).
pub const EXECUTION: &str = "shadow_reconciler.execution";
/// An operation's outcome.
pub const OUTCOME: &str = "shadow_reconciler.outcome";
/// An operation's phase in the plan.
pub const PHASE: &str = "shadow_reconciler.phase";
/// An operation's category in the plan.
pub const CATEGORY: &str = "shadow_reconciler.category";
/// The operations whose failure blocked this one (comma-separated).
pub const BLOCKED_BY: &str = "shadow_reconciler.blocked_by";
/// The 409 Conflicts an operation met.
pub const CONFLICTS: &str = "shadow_reconciler.conflicts";
/// Whether an operation was retried after a conflict.
pub const RETRIED: &str = "shadow_reconciler.retried";
/// On a candidate's dry-run operation span: whether it re-evaluates a step the control failed
/// on a 409 Conflict (only those count in the conflict resolutions; a sampled re-execution does
/// not).
pub const REEVALUATED: &str = "shadow_reconciler.reevaluated";
/// On an operation span of the Go package's legacy-loop form: the step was inferred from the
/// legacy function's report, not observed.
pub const INFERRED: &str = "shadow_reconciler.inferred";

/// The OpenTelemetry feature-flag semantic conventions, on a reconcile span.
pub mod feature_flag {
    /// The flag's key.
    pub const KEY: &str = "feature_flag.key";
    /// The provider's name.
    pub const PROVIDER_NAME: &str = "feature_flag.provider.name";
    /// The variant chosen: the mode.
    pub const RESULT_VARIANT: &str = "feature_flag.result.variant";
    /// Why (`static`, `default`, `split`, `targeting_match`, `stale`, `error`).
    pub const RESULT_REASON: &str = "feature_flag.result.reason";
    /// The evaluation context: the object's UID.
    pub const CONTEXT_ID: &str = "feature_flag.context.id";
    /// The flag ConfigMap's resourceVersion.
    pub const VERSION: &str = "feature_flag.version";
}

/// The OpenTelemetry (Kubernetes and error) semantic conventions the spans use.
pub mod semconv {
    /// The error's class.
    pub const ERROR_TYPE: &str = "error.type";
    /// The object's namespace.
    pub const K8S_NAMESPACE_NAME: &str = "k8s.namespace.name";
    /// The object's kind.
    pub const K8S_OBJECT_KIND: &str = "k8s.object.kind";
    /// The object's kind, as some instrumentations write it.
    pub const K8S_RESOURCE_KIND: &str = "k8s.resource.kind";
    /// The object's name.
    pub const K8S_OBJECT_NAME: &str = "k8s.object.name";
    /// The object's UID.
    pub const K8S_OBJECT_UID: &str = "k8s.object.uid";
    /// An API error's HTTP status code.
    pub const K8S_STATUS_CODE: &str = "k8s.status.code";
    /// An API error's reason (`Conflict`, `NotFound`...).
    pub const K8S_STATUS_REASON: &str = "k8s.status.reason";
}

/// The span event that carries a write difference (on the candidate's span of the operation, or
/// the control's for an operation of the legacy path only), and its attributes.
pub mod event {
    /// The event's name.
    pub const NAME: &str = "shadow_reconciler.write_difference";
    /// The written object's API group (empty for the core group).
    pub const GROUP: &str = "shadow_reconciler.write.group";
    /// Its kind.
    pub const KIND: &str = "shadow_reconciler.write.kind";
    /// Its namespace (absent when cluster-scoped).
    pub const NAMESPACE: &str = "shadow_reconciler.write.namespace";
    /// Its name.
    pub const NAME_ATTRIBUTE: &str = "shadow_reconciler.write.name";
    /// The subresource written (absent for the object itself).
    pub const SUBRESOURCE: &str = "shadow_reconciler.write.subresource";
    /// The control's last accepted verb (absent: it wrote nothing).
    pub const CONTROL: &str = "shadow_reconciler.write.control";
    /// The candidate's last accepted (dry-run) verb (absent: it wrote nothing).
    pub const CANDIDATE: &str = "shadow_reconciler.write.candidate";
    /// The differing fields (a string array).
    pub const FIELDS: &str = "shadow_reconciler.write.fields";
    /// How many fields differ in all.
    pub const FIELDS_TOTAL: &str = "shadow_reconciler.write.fields_total";
    /// Whether the plan declares it.
    pub const INTENDED: &str = "shadow_reconciler.write.intended";
}

/// Every name above, by its constant's path: the table the shared vectors are generated from.
pub const ALL: &[(&str, &str)] = &[
    ("PLAN", PLAN),
    ("PLAN_HASH", PLAN_HASH),
    ("RECONCILE", RECONCILE),
    ("MODE", MODE),
    ("ENFORCED_GROUPS", ENFORCED_GROUPS),
    ("CANDIDATE_GROUPS", CANDIDATE_GROUPS),
    ("UNBLOCKED", UNBLOCKED),
    ("DRY_RUN_REQUESTS", DRY_RUN_REQUESTS),
    ("GUARD_REFUSALS", GUARD_REFUSALS),
    ("CANCELLED", CANCELLED),
    ("COMPARISON_SKIPPED", COMPARISON_SKIPPED),
    ("OPERATION", OPERATION),
    ("POLICY", POLICY),
    ("EXECUTION", EXECUTION),
    ("OUTCOME", OUTCOME),
    ("PHASE", PHASE),
    ("CATEGORY", CATEGORY),
    ("BLOCKED_BY", BLOCKED_BY),
    ("CONFLICTS", CONFLICTS),
    ("RETRIED", RETRIED),
    ("REEVALUATED", REEVALUATED),
    ("INFERRED", INFERRED),
    ("feature_flag::KEY", feature_flag::KEY),
    ("feature_flag::PROVIDER_NAME", feature_flag::PROVIDER_NAME),
    ("feature_flag::RESULT_VARIANT", feature_flag::RESULT_VARIANT),
    ("feature_flag::RESULT_REASON", feature_flag::RESULT_REASON),
    ("feature_flag::CONTEXT_ID", feature_flag::CONTEXT_ID),
    ("feature_flag::VERSION", feature_flag::VERSION),
    ("semconv::ERROR_TYPE", semconv::ERROR_TYPE),
    ("semconv::K8S_NAMESPACE_NAME", semconv::K8S_NAMESPACE_NAME),
    ("semconv::K8S_OBJECT_KIND", semconv::K8S_OBJECT_KIND),
    ("semconv::K8S_RESOURCE_KIND", semconv::K8S_RESOURCE_KIND),
    ("semconv::K8S_OBJECT_NAME", semconv::K8S_OBJECT_NAME),
    ("semconv::K8S_OBJECT_UID", semconv::K8S_OBJECT_UID),
    ("semconv::K8S_STATUS_CODE", semconv::K8S_STATUS_CODE),
    ("semconv::K8S_STATUS_REASON", semconv::K8S_STATUS_REASON),
    ("event::NAME", event::NAME),
    ("event::GROUP", event::GROUP),
    ("event::KIND", event::KIND),
    ("event::NAMESPACE", event::NAMESPACE),
    ("event::NAME_ATTRIBUTE", event::NAME_ATTRIBUTE),
    ("event::SUBRESOURCE", event::SUBRESOURCE),
    ("event::CONTROL", event::CONTROL),
    ("event::CANDIDATE", event::CANDIDATE),
    ("event::FIELDS", event::FIELDS),
    ("event::FIELDS_TOTAL", event::FIELDS_TOTAL),
    ("event::INTENDED", event::INTENDED),
];
