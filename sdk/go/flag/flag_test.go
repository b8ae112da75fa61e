package flag

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"slices"
	"testing"
)

type vectors struct {
	Schema  string `json:"schema"`
	Buckets []struct {
		UID    string `json:"uid"`
		Bucket uint16 `json:"bucket"`
	} `json:"buckets"`
	Ramps []struct {
		Percent     any     `json:"percent"`
		BasisPoints *uint16 `json:"basis_points"`
	} `json:"ramps"`
	Modes []struct {
		UID         string  `json:"uid"`
		Mode        Mode    `json:"mode"`
		RampPercent float64 `json:"ramp_percent"`
		Expected    Mode    `json:"expected"`
	} `json:"modes"`
	ConfigMaps []struct {
		Data    map[string]string `json:"data"`
		Summary string            `json:"summary"`
		Error   *struct {
			Field string `json:"field"`
			Text  string `json:"text"`
		} `json:"error"`
		Objects []struct {
			Plan           string   `json:"plan"`
			UID            string   `json:"uid"`
			Annotation     *string  `json:"annotation"`
			Mode           Mode     `json:"mode"`
			Reason         Reason   `json:"reason"`
			EnforcedGroups []string `json:"enforced_groups"`
		} `json:"objects"`
	} `json:"configMaps"`
}

// The Go flag buckets, ramps and chooses modes exactly as the Rust flag did.
func TestSharedFlagVectors(t *testing.T) {
	data, err := os.ReadFile("../../../tests/data/flag-vectors.json")
	if err != nil {
		t.Fatalf("the shared flag vectors: %v", err)
	}
	var v vectors
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	if v.Schema != "shadow-reconciler.io/flag-vectors/v1" || len(v.Buckets) == 0 || len(v.Modes) == 0 {
		t.Fatalf("unexpected vectors: schema %q, %d buckets, %d modes", v.Schema, len(v.Buckets), len(v.Modes))
	}
	for _, b := range v.Buckets {
		if got := Bucket(b.UID); got != b.Bucket {
			t.Errorf("Bucket(%q) = %d, Rust says %d", b.UID, got, b.Bucket)
		}
	}
	for _, r := range v.Ramps {
		percent := math.NaN()
		if p, ok := r.Percent.(float64); ok {
			percent = p
		}
		got, ok := RampFromPercent(percent)
		switch {
		case r.BasisPoints == nil && ok:
			t.Errorf("RampFromPercent(%v) = %d, Rust refuses it", r.Percent, got)
		case r.BasisPoints != nil && (!ok || got != *r.BasisPoints):
			t.Errorf("RampFromPercent(%v) = %d, %v; Rust says %d", r.Percent, got, ok, *r.BasisPoints)
		}
	}
	for _, m := range v.Modes {
		ramp, ok := RampFromPercent(m.RampPercent)
		if !ok {
			t.Fatalf("ramp %v", m.RampPercent)
		}
		if got := ModeFor(m.Mode, ramp, m.UID); got != m.Expected {
			t.Errorf("ModeFor(%s, %v%%, %q) = %s, Rust says %s", m.Mode, m.RampPercent, m.UID, got, m.Expected)
		}
	}
}

// TestSharedConfigMapVectors reads each flag ConfigMap of the shared vectors as the Rust crate
// does: the same refusal (key and text), or the same summary and, for every object of both
// shipped plans, the same mode, reason and enforced groups.
func TestSharedConfigMapVectors(t *testing.T) {
	data, err := os.ReadFile("../../../tests/data/flag-vectors.json")
	if err != nil {
		t.Fatalf("the shared flag vectors: %v", err)
	}
	var v vectors
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("the shared flag vectors: %v", err)
	}
	if len(v.ConfigMaps) == 0 {
		t.Fatal("the shared flag vectors have no configMaps section")
	}
	ps := plans(t)
	byName := map[string]int{}
	for i, p := range ps {
		byName[p.Name] = i
	}
	objects := 0
	for _, c := range v.ConfigMaps {
		spec, err := ParseConfigMap(c.Data, nil, Default(), ps)
		if c.Error != nil {
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Errorf("%v: accepted (%v), Rust refuses it: %s", c.Data, err, c.Error.Text)
				continue
			}
			if fe.Field != c.Error.Field || fe.Error() != c.Error.Text {
				t.Errorf("%v: refused as %s %q, Rust says %s %q", c.Data, fe.Field, fe.Error(), c.Error.Field, c.Error.Text)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: refused (%v), Rust accepts it", c.Data, err)
			continue
		}
		if got := spec.Summary(); got != c.Summary {
			t.Errorf("%v: summary %q, Rust says %q", c.Data, got, c.Summary)
		}
		for _, o := range c.Objects {
			i, ok := byName[o.Plan]
			if !ok {
				t.Fatalf("plan %q of the vectors is not shipped", o.Plan)
			}
			annotation := ""
			if o.Annotation != nil {
				annotation = *o.Annotation
			}
			e := spec.ForPlan(ps[i]).Evaluate(o.UID, annotation, o.Annotation != nil, true, false, "42")
			if e.Mode != o.Mode || e.Reason != o.Reason || !slices.Equal(e.EnforcedGroups, o.EnforcedGroups) {
				t.Errorf("%v: %s %s (annotation %v): %s %s %v, Rust says %s %s %v", c.Data, o.Plan, o.UID, annotation,
					e.Mode, e.Reason, e.EnforcedGroups, o.Mode, o.Reason, o.EnforcedGroups)
			}
			objects++
		}
	}
	if objects == 0 {
		t.Fatal("no object was compared")
	}
}
