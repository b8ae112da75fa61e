package plan

import (
	"path/filepath"
	"strings"
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
		if len(p.LegacyOrder) != len(p.Operations) || len(p.PhasedOrder) != len(p.Operations) {
			t.Fatalf("%s: orders do not cover the operations", name)
		}
	}
}

const minimal = `apiVersion: shadow-reconciler.io/v1alpha1
kind: ReconcilePlan
metadata: {name: tiny}
spec:
  operations:
    - {name: A, phase: 1, category: critical, shadow: dry-run}
    - {name: B, phase: 2, category: non-critical, dependsOn: [A], shadow: skip}
  legacy: {order: [A, B]}
`

func TestBadPlansSayWhatIsWrong(t *testing.T) {
	p, err := Parse("tiny.yaml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Groups) != 1 || p.Groups[0].Name != ImplicitGroup || p.GroupsDeclared {
		t.Fatalf("implicit group: %+v", p.Groups)
	}
	for _, c := range []struct{ from, to, says string }{
		{"shadow: skip}", "shadow: skip, colour: red}", `unknown field "colour"`},
		{"dependsOn: [A]", "dependsOn: [C]", `depends on "C", which the plan does not declare`},
		{"order: [A, B]", "order: [A]", "must list every operation once"},
		{"category: critical", "category: vital", `category "vital"`},
		{"{name: B, phase: 2", "{name: A, phase: 2", `operation "A" is listed twice`},
		{"{name: A, phase: 1", "{name: A, phase: 3", `which does not run before it`},
	} {
		_, err := Parse("tiny.yaml", []byte(strings.Replace(minimal, c.from, c.to, 1)))
		if err == nil || !strings.Contains(err.Error(), c.says) || !strings.HasPrefix(err.Error(), "tiny.yaml") {
			t.Errorf("%s -> %s: %v, want an error saying %s", c.from, c.to, err, c.says)
		}
	}
}
