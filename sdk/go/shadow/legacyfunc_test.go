package shadow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/flag"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/model"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/plan"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/writes"
)

// funcHarness is the hostedcluster plan with the whole legacy loop as one function: the
// phased code of every operation upserts a ConfigMap named after it and notes its run in log.
type funcHarness struct {
	*legacyHarness
	log *recorded
}

func newFuncHarness(t *testing.T, f *Flag, fn LegacyFunc[*corev1.Secret], phased map[string]secretOp) *funcHarness {
	t.Helper()
	h := &funcHarness{log: &recorded{}}
	p := shipped(t, "hostedcluster")
	ops := map[string]secretOp{}
	for _, op := range p.Operations {
		if op.Only == plan.PathLegacy {
			continue
		}
		name, code := op.Name, phased[op.Name]
		if code == nil {
			code = upsert("cm-"+name, map[string]string{"op": name})
		}
		ops[name] = func(ctx context.Context, r *Run[*corev1.Secret, state]) error {
			h.log.add(fmt.Sprintf("%s %s", r.Execution, name))
			return code(ctx, r)
		}
	}
	h.legacyHarness = newLegacyHarness(t, f, ops, Legacy[*corev1.Secret, state]{Func: fn},
		existing("ssh-key", map[string]string{"key": "old"}))
	return h
}

// mark marks name and notes it.
func (h *funcHarness) mark(ctx context.Context, name string) {
	Step(ctx, name)
	h.log.add("legacy " + name)
}

func (h *funcHarness) executions(out *Outcome) map[string]string {
	got := map[string]string{}
	for _, s := range out.Candidate.Steps {
		name := h.plan.Operations[s.Op].Name
		switch {
		case s.Outcome.Kind == model.Unknown:
			got[name] = "unknown"
		case s.Executed:
			got[name] = "executed"
		default:
			got[name] = string(s.Outcome.Kind)
		}
	}
	return got
}

