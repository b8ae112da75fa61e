// Package model holds the two models of a reconcile, the same as the Rust crate's (docs/design.md):
// sequential (the legacy loop: legacy order, stop at the first failure; it runs the legacy code
// path's operations) and phased (HyperShift's error-collecting reconcile: phase order, gates and
// dependencies, errors collected with their category; it runs the phased code path's
// operations). A model never runs anything: bound to a plan as a Policy, it hands out a Run per
// reconcile, which says what to execute next and records the results into a Report. The shared
// test vectors (tests/data/model-vectors.json) hold both implementations to the same decisions.
package model

import (
	"fmt"
	"strings"
	"time"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/internal/ids"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/plan"
)

// Kind is sequential or phased.
type Kind string

const (
	Sequential Kind = "sequential"
	Phased     Kind = "phased"
)

// OutcomeKind is what became of an operation.
type OutcomeKind string

const (
	Succeeded OutcomeKind = "succeeded"
	// Idle: the operation ran and said it had nothing to do (a branch the object does not take,
	// an object already as wanted): a success that is no evidence, so a candidate step that had
	// nothing to do is never unblocked, and it is no change from a success.
	Idle    OutcomeKind = "idle"
	Failed  OutcomeKind = "failed"
	Blocked OutcomeKind = "blocked"
	Skipped OutcomeKind = "skipped"
	Unknown OutcomeKind = "unknown"
)

// Outcome of one operation in one run.
type Outcome struct {
	Kind OutcomeKind
	// Class of a failure (conflict, not-found, ...).
	Class string
	// By: the failed operations a blocked one waits on (ascending ids).
	By []int
	// After: the failed operation a skipped one comes after.
	After int
	// On: the not-simulated operations an unknown one depends on (ascending ids).
	On []int
}

// Ran says whether the operation ran (succeeded, had nothing to do, or failed).
func (o Outcome) Ran() bool { return o.Kind == Succeeded || o.Kind == Idle || o.Kind == Failed }

// OK says whether the operation ran without an error (succeeded or had nothing to do).
func (o Outcome) OK() bool { return o.Kind == Succeeded || o.Kind == Idle }

func (o Outcome) equal(other Outcome) bool {
	return o.Kind == other.Kind && o.Class == other.Class && o.After == other.After &&
		equalIDs(o.By, other.By) && equalIDs(o.On, other.On)
}

