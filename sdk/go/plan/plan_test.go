package plan

import (
	"path/filepath"
	"testing"
)

func TestShippedPlansLoad(t *testing.T) {
	for _, name := range []string{"hostedcluster", "addon-install-progression"} {
		p, err := Load(filepath.Join("../../../deploy/plans", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if p.Name != name || len(p.Operations) == 0 || len(p.Hash()) != 64 {
			t.Fatalf("%s: name %q, %d operations, hash %q", name, p.Name, len(p.Operations), p.Hash())
		}
		// Each order holds exactly the operations of its code path.
		for _, path := range []CodePath{PathLegacy, PathPhased} {
			in := map[int]bool{}
			for _, id := range p.Order(path) {
				if in[id] || !p.Operations[id].InPath(path) {
					t.Fatalf("%s: the %s order holds %s twice or from the other path", name, path, p.Operations[id].Name)
				}
				in[id] = true
			}
			for _, op := range p.Operations {
				if op.InPath(path) && !in[op.ID] {
					t.Fatalf("%s: the %s order misses %s", name, path, op.Name)
				}
			}
		}
	}
}

// The shipped HostedCluster plan: one operation in each path only, SSHKeySync's intended fix.
func TestHostedClusterCodePaths(t *testing.T) {
	p, err := Load("../../../deploy/plans/hostedcluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	only := map[string]CodePath{}
	for _, op := range p.Operations {
		if op.Only != "" {
			only[op.Name] = op.Only
		}
	}
	if len(only) != 2 || only["ManagedHSMVersionCheck"] != PathPhased || only["ValidConfigurationCondition"] != PathLegacy {
		t.Fatalf("one-sided operations: %v", only)
	}
	legacyOnly := p.Operations[mustLookup(t, p, "ValidConfigurationCondition")]
	if legacyOnly.Phase != 0 || legacyOnly.Category != Critical || legacyOnly.Gate != NoCriticalFailure || legacyOnly.Shadow != ShadowSkip || legacyOnly.RetryOnConflict {
		t.Fatalf("an only: legacy operation reads as %+v", legacyOnly)
	}
	sync := p.Operations[mustLookup(t, p, "SSHKeySync")]
	if len(sync.Intended) != 1 {
		t.Fatalf("SSHKeySync intends %+v", sync.Intended)
	}
	i := sync.Intended[0]
	if !i.Matches("Secret", "ssh-key", "", ActionNone, ActionDelete, nil) ||
		i.Matches("Secret", "other", "", ActionNone, ActionDelete, nil) ||
		i.Matches("Secret", "ssh-key", "", ActionWrite, ActionDelete, nil) {
		t.Fatal("SSHKeySync's intended difference matches the wrong differences")
	}
	for _, g := range p.Groups {
		for _, id := range g.Operations {
			if p.Operations[id].Only == PathLegacy {
				t.Fatalf("group %s holds a legacy-only operation", g.Name)
			}
		}
	}
}

func mustLookup(t *testing.T, p *Plan, name string) int {
	t.Helper()
	id, ok := p.Lookup(name)
	if !ok {
		t.Fatalf("no operation %s", name)
	}
	return id
}

func TestIntendedFieldsMatchOnlyFieldDifferences(t *testing.T) {
	i := IntendedDifference{Kind: "ConfigMap", Fields: []FieldPath{MustParseFieldPath("data.retention")}}
	retention := []FieldPath{MustParseFieldPath("data.retention")}
	if !i.Matches("ConfigMap", "a", "", ActionWrite, ActionWrite, retention) {
		t.Fatal("a covered field difference does not match")
	}
	if i.Matches("ConfigMap", "a", "", ActionWrite, ActionWrite, append(retention, MustParseFieldPath("data.x"))) {
		t.Fatal("an uncovered field matches")
	}
	if i.Matches("ConfigMap", "a", "", ActionNone, ActionWrite, nil) {
		t.Fatal("declared fields match a difference without fields")
	}
	empty := ""
	named := IntendedDifference{Kind: "Widget", Subresource: &empty, Candidate: ActionWrite}
	if !named.Matches("Widget", "w", "", ActionNone, ActionWrite, nil) || named.Matches("Widget", "w", "status", ActionNone, ActionWrite, nil) {
		t.Fatal("a declared empty subresource is the object itself")
	}
}

func TestFieldPathsRoundTrip(t *testing.T) {
	for _, text := range []string{
		"data",
		`metadata.labels["app.kubernetes.io/name"]`,
		"status.conditions[type=Ready].status",
		"spec.template.spec.containers[name=manager].args[2]",
		`data["tls.crt"]`,
		`["a.b"].c`,
		`data["\"q\\\n\u0001*"]`,
		"[*].x",
	} {
		p, err := ParseFieldPath(text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		if p.String() != text {
			t.Fatalf("%s reads back as %s", text, p)
		}
	}
	if got := MustParseFieldPath(`data["\u00e9\ud83d\ude00\/"]`).String(); got != `data["é😀/"]` {
		t.Fatalf("escapes decode to %s", got)
	}
}

func TestFieldPathWildcardsCover(t *testing.T) {
	pattern := MustParseFieldPath("status.conditions.*.lastProbeTime")
	if !pattern.Equal(MustParseFieldPath("status.conditions[*].lastProbeTime")) {
		t.Fatal(".* and [*] differ")
	}
	if !pattern.Covers(MustParseFieldPath("status.conditions[type=Ready].lastProbeTime")) ||
		pattern.Covers(MustParseFieldPath("status.conditions[type=Ready].status")) {
		t.Fatal("the wildcard covers the wrong paths")
	}
	prefix := MustParseFieldPath("metadata.annotations")
	if !prefix.Covers(MustParseFieldPath(`metadata.annotations["a/b"]`)) || prefix.Covers(MustParseFieldPath("metadata")) {
		t.Fatal("a prefix covers the wrong paths")
	}
}

func TestBadFieldPathsSayWhere(t *testing.T) {
	for text, offset := range map[string]int{
		"":                           0,
		" ":                          0,
		".data":                      0,
		"data.tls.crt[":              12,
		"data.a/b":                   5,
		`data["x`:                    5,
		"data[x y]":                  5,
		"data..x":                    5,
		`data["x"`:                   8,
		`data["\ud800"]`:             5,
		`data["\udc00"]`:             5,
		`data["\q"]`:                 5,
		"data[99999999999999999999]": 5,
		"data[0]x":                   7,
	} {
		_, err := ParseFieldPath(text)
		pe, ok := err.(*PathError)
		if !ok || pe.Offset != offset {
			t.Errorf("%q: %v, want an error at %d", text, err, offset)
		}
	}
}

// Paths order as the Rust crate's derived Ord: by segment kind (key, index, keyed, any), then
// contents; not by text.
func TestFieldPathOrder(t *testing.T) {
	ordered := []string{"a", "a.b", "a[2]", "a[10]", "a[name=x]", "a[*]", `b`, `["b c"]`}
	for i := 0; i+1 < len(ordered); i++ {
		a, b := MustParseFieldPath(ordered[i]), MustParseFieldPath(ordered[i+1])
		if a.Compare(b) >= 0 || b.Compare(a) <= 0 {
			t.Errorf("%s does not come before %s", a, b)
		}
	}
}