// The function's marks are its steps: at each mark the candidate's phased code of the
// operation runs first (paired, in dry-run), the function's writes until the next mark are
// compared with it, and the control report is the sequential model over the marks (unmarked
// operations it went past succeeded).
func TestALegacyFunctionIsTheControlAndItsMarksItsSteps(t *testing.T) {
	var h *funcHarness
	fn := func(ctx context.Context, obj *corev1.Secret, c client.Client) (reconcile.Result, error) {
		run := &Run[*corev1.Secret, state]{Client: c, Object: obj, State: &state{}}
		// Before any mark: the write belongs to no step.
		if err := upsert("before-any-mark", nil)(ctx, run); err != nil {
			return reconcile.Result{}, err
		}
		h.mark(ctx, "CPOImageAndNamespace")
		if err := upsert("cm-CPOImageAndNamespace", map[string]string{"op": "CPOImageAndNamespace"})(ctx, run); err != nil {
			return reconcile.Result{}, err
		}
		h.mark(ctx, "SSHKeySync")
		// The legacy code keeps the old key where the phased code writes a new one.
		if err := upsert("ssh-key", map[string]string{"key": "old"})(ctx, run); err != nil {
			return reconcile.Result{}, err
		}
		h.mark(ctx, "SSHKeySync") // the step already current: nothing
		h.mark(ctx, "PlatformOIDCAndCSI")
		h.mark(ctx, "ReleaseImageVersion")
		return reconcile.Result{RequeueAfter: 2 * time.Minute}, nil
	}
	h = newFuncHarness(t, nil, fn, map[string]secretOp{
		"SSHKeySync": upsert("ssh-key", map[string]string{"key": "new"}),
	})
	out := h.reconcile(t)
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	if res, err := out.Result(); err != nil || res.RequeueAfter != 2*time.Minute || out.Control.RequeueAfter != 2*time.Minute {
		t.Errorf("the control's requeue is the function's: %+v %v (report %v)", res, err, out.Control.RequeueAfter)
	}
	// Each marked operation of both paths: the candidate's code right at the mark, before the
	// function goes on (PlatformOIDCAndCSI is shadow: skip: never run by the candidate).
	got := h.log.take()
	want := []string{"dry-run CPOImageAndNamespace", "legacy CPOImageAndNamespace", "dry-run SSHKeySync", "legacy SSHKeySync", "legacy SSHKeySync", "legacy PlatformOIDCAndCSI", "dry-run ReleaseImageVersion", "legacy ReleaseImageVersion"}
	if len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
		t.Fatalf("order: %v", got)
	}
	// The rest of the candidate's code ran after the function returned, in dry-run: the
	// control ran other code for every operation of both paths, so nothing is reused.
	for _, line := range got[len(want):] {
		if !strings.HasPrefix(line, "dry-run ") {
			t.Errorf("after the control: %s", line)
		}
	}
	for _, s := range out.Control.Steps {
		if s.Outcome.Kind != model.Succeeded || !s.Executed {
			t.Errorf("control %s: %+v", h.plan.Operations[s.Op].Name, s)
		}
	}
	for name, execution := range h.executions(out) {
		op, _ := h.plan.Lookup(name)
		want := "executed"
		if h.plan.Operations[op].Shadow == plan.ShadowSkip {
			want = "unknown"
		}
		if execution != want {
			t.Errorf("candidate %s: %s", name, execution)
		}
	}
	// The differences: the SSH key's field, the phased code's write of ReleaseImageVersion
	// (the function wrote nothing there), and the phased-only operation's write.
	var found []string
	for _, d := range out.WriteDifferences {
		found = append(found, fmt.Sprintf("%s %s/%s %s/%s %v", d.Operation, d.Kind, d.Name, d.Control, d.Candidate, d.Fields))
	}
	slices.Sort(found)
	if strings.Join(found, "; ") != "ManagedHSMVersionCheck ConfigMap/cm-ManagedHSMVersionCheck /create []; ReleaseImageVersion ConfigMap/cm-ReleaseImageVersion /create []; SSHKeySync ConfigMap/ssh-key patch/patch [data.key]" {
		t.Errorf("differences: %v", found)
	}
	// Spans: one control span per marked step, from its mark to the next; the steps it went
	// past unmarked are instants marked inferred.
	for _, op := range h.plan.Operations {
		if op.Only == plan.PathPhased {
			continue
		}
		a := attrs(h.spanOf(t, op.Name, "control"))
		marked := slices.Contains([]string{"CPOImageAndNamespace", "SSHKeySync", "PlatformOIDCAndCSI", "ReleaseImageVersion"}, op.Name)
		if inferred := a["shadow_reconciler.inferred"].AsBool(); inferred == marked || a["shadow_reconciler.outcome"].AsString() != "succeeded" {
			t.Errorf("control span %s: %v", op.Name, a)
		}
	}
	if events(h.spanOf(t, "SSHKeySync", "candidate")) != 1 {
		t.Error("the SSH key's difference is not on the paired span")
	}
	// The function's writes were real.
	if !h.persisted("before-any-mark") || !h.persisted("cm-CPOImageAndNamespace") {
		t.Error("the function's writes are missing")
	}
}

func (h *legacyHarness) persisted(name string) bool {
	return h.real.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{}) == nil
}

