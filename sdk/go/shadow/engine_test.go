package shadow

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/flag"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/model"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/plan"
)

func shipped(t *testing.T, name string) *plan.Plan {
	t.Helper()
	p, err := plan.Load(filepath.Join("..", "..", "..", "deploy", "plans", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type state struct{ ran []string }

// harness: every operation applies a ConfigMap named after it in the object's namespace, and
// fails when the test says so; the candidate's client is the dry-run overlay over the same
// fake client (the guard's transport is tested on its own below).
type harness struct {
	t       *testing.T
	plan    *plan.Plan
	real    client.Client
	dry     *DryRun
	fail    map[string]error
	mu      sync.Mutex
	calls   map[string][]Execution
	spans   *tracetest.SpanRecorder
	engine  *Engine[*corev1.Secret, state]
	object  *corev1.Secret
	options Options
}

func newHarness(t *testing.T, planName string, f *Flag) *harness {
	h := &harness{t: t, plan: shipped(t, planName), fail: map[string]error{}, calls: map[string][]Execution{}}
	h.object = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-0", Name: "hc-0", UID: "uid-0"}}
	h.real = fake.NewClientBuilder().WithObjects(h.object.DeepCopy()).Build()
	h.dry = &DryRun{dry: client.NewDryRunClient(h.real), stats: &GuardStats{}}
	h.spans = tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans))
	ops := map[string]Op[*corev1.Secret, state]{}
	for _, op := range h.plan.Operations {
		name := op.Name
		ops[name] = func(ctx context.Context, r *Run[*corev1.Secret, state]) error {
			h.mu.Lock()
			h.calls[name] = append(h.calls[name], r.Execution)
			failure := h.fail[name]
			h.mu.Unlock()
			r.State.ran = append(r.State.ran, name)
			if err := failure; err != nil {
				return err
			}
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.Object.Namespace, Name: "cm-" + name}}
			if err := r.Client.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
			return nil
		}
	}
	h.options = Options{Flag: f, DryRun: h.dry, Tracer: tp.Tracer("test")}
	engine, err := New(h.plan, h.real, ops, h.options)
	if err != nil {
		t.Fatal(err)
	}
	h.engine = engine
	return h
}

func (h *harness) reconcile() *Outcome {
	h.calls = map[string][]Execution{}
	return h.engine.Reconcile(context.Background(), h.object)
}

func (h *harness) persisted(name string) bool {
	err := h.real.Get(context.Background(), types.NamespacedName{Namespace: "team-0", Name: "cm-" + name}, &corev1.ConfigMap{})
	return err == nil
}

