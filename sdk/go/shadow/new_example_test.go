package shadow_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/shadow"
)

// newPlan: the legacy loop runs FetchSecret then SyncConfig and stops at the first error; the
// phased reconcile runs both (same phase), so a missing secret no longer blocks the config.
const newPlan = `
apiVersion: shadow-reconciler.io/v1alpha1
kind: ReconcilePlan
metadata:
  name: example-new
spec:
  operations:
    - name: FetchSecret
      phase: 1
      category: critical
      shadow: dry-run
    - name: SyncConfig
      phase: 1
      category: non-critical
      shadow: dry-run
  legacy:
    order: [FetchSecret, SyncConfig]
`

// One engine for a controller whose operations share their code between the two paths: the
// control runs the legacy order for real, the candidate the phased one in dry run, and the
// outcome says what the phased reconcile would have unblocked.
func ExampleNew() {
	p, real, dry, stop := setUpPlan(newPlan)
	defer stop()
	ops := map[string]op{
		"FetchSecret": func(ctx context.Context, r *run) error {
			secret := &corev1.Secret{}
			return r.Client.Get(ctx, client.ObjectKey{Namespace: r.Object.Namespace, Name: "ssh-key"}, secret)
		},
		"SyncConfig": func(ctx context.Context, r *run) error {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.Object.Namespace, Name: "rendered"}}
			return r.Client.Create(ctx, cm)
		},
	}
	engine, err := shadow.New(p, real, ops, shadow.Options{DryRun: dry})
	if err != nil {
		panic(err)
	}
	out := engine.Reconcile(context.Background(), object(real))
	fmt.Println("mode:", out.Mode)
	for _, s := range out.Control.Steps {
		fmt.Println("control:", p.Operations[s.Op].Name, s.Outcome.Kind)
	}
	for _, s := range out.Candidate.Steps {
		fmt.Println("candidate:", p.Operations[s.Op].Name, s.Outcome.Kind)
	}
	fmt.Println("unblocked:", p.SortedNames(out.Diff.Unblocked))
	fmt.Println("control error:", out.Err != nil)
	// Output:
	// mode: shadow
	// control: FetchSecret failed
	// control: SyncConfig skipped
	// candidate: FetchSecret failed
	// candidate: SyncConfig succeeded
	// unblocked: [SyncConfig]
	// control error: true
}
