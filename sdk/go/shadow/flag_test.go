package shadow

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/flag"
)

// The flag ConfigMap, read through the controller's reader at every reconcile: a change
// applies from the next reconcile; an invalid one keeps the last valid flag (stale); a deleted
// one gives the defaults back.
func TestAFlagFlipChangesTheNextReconcile(t *testing.T) {
	h := newHarness(t, "hostedcluster", nil)
	key := types.NamespacedName{Namespace: "shadow-reconciler", Name: "shadow-reconciler-flag"}
	f, err := ConfigMapFlag(h.real, key, flag.Default(), logr.Discard(), h.plan)
	if err != nil {
		t.Fatal(err)
	}
	h.engine.flag = f
	ctx := context.Background()
	if out := h.reconcile(); out.Mode != flag.Shadow || out.Evaluation.Reason != flag.DefaultReason {
		t.Fatalf("no ConfigMap: %+v", out.Evaluation)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Data: map[string]string{"mode": "off"}}
	if err := h.real.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	out := h.reconcile()
	if out.Mode != flag.Off || out.Candidate != nil || out.Evaluation.Reason != flag.Static || out.Evaluation.Version == "" {
		t.Fatalf("after the flip to off: %+v", out.Evaluation)
	}
	cm.Data = map[string]string{"mode": "enforce", "enforcedGroups": "non-critical-syncs"}
	if err := h.real.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if out := h.reconcile(); out.Mode != flag.Enforce || out.Control.Kind != "phased" {
		t.Fatalf("after the flip to enforce: %+v", out.Evaluation)
	}
	cm.Data = map[string]string{"mode": "enforce", "rampPercent": "150"}
	if err := h.real.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	out = h.reconcile()
	if out.Mode != flag.Enforce || out.Evaluation.Reason != flag.Stale {
		t.Fatalf("an invalid ConfigMap must keep the last valid flag: %+v", out.Evaluation)
	}
	if s := f.Current(ctx); !s.Stale || s.Error == "" || len(s.Spec.EnforcedGroups) != 1 {
		t.Fatalf("%+v", s)
	}
	if err := h.real.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if out := h.reconcile(); out.Mode != flag.Shadow || out.Evaluation.Reason != flag.DefaultReason {
		t.Fatalf("after the delete: %+v", out.Evaluation)
	}
}

func TestTheAnnotationChoosesWhenAllowed(t *testing.T) {
	spec := flag.Default()
	spec.AllowObjectOverride = true
	h := newHarness(t, "hostedcluster", staticFlag(t, spec, "hostedcluster"))
	h.object.Annotations = map[string]string{flag.Annotation: "off"}
	if out := h.reconcile(); out.Mode != flag.Off || out.Evaluation.Reason != flag.TargetingMatch {
		t.Fatalf("%+v", out.Evaluation)
	}
}

// One engine serves concurrent reconciles (controller-runtime's MaxConcurrentReconciles) while
// the flag changes under them; run with -race to check the engine's sharing.
func TestConcurrentReconcilesWhileTheFlagChanges(t *testing.T) {
	h := newHarness(t, "hostedcluster", nil)
	key := types.NamespacedName{Namespace: "shadow-reconciler", Name: "shadow-reconciler-flag"}
	f, err := ConfigMapFlag(h.real, key, flag.Default(), logr.Discard(), h.plan)
	if err != nil {
		t.Fatal(err)
	}
	h.engine.flag = f
	h.engine.ops[6] = func(context.Context, *Run[*corev1.Secret, state]) error { return notFound("x") }
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Data: map[string]string{"mode": "shadow"}}
	if err := h.real.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	errs := make(chan string, 64)
	for w := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 50 {
				obj := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-0", Name: "hc", UID: types.UID(string(rune('a'+w)) + string(rune('a'+i%26)))}}
				out := h.engine.Reconcile(ctx, obj)
				if out.Control == nil || (out.Mode != flag.Off && out.Candidate == nil) {
					errs <- "an incomplete outcome"
				}
			}
		}()
	}
	for _, mode := range []string{"off", "enforce", "shadow", "off"} {
		cm.Data = map[string]string{"mode": mode}
		if err := h.real.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		<-done
	}
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