// The function's error is the failure of the step it is in: the steps before it in the legacy
// order succeeded, those after are skipped; marks of names the legacy path does not have are
// logged once each and ignored.
func TestALegacyFunctionsErrorFailsTheStepItIsIn(t *testing.T) {
	failure := apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, "cli-secret")
	fn := func(ctx context.Context, obj *corev1.Secret, c client.Client) (reconcile.Result, error) {
		run := &Run[*corev1.Secret, state]{Client: c, Object: obj, State: &state{}}
		for _, name := range []string{"Invented", "CPOImageAndNamespace", "ManagedHSMVersionCheck", "Invented", "ValidConfigurationCondition"} {
			Step(ctx, name)
		}
		if err := upsert("valid-configuration", nil)(ctx, run); err != nil {
			return reconcile.Result{}, err
		}
		Step(ctx, "MonitoringAndCLISecrets")
		return reconcile.Result{}, fmt.Errorf("sync the CLI secrets: %w", failure)
	}
	var logged []string
	h := newFuncHarness(t, nil, fn, nil)
	h.engine.opts.Log = funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{})
	out := h.reconcile(t)
	if !errors.Is(out.Err, failure) {
		t.Fatalf("the control's error is the function's: %v", out.Err)
	}
	monitoring := h.id(t, "MonitoringAndCLISecrets")
	if s := out.Control.Step(monitoring); s.Outcome.Kind != model.Failed || s.Outcome.Class != ClassNotFound || s.Message != out.Err.Error() {
		t.Fatalf("the failing step: %+v", s)
	}
	for i, op := range h.plan.LegacyOrder {
		s := out.Control.Step(op)
		switch {
		case i < 2 && (s.Outcome.Kind != model.Succeeded || !s.Executed):
			t.Errorf("%s before the failure: %+v", h.plan.Operations[op].Name, s)
		case i > 2 && s.Outcome.Kind != model.Skipped:
			t.Errorf("%s after the failure: %+v", h.plan.Operations[op].Name, s)
		}
	}
	a := attrs(h.spanOf(t, "MonitoringAndCLISecrets", "control"))
	if a["error.type"].AsString() != ClassNotFound || a["k8s.status.code"].AsInt64() != 404 {
		t.Errorf("the failing step's span: %v", a)
	}
	// The legacy-only step's writes are one-sided, on its control span; the marked steps the
	// function wrote nothing in differ from the phased code, which creates its ConfigMap; the
	// step the function failed in is not compared (its outcome says the runs differ).
	var found []string
	for _, d := range out.WriteDifferences {
		found = append(found, fmt.Sprintf("%s %s %s/%s %t", d.Operation, d.Name, d.Control, d.Candidate, d.Intended))
	}
	if strings.Join(found, "; ") != "CPOImageAndNamespace cm-CPOImageAndNamespace /create false; "+
		"ValidConfigurationCondition valid-configuration create/ true; "+
		"ManagedHSMVersionCheck cm-ManagedHSMVersionCheck /create true" ||
		events(h.spanOf(t, "ValidConfigurationCondition", "control")) != 1 {
		t.Errorf("%v", found)
	}
	// The candidate still dry-runs what the control skipped.
	core := h.id(t, "CoreHCPChain")
	if !slices.Contains(out.Diff.Unblocked, core) {
		t.Errorf("unblocked: %v", h.plan.SortedNames(out.Diff.Unblocked))
	}
	ignored := 0
	for _, line := range logged {
		if strings.Contains(line, "marks step") {
			ignored++
		}
	}
	if ignored != 2 {
		t.Errorf("each unknown mark is logged once: %v", logged)
	}
}

// Without a mark, a failed function's steps are not known: not simulated (unknown), and the
// candidate runs every step itself; a function that succeeds without marks went past them all.
func TestALegacyFunctionWithoutMarks(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
	}{{"fails", errors.New("the legacy loop failed")}, {"succeeds", nil}} {
		t.Run(c.name, func(t *testing.T) {
			fn := func(context.Context, *corev1.Secret, client.Client) (reconcile.Result, error) {
				return reconcile.Result{RequeueAfter: time.Minute}, c.err
			}
			h := newFuncHarness(t, nil, fn, nil)
			out := h.reconcile(t)
			if !errors.Is(out.Err, c.err) || (c.err == nil) != (out.Err == nil) {
				t.Fatalf("error: %v", out.Err)
			}
			for _, s := range out.Control.Steps {
				want := model.Succeeded
				if c.err != nil {
					want = model.Unknown
				}
				if s.Outcome.Kind != want {
					t.Errorf("control %s: %+v", h.plan.Operations[s.Op].Name, s)
				}
			}
			if c.err == nil && out.RequeueAfter != time.Minute {
				t.Errorf("requeue %v", out.RequeueAfter)
			}
			for name, execution := range h.executions(out) {
				op, _ := h.plan.Lookup(name)
				if h.plan.Operations[op].Shadow != plan.ShadowSkip && execution != "executed" {
					t.Errorf("candidate %s: %s", name, execution)
				}
			}
			for _, line := range h.log.take() {
				if !strings.HasPrefix(line, "dry-run ") {
					t.Errorf("%s", line)
				}
			}
		})
	}
}

