package flag

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/plan"
)

func plans(t *testing.T) []*plan.Plan {
	t.Helper()
	var out []*plan.Plan
	for _, name := range []string{"hostedcluster", "addon-install-progression"} {
		p, err := plan.Load(filepath.Join("..", "..", "..", "deploy", "plans", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

func TestAConfigMapOverridesTheDefaultsKeyByKey(t *testing.T) {
	ps := plans(t)
	spec, err := ParseConfigMap(map[string]string{
		"mode":           " enforce ",
		"enforcedGroups": "non-critical-syncs, hostedcluster/gated-components\nnon-critical-syncs",
		"rampPercent":    "12.5",
	}, nil, Default(), ps)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Mode != Enforce || spec.Ramp != 1250 || len(spec.EnforcedGroups) != 2 || spec.CandidateGroups != nil || spec.AllowObjectOverride {
		t.Fatalf("%+v", spec)
	}
	if got := spec.Summary(); got != "mode=enforce enforcedGroups=[non-critical-syncs,hostedcluster/gated-components] candidateGroups=every group rampPercent=12.5 allowObjectOverride=false" {
		t.Errorf("summary %q", got)
	}
	hc := spec.ForPlan(ps[0])
	if len(hc.EnforcedGroups()) != 2 {
		t.Errorf("hostedcluster enforces %v", hc.EnforcedGroups())
	}
	// A plan the list does not name enforces nothing of it.
	if addon := spec.ForPlan(ps[1]); len(addon.EnforcedGroups()) != 0 {
		t.Errorf("the add-on plan enforces %v", addon.EnforcedGroups())
	}
}

func TestAnInvalidConfigMapIsRefusedWithTheFieldAndWhy(t *testing.T) {
	ps := plans(t)
	cases := []struct {
		data   map[string]string
		binary []string
		want   string
	}{
		{map[string]string{"mode": "sideways"}, nil, `data.mode: "sideways": expected off, calibrate, shadow or enforce`},
		{map[string]string{"rampPercent": "150"}, nil, `data.rampPercent: "150": expected a percentage from 0 to 100 with at most two decimals`},
		{map[string]string{"rampPercent": "1.234"}, nil, "at most two decimals"},
		{map[string]string{"rampPrecent": "5"}, nil, `data.rampPrecent: "5": unknown key`},
		{map[string]string{"allowObjectOverride": "yes"}, nil, "expected true or false"},
		{map[string]string{"enforcedGroups": "a/b/c"}, nil, `"a/b/c" is not GROUP or PLAN/GROUP`},
		{map[string]string{"candidateGroups": "no-such-group"}, nil, `data.candidateGroups: "no-such-group": no plan has this rollout group; known: hostedcluster/`},
		{nil, []string{"mode"}, "binaryData: \"mode\": the flag reads `data` only"},
	}
	for _, c := range cases {
		_, err := ParseConfigMap(c.data, c.binary, Default(), ps)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %v: %v, want %q", c.data, c.binary, err, c.want)
		}
	}
}

func TestEvaluationByAnnotationRampAndSource(t *testing.T) {
	f := PlanFlag{Mode: Enforce, Ramp: All, AllowObjectOverride: true}
	if e := f.Evaluate("u", "off", true, true, false, "7"); e.Mode != Off || e.Reason != TargetingMatch || e.Version != "7" {
		t.Errorf("annotation: %+v", e)
	}
	if e := f.Evaluate("u", "sideways", true, true, false, "7"); e.Mode != Enforce || e.Reason != ErrorReason {
		t.Errorf("bad annotation: %+v", e)
	}
	f.AllowObjectOverride = false
	if e := f.Evaluate("u", "off", true, true, false, ""); e.Mode != Enforce || e.Reason != Static {
		t.Errorf("annotation not allowed: %+v", e)
	}
	if e := f.Evaluate("u", "", false, false, false, ""); e.Reason != DefaultReason {
		t.Errorf("defaults: %+v", e)
	}
	if e := f.Evaluate("u", "", false, true, true, ""); e.Reason != Stale {
		t.Errorf("stale: %+v", e)
	}
	f.Ramp = 0
	if e := f.Evaluate("u", "", false, true, false, ""); e.Mode != Shadow || e.Reason != Split {
		t.Errorf("outside the ramp: %+v", e)
	}
}
