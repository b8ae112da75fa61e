// Package shadow brings the shadow-reconciler engine into a Go controller's process: the
// controller registers its operations by the names of a ReconcilePlan and calls Reconcile; the
// engine runs the control (the legacy sequential loop, or the phased model with the flag's
// enforced groups) with the controller's client, and the phased candidate in shadow: it reuses
// what the control ran, runs what the control did not through a dry-run client (with a
// read-your-dry-run-writes overlay and a guard that refuses anything but dry runs), and
// reports both runs as OpenTelemetry spans that the shadow-reconciler sidecar (`ingest`) turns
// into the same metrics, Parquet data and analysis as the Rust engine's.
//
// A controller whose legacy loop is not the same code as its phased reconcile gives the legacy
// code too (NewWithLegacy): per operation (Legacy.Ops), or as the whole legacy loop in one
// function that marks its steps with Step (Legacy.Func, the HyperShift shape). The engine then
// runs the candidate's code of such an operation in dry-run just before the control's, on the
// same world, and reports what the two codes wrote differently (Outcome.WriteDifferences, and
// span events the sidecar records).
package shadow

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/flag"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/model"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/plan"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/writes"
)

// Execution is how a step ran.
type Execution string

const (
	ExecReal         Execution = "real"
	ExecDryRun       Execution = "dry-run"
	ExecReused       Execution = "reused"
	ExecNotSimulated Execution = "not-simulated"
)

// Op is one operation of the reconcile. It does its API work through r.Client, which is the
// controller's client in the control and the dry-run client in the candidate: the same code
// runs in both, unless the operation has legacy code of its own (NewWithLegacy).
type Op[T client.Object, S any] func(ctx context.Context, r *Run[T, S]) error

// Run is what an operation sees: the client of its run, the object, the state the operations
// of one run share (the candidate starts from a copy of the control's), how it runs, and which
// code path runs it.
type Run[T client.Object, S any] struct {
	// Client is the controller-runtime client of the run: the controller's in the control, the
	// dry-run client in the candidate. Nil for an engine without one (a client-go controller:
	// its operations take their clients from Clients.For(r)).
	Client    client.Client
	Object    T
	State     *S
	Execution Execution
	// Path is the code path running the operation: legacy in the legacy loop (the sequential
	// model), phased in the phased reconcile. The engine runs an operation's legacy code of its
	// own where it has one; code shared by both paths may read Path to log or label.
	Path plan.CodePath

	retry     bool
	requeue   time.Duration
	conflicts int
	attempt   int
	idle      bool
}

// NothingToDo says the operation had nothing to do in this run (a branch the object does not
// take, an object already as wanted); it then returns nil. Its outcome is "idle": a success that
// is no evidence of what the operation does, so a candidate step that had nothing to do is never
// counted as unblocked, and it is no change from a success.
func (r *Run[T, S]) NothingToDo() { r.idle = true }

// DryRun says whether the run is the candidate's dry run (the operation must then write only
// through the candidate's clients: Run.Client, or Clients.For(r)).
func (r *Run[T, S]) DryRun() bool { return r.Execution == ExecDryRun }

// Attempt is the attempt of the operation in its run: 1, then 2, 3, ... when the engine
// re-runs it on a 409 under retry-on-conflict. An attempt after the first must read what it
// updates afresh (Fresh), not from a cache that gave the stale version.
func (r *Run[T, S]) Attempt() int { return r.attempt }

// RequeueAfter asks for the object to be reconciled again after d (the smallest of a run wins).
func (r *Run[T, S]) RequeueAfter(d time.Duration) {
	if d > 0 && (r.requeue == 0 || d < r.requeue) {
		r.requeue = d
	}
}

// RetryOnConflict says whether the operation runs under the retry-on-conflict policy (an
// enforced operation whose plan says `retryOnConflict: true`, in the phased model): the engine
// then re-runs it on a 409 as client-go's retry.RetryOnConflict(retry.DefaultRetry, ...) does,
// so the operation must read what it updates afresh on each attempt.
func (r *Run[T, S]) RetryOnConflict() bool { return r.retry }