// Mode off runs the function alone; mode enforce runs the phased code (the function never);
// a panicking function fails its step as internal; Step outside an engine does nothing.
func TestALegacyFunctionInEveryMode(t *testing.T) {
	calls := 0
	fn := func(ctx context.Context, _ *corev1.Secret, _ client.Client) (reconcile.Result, error) {
		calls++
		Step(ctx, "CPOImageAndNamespace")
		Step(ctx, "PullSecretSync")
		if calls == 3 {
			panic("boom")
		}
		return reconcile.Result{}, nil
	}
	off := flag.Default()
	off.Mode = flag.Off
	h := newFuncHarness(t, staticFlag(t, off, "hostedcluster"), fn, nil)
	out := h.reconcile(t)
	if out.Err != nil || out.Candidate != nil || calls != 1 || len(h.log.take()) != 0 || len(out.WriteDifferences) != 0 {
		t.Fatalf("off: %v, candidate %v, %d calls", out.Err, out.Candidate != nil, calls)
	}
	enforce := flag.Default()
	enforce.Mode = flag.Enforce
	h = newFuncHarness(t, staticFlag(t, enforce, "hostedcluster"), fn, nil)
	out = h.reconcile(t)
	if out.Err != nil || calls != 1 || out.Control.Kind != model.Phased || len(out.WriteDifferences) != 0 {
		t.Fatalf("enforce: %v, %d calls, control %s, %+v", out.Err, calls, out.Control.Kind, out.WriteDifferences)
	}
	for _, line := range h.log.take() {
		if !strings.HasPrefix(line, "real ") {
			t.Errorf("enforce: the phased code is the control's, and reused: %s", line)
		}
	}
	h = newFuncHarness(t, nil, fn, nil)
	h.reconcile(t)
	out = h.reconcile(t)
	pull := h.id(t, "PullSecretSync")
	if s := out.Control.Step(pull); calls != 3 || s.Outcome.Kind != model.Failed || s.Outcome.Class != ClassInternal || out.Err == nil {
		t.Fatalf("a panic: %+v, %v", s, out.Err)
	}
	Step(context.Background(), "CPOImageAndNamespace")
}

// The recording client names what each verb wrote: group and resource through the REST
// mapper, the namespace, the subresource, the kind, and the answer as JSON values with the
// object's apiVersion and kind; a failed write is not logged.
func TestTheRecordingClientLogsAcceptedWrites(t *testing.T) {
	h := newLegacyHarness(t, nil, nil, Legacy[*corev1.Secret, state]{}, existing("a", map[string]string{"k": "v"}))
	rec := newRecorder(h.real)
	ctx := context.Background()
	cm := existing("b", map[string]string{"k": "v"})
	if err := rec.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := rec.Create(ctx, existing("a", nil)); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("%v", err)
	}
	cm.Data["k"] = "w"
	if err := rec.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	before := cm.DeepCopy()
	cm.Labels = map[string]string{"l": "x"}
	if err := rec.Patch(ctx, cm, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	if err := rec.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	pod.Namespace, pod.Name = ns, "p"
	if err := rec.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	if err := rec.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	got := rec.take()
	var lines []string
	for _, w := range got {
		o := w.Object
		lines = append(lines, fmt.Sprintf("%s %s/%s %s/%s/%s %s %t", w.Verb, o.Group, o.Resource, o.Namespace, o.Name, o.Subresource, w.Kind, w.HasAnswer))
	}
	want := []string{
		"create /configmaps team-0/b/ ConfigMap true",
		"update /configmaps team-0/b/ ConfigMap true",
		"patch /configmaps team-0/b/ ConfigMap true",
		"delete /configmaps team-0/b/ ConfigMap false",
		"create /pods team-0/p/ Pod true",
		"update /pods team-0/p/status Pod true",
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("logged:\n%s", strings.Join(lines, "\n"))
	}
	answer, _ := got[2].Answer.(map[string]any)
	if answer["apiVersion"] != "v1" || answer["kind"] != "ConfigMap" || fmt.Sprint(answer["data"]) != "map[k:w]" {
		t.Errorf("the patch's answer: %v", answer)
	}
	if fields, n := writes.DifferingFields(got[0].Answer, got[2].Answer, nil); n != 2 ||
		fields[0].String() != "data.k" || fields[1].String() != "metadata.labels" {
		t.Errorf("the create's and the patch's answers differ in %v", fields)
	}
	// What each request sent: the create's object as it was before the call, the patch's merge
	// patch (its content type with it), nothing for a delete.
	sent := func(i int, path string) bool {
		return got[i].Sent().Covers(plan.MustParseFieldPath(path))
	}
	if !sent(0, "data.k") || sent(0, "metadata.uid") || sent(0, "metadata.resourceVersion") {
		t.Errorf("the create sent %s", got[0].Request.Bytes)
	}
	if got[2].Request == nil || got[2].Request.ContentType != string(types.MergePatchType) || !sent(2, "metadata.labels.l") || sent(2, "data.k") {
		t.Errorf("the patch sent %+v", got[2].Request)
	}
	if got[3].Request != nil || sent(3, "data") {
		t.Errorf("the delete sent %+v", got[3].Request)
	}
	if len(rec.take()) != 0 {
		t.Error("take empties the log")
	}
}
