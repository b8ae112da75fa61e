package shadow

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/model"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/plan"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/writes"
)

// One reconcile's two runs, as the Rust engine's (src/engine/runs.rs): the control executes for
// real; the candidate reuses what the control ran with the same code, runs its own code of an
// operation in dry-run on the same world just before the control's (paired), dry-runs what the
// control did not run, and leaves `shadow: skip` operations not simulated. What the two codes
// wrote differently is collected on the way.

// shadowRun is what the candidate side of one reconcile keeps while the two runs go: the
// results and spans of the paired executions, the paired writes waiting for the control's, the
// control's recording client (made at the first operation whose writes are compared: none on
// the happy path with shared code) and the write differences found.
type shadowRun struct {
	// ctx is the reconcile's, counting the candidate's dry-run requests in local.
	ctx      context.Context
	local    *GuardStats
	paired   []*pairedStep // by operation id, made at the first pairing
	pending  []writes.Write
	recorder *recorder
	// differences found so far, in the order found.
	differences []writes.WriteDifference
	// calibrate: mode calibrate, every operation's own code paired with it.
	calibrate bool
}

// pairedStep is the candidate's paired execution of an operation: its result, kept for the
// candidate run (execution dry-run, never reused), and its span, closed once the control's
// writes of the operation are compared with its own.
type pairedStep struct {
	result model.Result
	span   stepSpan
	closed bool
}

func newShadowRun(ctx context.Context) *shadowRun {
	local := &GuardStats{}
	return &shadowRun{ctx: context.WithValue(WithCounters(ctx, local), candidateKey{}, true), local: local}
}

type candidateKey struct{}

// InCandidate says whether ctx is a candidate run's (the context the engine gives the
// candidate's operations, paired runs included): a Routed client sends its requests through
// the dry-run path.
func InCandidate(ctx context.Context) bool {
	in, _ := ctx.Value(candidateKey{}).(bool)
	return in
}

// controlRecorder is the control's recording client over real, made once per reconcile.
func (sh *shadowRun) controlRecorder(real client.Client) *recorder {
	if sh.recorder == nil && real != nil {
		sh.recorder = newRecorder(real)
	}
	return sh.recorder
}

func (sh *shadowRun) pairedAt(op int) *pairedStep {
	if op < len(sh.paired) {
		return sh.paired[op]
	}
	return nil
}

// closePaired ends the spans of paired executions whose control never logged its writes (not
// reachable: every paired operation runs in the control right after).
func (sh *shadowRun) closePaired() {
	for _, p := range sh.paired {
		if p != nil && !p.closed {
			p.closed = true
			p.span.reevaluates(false)
			p.span.close(nil)
		}
	}
}

// distinct says whether op has legacy code of its own while existing in both paths (its own
// legacy code in Legacy.Ops, or a legacy function): the candidate cannot reuse the control's
// result of it.
func (e *Engine[T, S]) distinct(op int) bool {
	return (e.legacy[op] != nil || e.fn != nil) && e.plan.Operations[op].Only == ""
}

// pairs says whether the candidate's code of op runs paired with the control's legacy code:
// it has legacy code of its own, and it may be dry-run (the code of a `shadow: skip` operation
// has effects no dry run contains: it never runs in the candidate).
func (e *Engine[T, S]) pairs(op int) bool {
	return e.distinct(op) && e.plan.Operations[op].Shadow != plan.ShadowSkip
}

// runControl runs the control's operations; with pairing (mode shadow: the control runs the
// legacy path, the candidate the phased one) an operation whose legacy code is its own is
// paired, and its writes, or those of an operation of the legacy path only, are recorded.
func (e *Engine[T, S]) runControl(ctx context.Context, policy, pairing *model.Policy, obj T, state *S, sh *shadowRun) (*model.Report, []bool) {
	retried := make([]bool, len(e.plan.Operations))
	run := policy.Start()
	for {
		op, execute, ok := run.Next()
		if !ok {
			break
		}
		if !execute {
			continue
		}
		paired := pairing != nil && (e.pairs(op) || (sh.calibrate && e.plan.Operations[op].Shadow != plan.ShadowSkip))
		compared := paired || (pairing != nil && !sh.calibrate && e.plan.Operations[op].Only == plan.PathLegacy)
		if paired {
			copied := *state
			e.runPaired(op, pairing, obj, &copied, sh)
		}
		retried[op] = e.retries(op, policy)
		r := &Run[T, S]{Client: e.real, Object: obj, State: state, Execution: ExecReal, Path: policy.Path(), retry: retried[op]}
		if !compared {
			mustComplete(run, op, e.run(ctx, op, r, "control"))
			continue
		}
		rec := sh.controlRecorder(e.real)
		r.Client = rec.client()
		result, span := e.execute(ctx, op, r, "control")
		span.close(e.collect(op, rec.take(), result, sh))
		mustComplete(run, op, result)
	}
	return mustReport(run), retried
}

