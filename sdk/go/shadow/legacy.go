package shadow

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/flag"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/model"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/plan"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/writes"
)

// Legacy is a controller's legacy code where it is not the phased code: a reconciler often
// keeps its legacy loop beside the phased reconcile, and the two diverge (a fix that landed in
// one path only, a step the old loop does inline that the new one dropped). Give one of the two
// shapes; the zero value is no legacy code of its own (every operation one code for both
// paths, as New).
type Legacy[T client.Object, S any] struct {
	// Ops is legacy code per operation: the legacy code of the operations whose legacy code
	// differs from their code in ops (they are then paired and compared in mode shadow), and
	// the code of the operations the plan marks `only: legacy`.
	Ops map[string]Op[T, S]
	// Func is the whole legacy loop as one function (the HyperShift shape: reconcileLegacy kept
	// beside the phased reconcile). It marks where each operation of the plan's legacy path
	// starts with Step. Every operation of both paths then has legacy code of its own.
	Func LegacyFunc[T]
}

// LegacyFunc is a whole legacy loop: the control whenever the control is the legacy path
// (modes off and shadow; in mode enforce the control is the phased code of ops). It writes
// through c (the controller's client; in mode shadow one that also records the writes the API
// server accepted) and marks each step with Step(ctx, name): a mark ends the step before it as
// succeeded and starts the named one; the error it returns is the failure of the step it was
// in, and its result is the control's.
type LegacyFunc[T client.Object] func(ctx context.Context, obj T, c client.Client) (reconcile.Result, error)

// LegacyCodeError says that legacy code was given for an operation that cannot have it.
type LegacyCodeError struct {
	Plan, Operation string
	// Problem is what is wrong, as the end of the sentence "... legacy code, but it ...".
	Problem string
}

func (e *LegacyCodeError) Error() string {
	return fmt.Sprintf("plan %s: the reconciler gives operation %s legacy code, but it %s", e.Plan, e.Operation, e.Problem)
}

