package shadow

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/flag"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/model"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/plan"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/writes"
)

// The fake client answers a dry-run write with success without looking at the store and
// without changing the object it was given (no defaults, no resourceVersion, a dry-run delete
// of a missing object succeeds too): the candidate's "answer" is the object its code sent. The
// tests below therefore write with code that reads first (create when missing, else update or
// patch what it read), as a real API server would answer it: both sides then send the same
// object, and only the fields the server itself sets (ignored by the comparison) differ.

type secretOp = Op[*corev1.Secret, state]

const ns = "team-0"

// upsert is an operation that sets ConfigMap name's data to data, creating it when missing
// (the same code in both paths, unless a test says otherwise).
func upsert(name string, data map[string]string) secretOp {
	return func(ctx context.Context, r *Run[*corev1.Secret, state]) error {
		r.State.ran = append(r.State.ran, name)
		cm := &corev1.ConfigMap{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cm)
		if apierrors.IsNotFound(err) {
			return r.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data})
		}
		if err != nil {
			return err
		}
		before := cm.DeepCopy()
		cm.Data = data
		return r.Client.Patch(ctx, cm, client.MergeFrom(before))
	}
}

// deleteConfigMap deletes ConfigMap name when it exists.
func deleteConfigMap(name string) secretOp {
	return func(ctx context.Context, r *Run[*corev1.Secret, state]) error {
		cm := &corev1.ConfigMap{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cm); err != nil {
			return client.IgnoreNotFound(err)
		}
		return r.Client.Delete(ctx, cm)
	}
}

// both runs each operation in order.
func both(ops ...secretOp) secretOp {
	return func(ctx context.Context, r *Run[*corev1.Secret, state]) error {
		for _, op := range ops {
			if err := op(ctx, r); err != nil {
				return err
			}
		}
		return nil
	}
}

// legacyHarness is an engine of the hostedcluster plan whose every operation upserts a
// ConfigMap named after it, but for the code a test gives; legacy is its legacy code.
type legacyHarness struct {
	plan   *plan.Plan
	real   client.Client
	spans  *tracetest.SpanRecorder
	engine *Engine[*corev1.Secret, state]
	object *corev1.Secret
}

func newLegacyHarness(t *testing.T, f *Flag, phased map[string]secretOp, legacy Legacy[*corev1.Secret, state], objects ...client.Object) *legacyHarness {
	t.Helper()
	h := &legacyHarness{plan: shipped(t, "hostedcluster"), spans: tracetest.NewSpanRecorder()}
	h.object = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hc-0", UID: "uid-0"}}
	h.real = fake.NewClientBuilder().WithRESTMapper(restMapper()).WithObjects(append(objects, h.object.DeepCopy())...).Build()
	ops := map[string]secretOp{}
	for _, op := range h.plan.Operations {
		switch {
		case phased[op.Name] != nil:
			ops[op.Name] = phased[op.Name]
		case op.Only == plan.PathLegacy && (legacy.Ops[op.Name] != nil || legacy.Func != nil):
		default:
			ops[op.Name] = upsert("cm-"+op.Name, map[string]string{"op": op.Name})
		}
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans))
	dry := &DryRun{dry: client.NewDryRunClient(h.real), stats: &GuardStats{}}
	e, err := NewWithLegacy(h.plan, h.real, ops, legacy, Options{Flag: f, DryRun: dry, Tracer: tp.Tracer("test")})
	if err != nil {
		t.Fatal(err)
	}
	h.engine = e
	return h
}

func (h *legacyHarness) reconcile(t *testing.T) *Outcome {
	t.Helper()
	out := h.engine.Reconcile(context.Background(), h.object)
	if out.GuardRefusals != 0 {
		t.Fatalf("the guard refused %d writes", out.GuardRefusals)
	}
	return out
}

func (h *legacyHarness) id(t *testing.T, name string) int {
	t.Helper()
	id, ok := h.plan.Lookup(name)
	if !ok {
		t.Fatalf("no operation %s", name)
	}
	return id
}

// spanOf is the last ended span of the operation in a run (policy control or candidate).
func (h *legacyHarness) spanOf(t *testing.T, name, policy string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found sdktrace.ReadOnlySpan
	for _, s := range h.spans.Ended() {
		if s.Name() == name && attrs(s)["shadow_reconciler.policy"].AsString() == policy {
			found = s
		}
	}
	if found == nil {
		t.Fatalf("no %s span of %s", policy, name)
	}
	return found
}

