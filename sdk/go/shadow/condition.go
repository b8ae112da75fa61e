package shadow

import (
	"context"
	"encoding/json"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/model"
)

// conditionAttempts bounds the re-reads after a 409, as the Rust engine does.
const conditionAttempts = 5

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
		if err == nil || !IsConflict(err) || attempt == conditionAttempts {
			return err
		}
		fresh := obj.DeepCopyObject().(client.Object)
		if err := reader.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
			return err
		}
		current = fresh
	}
}
