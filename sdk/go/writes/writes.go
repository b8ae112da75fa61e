// Package writes compares what an operation wrote in the control's code with what the
// candidate's code would have written, as the Rust crate's engine does (src/engine/writes.rs,
// fielddiff.rs): the writes the API server accepted (verb, object, its answer) for the
// operations whose two code paths differ, turned into WriteDifferences per object (kind,
// namespace, name, subresource): what each side did to it (none, write, delete) and, where both
// wrote it, the fields whose values differ. It is pure: it logs nothing and calls no server. The
// shared vectors (tests/data/write-vectors.json) hold it to the Rust crate's results.
package writes

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/internal/text"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/plan"
)

// Verb is the mutating verb of an accepted write, as the API server's audit log names it.
type Verb string

const (
	// Create is a POST.
	Create Verb = "create"
	// Update is a PUT.
	Update Verb = "update"
	// Patch is a PATCH (merge, JSON, strategic or server-side apply).
	Patch Verb = "patch"
	// Delete is a DELETE.
	Delete Verb = "delete"
)

// Action is what the verb leaves behind: the object written, or gone; ActionNone for "" (no
// write).
func (v Verb) Action() plan.WriteAction {
	switch v {
	case "":
		return plan.ActionNone
	case Delete:
		return plan.ActionDelete
	}
	return plan.ActionWrite
}

// ObjectRef is the object a write addressed. Namespace and Subresource are "" when the resource
// is cluster-scoped or the write addressed the object itself.
type ObjectRef struct {
	// Group is the API group ("" for the core group).
	Group string
	// Resource is the resource, plural (secrets).
	Resource    string
	Namespace   string
	Name        string
	Subresource string
}

// Compare orders objects as the Rust crate does: by group, resource, namespace (none first),
// name, subresource (none first); -1, 0 or +1.
func (o ObjectRef) Compare(other ObjectRef) int {
	for _, pair := range [][2]string{
		{o.Group, other.Group}, {o.Resource, other.Resource}, {o.Namespace, other.Namespace},
		{o.Name, other.Name}, {o.Subresource, other.Subresource},
	} {
		if c := strings.Compare(pair[0], pair[1]); c != 0 {
			return c
		}
	}
	return 0
}

// ObjectFromPath is the object a request path addresses; created is the created object's name
// for a POST to a collection (nil when the answer named none). False for paths that are not the
// API's (/version, /openapi/v2) and for a POST to a collection without created.
func ObjectFromPath(path string, created *string) (ObjectRef, bool) {
	segments := strings.Split(strings.Trim(path, "/"), "/")
	var group string
	var rest []string
	switch {
	case len(segments) >= 2 && segments[0] == "api":
		rest = segments[2:]
	case len(segments) >= 3 && segments[0] == "apis":
		group, rest = segments[1], segments[3:]
	default:
		return ObjectRef{}, false
	}
	namespace := ""
	if len(rest) >= 1 && rest[0] == "namespaces" {
		// A namespace itself (its status or finalize too) is cluster-scoped.
		itself := len(rest) <= 2 || (len(rest) == 3 && (rest[2] == "status" || rest[2] == "finalize"))
		if !itself {
			namespace, rest = rest[1], rest[2:]
		}
	}
	o := ObjectRef{Group: group, Namespace: namespace}
	switch len(rest) {
	case 1:
		if created == nil {
			return ObjectRef{}, false
		}
		o.Resource, o.Name = rest[0], *created
	case 2:
		o.Resource, o.Name = rest[0], rest[1]
	case 3:
		o.Resource, o.Name, o.Subresource = rest[0], rest[1], rest[2]
	default:
		return ObjectRef{}, false
	}
	return o, true
}

// Write is one write the API server accepted.
type Write struct {
	Verb   Verb
	Object ObjectRef
	// Kind is the object's kind as the answer named it (Secret), "" when it named none.
	Kind string
	// Answer is the server's answer, the object as written, decoded by DecodeJSON; HasAnswer is
	// false for a delete and for an answer that is not JSON (a JSON null answer is HasAnswer
	// with Answer nil).
	Answer    any
	HasAnswer bool
	// Request is its request's body, to tell what the code sent from what the server set (nil:
	// not kept, everything counts as sent; a delete sends nothing).
	Request *RequestBody
}

// Sent is what its request sent.
func (w Write) Sent() Sent {
	switch {
	case w.Verb == Delete:
		return Sent{kind: sentNothing}
	case w.Request == nil:
		return Sent{kind: sentEverything}
	}
	return SentOf(w.Verb, *w.Request)
}

