package shadow

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// conflictVectors is tests/data/conflict-vectors.json: how a 409 is counted, shared with the
// sidecar (tests/suite/conflict_vectors.rs reads the same spans into the same resolutions).
type conflictVectors struct {
	Cases []struct {
		Name              string   `json:"name"`
		Operation         string   `json:"operation"`
		SampleRate        float64  `json:"sample_rate"`
		ControlAttempts   []string `json:"control_attempts"`
		CandidateAttempts []string `json:"candidate_attempts"`
		Spans             struct {
			Control   vectorSpan `json:"control"`
			Candidate vectorSpan `json:"candidate"`
		} `json:"spans"`
	} `json:"cases"`
}

type vectorSpan struct {
	Execution   string `json:"execution"`
	Outcome     string `json:"outcome"`
	ErrorType   string `json:"error_type"`
	Conflicts   int64  `json:"conflicts"`
	Retried     bool   `json:"retried"`
	Reevaluated *bool  `json:"reevaluated"`
}

// TestTheConflictVectors runs every case through the engine and checks the spans of its
// operation: the facts the sidecar counts the conflicts from.
func TestTheConflictVectors(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "tests", "data", "conflict-vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var vectors conflictVectors
	if err := json.Unmarshal(raw, &vectors); err != nil {
		t.Fatal(err)
	}
	if len(vectors.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range vectors.Cases {
		t.Run(c.Name, func(t *testing.T) {
			h := newHarness(t, "addon-install-progression", nil)
			h.engine.opts.ReexecuteSampleRate = c.SampleRate
			id, ok := h.plan.Lookup(c.Operation)
			if !ok {
				t.Fatalf("no operation %s", c.Operation)
			}
			attempts := map[Execution]int{}
			h.engine.ops[id] = func(_ context.Context, r *Run[*corev1.Secret, state]) error {
				script := c.ControlAttempts
				if r.Execution == ExecDryRun {
					script = c.CandidateAttempts
				}
				n := attempts[r.Execution]
				attempts[r.Execution]++
				if n >= len(script) {
					t.Fatalf("%s attempt %d: the case has %d", r.Execution, n+1, len(script))
				}
				if script[n] == "conflict" {
					return conflictOn(r.Object.Name)
				}
				return nil
			}
			h.reconcile()
			if attempts[ExecReal] != len(c.ControlAttempts) || attempts[ExecDryRun] != len(c.CandidateAttempts) {
				t.Fatalf("attempts %v, the case says control %d, candidate %d", attempts, len(c.ControlAttempts), len(c.CandidateAttempts))
			}
			var control, candidate map[string]any
			for _, s := range h.spans.Ended() {
				if s.Name() != c.Operation {
					continue
				}
				a := attrs(s)
				facts := map[string]any{
					"execution": a["shadow_reconciler.execution"].AsString(),
					"outcome":   a["shadow_reconciler.outcome"].AsString(),
					"conflicts": a["shadow_reconciler.conflicts"].AsInt64(),
					"retried":   a["shadow_reconciler.retried"].AsBool(),
				}
				if e, ok := a["error.type"]; ok {
					facts["error_type"] = e.AsString()
				}
				if r, ok := a[ReevaluatedAttribute]; ok {
					facts["reevaluated"] = r.AsBool()
				}
				if a["shadow_reconciler.policy"].AsString() == "candidate" {
					candidate = facts
				} else {
					control = facts
				}
			}
			check := func(side string, got map[string]any, want vectorSpan) {
				if want.Execution == "reused" {
					if got != nil {
						t.Errorf("%s: a reused step has no span, got %v", side, got)
					}
					return
				}
				if got == nil {
					t.Fatalf("%s: no span", side)
				}
				expect := map[string]any{"execution": want.Execution, "outcome": want.Outcome, "conflicts": want.Conflicts, "retried": want.Retried}
				if side == "control" {
					expect["execution"] = "real"
				}
				if want.ErrorType != "" {
					expect["error_type"] = want.ErrorType
				}
				if want.Reevaluated != nil {
					expect["reevaluated"] = *want.Reevaluated
				}
				if len(got) != len(expect) {
					t.Errorf("%s: span %v, the case says %v", side, got, expect)
					return
				}
				for k, v := range expect {
					if got[k] != v {
						t.Errorf("%s: %s = %v, the case says %v (span %v)", side, k, got[k], v, got)
					}
				}
			}
			check("control", control, c.Spans.Control)
			check("candidate", candidate, c.Spans.Candidate)
		})
	}
}
