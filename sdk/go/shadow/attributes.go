package shadow

// The span convention's names (docs/ingest.md): the attributes and the event this package's
// spans carry and the sidecar (`shadow-reconciler ingest`) reads. The Rust crate writes them once
// (src/vocab/span.rs) and generates tests/data/span-vectors.json from them; attributes_test.go
// holds these constants to that file, so a name changed on one side only fails a test.
const (
	attrPlan              = "shadow_reconciler.plan"
	attrPlanHash          = "shadow_reconciler.plan.hash"
	attrReconcile         = "shadow_reconciler.reconcile"
	attrMode              = "shadow_reconciler.mode"
	attrEnforcedGroups    = "shadow_reconciler.enforced_groups"
	attrCandidateGroups   = "shadow_reconciler.candidate_groups"
	attrUnblocked         = "shadow_reconciler.unblocked"
	attrDryRunRequests    = "shadow_reconciler.dry_run_requests"
	attrGuardRefusals     = "shadow_reconciler.guard_refusals"
	attrCancelled         = "shadow_reconciler.cancelled"
	attrComparisonSkipped = "shadow_reconciler.comparison_skipped"
	attrOperation         = "shadow_reconciler.operation"
	attrPolicy            = "shadow_reconciler.policy"
	attrExecution         = "shadow_reconciler.execution"
	attrOutcome           = "shadow_reconciler.outcome"
	attrPhase             = "shadow_reconciler.phase"
	attrCategory          = "shadow_reconciler.category"
	attrBlockedBy         = "shadow_reconciler.blocked_by"
	attrConflicts         = "shadow_reconciler.conflicts"
	attrRetried           = "shadow_reconciler.retried"
	attrReevaluated       = "shadow_reconciler.reevaluated"
	attrInferred          = "shadow_reconciler.inferred"
	attrFlagKey           = "feature_flag.key"
	attrFlagProviderName  = "feature_flag.provider.name"
	attrFlagResultVariant = "feature_flag.result.variant"
	attrFlagResultReason  = "feature_flag.result.reason"
	attrFlagContextID     = "feature_flag.context.id"
	attrFlagVersion       = "feature_flag.version"
	attrErrorType         = "error.type"
	attrK8sNamespaceName  = "k8s.namespace.name"
	attrK8sObjectKind     = "k8s.object.kind"
	attrK8sResourceKind   = "k8s.resource.kind"
	attrK8sObjectName     = "k8s.object.name"
	attrK8sObjectUID      = "k8s.object.uid"
	attrK8sStatusCode     = "k8s.status.code"
	attrK8sStatusReason   = "k8s.status.reason"
	eventWriteDifference  = "shadow_reconciler.write_difference"
	eventGroup            = "shadow_reconciler.write.group"
	eventKind             = "shadow_reconciler.write.kind"
	eventNamespace        = "shadow_reconciler.write.namespace"
	eventName             = "shadow_reconciler.write.name"
	eventSubresource      = "shadow_reconciler.write.subresource"
	eventControl          = "shadow_reconciler.write.control"
	eventCandidate        = "shadow_reconciler.write.candidate"
	eventFields           = "shadow_reconciler.write.fields"
	eventFieldsTotal      = "shadow_reconciler.write.fields_total"
	eventIntended         = "shadow_reconciler.write.intended"
)

// PlanAttribute names a reconcile span's plan; a controller sets it on its tracer's resource
// (see Tracing) when its spans should reach the sidecar under that plan.
const PlanAttribute = attrPlan

// spanNames is every name above by the Rust constant's path, as the shared vectors key them.
var spanNames = map[string]string{
	"PLAN":                         attrPlan,
	"PLAN_HASH":                    attrPlanHash,
	"RECONCILE":                    attrReconcile,
	"MODE":                         attrMode,
	"ENFORCED_GROUPS":              attrEnforcedGroups,
	"CANDIDATE_GROUPS":             attrCandidateGroups,
	"UNBLOCKED":                    attrUnblocked,
	"DRY_RUN_REQUESTS":             attrDryRunRequests,
	"GUARD_REFUSALS":               attrGuardRefusals,
	"CANCELLED":                    attrCancelled,
	"COMPARISON_SKIPPED":           attrComparisonSkipped,
	"OPERATION":                    attrOperation,
	"POLICY":                       attrPolicy,
	"EXECUTION":                    attrExecution,
	"OUTCOME":                      attrOutcome,
	"PHASE":                        attrPhase,
	"CATEGORY":                     attrCategory,
	"BLOCKED_BY":                   attrBlockedBy,
	"CONFLICTS":                    attrConflicts,
	"RETRIED":                      attrRetried,
	"REEVALUATED":                  attrReevaluated,
	"INFERRED":                     attrInferred,
	"feature_flag::KEY":            attrFlagKey,
	"feature_flag::PROVIDER_NAME":  attrFlagProviderName,
	"feature_flag::RESULT_VARIANT": attrFlagResultVariant,
	"feature_flag::RESULT_REASON":  attrFlagResultReason,
	"feature_flag::CONTEXT_ID":     attrFlagContextID,
	"feature_flag::VERSION":        attrFlagVersion,
	"semconv::ERROR_TYPE":          attrErrorType,
	"semconv::K8S_NAMESPACE_NAME":  attrK8sNamespaceName,
	"semconv::K8S_OBJECT_KIND":     attrK8sObjectKind,
	"semconv::K8S_RESOURCE_KIND":   attrK8sResourceKind,
	"semconv::K8S_OBJECT_NAME":     attrK8sObjectName,
	"semconv::K8S_OBJECT_UID":      attrK8sObjectUID,
	"semconv::K8S_STATUS_CODE":     attrK8sStatusCode,
	"semconv::K8S_STATUS_REASON":   attrK8sStatusReason,
	"event::NAME":                  eventWriteDifference,
	"event::GROUP":                 eventGroup,
	"event::KIND":                  eventKind,
	"event::NAMESPACE":             eventNamespace,
	"event::NAME_ATTRIBUTE":        eventName,
	"event::SUBRESOURCE":           eventSubresource,
	"event::CONTROL":               eventControl,
	"event::CANDIDATE":             eventCandidate,
	"event::FIELDS":                eventFields,
	"event::FIELDS_TOTAL":          eventFieldsTotal,
	"event::INTENDED":              eventIntended,
}