// Accepted is the Write of an accepted mutating request, from its method (POST, PUT, PATCH,
// DELETE), path, its own body (nil: not kept) and the body the server answered; false for any
// other method and for a path that names no object.
func Accepted(method, path string, request *RequestBody, body []byte) (Write, bool) {
	var verb Verb
	switch method {
	case "POST":
		verb = Create
	case "PUT":
		verb = Update
	case "PATCH":
		verb = Patch
	case "DELETE":
		verb = Delete
	default:
		return Write{}, false
	}
	answer, err := DecodeJSON(body)
	hasAnswer := err == nil
	var created *string
	if m, ok := answer.(map[string]any); ok {
		if meta, ok := m["metadata"].(map[string]any); ok {
			if name, ok := meta["name"].(string); ok {
				created = &name
			}
		}
	}
	object, ok := ObjectFromPath(path, created)
	if !ok {
		return Write{}, false
	}
	kind := ""
	if m, ok := answer.(map[string]any); ok {
		if k, ok := m["kind"].(string); ok && k != "Status" {
			kind = k
		}
	}
	if verb == Delete {
		answer, hasAnswer = nil, false
	}
	return Write{Verb: verb, Object: object, Kind: kind, Answer: answer, HasAnswer: hasAnswer, Request: request}, true
}

// DecodeJSON reads one JSON document as serde_json does, numbers as json.Number: an error for
// text it would refuse (not UTF-8, an unpaired surrogate escape, nesting deeper than 127, a
// number out of range, anything after the document).
func DecodeJSON(data []byte) (any, error) {
	if !text.ReadableJSON(data) {
		return nil, errors.New("not JSON as serde_json reads it")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if err := dec.Decode(new(any)); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing characters after the JSON document")
	}
	if !numbersInRange(v) {
		return nil, errors.New("a number out of range")
	}
	return v, nil
}

func numbersInRange(v any) bool {
	switch v := v.(type) {
	case json.Number:
		_, ok := numberOf(v)
		return ok
	case map[string]any:
		for _, x := range v {
			if !numbersInRange(x) {
				return false
			}
		}
	case []any:
		for _, x := range v {
			if !numbersInRange(x) {
				return false
			}
		}
	}
	return true
}

// number is a JSON number as serde_json holds it: a non-negative integer, a negative one, or a
// finite float; numbers of different kinds are never equal (1 is not 1.0).
type number struct {
	kind uint8 // 0 non-negative integer, 1 negative integer, 2 float
	u    uint64
	i    int64
	f    float64
}

// numberOf reads a number as serde_json parses it; false when it is out of range.
func numberOf(n json.Number) (number, bool) {
	s := string(n)
	float := func() (number, bool) {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) {
			return number{}, false
		}
		return number{kind: 2, f: f}, true
	}
	if strings.ContainsAny(s, ".eE") {
		return float()
	}
	digits, negative := strings.CutPrefix(s, "-")
	u, err := strconv.ParseUint(digits, 10, 64)
	switch {
	case err != nil:
		return float() // beyond u64: a float
	case !negative:
		return number{kind: 0, u: u}, true
	case u == 0 || u > 1<<63:
		return float() // -0, or below i64: a float
	}
	return number{kind: 1, i: int64(-u)}, true
}

// numeric reads the numbers the comparison accepts: json.Number, float64 (encoding/json's
// default) and Go's integers.
func numeric(v any) (number, bool) {
	switch v := v.(type) {
	case json.Number:
		return numberOf(v)
	case float64:
		return number{kind: 2, f: v}, true
	case float32:
		return number{kind: 2, f: float64(v)}, true
	case int:
		return signed(int64(v)), true
	case int64:
		return signed(v), true
	case int32:
		return signed(int64(v)), true
	case uint:
		return number{kind: 0, u: uint64(v)}, true
	case uint64:
		return number{kind: 0, u: v}, true
	case uint32:
		return number{kind: 0, u: uint64(v)}, true
	}
	return number{}, false
}

func signed(i int64) number {
	if i >= 0 {
		return number{kind: 0, u: uint64(i)}
	}
	return number{kind: 1, i: i}
}

// Log holds the writes of one client, safe for concurrent use.
type Log struct {
	mu     sync.Mutex
	writes []Write
}

// Accepted logs an accepted mutating request (see the function Accepted).
func (l *Log) Accepted(method, path string, request *RequestBody, body []byte) {
	w, ok := Accepted(method, path, request, body)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes = append(l.writes, w)
}

// Take returns everything logged so far; the log is empty afterwards.
func (l *Log) Take() []Write {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.writes
	l.writes = nil
	return out
}

// Kinds are the kinds of resources, learned from the answers that named them (a DELETE is
// answered with a Status, which does not), over a table of the built-in ones. The zero value is
// ready to use and safe for concurrent use.
type Kinds struct {
	mu    sync.Mutex
	known map[[2]string]string
}