// Options configure an engine.
type Options struct {
	// Flag decides each reconcile's mode. Nil: mode shadow for every object, every group.
	Flag *Flag
	// DryRun makes the candidate's clients. Required unless the flag can only say off.
	DryRun *DryRun
	// Tracer emits the spans. Nil: otel.Tracer of the global provider.
	Tracer trace.Tracer
	// Kind is the kind of the objects reconciled, for the spans (k8s.object.kind). Empty: from
	// the controller-runtime client's scheme, else from the object's TypeMeta.
	Kind string
	// WriteCondition writes the ReconciliationSucceeded condition from the control when it
	// changed (status.conditions, a merge patch carrying the resourceVersion). When the server
	// stores no condition (the kind's status schema has none: a CRD prunes it), the engine says
	// so once in the log and in the gauge shadow_reconciler_condition_unstorable of
	// controller-runtime's metrics registry, and writes it no more.
	WriteCondition bool
	// APIReader reads the object afresh when the condition's patch meets a 409 (the manager's
	// mgr.GetAPIReader(); a cache could answer with the same stale object). Nil: the client.
	APIReader client.Reader
	// Log receives the reconcile lines. Zero: discarded.
	Log logr.Logger
	// ReexecuteSampleRate is the share (0 to 1) of the steps the candidate would reuse that it
	// re-executes through the dry-run client instead, to measure whether the phased order
	// changes their outcome (the Rust engine's reexecute_sample_rate). 0: none.
	ReexecuteSampleRate float64
}

// Engine runs one plan's operations for one kind of object.
type Engine[T client.Object, S any] struct {
	plan     *plan.Plan
	planHash string
	real     client.Client
	// ops is, by operation id, the code of the phased path (shared with the legacy path unless
	// legacy has code of the operation), and the code of an only: legacy operation given in ops.
	ops []Op[T, S]
	// legacy is, by operation id, legacy code of its own (Legacy.Ops), nil where there is none.
	legacy []Op[T, S]
	// fn is the whole legacy loop (Legacy.Func), nil when the legacy code is per operation.
	fn     LegacyFunc[T]
	flag   *Flag
	dry    *DryRun
	tracer trace.Tracer
	opts   Options
	// kinds are the kinds of the resources written, for naming deleted objects.
	kinds writes.Kinds

	mu           sync.Mutex
	conditionOff atomic.Bool // the kind's status cannot store the condition: not written
	policies     *policies
	samples      atomic.Uint64
	unknownSteps sync.Map // names Step marked that the legacy path does not have, logged once
}

// MismatchError says that the plan and the registered operations differ.
type MismatchError struct {
	Plan                         string
	MissingInCode, MissingInPlan []string
}

func (e *MismatchError) Error() string {
	var parts []string
	if len(e.MissingInCode) > 0 {
		parts = append(parts, "operations in the plan but not in code: "+strings.Join(e.MissingInCode, ", "))
	}
	if len(e.MissingInPlan) > 0 {
		parts = append(parts, "operations in code but not in the plan: "+strings.Join(e.MissingInPlan, ", "))
	}
	return fmt.Sprintf("plan %s and reconciler disagree: %s", e.Plan, strings.Join(parts, "; "))
}

// New matches the operations with the plan (every operation of the plan, no other) and
// builds the engine. real is the controller's client (the manager's). Each operation is one
// piece of code that both paths run; NewWithLegacy takes legacy code of its own.
func New[T client.Object, S any](p *plan.Plan, real client.Client, ops map[string]Op[T, S], opts Options) (*Engine[T, S], error) {
	return NewWithLegacy(p, real, ops, Legacy[T, S]{}, opts)
}

// Plan is the engine's plan.
func (e *Engine[T, S]) Plan() *plan.Plan { return e.plan }

