package model

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/plan"
)

// The repository's root, from this package's directory.
const root = "../../.."

type vectorFile struct {
	Schema string   `json:"schema"`
	Cases  []vector `json:"cases"`
}

type vector struct {
	Name           string                                     `json:"name"`
	Plan           string                                     `json:"plan"`
	PlanHash       string                                     `json:"plan_hash"`
	EnforcedGroups []string                                   `json:"enforced_groups"`
	Failures       map[string]struct{ Class, Message string } `json:"failures"`
	Control        json.RawMessage                            `json:"control"`
	Candidate      json.RawMessage                            `json:"candidate"`
	Diff           json.RawMessage                            `json:"diff"`
}

func names(p *plan.Plan, ops []int) []string {
	out := make([]string, 0, len(ops))
	for _, op := range ops {
		out = append(out, p.Operations[op].Name)
	}
	return out
}

// reportJSON renders a report as the vectors do.
func reportJSON(r *Report) any {
	steps := make([]map[string]any, 0, len(r.Steps))
	for _, s := range r.Steps {
		step := map[string]any{
			"op":       r.Plan.Operations[s.Op].Name,
			"outcome":  string(s.Outcome.Kind),
			"executed": s.Executed,
			"critical": s.Critical,
		}
		switch s.Outcome.Kind {
		case Failed:
			step["class"] = s.Outcome.Class
			step["message"] = s.Message
		case Blocked:
			step["by"] = names(r.Plan, s.Outcome.By)
		case Skipped:
			step["after"] = r.Plan.Operations[s.Outcome.After].Name
		case Unknown:
			step["on"] = names(r.Plan, s.Outcome.On)
		}
		steps = append(steps, step)
	}
	var aggregate any
	if text, failed := r.Aggregate(); failed {
		aggregate = text
	}
	c := r.Condition()
	return map[string]any{
		"steps":       steps,
		"aggregate":   aggregate,
		"log_summary": r.LogSummary(),
		"condition":   map[string]any{"type": c.Type, "status": c.Status, "reason": c.Reason, "message": c.Message},
	}
}

// normal decodes JSON into plain values, so that both sides compare as the same types.
func normal(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func raw(t *testing.T, data json.RawMessage) any {
	t.Helper()
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// The Go models decide every case of the shared vectors exactly as the Rust models did.
func TestSharedVectors(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "tests/data/model-vectors.json"))
	if err != nil {
		t.Fatalf("the shared vectors: %v", err)
	}
	var file vectorFile
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatalf("the shared vectors: %v", err)
	}
	if file.Schema != "shadow-reconciler.io/model-vectors/v1" {
		t.Fatalf("unknown vectors schema %q", file.Schema)
	}
	if len(file.Cases) < 500 {
		t.Fatalf("only %d cases", len(file.Cases))
	}
	plans := map[string]*plan.Plan{}
	for _, c := range file.Cases {
		p, ok := plans[c.Plan]
		if !ok {
			p, err = plan.Load(filepath.Join(root, c.Plan))
			if err != nil {
				t.Fatal(err)
			}
			plans[c.Plan] = p
		}
		if p.Hash() != c.PlanHash {
			t.Fatalf("%s: plan %s hashes to %s in Go, %s in Rust", c.Name, c.Plan, p.Hash(), c.PlanHash)
		}
		real := func(op plan.Operation) Result {
			if f, failed := c.Failures[op.Name]; failed {
				return Failure(f.Class, f.Message)
			}
			return Success()
		}
		control := Drive(NewSequential(p), real)
		phased, err := NewPhased(p, c.EnforcedGroups)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		candidate := Drive(phased, func(op plan.Operation) Result {
			if op.Shadow == plan.ShadowSkip {
				return NotSimulated()
			}
			return real(op)
		})
		diff, err := Between(control, candidate)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		reordered := make([][]string, 0, len(diff.Reordered))
		for _, pair := range diff.Reordered {
			reordered = append(reordered, names(p, pair[:]))
		}
		got := map[string]any{
			"control":   normal(t, reportJSON(control)),
			"candidate": normal(t, reportJSON(candidate)),
			"diff": normal(t, map[string]any{
				"unblocked":     names(p, diff.Unblocked),
				"newly_blocked": names(p, diff.NewlyBlocked),
				"changed":       names(p, diff.Changed),
				"reordered":     reordered,
			}),
		}
		want := map[string]any{
			"control":   raw(t, c.Control),
			"candidate": raw(t, c.Candidate),
			"diff":      raw(t, c.Diff),
		}
		for _, part := range []string{"control", "candidate", "diff"} {
			if !reflect.DeepEqual(got[part], want[part]) {
				g, _ := json.Marshal(got[part])
				w, _ := json.Marshal(want[part])
				t.Fatalf("%s: the %s differs\n go:   %s\n rust: %s", c.Name, part, g, w)
			}
		}
	}
}
