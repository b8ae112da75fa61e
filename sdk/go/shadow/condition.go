package shadow

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/model"
)

// conditionAttempts bounds the re-reads after a 409, as the Rust engine does.
const conditionAttempts = 5

// errConditionNotStored: the server accepted the condition's patch and stored no condition (the
// kind's status has no conditions in its schema).
var errConditionNotStored = errors.New("the API server accepted the status patch but stored no status.conditions: the kind's status schema has no conditions")

// conditionUnstorable is 1 for a plan and kind whose status cannot store the condition
// (Options.WriteCondition is then off for the engine), in controller-runtime's metrics registry
// (the manager's /metrics).
var conditionUnstorable = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "shadow_reconciler_condition_unstorable",
	Help: "1 when the ReconciliationSucceeded condition cannot be stored in the status of the plan's kind (its schema has no status.conditions): the engine stopped writing it.",
}, []string{"plan", "kind"})

func init() {
	// Registered once per process; a registry that already has it (a second import path of
	// this package) keeps its own.
	_ = crmetrics.Registry.Register(conditionUnstorable)
}

func conditionsOf(obj client.Object) ([]any, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	list, _, err := unstructured.NestedSlice(content, "status", "conditions")
	return list, err
}

func unchanged(conditions []any, c model.Condition) bool {
	for _, item := range conditions {
		m, _ := item.(map[string]any)
		if m["type"] == c.Type && m["status"] == c.Status && m["reason"] == c.Reason && m["message"] == c.Message {
			return true
		}
	}
	return false
}

// writeCondition writes the ReconciliationSucceeded condition into status.conditions when it
// changed, with a JSON merge patch of the status subresource carrying the resourceVersion (a
// stale object answers 409; then the object is read again, up to 5 times). The transition time
// moves only when the status flips.
func writeCondition(ctx context.Context, c client.Client, reader client.Reader, obj client.Object, condition model.Condition) error {
	current := obj
	for attempt := 1; ; attempt++ {
		conditions, err := conditionsOf(current)
		if err != nil {
			return err
		}
		if unchanged(conditions, condition) {
			return nil
		}
		transition := metav1.Now().UTC().Format(time.RFC3339)
		merged := make([]any, 0, len(conditions)+1)
		for _, item := range conditions {
			m, _ := item.(map[string]any)
			if m["type"] == condition.Type {
				if m["status"] == condition.Status {
					if t, ok := m["lastTransitionTime"].(string); ok {
						transition = t
					}
				}
				continue
			}
			merged = append(merged, item)
		}
		entry := map[string]any{"type": condition.Type, "status": condition.Status, "reason": condition.Reason,
			"message": condition.Message, "lastTransitionTime": transition}
		if g := current.GetGeneration(); g != 0 {
			entry["observedGeneration"] = g
		}
		merged = append(merged, entry)
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": current.GetResourceVersion()},
			"status":   map[string]any{"conditions": merged},
		})
		if err != nil {
			return err
		}
		target := current.DeepCopyObject().(client.Object)
		err = c.Status().Patch(ctx, target, client.RawPatch(types.MergePatchType, patch))
		if err == nil {
			// The server answers with the object it stored: a status schema without
			// conditions drops them (a CRD prunes unknown fields), and every later patch would
			// be dropped alike.
			if stored, _ := conditionsOf(target); !unchanged(stored, condition) {
				return errConditionNotStored
			}
			return nil
		}
		if !IsConflict(err) || attempt == conditionAttempts {
			return err
		}
		fresh := obj.DeepCopyObject().(client.Object)
		if err := reader.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
			return err
		}
		current = fresh
	}
}