// Outcome is one reconcile's result.
type Outcome struct {
	Mode       flag.Mode
	Evaluation flag.Evaluation
	// Control is the run that wrote; Candidate the shadow run (nil in mode off).
	Control, Candidate *model.Report
	Diff               *model.Diff
	// Err is the control's aggregate error (nil on success); for a legacy function
	// (Legacy.Func), the error it returned.
	Err error
	// RequeueAfter is the smallest requeue a control operation asked for; for a legacy
	// function, the RequeueAfter it returned.
	RequeueAfter time.Duration
	// DryRunRequests and GuardRefusals are the candidate's, its paired runs included
	// (refusals must stay 0).
	DryRunRequests, GuardRefusals uint64
	// WriteDifferences are what the candidate's code would have written differently from the
	// control's (mode shadow): per object, for the operations whose legacy code is their own
	// (paired), and every write of an operation of one code path, in the order found.
	WriteDifferences []writes.WriteDifference
	// TraceID of the reconcile span (empty when the tracer does not record).
	TraceID string
	// Cancelled says the reconcile was cut short: its context ended (the controller's
	// shutdown cancels it, a reconcile timeout ends it) and a step of it failed, which may be
	// the cut itself (context canceled on a write), so it is recorded as cancelled, never as a
	// failure or a write difference (the reconcile span says so; the sidecar counts it apart,
	// without its steps). A reconcile whose steps all ended before the context did is whole.
	// Err and the result are still the control's, for the controller.
	Cancelled bool
	// ComparisonSkipped says why the control ran alone in a mode with a shadow (SkipBudget: the
	// shadow's request budget was spent; SkipPaused: the shadow was paused under load, or a
	// pause began during the comparison, which is then dropped; SkipSampledOut: the object is
	// outside the paired sample), empty when the comparison ran:
	// Candidate nil, as in mode off (the reconcile span says so; the sidecar counts it).
	ComparisonSkipped ComparisonSkip

	// result is a legacy function's own result, returned as it is.
	result *reconcile.Result
}

// Result is what controller-runtime gets: the control's error and requeue (a legacy function's
// own result).
func (o *Outcome) Result() (reconcile.Result, error) {
	if o.result != nil {
		return *o.result, o.Err
	}
	return reconcile.Result{RequeueAfter: o.RequeueAfter}, o.Err
}

