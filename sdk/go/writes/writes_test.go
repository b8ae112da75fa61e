package writes

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/plan"
)

func decode(t *testing.T, s string) any {
	t.Helper()
	v, err := DecodeJSON([]byte(s))
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v
}

func paths(t *testing.T, a, b string, volatile ...string) []string {
	t.Helper()
	var patterns []plan.FieldPath
	for _, v := range volatile {
		patterns = append(patterns, plan.MustParseFieldPath(v))
	}
	fields, _ := DifferingFields(decode(t, a), decode(t, b), patterns)
	out := []string{}
	for _, f := range fields {
		out = append(out, f.String())
	}
	return out
}

func TestPathsNameTheirObjects(t *testing.T) {
	created := "c"
	for _, c := range []struct {
		path    string
		created *string
		want    *ObjectRef
	}{
		{"/api/v1/namespaces/a/secrets/s", nil, &ObjectRef{Resource: "secrets", Namespace: "a", Name: "s"}},
		{"/api/v1/namespaces/a/configmaps", &created, &ObjectRef{Resource: "configmaps", Namespace: "a", Name: "c"}},
		{"/api/v1/namespaces/a/configmaps", nil, nil},
		{"/api/v1/namespaces/hc-1", nil, &ObjectRef{Resource: "namespaces", Name: "hc-1"}},
		{"/api/v1/namespaces/hc-1/status", nil, &ObjectRef{Resource: "namespaces", Name: "hc-1", Subresource: "status"}},
		{"/apis/rbac.authorization.k8s.io/v1/clusterroles/r", nil, &ObjectRef{Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Name: "r"}},
		{"//api/v1/namespaces/a/pods/p/log/", nil, &ObjectRef{Resource: "pods", Namespace: "a", Name: "p", Subresource: "log"}},
		{"/api/v1/namespaces/a/pods/p/log/x", nil, nil},
		{"/version", nil, nil},
		{"/api", nil, nil},
		{"/apis/apps", nil, nil},
	} {
		got, ok := ObjectFromPath(c.path, c.created)
		if (c.want == nil) == ok || (ok && got != *c.want) {
			t.Errorf("%s: %+v %v, want %+v", c.path, got, ok, c.want)
		}
	}
}

func TestServerFieldsAndTimesAreIgnored(t *testing.T) {
	a := `{"metadata": {"name": "x", "resourceVersion": "1", "uid": "a", "creationTimestamp": "t1", "managedFields": [{"manager": "a"}], "generation": 1},
		"status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "t1"}]}}`
	b := `{"metadata": {"name": "x", "resourceVersion": "2", "uid": "b", "creationTimestamp": "t2", "managedFields": [{"manager": "b"}], "generation": 2},
		"status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "t2"}]}}`
	if got := paths(t, a, b); len(got) != 0 {
		t.Fatal(got)
	}
	// Only metadata's own: a spec field of the same name differs.
	if got := paths(t, `{"spec": {"uid": "a"}}`, `{"spec": {"uid": "b"}}`); !reflect.DeepEqual(got, []string{"spec.uid"}) {
		t.Fatal(got)
	}
}

func TestKeyedListsIgnoreOrderAndNameTheElement(t *testing.T) {
	a := `{"status": {"conditions": [{"type": "A", "status": "True"}, {"type": "B", "status": "False"}]}}`
	b := `{"status": {"conditions": [{"type": "B", "status": "True"}, {"type": "A", "status": "True"}]}}`
	if got := paths(t, a, b); !reflect.DeepEqual(got, []string{"status.conditions[type=B].status"}) {
		t.Fatal(got)
	}
}

func TestAddedRemovedAndChangedFields(t *testing.T) {
	a := `{"data": {"a": "1", "b": "2"}, "spec": {"args": ["x", "y"]}, "n": null}`
	b := `{"data": {"a": "1", "c": "3", "tls.crt": "z"}, "spec": {"args": ["x"]}}`
	if got := paths(t, a, b); !reflect.DeepEqual(got, []string{"data.b", "data.c", `data["tls.crt"]`, "spec.args[1]"}) {
		t.Fatal(got)
	}
	if got := paths(t, a, b, "data"); !reflect.DeepEqual(got, []string{"spec.args[1]"}) {
		t.Fatal(got)
	}
	if got := paths(t, a, b, "data.*", "spec.args[*]"); len(got) != 0 {
		t.Fatal(got)
	}
}

// Paths order by segment kind, not by text: a key before an index before a keyed element.
func TestDifferingFieldsOrderAsTheRustCrate(t *testing.T) {
	a := `{"x": {"b": 1, "a": 1}, "l": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], "m": {"a.b": 1, "z": 1}}`
	b := `{"x": {"b": 2, "a": 2}, "l": [0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12], "m": {"a.b": 2, "z": 2}}`
	want := []string{"l[0]", "l[10]", `m["a.b"]`, "m.z", "x.a", "x.b"}
	if got := paths(t, a, b); !reflect.DeepEqual(got, want) {
		t.Fatalf("%q, want %q", got, want)
	}
}

