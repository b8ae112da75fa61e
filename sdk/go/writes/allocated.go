package writes

import (
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/plan"
)

// What the code sent, and what the API server set on its own (the Rust crate's
// src/engine/allocated.rs).
//
// Two writes of one object by two codes are compared on what the codes decided. The server adds
// to every answer what no request sent: its defaults and its allocations (a Service's
// spec.clusterIP and node ports, a name from generateName, a UID, a bound claim's volume), and a
// dry-run create gets other allocations than the real one. So a field counts only where at least
// one side's request sent it (Sent.Covers); a field neither sent is the server's. A value the
// server allocated can travel into a later request of the same code (an owner reference to the
// UID just created, a URL with the allocated address): Allocations pairs each side's allocated
// values, so such a field compares equal when one side's value is the other's allocation (and a
// string equal to it once every allocated value inside it is replaced).

// RequestBody is the body of an accepted write's request, kept to tell what the code sent.
type RequestBody struct {
	// ContentType is its Content-Type, "" when it had none.
	ContentType string
	Bytes       []byte
}

// sentKind is what a request's body says it set.
type sentKind uint8

const (
	// sentEverything: a body that could not be read (or was not kept): every field counts.
	sentEverything sentKind = iota
	// sentFields: an object-shaped body (create, update, merge, strategic or apply patch).
	sentFields
	// sentPointers: a JSON patch, the paths its operations name.
	sentPointers
	// sentNothing: a delete, or no body.
	sentNothing
)

// Sent is the fields a request set.
type Sent struct {
	kind     sentKind
	fields   any
	pointers [][]string
}

// SentOf is what body sent, for a request of verb.
func SentOf(verb Verb, body RequestBody) Sent {
	if verb == Delete || len(body.Bytes) == 0 {
		return Sent{kind: sentNothing}
	}
	value, err := DecodeJSON(body.Bytes)
	if err != nil {
		// An apply patch may be YAML.
		json, yerr := yaml.YAMLToJSON(body.Bytes)
		if yerr != nil {
			return Sent{kind: sentEverything}
		}
		if value, err = DecodeJSON(json); err != nil {
			return Sent{kind: sentEverything}
		}
	}
	if strings.HasPrefix(body.ContentType, "application/json-patch+json") {
		ops, ok := value.([]any)
		if !ok {
			return Sent{kind: sentEverything}
		}
		pointers := [][]string{}
		for _, op := range ops {
			m, _ := op.(map[string]any)
			for _, key := range [...]string{"path", "from"} {
				if p, ok := m[key].(string); ok {
					pointers = append(pointers, pointer(p))
				}
			}
		}
		return Sent{kind: sentPointers, pointers: pointers}
	}
	if _, ok := value.(map[string]any); ok {
		return Sent{kind: sentFields, fields: value}
	}
	return Sent{kind: sentEverything}
}

// Covers says whether the request set path, a part of it, or a field that holds it.
func (s Sent) Covers(path plan.FieldPath) bool {
	switch s.kind {
	case sentFields:
		return holds(s.fields, path)
	case sentPointers:
		for _, p := range s.pointers {
			if pointerCovers(p, path) {
				return true
			}
		}
		return false
	case sentNothing:
		return false
	}
	return true
}

// GenerateName is the metadata.generateName of a body that asks the server for a name (no
// metadata.name), "" otherwise.
func (s Sent) GenerateName() string {
	if s.kind != sentFields {
		return ""
	}
	meta, _ := s.fields.(map[string]any)["metadata"].(map[string]any)
	if name, _ := meta["name"].(string); name != "" {
		return ""
	}
	g, _ := meta["generateName"].(string)
	return g
}