// Reconcile reconciles one object: the control for real, the candidate in shadow, the spans,
// and the condition when asked for. The control's operations get obj (what they do to it is
// theirs); the candidate's get a deep copy, and a copy of the control's final state (a
// shallow copy of S: operations replace what the state points to, never modify it in place).
// An operation whose legacy code is its own is paired in mode shadow: just before the control
// runs its legacy code, the candidate's code of it runs in dry-run, on a deep copy of the
// object and a copy of the control's state at that point, and the two runs' writes are
// compared. With a legacy function (Legacy.Func) the candidate's state is its own, carried
// from one paired run to the next and into the candidate run.
func (e *Engine[T, S]) Reconcile(ctx context.Context, obj T) *Outcome {
	state := e.flag.Current(ctx)
	pol, err := e.policiesFor(state)
	if err != nil {
		// Unreachable: a flag names only groups the plan has (validated); keep the policies
		// of the last flag.
		e.opts.Log.Error(err, "cannot build the policies of the flag; keeping the previous ones")
		e.mu.Lock()
		pol = e.policies
		e.mu.Unlock()
	}
	uid := string(obj.GetUID())
	if uid == "" {
		uid = obj.GetNamespace() + "/" + obj.GetName()
	}
	annotation, has := obj.GetAnnotations()[flag.Annotation]
	eval := pol.flag.Evaluate(uid, annotation, has, state.FromConfigMap, state.Stale, state.Version)
	out := &Outcome{Mode: eval.Mode, Evaluation: eval}

	kind := e.kindOf(obj)
	attrs := []attribute.KeyValue{
		attribute.String(attrPlan, e.plan.Name),
		attribute.String(attrPlanHash, e.planHash),
		attribute.String(attrMode, string(out.Mode)),
		attribute.String(attrK8sObjectKind, kind),
		attribute.String(attrK8sObjectName, obj.GetName()),
		attribute.String(attrK8sObjectUID, string(obj.GetUID())),
		attribute.String(attrFlagKey, flag.Key),
		attribute.String(attrFlagProviderName, "shadow-reconciler"),
		attribute.String(attrFlagResultVariant, string(eval.Mode)),
		attribute.String(attrFlagResultReason, string(eval.Reason)),
	}
	if ns := obj.GetNamespace(); ns != "" {
		attrs = append(attrs, attribute.String(attrK8sNamespaceName, ns))
	}
	if eval.Version != "" {
		attrs = append(attrs, attribute.String(attrFlagVersion, eval.Version))
	}
	if out.Mode == flag.Enforce {
		attrs = append(attrs, attribute.StringSlice(attrEnforcedGroups, eval.EnforcedGroups))
	}
	if out.Mode != flag.Off {
		// Always sent, so the sidecar evaluates the candidate this engine ran; empty: every
		// operation enforced.
		groups := pol.flag.CandidateGroups
		if groups == nil {
			groups = []string{}
		}
		attrs = append(attrs, attribute.StringSlice(attrCandidateGroups, groups))
	}
	ctx, span := e.tracer.Start(ctx, "reconcile", trace.WithAttributes(attrs...))
	defer span.End()
	if sc := span.SpanContext(); sc.HasTraceID() {
		out.TraceID = sc.TraceID().String()
	}

	controlPolicy := pol.sequential
	if out.Mode == flag.Enforce {
		controlPolicy = pol.enforceFor(eval.EnforcedGroups)
	}
	// The candidate side of the reconcile, and the policy whose code is paired with the
	// control's: the phased candidate when the control runs the legacy path.
	var sh *shadowRun
	var pairing *model.Policy
	budget, skip := e.admit(out.Mode, uid, controlPolicy)
	pausesAtStart := budget.Pauses()
	switch {
	case skip != "":
		// The shadow is paused under load, or its budget is spent: the control runs alone, as
		// with the shadow off.
		out.ComparisonSkipped = skip
	case out.Mode == flag.Calibrate:
		// The control's own code of every operation is paired with it: no candidate.
		sh = newShadowRun(ctx)
		sh.calibrate, pairing = true, controlPolicy
	case out.Mode != flag.Off:
		sh = newShadowRun(ctx)
		if controlPolicy.Path() == plan.PathLegacy {
			pairing = pol.candidate
		}
	}
	var controlState, candidateState S
	var control *model.Report
	var retried []bool
	var condition model.Condition
	if e.fn != nil && controlPolicy.Path() == plan.PathLegacy {
		var result reconcile.Result
		var fnErr error
		control, result, fnErr = e.runLegacyFunc(ctx, controlPolicy, pairing, obj, &candidateState, sh)
		retried = make([]bool, len(e.plan.Operations))
		out.result, out.Err, out.RequeueAfter = &result, fnErr, result.RequeueAfter
		condition = control.Condition()
		if _, failed := control.Aggregate(); fnErr != nil && !failed {
			// It failed without marking a step: which step is not known, the error is.
			condition = model.Condition{Type: model.ConditionType, Status: "False", Reason: model.ReasonError, Message: fnErr.Error()}
		}
	} else {
		control, retried = e.runControl(ctx, controlPolicy, pairing, obj, &controlState, sh)
		candidateState = controlState
		out.RequeueAfter = control.RequeueAfter
		if message, failed := control.Aggregate(); failed {
			out.Err = errors.New(message)
		}
		condition = control.Condition()
	}
	out.Control = control
	if sh != nil && !sh.calibrate && budget.Paused() {
		// Paused during the control's run: the shadow steps aside before the candidate's
		// requests.
		sh.closePaired()
		sh, out.ComparisonSkipped = nil, SkipPaused
	}
	if sh != nil && sh.calibrate {
		sh.closePaired()
		out.DryRunRequests, out.GuardRefusals = sh.local.DryRunRequests(), sh.local.Refused()
		out.WriteDifferences = sh.differences
		span.SetAttributes(
			attribute.Int64(attrDryRunRequests, int64(out.DryRunRequests)),
			attribute.Int64(attrGuardRefusals, int64(out.GuardRefusals)),
		)
	} else if sh != nil {
		// The candidate's own copy: nothing it does to the object, or a dry-run answer decoded
		// into it, reaches the control's object or the condition written from it.
		candidateObject := obj.DeepCopyObject().(T)
		out.Candidate = e.runCandidate(pol.candidate, candidateObject, &candidateState, control, retried, sh)
		sh.closePaired()
		out.Diff, _ = model.Between(control, out.Candidate)
		out.DryRunRequests, out.GuardRefusals = sh.local.DryRunRequests(), sh.local.Refused()
		out.WriteDifferences = sh.differences
		span.SetAttributes(
			attribute.Int64(attrDryRunRequests, int64(out.DryRunRequests)),
			attribute.Int64(attrGuardRefusals, int64(out.GuardRefusals)),
			attribute.StringSlice(attrUnblocked, e.plan.SortedNames(out.Diff.Unblocked)),
		)
	}
	if sh != nil && budget.Pauses() != pausesAtStart {
		// A pause began during the comparison (a 429, the control slowing down): what it
		// measured is the server's load, not the candidate. Dropped, counted as paused.
		out.Candidate, out.Diff, out.WriteDifferences = nil, nil, nil
		out.ComparisonSkipped = SkipPaused
	}
	if out.ComparisonSkipped != "" {
		span.SetAttributes(attribute.String(attrComparisonSkipped, string(out.ComparisonSkipped)))
	}
	if ctx.Err() != nil && (len(out.Control.Failures()) > 0 || (out.Candidate != nil && len(out.Candidate.Failures()) > 0)) {
		// Cut short: what failed may be the cut itself, and a write the candidate's dry run made
		// may have no real counterpart only because the control's was cancelled. A reconcile
		// whose every step ended before the cut (the context ended after them) is whole.
		out.Cancelled, out.WriteDifferences = true, nil
		span.SetAttributes(attribute.Bool(attrCancelled, true))
		e.log(obj, out)
		return out
	}
	if out.Err != nil {
		span.SetStatus(codes.Error, out.Err.Error())
	}
	if e.opts.WriteCondition && e.real != nil && !e.conditionOff.Load() {
		reader := e.opts.APIReader
		if reader == nil {
			reader = e.real
		}
		err := writeCondition(ctx, e.real, reader, obj, condition)
		switch {
		case errors.Is(err, errConditionNotStored):
			if e.conditionOff.CompareAndSwap(false, true) {
				kind := e.kindOf(obj)
				conditionUnstorable.WithLabelValues(e.plan.Name, kind).Set(1)
				e.opts.Log.Info("the ReconciliationSucceeded condition cannot be stored: no longer written (Options.WriteCondition); the spans and the sidecar's data still carry every outcome",
					"plan", e.plan.Name, "kind", kind, "object", objectName(obj), "reason", err.Error())
			}
		case err != nil:
			e.opts.Log.Info("cannot write the ReconciliationSucceeded condition", "object", objectName(obj), "error", err.Error())
		}
	}
	e.log(obj, out)
	return out
}