// candidateSpans counts the candidate's dry-run spans by operation, over every reconcile so far.
func (h *legacyHarness) candidateSpans() map[string]int {
	n := map[string]int{}
	for _, s := range h.spans.Ended() {
		a := attrs(s)
		if a["shadow_reconciler.policy"].AsString() == "candidate" && a["shadow_reconciler.execution"].AsString() == "dry-run" {
			n[s.Name()]++
		}
	}
	return n
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// compared are the differences of the operations of both paths.
func compared(out *Outcome) []writes.WriteDifference {
	var found []writes.WriteDifference
	for _, d := range out.WriteDifferences {
		if d.Only == "" {
			found = append(found, d)
		}
	}
	return found
}

func existing(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

// The candidate's code patches a field the legacy code does not, and deletes an object the
// legacy code keeps: both differences are reported, with the object and the field paths, the
// step is the candidate's own dry run (never the control's result), and nothing the candidate
// did persisted.
func TestADistinctOperationIsPairedAndItsWriteDifferencesReported(t *testing.T) {
	const op = "MonitoringAndCLISecrets"
	h := newLegacyHarness(t, nil,
		map[string]secretOp{op: both(
			upsert("monitoring-config", map[string]string{"scrape": "true", "retention": "15d"}),
			deleteConfigMap("monitoring-dashboard"),
		)},
		Legacy[*corev1.Secret, state]{Ops: map[string]secretOp{op: upsert("monitoring-config", map[string]string{"scrape": "true"})}},
		existing("monitoring-config", map[string]string{"scrape": "true"}),
		existing("monitoring-dashboard", map[string]string{"panels": "3"}),
	)
	for round := range 2 {
		out := h.reconcile(t)
		if out.Err != nil {
			t.Fatal(out.Err)
		}
		id := h.id(t, op)
		if s := out.Candidate.Step(id); !s.Executed || s.Outcome.Kind != model.Succeeded {
			t.Fatalf("round %d: the candidate's step: %+v", round, s)
		}
		// Its own dry run (a reused step has no candidate span), once per reconcile.
		if n := h.candidateSpans()[op]; n != round+1 {
			t.Fatalf("round %d: %d dry runs of the candidate's code", round, n)
		}
		type found struct {
			object             string
			control, candidate writes.Verb
			fields             []string
			total              uint32
			intended           bool
		}
		var got []found
		for _, d := range compared(out) {
			if d.Operation != op {
				t.Errorf("round %d: a difference of %s, which has one code: %+v", round, d.Operation, d)
			}
			got = append(got, found{d.Kind + " " + d.Namespace + "/" + d.Name, d.Control, d.Candidate, d.Fields, d.FieldsTotal, d.Intended})
		}
		want := []found{
			{"ConfigMap team-0/monitoring-config", writes.Patch, writes.Patch, []string{"data.retention"}, 1, false},
			{"ConfigMap team-0/monitoring-dashboard", "", writes.Delete, nil, 0, false},
		}
		if len(got) != len(want) {
			t.Fatalf("round %d: %+v", round, out.WriteDifferences)
		}
		for i := range want {
			if got[i].object != want[i].object || got[i].control != want[i].control || got[i].candidate != want[i].candidate ||
				!slices.Equal(got[i].fields, want[i].fields) || got[i].total != want[i].total || got[i].intended != want[i].intended {
				t.Errorf("round %d: difference %d: got %+v, want %+v", round, i, got[i], want[i])
			}
		}
	}
	// The control's code ran for real; the candidate's persisted nothing.
	cm := &corev1.ConfigMap{}
	if err := h.real.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "monitoring-config"}, cm); err != nil || cm.Data["retention"] != "" {
		t.Fatalf("monitoring-config: %v %v", err, cm.Data)
	}
	if err := h.real.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "monitoring-dashboard"}, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("the candidate's delete persisted: %v", err)
	}
}

