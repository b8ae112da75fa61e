package shadow

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/model"
)

// OCM's shape: one of three status branches per add-on. The control fails its branch on a 409
// and stops; the candidate runs the two other branches, which have nothing to do: they are not
// unblocked, and their spans say idle.
func TestBranchesThatHadNothingToDoAreNotUnblocked(t *testing.T) {
	p := shipped(t, "addon-install-progression")
	object := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-0", Name: "addon-0", UID: "uid-0"}}
	real := fake.NewClientBuilder().WithObjects(object.DeepCopy()).Build()
	dry := &DryRun{dry: client.NewDryRunClient(real), stats: &GuardStats{}}
	spans := tracetest.NewSpanRecorder()
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)).Tracer("test")
	branch := func(taken bool) Op[*corev1.Secret, state] {
		return func(ctx context.Context, r *Run[*corev1.Secret, state]) error {
			if !taken {
				r.NothingToDo()
				return nil
			}
			if r.DryRun() {
				return nil // the candidate's retry succeeds
			}
			return conflictOn("addon-0")
		}
	}
	ops := map[string]Op[*corev1.Secret, state]{
		"DefaultConfigReferences": func(context.Context, *Run[*corev1.Secret, state]) error { return nil },
		"ManualStrategyStatus":    branch(true),
		"SelfManagedStatus":       branch(false),
		"PlacementStatus":         branch(false),
	}
	e, err := New(p, real, ops, Options{DryRun: dry, Tracer: tracer})
	if err != nil {
		t.Fatal(err)
	}
	out := e.Reconcile(context.Background(), object)
	if out.Err == nil || out.Diff == nil {
		t.Fatalf("err %v, diff %+v", out.Err, out.Diff)
	}
	if len(out.Diff.Unblocked) != 0 || len(out.Diff.Changed) != 1 {
		t.Fatalf("unblocked %v, changed %v: the idle branches are neither", p.SortedNames(out.Diff.Unblocked), p.SortedNames(out.Diff.Changed))
	}
	for _, name := range []string{"SelfManagedStatus", "PlacementStatus"} {
		id, _ := p.Lookup(name)
		step, ok := out.Candidate.Get(id)
		if !ok || !step.Executed || step.Outcome.Kind != model.Idle {
			t.Fatalf("%s in the candidate: %+v", name, step)
		}
	}
	idle := 0
	for _, s := range spans.Ended() {
		for _, a := range s.Attributes() {
			if string(a.Key) == attrOutcome && a.Value.AsString() == "idle" {
				idle++
			}
		}
	}
	if idle != 2 {
		t.Fatalf("%d spans say idle, want the candidate's two branches", idle)
	}
	// Every operation span carries one outcome, the last set: the start's `succeeded` gives way
	// to a failure or to idle (the SDK keeps a key's last value).
	outcomes := map[string]int{}
	for _, s := range spans.Ended() {
		if s.Name() == "reconcile" {
			continue
		}
		var said []string
		policy := ""
		for _, a := range s.Attributes() {
			switch string(a.Key) {
			case attrOutcome:
				said = append(said, a.Value.AsString())
			case attrPolicy:
				policy = a.Value.AsString()
			}
		}
		if len(said) != 1 {
			t.Fatalf("span %s (%s) has outcomes %v, want one", s.Name(), policy, said)
		}
		outcomes[policy+"/"+s.Name()+"/"+said[0]]++
	}
	for _, want := range []string{"control/ManualStrategyStatus/failed", "candidate/ManualStrategyStatus/succeeded", "control/DefaultConfigReferences/succeeded"} {
		if outcomes[want] != 1 {
			t.Fatalf("no span %s: %v", want, outcomes)
		}
	}
}