// Numbers compare as serde_json's: an integer never equals a float, -0 is a float.
func TestNumbersCompareAsSerdeJSON(t *testing.T) {
	for _, c := range []struct {
		a, b   string
		differ bool
	}{
		{"1", "1", false}, {"1", "1.0", true}, {"1.0", "1.00", false}, {"1e2", "100.0", false},
		{"1e2", "100", true}, {"-1", "-1", false}, {"-0", "0.0", false}, {"-0", "0", true},
		{"18446744073709551616", "1.8446744073709552e19", false}, {"-9223372036854775808", "-9223372036854775808", false},
	} {
		got := paths(t, `{"n": `+c.a+`}`, `{"n": `+c.b+`}`)
		if (len(got) > 0) != c.differ {
			t.Errorf("%s against %s: %v", c.a, c.b, got)
		}
	}
	// Go values too: encoding/json's float64, Go integers.
	if f, n := DifferingFields(map[string]any{"n": 1}, map[string]any{"n": uint64(1)}, nil); n != 0 {
		t.Fatal(f)
	}
}

func TestManyDifferencesAreAllFoundAndListedBounded(t *testing.T) {
	data := map[string]any{}
	for i := range 50 {
		data[fmt.Sprintf("k%02d", i)] = i
	}
	found, total := DifferingFields(map[string]any{"data": data}, map[string]any{"data": map[string]any{}}, nil)
	if len(found) != 50 || total != 50 || found[0].String() != "data.k00" {
		t.Fatalf("%d found (%v...), %d in all", len(found), found[0], total)
	}
	d := difference(plan.Operation{Name: "Op"}, ObjectRef{Resource: "configmaps", Name: "c"}, "ConfigMap", Patch, Patch, found, total)
	if len(d.Fields) != MaxFields || d.FieldsTotal != 50 {
		t.Fatalf("%d listed, %d in all", len(d.Fields), d.FieldsTotal)
	}
}

func TestAcceptedReadsWhatTheRustCrateReads(t *testing.T) {
	for _, c := range []struct {
		method, path, body string
		ok, answer         bool
		kind, name         string
	}{
		{"POST", "/api/v1/namespaces/a/secrets", `{"kind": "Secret", "metadata": {"name": "s"}}`, true, true, "Secret", "s"},
		{"PUT", "/api/v1/namespaces/a/secrets/s", `not json`, true, false, "", "s"},
		{"PATCH", "/api/v1/namespaces/a/secrets/s", `null`, true, true, "", "s"},
		{"PATCH", "/api/v1/namespaces/a/secrets/s", `{"a": "\ud800"}`, true, false, "", "s"},
		{"PATCH", "/api/v1/namespaces/a/secrets/s", `{"a": 1e400}`, true, false, "", "s"},
		{"PATCH", "/api/v1/namespaces/a/secrets/s", `{} {}`, true, false, "", "s"},
		{"PATCH", "/api/v1/namespaces/a/secrets/s", strings.Repeat("[", 127) + strings.Repeat("]", 127), true, true, "", "s"},
		{"PATCH", "/api/v1/namespaces/a/secrets/s", strings.Repeat("[", 128) + strings.Repeat("]", 128), true, false, "", "s"},
		{"DELETE", "/api/v1/namespaces/a/secrets/s", `{"kind": "Status", "status": "Success"}`, true, false, "", "s"},
		{"POST", "/api/v1/namespaces/a/secrets", `{"kind": "Secret"}`, false, false, "", ""},
		{"GET", "/api/v1/namespaces/a/secrets/s", `{}`, false, false, "", ""},
		{"post", "/api/v1/namespaces/a/secrets/s", `{}`, false, false, "", ""},
	} {
		w, ok := Accepted(c.method, c.path, nil, []byte(c.body))
		if ok != c.ok || (ok && (w.HasAnswer != c.answer || w.Kind != c.kind || w.Object.Name != c.name)) {
			t.Errorf("%s %s %.40s: %+v %v", c.method, c.path, c.body, w, ok)
		}
	}
}

func TestKindsLearnOverTheBuiltInTable(t *testing.T) {
	var kinds Kinds
	widget := ObjectRef{Group: "example.com", Resource: "widgets", Name: "w"}
	secret := ObjectRef{Resource: "secrets", Name: "s"}
	if kinds.Of(widget) != "widgets" || kinds.Of(secret) != "Secret" {
		t.Fatal("unlearned kinds")
	}
	kinds.Learn([]Write{{Object: widget, Kind: "Widget"}, {Object: widget, Kind: "Other"}, {Object: secret, Kind: "Sekret"}})
	if kinds.Of(widget) != "Widget" || kinds.Of(secret) != "Sekret" {
		t.Fatal("the first learned kind does not win over the table")
	}
}

func TestDescribe(t *testing.T) {
	d := WriteDifference{Operation: "SSHKeySync", Kind: "Secret", Namespace: "ns", Name: "ssh-key", Candidate: Delete}
	if got := d.Describe(); got != "SSHKeySync: the candidate deletes Secret ns/ssh-key where the control writes nothing" {
		t.Fatal(got)
	}
	d = WriteDifference{Operation: "Sync", Kind: "Widget", Name: "w", Subresource: "status", Control: Update, Candidate: Patch, Fields: []string{"a", "b"}}
	if got := d.Describe(); got != "Sync: Widget w (status) differs in a, b" {
		t.Fatal(got)
	}
	if d.ControlAction() != plan.ActionWrite || (&WriteDifference{}).CandidateAction() != plan.ActionNone {
		t.Fatal("actions")
	}
}