// The same code declared distinct everywhere: every operation of both paths is paired, and
// the comparison finds nothing, on the first reconcile (both create) and the later ones (both
// patch).
func TestIdenticalCodeDeclaredDistinctReportsNoDifference(t *testing.T) {
	p := shipped(t, "hostedcluster")
	phased, legacy := map[string]secretOp{}, map[string]secretOp{}
	for _, op := range p.Operations {
		code := upsert("cm-"+op.Name, map[string]string{"op": op.Name})
		if op.Only != plan.PathLegacy {
			phased[op.Name] = code
		}
		if op.Only != plan.PathPhased {
			legacy[op.Name] = code
		}
	}
	h := newLegacyHarness(t, nil, phased, Legacy[*corev1.Secret, state]{Ops: legacy})
	for round := range 3 {
		out := h.reconcile(t)
		if out.Err != nil {
			t.Fatal(out.Err)
		}
		if d := compared(out); len(d) != 0 {
			t.Fatalf("round %d: %+v", round, d)
		}
		dryRuns := h.candidateSpans()
		for _, op := range p.Operations {
			want := round + 1
			if op.Only == plan.PathLegacy || op.Shadow == plan.ShadowSkip {
				want = 0
			}
			if dryRuns[op.Name] != want {
				t.Errorf("round %d: %s is paired, never reused: %d dry runs", round, op.Name, dryRuns[op.Name])
			}
		}
	}
}

// An operation of the legacy path only: its every write is a difference, intended, with the
// control's verb, on the control's span; one of the phased path only: its dry-run writes, on
// the candidate's span.
func TestOneSidedOperationsReportTheirWrites(t *testing.T) {
	h := newLegacyHarness(t, nil, nil, Legacy[*corev1.Secret, state]{})
	out := h.reconcile(t)
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	byOp := map[string][]writes.WriteDifference{}
	for _, d := range out.WriteDifferences {
		byOp[d.Operation] = append(byOp[d.Operation], d)
	}
	if len(byOp) != 2 {
		t.Fatalf("%+v", out.WriteDifferences)
	}
	legacy := byOp["ValidConfigurationCondition"]
	if len(legacy) != 1 || legacy[0].Only != plan.PathLegacy || legacy[0].Control != writes.Create || legacy[0].Candidate != "" ||
		!legacy[0].Intended || legacy[0].Kind != "ConfigMap" || legacy[0].Name != "cm-ValidConfigurationCondition" {
		t.Errorf("the legacy-only operation: %+v", legacy)
	}
	phased := byOp["ManagedHSMVersionCheck"]
	if len(phased) != 1 || phased[0].Only != plan.PathPhased || phased[0].Control != "" || phased[0].Candidate != writes.Create || !phased[0].Intended {
		t.Errorf("the phased-only operation: %+v", phased)
	}
	if events(h.spanOf(t, "ValidConfigurationCondition", "control")) != 1 || events(h.spanOf(t, "ManagedHSMVersionCheck", "candidate")) != 1 {
		t.Error("the one-sided differences are not on their spans")
	}
	hsm := h.id(t, "ManagedHSMVersionCheck")
	if s := out.Candidate.Step(hsm); !s.Executed || slices.Contains(out.Diff.Unblocked, hsm) {
		t.Errorf("the phased-only operation is executed by the candidate, never unblocked: %+v", s)
	}
	// Mode enforce: both runs are the phased code, nothing is compared.
	enforce := flag.Default()
	enforce.Mode = flag.Enforce
	h = newLegacyHarness(t, staticFlag(t, enforce, "hostedcluster"), nil,
		Legacy[*corev1.Secret, state]{Ops: map[string]secretOp{"SSHKeySync": upsert("legacy", nil)}})
	out = h.reconcile(t)
	if out.Err != nil || len(out.WriteDifferences) != 0 || out.DryRunRequests != 0 {
		t.Fatalf("enforce: %v, %+v, %d dry-run requests", out.Err, out.WriteDifferences, out.DryRunRequests)
	}
}

func events(s sdktrace.ReadOnlySpan) int {
	n := 0
	for _, e := range s.Events() {
		if e.Name == "shadow_reconciler.write_difference" {
			n++
		}
	}
	return n
}