// kindOf is the kind of obj for the spans: Options.Kind, else the controller-runtime
// client's scheme's, else the object's TypeMeta.
func (e *Engine[T, S]) kindOf(obj T) string {
	if e.opts.Kind != "" {
		return e.opts.Kind
	}
	if e.real != nil {
		if gvk, err := e.real.GroupVersionKindFor(obj); err == nil {
			return gvk.Kind
		}
	}
	return obj.GetObjectKind().GroupVersionKind().Kind
}

func (e *Engine[T, S]) log(obj T, out *Outcome) {
	values := []any{"plan", e.plan.Name, "mode", out.Mode, "object", objectName(obj), "traceID", out.TraceID}
	if out.Cancelled {
		e.opts.Log.Info("reconcile cancelled before it finished (recorded as cancelled, not as a failure)", values...)
		return
	}
	if out.ComparisonSkipped != "" {
		values = append(values, "comparisonSkipped", string(out.ComparisonSkipped))
	}
	if out.Diff != nil && len(out.Diff.Unblocked) > 0 {
		values = append(values, "wouldUnblock", e.plan.SortedNames(out.Diff.Unblocked))
	}
	if len(out.WriteDifferences) > 0 {
		described := make([]string, len(out.WriteDifferences))
		for i := range out.WriteDifferences {
			described[i] = out.WriteDifferences[i].Describe()
		}
		values = append(values, "writeDifferences", described)
	}
	if out.Err != nil {
		e.opts.Log.Info("reconciliation completed with errors", append(values, "error", out.Err.Error(), "summary", out.Control.LogSummary())...)
		return
	}
	e.opts.Log.V(1).Info("successfully reconciled", values...)
}

// retries says whether op runs under retry-on-conflict in policy: enforced operations whose
// plan says so, in the phased model.
func (e *Engine[T, S]) retries(op int, policy *model.Policy) bool {
	return policy.Kind == model.Phased && slices.Contains(policy.Enforced, op) && e.plan.Operations[op].RetryOnConflict
}