func notFound(name string) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func staticFlag(t *testing.T, spec flag.Spec, p string) *Flag {
	f, err := StaticFlag(spec, shipped(t, p))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestShadowReusesTheControlAndDryRunsWhatItDidNotRun(t *testing.T) {
	h := newHarness(t, "hostedcluster", nil)
	h.fail["SSHKeySync"] = notFound("hc-0-ssh-key")
	out := h.reconcile()
	if out.Mode != flag.Shadow || out.Candidate == nil || out.Err == nil {
		t.Fatalf("mode %s, candidate %v, err %v", out.Mode, out.Candidate != nil, out.Err)
	}
	// The control stopped at SSHKeySync; everything it ran ran once, for real.
	for name, calls := range h.calls {
		if slices.Contains(calls, ExecReal) && calls[0] != ExecReal {
			t.Errorf("%s: the control's execution must come first: %v", name, calls)
		}
		if len(calls) > 1 && calls[1] != ExecDryRun {
			t.Errorf("%s: executed %v", name, calls)
		}
	}
	if got := h.calls["PullSecretSync"]; !slices.Equal(got, []Execution{ExecReal}) {
		t.Errorf("the candidate must reuse PullSecretSync, not run it again: %v", got)
	}
	if got := h.calls["CoreHCPChain"]; !slices.Equal(got, []Execution{ExecDryRun}) {
		t.Errorf("CoreHCPChain, skipped by the control, must be dry-run by the candidate: %v", got)
	}
	if got := h.calls["PlatformOIDCAndCSI"]; len(got) != 0 {
		t.Errorf("PlatformOIDCAndCSI is `shadow: skip`: it must not run in the candidate: %v", got)
	}
	if h.persisted("CoreHCPChain") {
		t.Error("a dry-run write persisted")
	}
	if !h.persisted("PullSecretSync") {
		t.Error("the control's write is missing")
	}
	core, _ := h.plan.Lookup("CoreHCPChain")
	if !slices.Contains(out.Diff.Unblocked, core) {
		t.Errorf("CoreHCPChain not unblocked: %v", h.plan.SortedNames(out.Diff.Unblocked))
	}
	if s := out.Candidate.Step(core); s.Outcome.Kind != model.Succeeded {
		t.Errorf("CoreHCPChain in the candidate: %+v", s)
	}
	skip, _ := h.plan.Lookup("PlatformOIDCAndCSI")
	if s := out.Candidate.Step(skip); s.Outcome.Kind != model.Unknown {
		t.Errorf("PlatformOIDCAndCSI in the candidate: %+v", s)
	}
	// The candidate's state starts from the control's.
	// Spans: one reconcile span, the control's operations and the candidate's dry runs as its
	// direct children.
	spans := h.spans.Ended()
	var root sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == "reconcile" {
			root = s
		}
	}
	if root == nil {
		t.Fatal("no reconcile span")
	}
	attrs := map[attribute.Key]attribute.Value{}
	for _, kv := range root.Attributes() {
		attrs[kv.Key] = kv.Value
	}
	if attrs["shadow_reconciler.plan.hash"].AsString() != h.plan.Hash() || attrs["shadow_reconciler.mode"].AsString() != "shadow" ||
		attrs["k8s.object.uid"].AsString() != "uid-0" || attrs["k8s.object.kind"].AsString() != "Secret" {
		t.Errorf("reconcile span attributes: %v", root.Attributes())
	}
	dryRuns, controls := 0, 0
	for _, s := range spans {
		if s == root {
			continue
		}
		if s.Parent().SpanID() != root.SpanContext().SpanID() {
			t.Errorf("span %s is not a direct child of the reconcile span", s.Name())
		}
		a := map[attribute.Key]string{}
		for _, kv := range s.Attributes() {
			a[kv.Key] = kv.Value.Emit()
		}
		switch a["shadow_reconciler.policy"] {
		case "control":
			controls++
		case "candidate":
			dryRuns++
			if a["shadow_reconciler.execution"] != "dry-run" {
				t.Errorf("candidate span %s: %v", s.Name(), a)
			}
		}
		if s.Name() == "SSHKeySync" && (a["error.type"] != ClassNotFound || a["k8s.status.code"] != "404") {
			t.Errorf("the failed span carries its class and code: %v", a)
		}
	}
	if controls != len(h.calls)-countExec(h.calls, ExecDryRun, true) || dryRuns != countExec(h.calls, ExecDryRun, false) {
		t.Errorf("%d control spans, %d dry-run spans for calls %v", controls, dryRuns, h.calls)
	}
}

// countExec counts the calls of an execution (only: operations run only that way).
func countExec(calls map[string][]Execution, e Execution, only bool) int {
	n := 0
	for _, c := range calls {
		for _, x := range c {
			if x == e && (!only || len(c) == 1) {
				n++
			}
		}
	}
	return n
}

func TestOffRunsTheControlOnlyAndEnforceRunsThePhasedControl(t *testing.T) {
	off := flag.Default()
	off.Mode = flag.Off
	h := newHarness(t, "hostedcluster", staticFlag(t, off, "hostedcluster"))
	h.fail["SSHKeySync"] = notFound("hc-0-ssh-key")
	out := h.reconcile()
	if out.Mode != flag.Off || out.Candidate != nil || countExec(h.calls, ExecDryRun, false) != 0 {
		t.Fatalf("off: mode %s, candidate %v, calls %v", out.Mode, out.Candidate != nil, h.calls)
	}

	enforce := flag.Default()
	enforce.Mode = flag.Enforce
	enforce.EnforcedGroups = []flag.GroupRef{{Group: "non-critical-syncs"}}
	h = newHarness(t, "hostedcluster", staticFlag(t, enforce, "hostedcluster"))
	h.fail["SSHKeySync"] = notFound("hc-0-ssh-key")
	out = h.reconcile()
	if out.Mode != flag.Enforce || out.Control.Kind != model.Phased {
		t.Fatalf("enforce: mode %s, control %s", out.Mode, out.Control.Kind)
	}
	// SSHKeySync is enforced non-critical: the control goes on past it, for real.
	if got := h.calls["CoreHCPChain"]; !slices.Equal(got, []Execution{ExecReal}) {
		t.Errorf("CoreHCPChain under enforce: %v", got)
	}
	if !h.persisted("CoreHCPChain") {
		t.Error("the enforced control's write is missing")
	}
	if message, failed := out.Control.Aggregate(); !failed || out.Err == nil || out.Err.Error() != message {
		t.Errorf("the control's aggregate error is the reconcile's: %v / %q", out.Err, message)
	}
}