func pointer(text string) []string {
	parts := strings.Split(text, "/")
	if len(parts) == 0 {
		return nil
	}
	out := make([]string, 0, len(parts)-1)
	for _, p := range parts[1:] {
		out = append(out, strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~"))
	}
	return out
}

func pointerCovers(p []string, path plan.FieldPath) bool {
	for i := 0; i < len(p) && i < path.Len(); i++ {
		s := path.At(i)
		switch s.Kind {
		case plan.SegmentKey:
			if p[i] != s.Key {
				return false
			}
		case plan.SegmentIndex:
			if p[i] != "-" && p[i] != strconv.FormatUint(s.Index, 10) {
				return false
			}
		case plan.SegmentKeyed:
			if _, err := strconv.ParseUint(p[i], 10, 64); err != nil && p[i] != "-" {
				return false
			}
		}
	}
	return true
}

// holds says whether body holds the field at path, a part of it, or a value where it would be.
func holds(body any, path plan.FieldPath) bool {
	for i := 0; i < path.Len(); i++ {
		s := path.At(i)
		switch v := body.(type) {
		case map[string]any:
			if s.Kind != plan.SegmentKey {
				return true // shaped otherwise than the answer: not what the server added
			}
			next, ok := v[s.Key]
			if !ok {
				return false
			}
			body = next
		case []any:
			switch s.Kind {
			case plan.SegmentIndex:
				if s.Index >= uint64(len(v)) {
					return false
				}
				body = v[s.Index]
			case plan.SegmentKeyed:
				found := false
				for _, item := range v {
					if m, ok := item.(map[string]any); ok {
						if value, ok := m[s.Field].(string); ok && value == s.Value {
							body, found = item, true
							break
						}
					}
				}
				if !found {
					return false
				}
			default:
				return true
			}
		default:
			// A value (a null too: a merge patch's removal) where the path goes deeper.
			return true
		}
	}
	return true
}

// minString is the shortest string taken for an allocation (an IPv4 address has at least 7
// characters); minNumber the smallest number (node ports start at 30000 by default).
const (
	minString = 7
	minNumber = 1024
)

// distinctive says whether a value can be told apart from ordinary ones: a long string or a
// large integer.
func distinctive(v any) bool {
	if s, ok := v.(string); ok {
		return len(s) >= minString
	}
	n, ok := numeric(v)
	return ok && n.kind == 0 && n.u >= minNumber
}

// Allocations are the values the server allocated to each side, paired: the control's value,
// the candidate's.
type Allocations struct {
	pairs [][2]any
}

// Learn learns from two answers of one object (the control's, the candidate's) the values that
// differ where neither request sent them, if they are distinctive (strings of at least 7
// characters, integers of at least 1024).
func (a *Allocations) Learn(control, candidate any, sentControl, sentCandidate []Sent) {
	a.walk(control, candidate, plan.FieldPath{}, sentControl, sentCandidate)
}

func (a *Allocations) walk(x, y any, path plan.FieldPath, sc, sk []Sent) {
	switch xv := x.(type) {
	case map[string]any:
		yv, ok := y.(map[string]any)
		if !ok {
			return
		}
		keys := make([]string, 0, len(xv))
		for key := range xv {
			keys = append(keys, key)
		}
		sort.Strings(keys)
		inMetadata := path.Len() == 1 && path.At(0) == plan.KeySegment("metadata")
		for _, key := range keys {
			other, ok := yv[key]
			if !ok || (inMetadata && (key == "resourceVersion" || key == "generation" || key == "managedFields")) {
				continue
			}
			a.walk(xv[key], other, path.Child(plan.KeySegment(key)), sc, sk)
		}
	case []any:
		yv, ok := y.([]any)
		if !ok || len(xv) != len(yv) {
			return
		}
		for i := range xv {
			a.walk(xv[i], yv[i], path.Child(plan.IndexSegment(uint64(i))), sc, sk)
		}
	case nil, bool:
	default:
		if _, isMap := y.(map[string]any); isMap || y == nil {
			return
		}
		if _, isList := y.([]any); isList {
			return
		}
		if _, isBool := y.(bool); isBool || scalarEqual(x, y) || !distinctive(x) || !distinctive(y) {
			return
		}
		for _, s := range [][]Sent{sc, sk} {
			for _, sent := range s {
				if sent.Covers(path) {
					return
				}
			}
		}
		for _, p := range a.pairs {
			if scalarEqual(p[0], x) {
				return
			}
		}
		a.pairs = append(a.pairs, [2]any{x, y})
	}
}

// Corresponds says whether the control's value x and the candidate's y are one value allocated
// twice: a learnt pair, or a string that becomes y once every allocated string in it is
// replaced by the candidate's.
func (a *Allocations) Corresponds(x, y any) bool {
	for _, p := range a.pairs {
		if scalarEqual(p[0], x) && scalarEqual(p[1], y) {
			return true
		}
	}
	xs, ok := x.(string)
	ys, ok2 := y.(string)
	if !ok || !ok2 {
		return false
	}
	replaced := xs
	for _, p := range a.pairs {
		from, ok := p[0].(string)
		to, ok2 := p[1].(string)
		if ok && ok2 {
			replaced = strings.ReplaceAll(replaced, from, to)
		}
	}
	return replaced != xs && replaced == ys
}