// NewWithLegacy is New for a controller whose legacy code is not all its phased code: ops holds
// the code of every operation of the phased path (shared by both paths, or the phased code
// where legacy has the operation's own), legacy the legacy code (per operation, or the whole
// loop). Every operation of the plan must have code on each of its paths, and nothing else:
// an operation of both paths or `only: phased` in ops; an `only: legacy` one in legacy.Ops (or
// in ops, when it has no other code), or covered by legacy.Func. Legacy code for an `only:
// phased` operation, or for a name the plan does not have, is an error naming plan and
// operation, as is giving both legacy.Ops and legacy.Func. All problems are reported at once.
func NewWithLegacy[T client.Object, S any](p *plan.Plan, real client.Client, ops map[string]Op[T, S], legacy Legacy[T, S], opts Options) (*Engine[T, S], error) {
	if p == nil {
		return nil, errors.New("shadow: no plan")
	}
	byID, legacyByID, err := matchCode(p, ops, legacy)
	if err != nil {
		return nil, err
	}
	if real == nil && opts.WriteCondition {
		return nil, errors.New("shadow.New: Options.WriteCondition needs the controller's controller-runtime client, and it is nil")
	}
	if opts.DryRun == nil {
		return nil, errors.New("shadow.New: Options.DryRun is required: the candidate's client (shadow.NewDryRun over the manager's REST config and cache)")
	}
	if opts.Flag == nil {
		f, err := StaticFlag(flag.Default(), p)
		if err != nil {
			return nil, err
		}
		opts.Flag = f
	}
	if opts.Tracer == nil {
		opts.Tracer = otel.Tracer("github.com/shadow-reconciler/shadow-reconciler/sdk/go/shadow", trace.WithInstrumentationVersion(Version))
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	e := &Engine[T, S]{
		plan: p, planHash: p.Hash(), real: real, ops: byID, legacy: legacyByID, fn: legacy.Func,
		flag: opts.Flag, dry: opts.DryRun, tracer: opts.Tracer, opts: opts,
	}
	if _, err := e.policiesFor(opts.Flag.state); err != nil {
		return nil, err
	}
	return e, nil
}

// matchCode matches the code with the plan's operations, by operation id.
func matchCode[T client.Object, S any](p *plan.Plan, ops map[string]Op[T, S], legacy Legacy[T, S]) ([]Op[T, S], []Op[T, S], error) {
	n := len(p.Operations)
	byID, legacyByID := make([]Op[T, S], n), make([]Op[T, S], n)
	mismatch := &MismatchError{Plan: p.Name}
	var problems []error
	problem := func(op, text string) {
		problems = append(problems, &LegacyCodeError{Plan: p.Name, Operation: op, Problem: text})
	}
	if legacy.Func != nil && len(legacy.Ops) > 0 {
		problems = append(problems, fmt.Errorf("plan %s: Legacy gives both Func (the whole legacy loop) and Ops (legacy code per operation): give one", p.Name))
	}
	for _, name := range sortedKeys(legacy.Ops) {
		id, ok := p.Lookup(name)
		switch {
		case !ok:
			problem(name, "is not an operation of the plan")
		case p.Operations[id].Only == plan.PathPhased:
			problem(name, "has `only: phased` in the plan: the legacy loop never runs it, so it has no legacy code")
		case legacy.Ops[name] == nil:
			problem(name, "is nil")
		default:
			legacyByID[id] = legacy.Ops[name]
		}
	}
	for _, op := range p.Operations {
		fn := ops[op.Name]
		legacyOnly := op.Only == plan.PathLegacy
		switch {
		case fn != nil && legacyOnly && legacyByID[op.ID] != nil:
			problem(op.Name, "has `only: legacy` and code in ops too: give its code once")
		case fn != nil && legacyOnly && legacy.Func != nil:
			problem(op.Name, "has `only: legacy` and Legacy.Func is the whole legacy loop: its code in ops would never run")
		case fn != nil:
			byID[op.ID] = fn
		case legacyOnly && (legacyByID[op.ID] != nil || legacy.Func != nil):
		default:
			mismatch.MissingInCode = append(mismatch.MissingInCode, op.Name)
		}
	}
	for _, name := range sortedKeys(ops) {
		if _, ok := p.Lookup(name); !ok {
			mismatch.MissingInPlan = append(mismatch.MissingInPlan, name)
		}
	}
	if len(mismatch.MissingInCode)+len(mismatch.MissingInPlan) > 0 {
		problems = append([]error{mismatch}, problems...)
	}
	switch len(problems) {
	case 0:
		return byID, legacyByID, nil
	case 1:
		return nil, nil, problems[0]
	}
	return nil, nil, errors.Join(problems...)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

type stepKey struct{}

type stepper interface{ step(name string) }

// Step marks, inside a legacy function the engine runs (Legacy.Func), the start of the plan's
// operation name: the step before it succeeded (the function went on), and in mode shadow the
// candidate's phased code of name runs now, in dry-run, on the world the function is about to
// write to, before Step returns. The function's writes from here to the next mark, and its
// error if it returns before one, are the step's. A name that is not an operation of the plan's
// legacy path is logged once and ignored; a mark of the step already current does nothing.
// Outside a legacy function run by an engine (any other context) Step does nothing, so the
// legacy function works unchanged without the engine. Marks are expected in the plan's legacy
// order; Step is safe to call from several goroutines, and a mark after the function returned
// is ignored.
func Step(ctx context.Context, name string) {
	if s, ok := ctx.Value(stepKey{}).(stepper); ok {
		s.step(name)
	}
}

// legacyRun is one call of a legacy function: its marks, the control steps they open and
// close, and in mode shadow the candidate's paired run at each mark.
type legacyRun[T client.Object, S any] struct {
	e   *Engine[T, S]
	ctx context.Context // the reconcile's: the parent of the step spans
	// sh and pairing are the candidate side and its policy, nil but in mode shadow.
	sh      *shadowRun
	pairing *model.Policy
	obj     T
	// state is the candidate's own, carried from one paired run to the next.
	state *S
	// recorder is the function's client in mode shadow.
	recorder *recorder
	// rehearsed is, in mode calibrate, each operation's writes of the function's dry-run
	// rehearsal (nil where it did not get): the paired writes its real steps are compared with.
	rehearsed []*[]writes.Write

	mu      sync.Mutex
	done    bool
	marked  bool
	current int // the step the function is in, -1 before the first mark
	span    trace.Span
	results []*model.Result
}

func (l *legacyRun[T, S]) step(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return
	}
	p := l.e.plan
	op, ok := p.Lookup(name)
	if !ok || !p.Operations[op].InPath(plan.PathLegacy) {
		l.e.unknownStep(name)
		return
	}
	if op == l.current {
		return
	}
	l.close(model.Success(), nil)
	l.marked = true
	switch {
	case l.rehearsed != nil && l.rehearsed[op] != nil:
		l.sh.pending = *l.rehearsed[op]
	case l.pairing != nil && l.e.pairs(op):
		l.e.runPaired(op, l.pairing, l.obj, l.state, l.sh)
	}
	if l.recorder != nil {
		_ = l.recorder.take() // writes before the first mark belong to no step
	}
	l.current = op
	_, l.span = l.e.startSpan(l.ctx, op, "control", ExecReal)
}

// close ends the current step with result (err: its failure), its writes compared.
func (l *legacyRun[T, S]) close(result model.Result, err error) {
	if l.current < 0 {
		return
	}
	op := l.current
	l.current = -1
	l.results[op] = &result
	end := time.Now()
	var own []writes.WriteDifference
	if l.pairing != nil {
		written := l.recorder.take() // nil without a controller-runtime client: nothing recorded
		switch {
		case l.rehearsed != nil:
			// What the rehearsal did not get to is not compared.
			if l.rehearsed[op] != nil {
				own = l.e.collect(op, written, result, l.sh)
			}
		case l.e.pairs(op) || l.e.plan.Operations[op].Only == plan.PathLegacy:
			own = l.e.collect(op, written, result, l.sh)
		}
	}
	reportOutcome(l.span, err, false, 0, false)
	stepSpan{l.span, end}.close(own)
}

// runLegacyFunc runs the legacy function as the control and replays its marks through policy
// (the sequential model): a marked operation takes its result; an unmarked one succeeded (the
// function went past it, or returned without error); when the function failed without marking
// anything, its steps are not known and complete as not simulated (outcome unknown). With
// pairing (mode shadow) the function writes through a recording client, and each mark runs the
// candidate's code of its operation first. state is the candidate's state.
func (e *Engine[T, S]) runLegacyFunc(ctx context.Context, policy, pairing *model.Policy, obj T, state *S, sh *shadowRun) (*model.Report, reconcile.Result, error) {
	l := &legacyRun[T, S]{e: e, ctx: ctx, sh: sh, pairing: pairing, obj: obj, state: state, current: -1, results: make([]*model.Result, len(e.plan.Operations))}
	if sh != nil && sh.calibrate {
		// The whole function first in dry-run, on the world the real call then runs in: its
		// writes, step by step, are the paired writes of the real call's steps.
		l.rehearsed = e.rehearse(obj, sh)
	}
	var c client.Client = e.real
	if pairing != nil && e.real != nil {
		l.recorder = sh.controlRecorder(e.real)
		c = l.recorder
	}
	result, err := e.callLegacy(context.WithValue(ctx, stepKey{}, stepper(l)), obj, c)
	outcome := model.Success()
	if err != nil {
		outcome = model.Failure(Classify(err), err.Error())
	} else {
		outcome.RequeueAfter = result.RequeueAfter
	}
	l.mu.Lock()
	l.done = true
	marked := l.marked
	l.close(outcome, err)
	results := l.results
	l.mu.Unlock()

	end := time.Now()
	run := policy.Start()
	first := true
	for {
		op, execute, ok := run.Next()
		if !ok {
			break
		}
		if !execute {
			continue
		}
		var step model.Result
		switch {
		case results[op] != nil:
			step = *results[op]
		case !marked && err != nil:
			step = model.NotSimulated()
		case !marked && first:
			step = outcome // the function's requeue, on its first step when it marked none
			e.inferredSpan(ctx, op, end)
		default:
			step = model.Success()
			e.inferredSpan(ctx, op, end)
		}
		first = false
		mustComplete(run, op, step)
	}
	return mustReport(run), result, err
}

// rehearsal collects the writes of a legacy function's dry-run call, step by step.
type rehearsal struct {
	mu      sync.Mutex
	dry     *recorder
	current int
	writes  []*[]writes.Write
	done    bool
	failed  bool // the function returned an error
	plan    *plan.Plan
}

func (r *rehearsal) step(name string) {
	r.mu.Lock()
	op, ok := r.plan.Lookup(name)
	if r.done || !ok || !r.plan.Operations[op].InPath(plan.PathLegacy) {
		r.mu.Unlock()
		return
	}
	r.end()
	if r.plan.Operations[op].Shadow == plan.ShadowSkip {
		// A rehearsal never runs what a dry run cannot contain (an upload to cloud storage, the
		// legacy path's own steps): the function's goroutine ends at this mark, its deferred
		// calls run, and nothing after the mark does.
		r.done = true
		r.mu.Unlock()
		runtime.Goexit()
	}
	r.current = op
	r.writes[op] = &[]writes.Write{}
	r.mu.Unlock()
}

// end gives the writes since the last mark to the step they belong to.
func (r *rehearsal) end() {
	written := r.dry.take()
	if r.current >= 0 {
		*r.writes[r.current] = append(*r.writes[r.current], written...)
	}
	r.current = -1
}

// rehearse calls the legacy function through a dry-run client (mode calibrate), in the
// candidate's context, on a goroutine of its own, and returns its writes per operation (nil
// where it did not get: it ends at the mark of the first operation a dry run cannot contain);
// its result is not the control's, and it emits no span.
func (e *Engine[T, S]) rehearse(obj T, sh *shadowRun) []*[]writes.Write {
	r := &rehearsal{dry: newRecorder(e.dry.ForReconcile()), current: -1,
		writes: make([]*[]writes.Write, len(e.plan.Operations)), plan: e.plan}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := e.callLegacy(context.WithValue(sh.ctx, stepKey{}, stepper(r)), obj.DeepCopyObject().(T), r.dry.client())
		r.mu.Lock()
		r.failed = err != nil
		r.mu.Unlock()
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done = true
	if r.failed && r.current >= 0 {
		// The step the function failed in is not compared.
		r.writes[r.current] = nil
		r.current = -1
	}
	r.end()
	return r.writes
}

// inferredSpan is the control span of a step the function did not mark but went past: an
// instant, succeeded, so the sidecar replays the control as the engine did.
func (e *Engine[T, S]) inferredSpan(ctx context.Context, op int, at time.Time) {
	_, span := e.startSpan(ctx, op, "control", ExecReal, trace.WithTimestamp(at),
		trace.WithAttributes(attribute.Bool(attrInferred, true)))
	reportOutcome(span, nil, false, 0, false)
	span.End(trace.WithTimestamp(at))
}

// callLegacy calls the legacy function; a panic is its failure (class internal).
func (e *Engine[T, S]) callLegacy(ctx context.Context, obj T, c client.Client) (result reconcile.Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			result, err = reconcile.Result{}, Errorf(ClassInternal, "the legacy function of plan %s panicked: %v", e.plan.Name, p)
		}
	}()
	return e.fn(ctx, obj, c)
}

// unknownStep logs, once per name, a mark of a step the plan's legacy path does not have.
func (e *Engine[T, S]) unknownStep(name string) {
	if _, seen := e.unknownSteps.LoadOrStore(name, struct{}{}); seen {
		return
	}
	problem := "is not an operation of the plan"
	if _, ok := e.plan.Lookup(name); ok {
		problem = "has `only: phased`: the legacy loop does not have it"
	}
	e.opts.Log.Error(fmt.Errorf("plan %s: the legacy function marks step %q, which %s", e.plan.Name, name, problem),
		"a step mark is ignored (logged once per name)")
}
