package shadow

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// A reconcile whose context is cancelled while it runs (the controller's SIGTERM) is recorded
// as cancelled: the control's "context canceled" is not a failure and the candidate's accepted
// dry-run write, which has no real counterpart only because of the cut, is not a difference.
func TestACancelledReconcileIsNeitherAFailureNorAWriteDifference(t *testing.T) {
	p := shipped(t, "hostedcluster")
	object := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-0", Name: "hc-0", UID: "uid-0"}}
	real := fake.NewClientBuilder().WithObjects(object.DeepCopy()).Build()
	dry := &DryRun{dry: client.NewDryRunClient(real), stats: &GuardStats{}}
	spans := tracetest.NewSpanRecorder()
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)).Tracer("test")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	write := func(ctx context.Context, r *Run[*corev1.Secret, state]) error {
		err := r.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-0", Name: "svc-" + r.Object.Name}})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	ops := map[string]Op[*corev1.Secret, state]{}
	for _, op := range p.Operations {
		ops[op.Name] = func(context.Context, *Run[*corev1.Secret, state]) error { return nil }
	}
	ops["SSHKeySync"] = write
	legacy := Legacy[*corev1.Secret, state]{Ops: map[string]Op[*corev1.Secret, state]{
		// The shutdown arrives while the legacy code of the paired operation writes.
		"SSHKeySync": func(ctx context.Context, r *Run[*corev1.Secret, state]) error {
			cancel()
			if err := ctx.Err(); err != nil {
				return err
			}
			return write(ctx, r)
		},
	}}
	e, err := NewWithLegacy(p, real, ops, legacy, Options{DryRun: dry, Tracer: tracer})
	if err != nil {
		t.Fatal(err)
	}
	out := e.Reconcile(ctx, object)
	if !out.Cancelled || len(out.WriteDifferences) != 0 || out.Err == nil {
		t.Fatalf("cancelled %v, differences %+v, err %v", out.Cancelled, out.WriteDifferences, out.Err)
	}
	var reconcile sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		if s.Name() == "reconcile" {
			reconcile = s
		}
	}
	if reconcile == nil {
		t.Fatal("no reconcile span")
	}
	cancelled := false
	for _, a := range reconcile.Attributes() {
		if string(a.Key) == attrCancelled && a.Value.AsBool() {
			cancelled = true
		}
	}
	if !cancelled || reconcile.Status().Code == codes.Error {
		t.Fatalf("the reconcile span: cancelled %v, status %v", cancelled, reconcile.Status())
	}

	// The same reconcile with a live context is a real failure and difference: the check is the
	// context, not the error text.
	e2, err := NewWithLegacy(p, real, ops, Legacy[*corev1.Secret, state]{Ops: map[string]Op[*corev1.Secret, state]{
		"SSHKeySync": func(context.Context, *Run[*corev1.Secret, state]) error { return context.Canceled },
	}}, Options{DryRun: dry, Tracer: tracer})
	if err != nil {
		t.Fatal(err)
	}
	live := e2.Reconcile(context.Background(), object)
	if live.Cancelled || live.Err == nil {
		t.Fatalf("a live context: cancelled %v, err %v", live.Cancelled, live.Err)
	}
}

// A reconcile whose every step ended before its context did is whole: the context ending
// after the last step (a shutdown just then) cut nothing, and its record stays.
func TestAContextEndingAfterEveryStepCutsNothing(t *testing.T) {
	p := shipped(t, "hostedcluster")
	object := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-0", Name: "hc-0", UID: "uid-0"}}
	real := fake.NewClientBuilder().WithObjects(object.DeepCopy()).Build()
	dry := &DryRun{dry: client.NewDryRunClient(real), stats: &GuardStats{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	last := p.Operations[p.LegacyOrder[len(p.LegacyOrder)-1]].Name
	ops := map[string]Op[*corev1.Secret, state]{}
	for _, op := range p.Operations {
		ops[op.Name] = func(context.Context, *Run[*corev1.Secret, state]) error { return nil }
	}
	// The control's last step ends the context after it succeeded; what the candidate runs after
	// it does not fail.
	ops[last] = func(_ context.Context, r *Run[*corev1.Secret, state]) error {
		if !r.DryRun() {
			defer cancel()
		}
		return nil
	}
	e, err := New(p, real, ops, Options{DryRun: dry})
	if err != nil {
		t.Fatal(err)
	}
	out := e.Reconcile(ctx, object)
	if ctx.Err() == nil {
		t.Fatal("the test's context did not end: it proves nothing")
	}
	if out.Cancelled || out.Err != nil || len(out.Control.Failures()) != 0 {
		t.Fatalf("cancelled %v, err %v", out.Cancelled, out.Err)
	}
}