func TestAMismatchBetweenPlanAndCodeIsAnError(t *testing.T) {
	p := shipped(t, "hostedcluster")
	ops := map[string]Op[*corev1.Secret, state]{"Invented": func(context.Context, *Run[*corev1.Secret, state]) error { return nil }}
	_, err := New(p, fake.NewClientBuilder().Build(), ops, Options{})
	var mismatch *MismatchError
	if !errors.As(err, &mismatch) || !slices.Contains(mismatch.MissingInPlan, "Invented") || len(mismatch.MissingInCode) != len(p.Operations) {
		t.Fatalf("%v", err)
	}
}

func TestAPanickingOperationFailsAsInternal(t *testing.T) {
	h := newHarness(t, "hostedcluster", nil)
	h.fail["PullSecretSync"] = nil
	h.engine.ops[2] = func(context.Context, *Run[*corev1.Secret, state]) error { panic("boom") }
	out := h.reconcile()
	step := out.Control.Step(2)
	if step.Outcome.Kind != model.Failed || step.Outcome.Class != ClassInternal {
		t.Fatalf("%+v", step)
	}
}

func TestRetryOnConflictReRunsAnEnforcedOperationOnly(t *testing.T) {
	p := shipped(t, "addon-install-progression")
	enforce := flag.Default()
	enforce.Mode = flag.Enforce
	enforce.EnforcedGroups = nil
	for _, g := range p.Groups {
		enforce.EnforcedGroups = append(enforce.EnforcedGroups, flag.GroupRef{Group: g.Name})
	}
	h := newHarness(t, "addon-install-progression", staticFlag(t, enforce, "addon-install-progression"))
	conflicts := 0
	id, _ := p.Lookup("ManualStrategyStatus")
	if !p.Operations[id].RetryOnConflict {
		t.Fatal("the plan no longer retries ManualStrategyStatus")
	}
	h.engine.ops[id] = func(_ context.Context, r *Run[*corev1.Secret, state]) error {
		if !r.RetryOnConflict() {
			t.Error("an enforced retryOnConflict operation must run under the retry policy")
		}
		if r.Execution == ExecReal && conflicts < 2 {
			conflicts++
			return apierrors.NewConflict(schema.GroupResource{Resource: "clustermanagementaddons"}, "a", fmt.Errorf("stale"))
		}
		return nil
	}
	out := h.reconcile()
	if s := out.Control.Step(id); s.Outcome.Kind != model.Succeeded || conflicts != 2 {
		t.Fatalf("after %d conflicts: %+v", conflicts, s)
	}
}

func TestTheSampleRateReExecutesReusedSteps(t *testing.T) {
	h := newHarness(t, "hostedcluster", nil)
	h.engine.opts.ReexecuteSampleRate = 1
	out := h.reconcile()
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	for _, op := range h.plan.Operations {
		calls := h.calls[op.Name]
		var want []Execution
		switch {
		case op.Only == plan.PathPhased:
			// The control never has it: the candidate executes it, whatever the rate.
			want = []Execution{ExecDryRun}
		case op.Only == plan.PathLegacy, op.Shadow == plan.ShadowSkip:
			want = []Execution{ExecReal}
		default:
			want = []Execution{ExecReal, ExecDryRun}
		}
		if !slices.Equal(calls, want) {
			t.Errorf("%s at rate 1: %v", op.Name, calls)
		}
	}
	if len(out.Diff.Changed) != 0 {
		t.Errorf("the same operations changed outcome: %v", out.Diff.Changed)
	}
}

func TestAnEngineNeedsADryRunClient(t *testing.T) {
	p := shipped(t, "hostedcluster")
	ops := map[string]Op[*corev1.Secret, state]{}
	for _, op := range p.Operations {
		ops[op.Name] = func(context.Context, *Run[*corev1.Secret, state]) error { return nil }
	}
	if _, err := New(p, fake.NewClientBuilder().Build(), ops, Options{}); err == nil || !strings.Contains(err.Error(), "Options.DryRun") {
		t.Fatalf("%v", err)
	}
}