// The events carry exactly the attributes the sidecar reads (src/engine/writes.rs, mod event):
// the optional ones only when set, the fields as a string slice, the total as an integer. The
// paired candidate span is a direct child of the reconcile span, says candidate / dry-run, and
// ended before the control's code of the operation started.
func TestTheWriteDifferenceEventsCarryTheSidecarsAttributes(t *testing.T) {
	const op = "SSHKeySync"
	h := newLegacyHarness(t, nil,
		map[string]secretOp{op: both(upsert("ssh-key", map[string]string{"key": "new"}), deleteConfigMap("leftover"))},
		Legacy[*corev1.Secret, state]{Ops: map[string]secretOp{op: upsert("ssh-key", map[string]string{"key": "old"})}},
		existing("ssh-key", map[string]string{"key": "old"}),
		existing("leftover", nil),
	)
	out := h.reconcile(t)
	if out.Err != nil || len(compared(out)) != 2 {
		t.Fatalf("%v %+v", out.Err, out.WriteDifferences)
	}
	candidate := h.spanOf(t, op, "candidate")
	control := h.spanOf(t, op, "control")
	a := attrs(candidate)
	if a["shadow_reconciler.execution"].AsString() != "dry-run" || a["shadow_reconciler.operation"].AsString() != op {
		t.Errorf("the paired span: %v", a)
	}
	var root sdktrace.ReadOnlySpan
	for _, s := range h.spans.Ended() {
		if s.Name() == "reconcile" {
			root = s
		}
	}
	if root == nil || candidate.Parent().SpanID() != root.SpanContext().SpanID() {
		t.Fatal("the paired span is not a direct child of the reconcile span")
	}
	if candidate.EndTime().After(control.StartTime()) {
		t.Errorf("the paired span ends at %v, after the control's code started at %v", candidate.EndTime(), control.StartTime())
	}
	if events(control) != 0 {
		t.Error("the differences of an operation of both paths belong on the candidate's span")
	}
	want := []map[string]any{
		{
			"shadow_reconciler.write.group": "", "shadow_reconciler.write.kind": "ConfigMap",
			"shadow_reconciler.write.namespace": ns, "shadow_reconciler.write.name": "leftover",
			"shadow_reconciler.write.candidate": "delete",
			"shadow_reconciler.write.fields":    []string{}, "shadow_reconciler.write.fields_total": int64(0),
			"shadow_reconciler.write.intended": false,
		},
		{
			"shadow_reconciler.write.group": "", "shadow_reconciler.write.kind": "ConfigMap",
			"shadow_reconciler.write.namespace": ns, "shadow_reconciler.write.name": "ssh-key",
			"shadow_reconciler.write.control": "patch", "shadow_reconciler.write.candidate": "patch",
			"shadow_reconciler.write.fields": []string{"data.key"}, "shadow_reconciler.write.fields_total": int64(1),
			"shadow_reconciler.write.intended": false,
		},
	}
	got := candidate.Events()
	if len(got) != len(want) {
		t.Fatalf("events: %+v", got)
	}
	for i, e := range got {
		if e.Name != "shadow_reconciler.write_difference" || !e.Time.Equal(candidate.EndTime()) {
			t.Errorf("event %d: %s at %v (span end %v)", i, e.Name, e.Time, candidate.EndTime())
		}
		values := map[string]any{}
		for _, kv := range e.Attributes {
			values[string(kv.Key)] = kv.Value.AsInterface()
		}
		if len(values) != len(want[i]) {
			t.Errorf("event %d: attributes %v, want %v", i, values, want[i])
			continue
		}
		for k, v := range want[i] {
			if fields, ok := v.([]string); ok {
				if got, _ := values[k].([]string); !slices.Equal(got, fields) || got == nil {
					t.Errorf("event %d: %s = %#v, want %#v", i, k, values[k], v)
				}
			} else if values[k] != v {
				t.Errorf("event %d: %s = %#v, want %#v", i, k, values[k], v)
			}
		}
	}
	// The only-legacy operation's event, on the control span, names its control verb only.
	e := h.spanOf(t, "ValidConfigurationCondition", "control").Events()
	if len(e) != 1 {
		t.Fatalf("%+v", e)
	}
	keys := []string{}
	for _, kv := range e[0].Attributes {
		keys = append(keys, string(kv.Key))
	}
	slices.Sort(keys)
	if strings.Join(keys, " ") != "shadow_reconciler.write.control shadow_reconciler.write.fields shadow_reconciler.write.fields_total shadow_reconciler.write.group shadow_reconciler.write.intended shadow_reconciler.write.kind shadow_reconciler.write.name shadow_reconciler.write.namespace" {
		t.Errorf("the legacy-only event's attributes: %v", keys)
	}
}