func mustComplete(run *model.Run, op int, result model.Result) {
	if err := run.Complete(op, result); err != nil {
		panic(err) // the engine completes exactly the pending operation
	}
}

func mustReport(run *model.Run) *model.Report {
	report, err := run.Report()
	if err != nil {
		panic(err) // the engine decides every operation
	}
	return report
}

// sampled says whether this reused step is re-executed instead, drawn deterministically from
// a counter at the configured rate.
func (e *Engine[T, S]) sampled() bool {
	rate := e.opts.ReexecuteSampleRate
	if rate <= 0 {
		return false
	}
	n := e.samples.Add(1)
	return rand.New(rand.NewPCG(n, 0x9e3779b97f4a7c15)).Float64() < rate
}

// reuse is the control's result of a step, as the candidate takes it.
func reuse(step model.Step) model.Result {
	var result model.Result
	switch step.Outcome.Kind {
	case model.Failed:
		result = model.Failure(step.Outcome.Class, step.Message)
	case model.Unknown:
		result = model.NotSimulated()
	case model.Idle:
		result = model.NothingToDo()
	default:
		result = model.Success()
	}
	result.RequeueAfter = step.RequeueAfter
	return result
}

// execute runs one operation in its own span, with retry-on-conflict when the run asks for it,
// and returns the span for the caller to close. A panic in the operation is its failure (class
// internal), not the controller's crash.
func (e *Engine[T, S]) execute(ctx context.Context, op int, r *Run[T, S], policy string, options ...trace.SpanStartOption) (model.Result, stepSpan) {
	ctx, span := e.startSpan(ctx, op, policy, r.Execution, options...)
	err := e.call(ctx, r, op)
	end := time.Now()
	result := model.Success()
	switch {
	case err != nil:
		result = model.Failure(Classify(err), err.Error())
	case r.idle:
		result = model.NothingToDo()
		result.RequeueAfter = r.requeue
	default:
		// As the Rust engine: a requeue counts from an operation that succeeded.
		result.RequeueAfter = r.requeue
	}
	reportOutcome(span, err, err == nil && r.idle, r.conflicts, r.retry)
	return result, stepSpan{span, end}
}

// run executes one operation and ends its span.
func (e *Engine[T, S]) run(ctx context.Context, op int, r *Run[T, S], policy string) model.Result {
	result, span := e.execute(ctx, op, r, policy)
	span.close(nil)
	return result
}

// code is the code of op that the run's path runs: its legacy code of its own in the legacy
// path, else the shared (phased) code.
func (e *Engine[T, S]) code(op int, path plan.CodePath) Op[T, S] {
	if path == plan.PathLegacy && e.legacy[op] != nil {
		return e.legacy[op]
	}
	return e.ops[op]
}

func (e *Engine[T, S]) call(ctx context.Context, r *Run[T, S], op int) error {
	code := e.code(op, r.Path)
	r.attempt = 0
	once := func() (err error) {
		r.requeue, r.idle = 0, false // a retried attempt starts afresh
		r.attempt++
		defer func() {
			if p := recover(); p != nil {
				err = Errorf(ClassInternal, "operation %s panicked: %v", e.plan.Operations[op].Name, p)
			}
		}()
		if code == nil {
			return Errorf(ClassInternal, "operation %s has no code in the %s path", e.plan.Operations[op].Name, r.Path)
		}
		err = code(ctx, r)
		if IsConflict(err) {
			r.conflicts++
		}
		return err
	}
	if !r.retry {
		return once()
	}
	return retry.RetryOnConflict(retry.DefaultRetry, once)
}

// objectName is how an object is named in the log: namespace/name, or name alone for a
// cluster-scoped object.
func objectName(obj client.Object) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}

// Reconciler adapts the engine to controller-runtime: it reads the object with reader (the
// manager's client), ignores one that is gone, and returns the control's error and requeue.
func Reconciler[T client.Object, S any](e *Engine[T, S], reader client.Reader, newObject func() T) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		obj := newObject()
		if err := reader.Get(ctx, req.NamespacedName, obj); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		return e.Reconcile(ctx, obj).Result()
	})
}
