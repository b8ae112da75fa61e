package shadow

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/flag"
)

// calibrating is a flag whose every object is in mode calibrate.
func calibrating(t *testing.T) *Flag {
	t.Helper()
	spec := flag.Default()
	spec.Mode = flag.Calibrate
	return staticFlag(t, spec, "hostedcluster")
}

// Mode calibrate pairs every operation's own code with it: identical writes make no difference,
// a value the code draws anew each run (a timestamp, a random token) does, and is the
// comparison's noise; there is no candidate run.
func TestCalibrationFindsTheNoiseOfTheControlsOwnCode(t *testing.T) {
	var draws atomic.Int64
	noisy := func(ctx context.Context, r *Run[*corev1.Secret, state]) error {
		return upsert("cm-noisy", map[string]string{"stamp": fmt.Sprint(draws.Add(1)), "fixed": "x"})(ctx, r)
	}
	h := newLegacyHarness(t, calibrating(t), map[string]secretOp{"SSHKeySync": noisy}, Legacy[*corev1.Secret, state]{})
	out := h.reconcile(t)
	if out.Mode != flag.Calibrate || out.Candidate != nil || out.Err != nil {
		t.Fatalf("mode %s, candidate %v, err %v", out.Mode, out.Candidate != nil, out.Err)
	}
	if len(out.WriteDifferences) != 1 {
		t.Fatalf("differences: %+v", out.WriteDifferences)
	}
	d := out.WriteDifferences[0]
	if d.Operation != "SSHKeySync" || d.Kind != "ConfigMap" || d.Name != "cm-noisy" || len(d.Fields) != 1 || d.Fields[0] != "data.stamp" {
		t.Fatalf("%+v", d)
	}
	// Every other operation's code was paired too, but those a dry run cannot contain: the
	// plan's `shadow: skip` ones and the legacy path's own (the plan gives them no shadow policy).
	spans := h.candidateSpans()
	if spans["CPOImageAndNamespace"] != 1 || spans["PlatformOIDCAndCSI"] != 0 || spans["ValidConfigurationCondition"] != 0 {
		t.Fatalf("paired spans: %v", spans)
	}
}

// A legacy function is rehearsed in dry-run, then called for real; its writes are compared step
// by step, and the differences are on the control's step spans. The rehearsal ends at the mark
// of a step a dry run cannot contain (`shadow: skip`): its effect happens in the real call only.
func TestCalibrationRehearsesALegacyFunction(t *testing.T) {
	var draws, uploads atomic.Int64
	fn := func(ctx context.Context, obj *corev1.Secret, c client.Client) (reconcile.Result, error) {
		for _, step := range []string{"CPOImageAndNamespace", "PullSecretSync", "SSHKeySync", "PlatformOIDCAndCSI"} {
			Step(ctx, step)
			if step == "PlatformOIDCAndCSI" {
				uploads.Add(1) // an effect outside the API server (`shadow: skip`)
				continue
			}
			data := map[string]string{"step": step}
			if step == "SSHKeySync" {
				data["token"] = fmt.Sprint(draws.Add(1))
			}
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fn-" + step}, Data: data}
			if err := c.Create(ctx, cm); err != nil {
				return reconcile.Result{}, err
			}
		}
		return reconcile.Result{}, nil
	}
	h := newLegacyHarness(t, calibrating(t), nil, Legacy[*corev1.Secret, state]{Func: fn})
	out := h.reconcile(t)
	if out.Err != nil || out.Candidate != nil {
		t.Fatalf("err %v, candidate %v", out.Err, out.Candidate != nil)
	}
	if len(out.WriteDifferences) != 1 || out.WriteDifferences[0].Operation != "SSHKeySync" ||
		out.WriteDifferences[0].Fields[0] != "data.token" {
		t.Fatalf("differences: %+v", out.WriteDifferences)
	}
	if draws.Load() != 2 || uploads.Load() != 1 {
		t.Fatalf("the function drew %d tokens and uploaded %d times, want the rehearsal and the real call, and the upload of the real call only", draws.Load(), uploads.Load())
	}
	// Nothing of the rehearsal persisted: the real call created each object once.
	list := &corev1.ConfigMapList{}
	if err := h.real.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 3 {
		t.Fatalf("%d ConfigMaps", len(list.Items))
	}
	span := h.spanOf(t, "SSHKeySync", "control")
	if len(span.Events()) != 1 {
		t.Fatalf("the control's SSHKeySync span carries %d events", len(span.Events()))
	}
}
