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
