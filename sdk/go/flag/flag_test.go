package flag

import (
	"encoding/json"
	"math"
	"os"
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
