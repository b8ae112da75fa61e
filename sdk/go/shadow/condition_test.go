package shadow

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/plan"
)

const onePlan = `
apiVersion: shadow-reconciler.io/v1alpha1
kind: ReconcilePlan
metadata:
  name: one
spec:
  operations:
    - name: Only
      phase: 1
      category: critical
      shadow: dry-run
  legacy:
    order: [Only]
`

// conditionHarness reconciles obj with WriteCondition on, counting the status patches and the
// log lines.
func conditionHarness[T client.Object](t *testing.T, obj T) (func(), *int, *[]string) {
	t.Helper()
	p, err := plan.Parse("one.yaml", []byte(onePlan))
	if err != nil {
		t.Fatal(err)
	}
	patches := 0
	var mu sync.Mutex
	var lines []string
	real := fake.NewClientBuilder().WithObjects(obj).WithStatusSubresource(obj).WithInterceptorFuncs(interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, o client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			patches++
			return c.SubResource(sub).Patch(ctx, o, patch, opts...)
		},
	}).Build()
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		lines = append(lines, args)
		mu.Unlock()
	}, funcr.Options{})
	ops := map[string]Op[T, struct{}]{"Only": func(context.Context, *Run[T, struct{}]) error { return nil }}
	e, err := New(p, real, ops, Options{DryRun: &DryRun{dry: client.NewDryRunClient(real), stats: &GuardStats{}}, WriteCondition: true, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	reconcile := func() {
		fresh := obj.DeepCopyObject().(T)
		if err := real.Get(context.Background(), client.ObjectKeyFromObject(obj), fresh); err != nil {
			t.Fatal(err)
		}
		e.Reconcile(context.Background(), fresh)
	}
	return reconcile, &patches, &lines
}

// A status with conditions stores the condition: one patch, none once it is there.
func TestTheConditionIsWrittenOnceWhereTheStatusHasConditions(t *testing.T) {
	reconcile, patches, lines := conditionHarness(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"}})
	reconcile()
	reconcile()
	if *patches != 1 {
		t.Errorf("%d status patches, want 1: %v", *patches, *lines)
	}
}

// A status without conditions (the server drops them, as a CRD's schema prunes them): the
// engine says so once, in the log and the gauge, and sends no more patches.
func TestAConditionTheStatusCannotStoreIsReportedOnceAndNoLongerWritten(t *testing.T) {
	reconcile, patches, lines := conditionHarness(t, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q", UID: "u"}})
	for range 3 {
		reconcile()
	}
	if *patches != 1 {
		t.Errorf("%d status patches, want 1 (the one that showed it)", *patches)
	}
	said := 0
	for _, l := range *lines {
		if strings.Contains(l, "cannot be stored") {
			said++
		}
	}
	if said != 1 {
		t.Errorf("said %d times: %v", said, *lines)
	}
	if v := testutil.ToFloat64(conditionUnstorable.WithLabelValues("one", "ResourceQuota")); v != 1 {
		t.Errorf("shadow_reconciler_condition_unstorable = %v", v)
	}
}
