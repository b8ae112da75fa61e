package writes

import (
	"sort"
	"strings"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/plan"
)

// Field-by-field comparison of two answers of the API server for one object: the fields whose
// values differ, ignoring what the server itself changes from one write to the next.
//
// Ignored everywhere: metadata.resourceVersion, uid, generation, creationTimestamp,
// managedFields and selfLink; any field whose key ends in Time or Timestamp
// (lastTransitionTime, lastHeartbeatTime...); and the plan's volatile fields. With the requests
// at hand (Compare), a field neither side's request sent is the server's (a default, an
// allocated address or port) and a value that is the server's allocation to each side is one
// value (allocated.go). A list of objects
// that all carry a distinct name (else type) is compared by that key, as Kubernetes merges it, so
// the same conditions in another order are no difference. A null equals a missing field.

// MaxFields is how many differing fields a WriteDifference lists at most; the rest are counted.
const MaxFields = 32

// serverMetadata are the metadata fields the server sets on every write.
var serverMetadata = [...]string{"resourceVersion", "uid", "generation", "creationTimestamp", "managedFields", "selfLink"}

// DifferingFields are the fields of control and candidate (two versions of one object, decoded
// JSON: maps, slices, strings, bools, nil and numbers as json.Number, float64 or Go integers)
// whose values differ, every one, in path order (FieldPath.Compare), without the ignored ones,
// and how many (a WriteDifference lists the first MaxFields). Numbers compare as serde_json's:
// an integer never equals a float (1 is not 1.0).
func DifferingFields(control, candidate any, volatile []plan.FieldPath) ([]plan.FieldPath, int) {
	return differingFields(control, candidate, context{volatile: volatile})
}

// context decides whether a differing field counts: the plan's volatile fields, what each
// side's requests for the object sent (nil: everything), and the server's allocations to each.
type context struct {
	volatile                   []plan.FieldPath
	sentControl, sentCandidate []Sent
	allocations                *Allocations
}

// counts says whether a field that differs (x the control's value, y the candidate's; nil
// where a side has none) is a difference of the codes.
func (c context) counts(path plan.FieldPath, x, y any) bool {
	if c.sentControl != nil || c.sentCandidate != nil {
		sent := false
		for _, side := range [][]Sent{c.sentControl, c.sentCandidate} {
			for _, s := range side {
				sent = sent || s.Covers(path)
			}
		}
		if !sent {
			return false
		}
	}
	return x == nil || y == nil || c.allocations == nil || !c.allocations.Corresponds(x, y)
}

func differingFields(control, candidate any, ctx context) ([]plan.FieldPath, int) {
	var out []plan.FieldPath
	walk(control, candidate, plan.FieldPath{}, ctx, &out)
	sort.SliceStable(out, func(a, b int) bool { return out[a].Compare(out[b]) < 0 })
	return out, len(out)
}

func ignored(path plan.FieldPath, volatile []plan.FieldPath) bool {
	n := path.Len()
	if n == 2 && path.At(0) == plan.KeySegment("metadata") && path.At(1).Kind == plan.SegmentKey {
		for _, field := range serverMetadata {
			if path.At(1).Key == field {
				return true
			}
		}
	}
	if n > 0 && path.At(n-1).Kind == plan.SegmentKey {
		if last := path.At(n - 1).Key; strings.HasSuffix(last, "Time") || strings.HasSuffix(last, "Timestamp") {
			return true
		}
	}
	for _, pattern := range volatile {
		if pattern.Covers(path) {
			return true
		}
	}
	return false
}

func walk(a, b any, path plan.FieldPath, ctx context, out *[]plan.FieldPath) {
	if ignored(path, ctx.volatile) {
		return
	}
	am, aIsMap := a.(map[string]any)
	bm, bIsMap := b.(map[string]any)
	if aIsMap && bIsMap {
		objects(am, bm, path, ctx, out)
		return
	}
	al, aIsList := a.([]any)
	bl, bIsList := b.([]any)
	if aIsList && bIsList {
		arrays(al, bl, path, ctx, out)
		return
	}
	if !scalarEqual(a, b) && ctx.counts(path, a, b) {
		*out = append(*out, path)
	}
}

// oneSide is a field one side has and the other has not.
func oneSide(path plan.FieldPath, x, y any, ctx context, out *[]plan.FieldPath) {
	if !ignored(path, ctx.volatile) && ctx.counts(path, x, y) {
		*out = append(*out, path)
	}
}

// scalarEqual is serde_json's Value equality where at least one side is not a container (a map
// never equals a list or a scalar).
func scalarEqual(a, b any) bool {
	switch a := a.(type) {
	case nil:
		return b == nil
	case string:
		s, ok := b.(string)
		return ok && a == s
	case bool:
		t, ok := b.(bool)
		return ok && a == t
	case map[string]any, []any:
		return false
	}
	x, ok := numeric(a)
	y, ok2 := numeric(b)
	if !ok || !ok2 || x.kind != y.kind {
		return false
	}
	switch x.kind {
	case 0:
		return x.u == y.u
	case 1:
		return x.i == y.i
	}
	return x.f == y.f
}

// objects compares two maps key by key, in key order; a null is a missing field.
func objects(a, b map[string]any, path plan.FieldPath, ctx context, out *[]plan.FieldPath) {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, both := a[k]; !both {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, key := range keys {
		x, y := a[key], b[key] // missing reads as nil, as null does
		child := path.Child(plan.KeySegment(key))
		switch {
		case x == nil && y == nil:
		case x != nil && y != nil:
			walk(x, y, child, ctx, out)
		default:
			oneSide(child, x, y, ctx, out)
		}
	}
}

// listKey is the key field of two lists whose elements are all objects with a distinct string
// value of it (name, else type), "" when there is none.
func listKey(a, b []any) string {
	for _, field := range [...]string{"name", "type"} {
		keyed := true
		for _, list := range [][]any{a, b} {
			if len(list) == 0 {
				keyed = false
				break
			}
			seen := map[string]bool{}
			for _, item := range list {
				m, ok := item.(map[string]any)
				if !ok {
					keyed = false
					break
				}
				v, ok := m[field].(string)
				if !ok || seen[v] {
					keyed = false
					break
				}
				seen[v] = true
			}
			if !keyed {
				break
			}
		}
		if keyed {
			return field
		}
	}
	return ""
}

func arrays(a, b []any, path plan.FieldPath, ctx context, out *[]plan.FieldPath) {
	if field := listKey(a, b); field != "" {
		byKey := func(list []any) map[string]any {
			m := make(map[string]any, len(list))
			for _, item := range list {
				m[item.(map[string]any)[field].(string)] = item
			}
			return m
		}
		am, bm := byKey(a), byKey(b)
		keys := make([]string, 0, len(am)+len(bm))
		for k := range am {
			keys = append(keys, k)
		}
		for k := range bm {
			if _, both := am[k]; !both {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, key := range keys {
			child := path.Child(plan.KeyedSegment(field, key))
			x, inA := am[key]
			y, inB := bm[key]
			if inA && inB {
				walk(x, y, child, ctx, out)
			} else {
				oneSide(child, x, y, ctx, out)
			}
		}
		return
	}
	for i := 0; i < max(len(a), len(b)); i++ {
		child := path.Child(plan.IndexSegment(uint64(i)))
		switch {
		case i < len(a) && i < len(b):
			walk(a[i], b[i], child, ctx, out)
		case i < len(a):
			oneSide(child, a[i], nil, ctx, out)
		default:
			oneSide(child, nil, b[i], ctx, out)
		}
	}
}