// What the candidate does to its object stays in the candidate: the control's object, and the
// condition written from it, never see it.
func TestTheCandidateWorksOnItsOwnCopyOfTheObject(t *testing.T) {
	h := newHarness(t, "hostedcluster", nil)
	h.fail["SSHKeySync"] = notFound("hc-0-ssh-key")
	core, _ := h.plan.Lookup("CoreHCPChain")
	h.engine.ops[core] = func(_ context.Context, r *Run[*corev1.Secret, state]) error {
		r.Object.Labels = map[string]string{"candidate": "was-here"}
		return nil
	}
	h.reconcile()
	if _, leaked := h.object.Labels["candidate"]; leaked {
		t.Fatal("the candidate's change reached the control's object")
	}
}

// candidateSpan is the candidate's span of an operation in the harness's last reconcile.
func (h *harness) candidateSpan(name string) sdktrace.ReadOnlySpan {
	h.t.Helper()
	var found sdktrace.ReadOnlySpan
	for _, s := range h.spans.Ended() {
		if s.Name() == name && attrs(s)["shadow_reconciler.policy"].AsString() == "candidate" {
			found = s
		}
	}
	if found == nil {
		h.t.Fatalf("no candidate span of %s", name)
	}
	return found
}

func conflictOn(name string) error {
	return apierrors.NewConflict(schema.GroupResource{Group: "addon.open-cluster-management.io", Resource: "clustermanagementaddons"}, name, fmt.Errorf("the object has been modified"))
}

// The control met a 409; when the candidate re-evaluates the step, the conflict is gone (its
// cache caught up): its first attempt succeeds. Its span says it re-evaluates the control's
// 409, so the sidecar counts it would-have-succeeded though it met no 409 itself.
func TestAReevaluationThatSucceedsAtOnceSaysItReevaluatesTheControls409(t *testing.T) {
	h := newHarness(t, "addon-install-progression", nil)
	id, _ := h.plan.Lookup("PlacementStatus")
	if !h.plan.Operations[id].RetryOnConflict {
		t.Fatal("the plan no longer retries PlacementStatus")
	}
	attempts := map[Execution]int{}
	h.engine.ops[id] = func(_ context.Context, r *Run[*corev1.Secret, state]) error {
		attempts[r.Execution]++
		if r.Execution == ExecReal {
			return conflictOn(r.Object.Name)
		}
		return nil
	}
	out := h.reconcile()
	if s := out.Control.Step(id); !(s.Outcome.Kind == model.Failed && s.Outcome.Class == ClassConflict) {
		t.Fatalf("control: %+v", s)
	}
	if s := out.Candidate.Step(id); s.Outcome.Kind != model.Succeeded {
		t.Fatalf("candidate: %+v", s)
	}
	if attempts[ExecReal] != 1 || attempts[ExecDryRun] != 1 {
		t.Fatalf("attempts: %v", attempts)
	}
	a := attrs(h.candidateSpan("PlacementStatus"))
	if a["shadow_reconciler.execution"].AsString() != "dry-run" || !a[ReevaluatedAttribute].AsBool() {
		t.Fatalf("the candidate's span: %v", a)
	}
	if _, met := a["shadow_reconciler.conflicts"]; met {
		t.Fatalf("the candidate met no 409: %v", a)
	}
}

// A sampled re-execution of a step the control ran without a conflict answers nothing about
// conflicts: its span says it does not re-evaluate a control 409, whatever it met.
func TestASampledReexecutionThatMeetsA409IsNoReevaluation(t *testing.T) {
	h := newHarness(t, "addon-install-progression", nil)
	h.engine.opts.ReexecuteSampleRate = 1
	id, _ := h.plan.Lookup("DefaultConfigReferences")
	h.engine.ops[id] = func(_ context.Context, r *Run[*corev1.Secret, state]) error {
		if r.Execution == ExecDryRun {
			return conflictOn(r.Object.Name) // the control's own fresh write
		}
		return nil
	}
	out := h.reconcile()
	if s := out.Control.Step(id); s.Outcome.Kind != model.Succeeded {
		t.Fatalf("control: %+v", s)
	}
	a := attrs(h.candidateSpan("DefaultConfigReferences"))
	if a["shadow_reconciler.execution"].AsString() != "dry-run" || a["shadow_reconciler.conflicts"].AsInt64() != 1 {
		t.Fatalf("the sampled re-execution's span: %v", a)
	}
	if v, ok := a[ReevaluatedAttribute]; !ok || v.AsBool() {
		t.Fatalf("a sampled re-execution must say it re-evaluates no control 409: %v", a)
	}
}