// builtIn are the built-in resources (group, plural) and their kinds.
var builtIn = [...][3]string{
	{"", "configmaps", "ConfigMap"},
	{"", "secrets", "Secret"},
	{"", "namespaces", "Namespace"},
	{"", "services", "Service"},
	{"", "serviceaccounts", "ServiceAccount"},
	{"", "pods", "Pod"},
	{"", "endpoints", "Endpoints"},
	{"", "persistentvolumeclaims", "PersistentVolumeClaim"},
	{"", "events", "Event"},
	{"apps", "deployments", "Deployment"},
	{"apps", "statefulsets", "StatefulSet"},
	{"apps", "daemonsets", "DaemonSet"},
	{"apps", "replicasets", "ReplicaSet"},
	{"batch", "jobs", "Job"},
	{"batch", "cronjobs", "CronJob"},
	{"rbac.authorization.k8s.io", "roles", "Role"},
	{"rbac.authorization.k8s.io", "rolebindings", "RoleBinding"},
	{"rbac.authorization.k8s.io", "clusterroles", "ClusterRole"},
	{"rbac.authorization.k8s.io", "clusterrolebindings", "ClusterRoleBinding"},
	{"networking.k8s.io", "networkpolicies", "NetworkPolicy"},
	{"networking.k8s.io", "ingresses", "Ingress"},
	{"coordination.k8s.io", "leases", "Lease"},
}

// Learn learns the kinds the writes' answers name; the first kind learned for a resource stays.
func (k *Kinds) Learn(writes []Write) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, w := range writes {
		// An answer of a subresource other than status is another kind (scale: Scale).
		if w.Kind == "" || (w.Object.Subresource != "" && w.Object.Subresource != "status") {
			continue
		}
		if k.known == nil {
			k.known = map[[2]string]string{}
		}
		key := [2]string{w.Object.Group, w.Object.Resource}
		if _, ok := k.known[key]; !ok {
			k.known[key] = w.Kind
		}
	}
}

// Of is the kind of the object's resource: learned, built in, else the resource's name.
func (k *Kinds) Of(o ObjectRef) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if kind, ok := k.known[[2]string{o.Group, o.Resource}]; ok {
		return kind
	}
	for _, b := range builtIn {
		if b[0] == o.Group && b[1] == o.Resource {
			return b[2]
		}
	}
	return o.Resource
}

// WriteDifference is one object an operation wrote differently in the control's code and the
// candidate's.
type WriteDifference struct {
	// Operation is the operation's name.
	Operation string
	// Only is the operation's code path when it exists in one path only (its every write
	// differs), else "".
	Only plan.CodePath
	// Group is the object's API group ("": core).
	Group string
	// Kind is the object's kind (Secret; the resource, secrets, when no answer named the kind).
	Kind string
	// Namespace is "" for a cluster-scoped object.
	Namespace string
	Name      string
	// Subresource is the subresource written (status), "" for the object itself.
	Subresource string
	// Control is the control's last accepted verb on the object, "" when it wrote nothing.
	Control Verb
	// Candidate is the candidate's last accepted (dry-run) verb on it, "" when it wrote nothing.
	Candidate Verb
	// Fields are, where both wrote it, the fields whose values differ (at most MaxFields).
	Fields []string
	// FieldsTotal is how many fields differ in all (more than Fields lists when it was cut).
	FieldsTotal uint32
	// Intended says whether the plan declares this difference (intendedDifferences, or an
	// operation in one code path only).
	Intended bool
}

// ControlAction is what the control did to the object.
func (d *WriteDifference) ControlAction() plan.WriteAction { return d.Control.Action() }

// CandidateAction is what the candidate did to the object.
func (d *WriteDifference) CandidateAction() plan.WriteAction { return d.Candidate.Action() }

// Describe is the difference for logs: "SSHKeySync: the candidate deletes Secret ns/ssh-key
// where the control writes nothing".
func (d *WriteDifference) Describe() string {
	object := d.Kind + " " + d.Name
	if d.Namespace != "" {
		object = d.Kind + " " + d.Namespace + "/" + d.Name
	}
	if d.Subresource != "" {
		object += " (" + d.Subresource + ")"
	}
	if d.Control != "" && d.Candidate != "" && len(d.Fields) > 0 {
		return d.Operation + ": " + object + " differs in " + strings.Join(d.Fields, ", ")
	}
	return d.Operation + ": the candidate " + phrase(d.Candidate) + " " + object + " where the control " + phrase(d.Control)
}

func phrase(v Verb) string {
	switch v {
	case Create:
		return "creates"
	case Update:
		return "updates"
	case Patch:
		return "patches"
	case Delete:
		return "deletes"
	}
	return "writes nothing"
}

// side is what one side did to one object: its last accepted write, and what all its requests
// for it sent.
type side struct {
	last Write
	sent []Sent
}