func equalIDs(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Result is what executing an operation returned.
type Result struct {
	kind         OutcomeKind // Succeeded, Idle, Failed, or Unknown for not simulated
	class        string
	message      string
	RequeueAfter time.Duration
}

// Success is a result without error.
func Success() Result { return Result{kind: Succeeded} }

// NothingToDo is a result without error of an operation that had nothing to do.
func NothingToDo() Result { return Result{kind: Idle} }

// Failure is a failed result of an error class.
func Failure(class, message string) Result {
	return Result{kind: Failed, class: class, message: message}
}

// NotSimulated is the result of an operation the candidate cannot dry-run.
func NotSimulated() Result { return Result{kind: Unknown} }

// Failed says whether the result is a failure.
func (r Result) Failed() bool { return r.kind == Failed }

// FailedWith says whether the result is a failure of error class class.
func (r Result) FailedWith(class string) bool { return r.kind == Failed && r.class == class }

type effective struct{ critical, gated bool }

// Policy is a model bound to a plan and its enforced rollout groups.
type Policy struct {
	Plan      *plan.Plan
	Kind      Kind
	Enforced  []int
	Order     []int
	effective []effective
}

// NewSequential is the legacy loop: legacy order, stop at the first failure. It runs the
// operations of the legacy code path (every one but those with only: phased).
func NewSequential(p *plan.Plan) *Policy {
	eff := make([]effective, len(p.Operations))
	for i := range eff {
		eff[i] = effective{true, true}
	}
	return &Policy{Plan: p, Kind: Sequential, Order: p.LegacyOrder, effective: eff}
}

// NewPhased is the phased model with the named rollout groups enforced; the operations outside
// them behave fail-fast (critical, gated). It runs the operations of the phased code path
// (every one but those with only: legacy).
func NewPhased(p *plan.Plan, groups []string) (*Policy, error) {
	enforced, err := p.GroupMembers(groups)
	if err != nil {
		return nil, err
	}
	eff := make([]effective, len(p.Operations))
	for i, op := range p.Operations {
		eff[i] = effective{true, true}
		if ids.Contains(enforced, i) {
			eff[i] = effective{op.Category == plan.Critical, op.Gate == plan.NoCriticalFailure}
		}
	}
	return &Policy{Plan: p, Kind: Phased, Enforced: enforced, Order: p.PhasedOrder, effective: eff}, nil
}

// NewPhasedAll is the phased model with every operation of the phased path enforced: the plan
// exactly as classified (the candidate when the flag names no candidate group).
func NewPhasedAll(p *plan.Plan) *Policy {
	eff := make([]effective, len(p.Operations))
	enforced := ids.Extend(nil, p.PhasedOrder)
	for i, op := range p.Operations {
		eff[i] = effective{true, true}
		if ids.Contains(enforced, i) {
			eff[i] = effective{op.Category == plan.Critical, op.Gate == plan.NoCriticalFailure}
		}
	}
	return &Policy{Plan: p, Kind: Phased, Enforced: enforced, Order: p.PhasedOrder, effective: eff}
}

// Path is the code path whose operations the policy runs: legacy for sequential, phased for
// phased.
func (p *Policy) Path() plan.CodePath {
	if p.Kind == Sequential {
		return plan.PathLegacy
	}
	return plan.PathPhased
}

// How the candidate obtains an operation's result (CandidateExecution).
const (
	ExecutionReused       = "reused"
	ExecutionDryRun       = "dry-run"
	ExecutionNotSimulated = "not-simulated"
)

// CandidateExecution is how the candidate obtains op's result, the rule both engines follow and
// the shared vectors hold them to: its own code's dry run where its code differs from the
// control's (distinct) or the control did not run it; the control's result, reused, where the
// control ran the same code; not simulated where it would have to run an operation declared
// shadow: skip. (An engine may re-execute a reusable step instead: a conflict the candidate
// would retry, or a sampled re-execution.)
func CandidateExecution(op plan.Operation, control *Report, distinct bool) string {
	theirs, ok := control.Get(op.ID)
	switch {
	case ok && theirs.Executed && !distinct:
		return ExecutionReused
	case op.Shadow == plan.ShadowSkip:
		return ExecutionNotSimulated
	}
	return ExecutionDryRun
}

// Step is one decided operation.
type Step struct {
	Op           int
	Outcome      Outcome
	Executed     bool
	Critical     bool
	Message      string
	RequeueAfter time.Duration
}

// Run is one reconcile's run of a policy.
type Run struct {
	policy           *Policy
	cursor           int
	pending          int // -1: none
	steps            []Step
	decided          []int // step index per op, -1 undecided
	criticalFailures []int
	unknownCritical  []int
	firstFailure     int // -1: none
	requeueAfter     time.Duration
}

// Start begins a reconcile's run.
func (p *Policy) Start() *Run {
	decided := make([]int, len(p.Plan.Operations))
	for i := range decided {
		decided[i] = -1
	}
	return &Run{policy: p, pending: -1, decided: decided, firstFailure: -1, steps: make([]Step, 0, len(p.Plan.Operations))}
}

// Next returns the next operation to decide, and whether the caller must execute it (the model
// decides blocked, skipped and unknown ones itself); ok is false when every operation is decided.
func (r *Run) Next() (op int, execute bool, ok bool) {
	if r.pending >= 0 {
		return r.pending, true, true
	}
	if r.cursor >= len(r.policy.Order) {
		return 0, false, false
	}
	op = r.policy.Order[r.cursor]
	r.cursor++
	var decided *Outcome
	if r.policy.Kind == Sequential {
		decided = r.decideSequential()
	} else {
		decided = r.decidePhased(op)
	}
	if decided != nil {
		r.record(op, *decided, false, "", 0)
		return op, false, true
	}
	r.pending = op
	return op, true, true
}

func (r *Run) decideSequential() *Outcome {
	if r.firstFailure >= 0 {
		return &Outcome{Kind: Skipped, After: r.firstFailure}
	}
	if len(r.unknownCritical) > 0 {
		return &Outcome{Kind: Unknown, On: append([]int(nil), r.unknownCritical...)}
	}
	return nil
}

func (r *Run) decidePhased(op int) *Outcome {
	var by, unknownOn []int
	for _, dep := range r.policy.Plan.Operations[op].DependsOn {
		o, ok := r.Outcome(dep)
		if !ok {
			continue
		}
		switch o.Kind {
		case Failed:
			by = ids.Insert(by, dep)
		case Blocked:
			by = ids.Extend(by, o.By)
		case Skipped:
			by = ids.Insert(by, o.After)
		case Unknown:
			unknownOn = ids.Extend(unknownOn, o.On)
		}
	}
	if r.policy.effective[op].gated {
		if len(r.criticalFailures) == 0 {
			unknownOn = ids.Extend(unknownOn, r.unknownCritical)
		} else {
			by = ids.Extend(by, r.criticalFailures)
		}
	}
	switch {
	case len(by) > 0:
		return &Outcome{Kind: Blocked, By: by}
	case len(unknownOn) > 0:
		return &Outcome{Kind: Unknown, On: unknownOn}
	}
	return nil
}

// Complete records the result of the operation Next said to execute.
func (r *Run) Complete(op int, result Result) error {
	if r.pending != op {
		return fmt.Errorf("operation %s completed, but the model is waiting for %s", r.policy.Plan.Operations[op].Name, r.pendingName())
	}
	r.pending = -1
	critical := r.policy.effective[op].critical
	var outcome Outcome
	message := ""
	switch result.kind {
	case Succeeded, Idle:
		outcome = Outcome{Kind: result.kind}
	case Failed:
		if r.firstFailure < 0 {
			r.firstFailure = op
		}
		if critical {
			r.criticalFailures = ids.Insert(r.criticalFailures, op)
		}
		outcome = Outcome{Kind: Failed, Class: result.class}
		message = result.message
	default:
		if critical {
			r.unknownCritical = ids.Insert(r.unknownCritical, op)
		}
		outcome = Outcome{Kind: Unknown, On: []int{op}}
	}
	if result.RequeueAfter > 0 && (r.requeueAfter == 0 || result.RequeueAfter < r.requeueAfter) {
		r.requeueAfter = result.RequeueAfter
	}
	r.record(op, outcome, true, message, result.RequeueAfter)
	return nil
}

func (r *Run) pendingName() string {
	if r.pending < 0 {
		return "nothing"
	}
	return r.policy.Plan.Operations[r.pending].Name
}

func (r *Run) record(op int, outcome Outcome, executed bool, message string, requeue time.Duration) {
	if outcome.Kind == Unknown && !executed && r.policy.effective[op].critical {
		r.unknownCritical = ids.Extend(r.unknownCritical, outcome.On)
	}
	r.decided[op] = len(r.steps)
	r.steps = append(r.steps, Step{
		Op: op, Outcome: outcome, Executed: executed,
		Critical: r.policy.effective[op].critical, Message: message, RequeueAfter: requeue,
	})
}

// Outcome is what became of op so far, if it was decided.
func (r *Run) Outcome(op int) (Outcome, bool) {
	if at := r.decided[op]; at >= 0 {
		return r.steps[at].Outcome, true
	}
	return Outcome{}, false
}

// Report finishes the run.
func (r *Run) Report() (*Report, error) {
	remaining := len(r.policy.Order) - r.cursor
	if r.pending >= 0 {
		remaining++
	}
	if remaining > 0 {
		return nil, fmt.Errorf("run of plan %s is unfinished: %d operations not yet decided", r.policy.Plan.Name, remaining)
	}
	return &Report{Plan: r.policy.Plan, Kind: r.policy.Kind, Steps: r.steps, index: r.decided, RequeueAfter: r.requeueAfter}, nil
}

// Drive runs a whole reconcile: execute is called for each operation the model runs.
func Drive(p *Policy, execute func(op plan.Operation) Result) *Report {
	run := p.Start()
	for {
		op, exec, ok := run.Next()
		if !ok {
			break
		}
		if exec {
			if err := run.Complete(op, execute(p.Plan.Operations[op])); err != nil {
				panic(err) // the driver completes exactly the pending operation
			}
		}
	}
	report, err := run.Report()
	if err != nil {
		panic(err) // the driver decides every operation
	}
	return report
}

// The ReconciliationSucceeded condition, as HyperShift writes it (the reason's misspelling is
// upstream's own).
const (
	ConditionType    = "ReconciliationSucceeded"
	ReasonSucceeded  = "ReconciliatonSucceeded"
	ReasonError      = "ReconciliationError"
	MessageSucceeded = "Reconciliation completed successfully"
)

// Report is a finished run.
type Report struct {
	Plan         *plan.Plan
	Kind         Kind
	Steps        []Step
	index        []int
	RequeueAfter time.Duration
}

// Step returns the step of op; for an operation not in the run's code path (an operation with
// only: the other path) it is Step{Op: op}, not executed, with no outcome. Get tells the two
// apart.
func (r *Report) Step(op int) Step {
	s, _ := r.Get(op)
	return s
}

// Get returns the step of op, and false (with Step{Op: op}) when op is not in the run's code
// path (only:).
func (r *Report) Get(op int) (Step, bool) {
	if op < 0 || op >= len(r.index) || r.index[op] < 0 {
		return Step{Op: op}, false
	}
	return r.Steps[r.index[op]], true
}

// Failures are the failed steps, in decision order.
func (r *Report) Failures() []Step {
	var out []Step
	for _, s := range r.Steps {
		if s.Outcome.Kind == Failed {
			out = append(out, s)
		}
	}
	return out
}

// CriticalFailures are the failed steps that ran as critical.
func (r *Report) CriticalFailures() []Step {
	var out []Step
	for _, s := range r.Failures() {
		if s.Critical {
			out = append(out, s)
		}
	}
	return out
}

func (r *Report) namesWhere(kind OutcomeKind) []string {
	var ops []int
	for _, s := range r.Steps {
		if s.Outcome.Kind == kind {
			ops = append(ops, s.Op)
		}
	}
	return r.Plan.SortedNames(ops)
}

// Blocked names the blocked operations, sorted.
func (r *Report) Blocked() []string { return r.namesWhere(Blocked) }

// Skipped names the skipped operations, sorted.
func (r *Report) Skipped() []string { return r.namesWhere(Skipped) }

// joinErrors is Kubernetes' utilerrors.NewAggregate(errs).Error(): one error as itself, several
// as [e1, e2], each distinct message once.
func joinErrors(steps []Step) string {
	var messages []string
	for _, s := range steps {
		dup := false
		for _, m := range messages {
			if m == s.Message {
				dup = true
			}
		}
		if !dup {
			messages = append(messages, s.Message)
		}
	}
	if len(messages) == 1 {
		return messages[0]
	}
	return "[" + strings.Join(messages, ", ") + "]"
}

// Aggregate is the reconcile's error text, and false on success: HyperShift's
// reconcileReport.aggregate() for phased, the error the legacy loop stopped at for sequential.
func (r *Report) Aggregate() (string, bool) {
	failures := r.Failures()
	if len(failures) == 0 {
		return "", false
	}
	critical := r.CriticalFailures()
	if r.Kind == Phased && len(critical) > 0 {
		errs := joinErrors(critical)
		blocked := r.Blocked()
		if len(blocked) == 0 {
			return "critical error: " + errs, true
		}
		return "critical error: " + errs + "; blocked operations: [" + strings.Join(blocked, ", ") + "]", true
	}
	return joinErrors(failures), true
}

// LogSummary is the one-line summary for logs. Phased: "critical failures: [X]; blocked
// operations: [A, B]", empty without a critical failure (critical as the step ran: an operation
// of a group not enforced runs fail-fast). Sequential, the legacy loop, which stops at any
// failure whatever the plan's category: "failed: [X]; skipped operations: [A, B]", empty
// without a failure.
func (r *Report) LogSummary() string {
	critical := r.CriticalFailures()
	if len(critical) == 0 {
		return ""
	}
	ops := make([]int, 0, len(critical))
	for _, s := range critical {
		ops = append(ops, s.Op)
	}
	heading, label, rest := "critical failures", "blocked", r.Blocked()
	if r.Kind == Sequential {
		heading, label, rest = "failed", "skipped", r.Skipped()
	}
	summary := heading + ": [" + strings.Join(r.Plan.SortedNames(ops), ", ") + "]"
	if len(rest) == 0 {
		return summary
	}
	return summary + "; " + label + " operations: [" + strings.Join(rest, ", ") + "]"
}

// Condition is the ReconciliationSucceeded condition the report implies.
type Condition struct {
	Type, Status, Reason, Message string
}

// Condition returns the condition the report implies.
func (r *Report) Condition() Condition {
	if message, failed := r.Aggregate(); failed {
		return Condition{ConditionType, "False", ReasonError, message}
	}
	return Condition{ConditionType, "True", ReasonSucceeded, MessageSucceeded}
}
