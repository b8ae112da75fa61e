package shadow_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/plan"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/shadow"
)

// examplePlan: Sync is in both paths (its phased code deletes a stale copy the legacy code
// keeps, a declared difference), Check in the phased path only, Inline in the legacy loop only.
const examplePlan = `
apiVersion: shadow-reconciler.io/v1alpha1
kind: ReconcilePlan
metadata:
  name: example
spec:
  operations:
    - name: Sync
      phase: 1
      category: non-critical
      shadow: dry-run
      intendedDifferences:
        - kind: ConfigMap
          name: copy
          control: none
          candidate: delete
          reason: the clean-up fix, in the phased path only
    - name: Check
      phase: 2
      category: critical
      shadow: dry-run
      only: phased
    - name: Inline
      only: legacy
  legacy:
    order: [Sync, Inline]
`

type op = shadow.Op[*corev1.ConfigMap, struct{}]
type run = shadow.Run[*corev1.ConfigMap, struct{}]

// The phased code: ops holds every operation of the phased path.
var phased = map[string]op{
	"Sync": func(ctx context.Context, r *run) error {
		// The clean-up fix: the copy goes once the object references no source.
		stale := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.Object.Namespace, Name: "copy"}}
		return client.IgnoreNotFound(r.Client.Delete(ctx, stale))
	},
	"Check": func(context.Context, *run) error { return nil },
}

// Per operation: the legacy code where it is its own (Sync, without the fix), and the legacy
// loop's own step (Inline, `only: legacy`).
func ExampleNewWithLegacy() {
	p, real, dry, stop := setUp()
	defer stop()
	legacy := shadow.Legacy[*corev1.ConfigMap, struct{}]{Ops: map[string]op{
		"Sync": func(context.Context, *run) error { return nil }, // keeps the copy
		"Inline": func(ctx context.Context, r *run) error {
			r.Object.Annotations = map[string]string{"validated": "true"}
			return r.Client.Update(ctx, r.Object)
		},
	}}
	engine, err := shadow.NewWithLegacy(p, real, phased, legacy, shadow.Options{DryRun: dry})
	if err != nil {
		panic(err)
	}
	out := engine.Reconcile(context.Background(), object(real))
	for _, d := range out.WriteDifferences {
		fmt.Printf("%s (intended: %t)\n", d.Describe(), d.Intended)
	}
	// Output:
	// Sync: the candidate deletes ConfigMap team-0/copy where the control writes nothing (intended: true)
	// Inline: the candidate writes nothing ConfigMap team-0/hc where the control updates (intended: true)
}

// reconcileLegacy is a legacy loop kept as it was, as one function: it only gains a mark at the
// start of each step. Without an engine the marks do nothing.
func reconcileLegacy(ctx context.Context, obj *corev1.ConfigMap, c client.Client) (reconcile.Result, error) {
	shadow.Step(ctx, "Sync")
	// ... the legacy loop's sync, which keeps the copy ...
	shadow.Step(ctx, "Inline")
	obj.Annotations = map[string]string{"validated": "true"}
	if err := c.Update(ctx, obj); err != nil {
		return reconcile.Result{}, fmt.Errorf("inline status update: %w", err)
	}
	return reconcile.Result{}, nil
}

// The whole legacy loop as one function (the HyperShift shape): at each mark the candidate's
// phased code of the step runs in dry-run before the function goes on.
func ExampleStep() {
	p, real, dry, stop := setUp()
	defer stop()
	legacy := shadow.Legacy[*corev1.ConfigMap, struct{}]{Func: reconcileLegacy}
	engine, err := shadow.NewWithLegacy(p, real, phased, legacy, shadow.Options{DryRun: dry})
	if err != nil {
		panic(err)
	}
	out := engine.Reconcile(context.Background(), object(real))
	for _, s := range out.Control.Steps {
		fmt.Println("control:", p.Operations[s.Op].Name, s.Outcome.Kind)
	}
	for _, s := range out.Candidate.Steps {
		fmt.Println("candidate:", p.Operations[s.Op].Name, s.Outcome.Kind)
	}
	for _, d := range out.WriteDifferences {
		fmt.Printf("%s (intended: %t)\n", d.Describe(), d.Intended)
	}
	// Output:
	// control: Sync succeeded
	// control: Inline succeeded
	// candidate: Sync succeeded
	// candidate: Check succeeded
	// Sync: the candidate deletes ConfigMap team-0/copy where the control writes nothing (intended: true)
	// Inline: the candidate writes nothing ConfigMap team-0/hc where the control updates (intended: true)
}

// setUp is the plan, a fake API holding the object and a stale copy as the controller's client,
// and a dry-run client whose server answers every write with what it was sent.
func setUp() (*plan.Plan, client.Client, *shadow.DryRun, func()) {
	return setUpPlan(examplePlan)
}

// setUpPlan is setUp with another plan.
func setUpPlan(text string) (*plan.Plan, client.Client, *shadow.DryRun, func()) {
	p, err := plan.Parse("example.yaml", []byte(text))
	if err != nil {
		panic(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	for gvk := range clientgoscheme.Scheme.AllKnownTypes() {
		mapper.Add(gvk, meta.RESTScopeNamespace)
	}
	real := fake.NewClientBuilder().WithRESTMapper(mapper).WithObjects(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-0", Name: "hc", UID: "uid-0"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-0", Name: "copy"}},
	).Build()
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodDelete {
			body = []byte(`{"kind":"Status","apiVersion":"v1","status":"Success"}`)
		}
		_, _ = w.Write(body)
	}))
	cfg := &rest.Config{Host: server.URL}
	cfg.ContentType = "application/json"
	dry, err := shadow.NewDryRun(cfg, real, client.Options{Scheme: clientgoscheme.Scheme, Mapper: mapper})
	if err != nil {
		panic(err)
	}
	return p, real, dry, server.Close
}

func object(c client.Client) *corev1.ConfigMap {
	obj := &corev1.ConfigMap{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "team-0", Name: "hc"}, obj); err != nil {
		panic(err)
	}
	return obj
}