// sides is, per object, what a log did to it, and the objects in order. An object created with
// generateName is named by the pattern PREFIX* (PREFIX*#2 for the second of one prefix), there
// and in its later writes, so the two sides' creations of it pair up whatever names the server
// gave them.
func sides(writes []Write) (map[ObjectRef]*side, []ObjectRef) {
	out := make(map[ObjectRef]*side, len(writes))
	generated := map[ObjectRef]string{}
	prefixes := map[string]int{}
	var objects []ObjectRef
	for _, w := range writes {
		sent := w.Sent()
		itself := w.Object
		itself.Subresource = ""
		if w.Verb == Create {
			if prefix := sent.GenerateName(); prefix != "" {
				prefixes[prefix]++
				pattern := prefix + "*"
				if n := prefixes[prefix]; n > 1 {
					pattern += "#" + strconv.Itoa(n)
				}
				generated[itself] = pattern
			}
		}
		object := w.Object
		if pattern, ok := generated[itself]; ok {
			object.Name = pattern
		}
		if s, seen := out[object]; seen {
			s.last = w
			s.sent = append(s.sent, sent)
			continue
		}
		out[object] = &side{last: w, sent: []Sent{sent}}
		objects = append(objects, object)
	}
	sortObjects(objects)
	return out, objects
}

func sortObjects(objects []ObjectRef) {
	sort.Slice(objects, func(a, b int) bool { return objects[a].Compare(objects[b]) < 0 })
}

// Compare is the differences between the control's and the candidate's writes of op, per
// object: one side wrote or deleted an object the other did not touch or treated otherwise, or
// both wrote it with different field values (volatile, the server's own fields, what neither
// side's requests sent and the server's allocations to each side ignored). Ordered by object.
// It teaches kinds the kinds both logs' answers name.
func Compare(op plan.Operation, control, candidate []Write, volatile []plan.FieldPath, kinds *Kinds) []WriteDifference {
	kinds.Learn(control)
	kinds.Learn(candidate)
	ours, ourObjects := sides(control)
	theirs, theirObjects := sides(candidate)
	// What the server allocated to each side, from every object both wrote.
	var allocations Allocations
	for _, object := range ourObjects {
		c, k := ours[object], theirs[object]
		if k != nil && c.last.HasAnswer && k.last.HasAnswer {
			allocations.Learn(c.last.Answer, k.last.Answer, c.sent, k.sent)
		}
	}
	objects := append(ourObjects, theirObjects...)
	sortObjects(objects)
	var out []WriteDifference
	for i, object := range objects {
		if i > 0 && objects[i-1] == object {
			continue
		}
		c, k := ours[object], theirs[object]
		var cVerb, kVerb Verb
		if c != nil {
			cVerb = c.last.Verb
		}
		if k != nil {
			kVerb = k.last.Verb
		}
		var fields []plan.FieldPath
		total := 0
		if cVerb.Action() == kVerb.Action() {
			if c == nil || k == nil {
				continue
			}
			if c.last.HasAnswer && k.last.HasAnswer {
				fields, total = differingFields(c.last.Answer, k.last.Answer, context{volatile, c.sent, k.sent, &allocations})
			}
			if total == 0 {
				continue
			}
		}
		out = append(out, difference(op, object, kinds.Of(object), cVerb, kVerb, fields, total))
	}
	return out
}

// OneSided is every write of an operation that exists in one code path only (path), as
// differences with nothing on the other side (intended by the plan's declaration).
func OneSided(op plan.Operation, path plan.CodePath, writes []Write, kinds *Kinds) []WriteDifference {
	kinds.Learn(writes)
	last, objects := sides(writes)
	out := make([]WriteDifference, 0, len(objects))
	for _, object := range objects {
		verb := last[object].last.Verb
		control, candidate := verb, Verb("")
		if path == plan.PathPhased {
			control, candidate = "", verb
		}
		out = append(out, difference(op, object, kinds.Of(object), control, candidate, nil, 0))
	}
	return out
}

func difference(op plan.Operation, object ObjectRef, kind string, control, candidate Verb, fields []plan.FieldPath, total int) WriteDifference {
	// Intended only when every differing field is declared, those past the listed ones too.
	intended := op.Only != ""
	for i := 0; i < len(op.Intended) && !intended; i++ {
		intended = op.Intended[i].Matches(kind, object.Name, object.Subresource, control.Action(), candidate.Action(), fields)
	}
	texts := make([]string, min(len(fields), MaxFields))
	for i := range texts {
		texts[i] = fields[i].String()
	}
	return WriteDifference{
		Operation: op.Name, Only: op.Only, Group: object.Group, Kind: kind, Namespace: object.Namespace,
		Name: object.Name, Subresource: object.Subresource, Control: control, Candidate: candidate,
		Fields: texts, FieldsTotal: uint32(min(total, math.MaxUint32)), Intended: intended,
	}
}