// runPaired runs the candidate's code of op in dry-run (a dry-run client with a fresh overlay),
// on a deep copy of the control's object and state, on the world the control's code is about
// to run in: its result waits for the candidate run, its writes for the control's to be
// compared with.
func (e *Engine[T, S]) runPaired(op int, candidate *model.Policy, obj T, state *S, sh *shadowRun) {
	dry := newRecorder(e.dry.ForReconcile())
	r := &Run[T, S]{
		Client: dry.client(), Object: obj.DeepCopyObject().(T), State: state, Execution: ExecDryRun,
		Path: candidate.Path(), retry: e.retries(op, candidate),
	}
	result, span := e.execute(sh.ctx, op, r, "candidate")
	if sh.paired == nil {
		sh.paired = make([]*pairedStep, len(e.plan.Operations))
	}
	if earlier := sh.paired[op]; earlier != nil && !earlier.closed {
		earlier.closed = true
		earlier.span.reevaluates(false)
		earlier.span.close(nil)
	}
	sh.paired[op] = &pairedStep{result: result, span: span}
	sh.pending = dry.take()
}

// collect compares the control's writes of op with the candidate's paired writes of it and
// closes the paired span with the differences, saying whether the paired run re-evaluates a
// control step that failed on a 409 (result is the control's); for an operation of the legacy
// path only, it records the control's every write. It returns the differences that belong on
// the control's span (those of an operation of the legacy path only).
func (e *Engine[T, S]) collect(op int, control []writes.Write, result model.Result, sh *shadowRun) []writes.WriteDifference {
	operation := e.plan.Operations[op]
	if operation.Only == plan.PathLegacy && !sh.calibrate {
		found := writes.OneSided(operation, plan.PathLegacy, control, &e.kinds)
		sh.differences = append(sh.differences, found...)
		return found
	}
	// A step either side failed is not compared: a failure stops its writes part way, and its
	// outcome already says that the two runs differ.
	p := sh.pairedAt(op)
	var found []writes.WriteDifference
	if !result.Failed() && (p == nil || !p.result.Failed()) {
		found = writes.Compare(operation, control, sh.pending, e.plan.Volatile, &e.kinds)
	}
	sh.pending = nil
	sh.differences = append(sh.differences, found...)
	if p != nil && !p.closed {
		p.closed = true
		p.span.reevaluates(result.FailedWith(ClassConflict))
		p.span.close(found)
		return nil
	}
	// No paired span (a legacy function's calibration rehearsed the whole function): the
	// control's span carries them.
	return found
}

// runCandidate runs the candidate: paired results where the control's code differs, the
// control's result where it ran the same code, dry runs of what the control did not run (and of
// a step it failed on a conflict the candidate would retry, and of a sampled share of the
// reusable ones), `shadow: skip` not simulated. The dry-run client is made at the first dry
// run: on the happy path every step is reused and the candidate costs no client at all.
func (e *Engine[T, S]) runCandidate(policy *model.Policy, obj T, state *S, control *model.Report, controlRetried []bool, sh *shadowRun) *model.Report {
	var dry *recorder
	made := false
	run := policy.Start()
	for {
		op, execute, ok := run.Next()
		if !ok {
			break
		}
		if !execute {
			continue
		}
		if p := sh.pairedAt(op); p != nil {
			mustComplete(run, op, p.result)
			continue
		}
		operation := e.plan.Operations[op]
		theirs := control.Step(op)
		retry := e.retries(op, policy)
		reevaluate := theirs.Outcome.Kind == model.Failed && theirs.Outcome.Class == ClassConflict && retry && !controlRetried[op]
		// The control ran other code than the candidate's only in the legacy path: in mode
		// enforce both run the phased code, and the control's result is the candidate's.
		distinct := e.distinct(op) && control.Kind == model.Sequential
		var result model.Result
		switch execution := model.CandidateExecution(operation, control, distinct); {
		case execution == model.ExecutionReused && !reevaluate && !e.sampled():
			result = reuse(theirs)
		case operation.Shadow == plan.ShadowSkip:
			result = model.NotSimulated()
		default:
			// Never ran in the control (or not the candidate's code there), or failed there on
			// a conflict the candidate would retry: find out, through the dry-run client, what
			// the candidate would get.
			if !made {
				dry, made = newRecorder(e.dry.ForReconcile()), true
			}
			oneSided := operation.Only == plan.PathPhased && control.Kind == model.Sequential
			dry.recording(oneSided)
			r := &Run[T, S]{Client: dry.client(), Object: obj, State: state, Execution: ExecDryRun, Path: policy.Path(), retry: retry}
			var span stepSpan
			// Known before it runs: a start attribute, not one more when the span ends.
			result, span = e.execute(sh.ctx, op, r, "candidate", trace.WithAttributes(attribute.Bool(ReevaluatedAttribute, reevaluate)))
			var found []writes.WriteDifference
			if oneSided {
				found = writes.OneSided(operation, plan.PathPhased, dry.take(), &e.kinds)
				sh.differences = append(sh.differences, found...)
			}
			span.close(found)
		}
		mustComplete(run, op, result)
	}
	return mustReport(run)
}