// Every problem of the legacy code is reported at construction, naming the plan and the
// operation.
func TestLegacyCodeIsValidatedAgainstThePlan(t *testing.T) {
	p := shipped(t, "hostedcluster")
	noop := func(context.Context, *Run[*corev1.Secret, state]) error { return nil }
	fn := func(context.Context, *corev1.Secret, client.Client) (result reconcile.Result, err error) { return }
	all := func(skip ...string) map[string]secretOp {
		ops := map[string]secretOp{}
		for _, op := range p.Operations {
			if !slices.Contains(skip, op.Name) {
				ops[op.Name] = noop
			}
		}
		return ops
	}
	phasedPath := all("ValidConfigurationCondition")
	cases := []struct {
		name   string
		ops    map[string]secretOp
		legacy Legacy[*corev1.Secret, state]
		want   []string // the error's text contains each
	}{
		{"per-operation legacy code", phasedPath, Legacy[*corev1.Secret, state]{Ops: map[string]secretOp{"SSHKeySync": noop, "ValidConfigurationCondition": noop}}, nil},
		{"the legacy-only operation in ops", all(), Legacy[*corev1.Secret, state]{Ops: map[string]secretOp{"SSHKeySync": noop}}, nil},
		{"a legacy function", phasedPath, Legacy[*corev1.Secret, state]{Func: fn}, nil},
		{"legacy code of a phased-only operation", all(), Legacy[*corev1.Secret, state]{Ops: map[string]secretOp{"ManagedHSMVersionCheck": noop}},
			[]string{"plan hostedcluster: the reconciler gives operation ManagedHSMVersionCheck legacy code, but it has `only: phased` in the plan: the legacy loop never runs it, so it has no legacy code"}},
		{"legacy code of a name the plan does not have", all(), Legacy[*corev1.Secret, state]{Ops: map[string]secretOp{"Invented": noop}},
			[]string{"plan hostedcluster: the reconciler gives operation Invented legacy code, but it is not an operation of the plan"}},
		{"nil legacy code", all(), Legacy[*corev1.Secret, state]{Ops: map[string]secretOp{"SSHKeySync": nil}},
			[]string{"operation SSHKeySync legacy code, but it is nil"}},
		{"the legacy-only operation twice", all(), Legacy[*corev1.Secret, state]{Ops: map[string]secretOp{"ValidConfigurationCondition": noop}},
			[]string{"operation ValidConfigurationCondition legacy code, but it has `only: legacy` and code in ops too"}},
		{"the legacy-only operation nowhere", phasedPath, Legacy[*corev1.Secret, state]{Ops: map[string]secretOp{"SSHKeySync": noop}},
			[]string{"plan hostedcluster and reconciler disagree: operations in the plan but not in code: ValidConfigurationCondition"}},
		{"a phased operation given as legacy code only", all("SSHKeySync"), Legacy[*corev1.Secret, state]{Ops: map[string]secretOp{"SSHKeySync": noop}},
			[]string{"operations in the plan but not in code: SSHKeySync"}},
		{"both shapes", phasedPath, Legacy[*corev1.Secret, state]{Func: fn, Ops: map[string]secretOp{"ValidConfigurationCondition": noop}},
			[]string{"plan hostedcluster: Legacy gives both Func (the whole legacy loop) and Ops (legacy code per operation): give one"}},
		{"a legacy function and the legacy-only operation in ops", all(), Legacy[*corev1.Secret, state]{Func: fn},
			[]string{"operation ValidConfigurationCondition legacy code, but it has `only: legacy` and Legacy.Func is the whole legacy loop"}},
		{"every problem at once", all("CoreHCPChain"), Legacy[*corev1.Secret, state]{Ops: map[string]secretOp{"ManagedHSMVersionCheck": noop, "Invented": noop}},
			[]string{"operations in the plan but not in code: CoreHCPChain", "operation Invented legacy code", "operation ManagedHSMVersionCheck legacy code"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dry := &DryRun{dry: fake.NewClientBuilder().Build(), stats: &GuardStats{}}
			_, err := NewWithLegacy(p, fake.NewClientBuilder().Build(), c.ops, c.legacy, Options{DryRun: dry})
			if len(c.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
			var legacyErr *LegacyCodeError
			var mismatch *MismatchError
			if !errors.As(err, &legacyErr) && !errors.As(err, &mismatch) && !strings.Contains(err.Error(), "give one") {
				t.Errorf("%T is neither a LegacyCodeError nor a MismatchError", err)
			}
		})
	}
}

// recorded is a concurrency-safe log of what happened, in order.
type recorded struct {
	mu    sync.Mutex
	lines []string
}

func (r *recorded) add(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, line)
}

func (r *recorded) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.lines
	r.lines = nil
	return out
}

var _ = time.Second
