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

type failures map[string]struct{ Class, Message string }

type vector struct {
	Name           string   `json:"name"`
	Plan           string   `json:"plan"`
	PlanHash       string   `json:"plan_hash"`
	EnforcedGroups []string `json:"enforced_groups"`
	Failures       failures `json:"failures"`
	// Distinct operations have legacy code of their own, whose failures are LegacyFailures.
	Distinct       []string `json:"distinct"`
	LegacyFailures failures `json:"legacy_failures"`
	// Idle operations have nothing to do where they do not fail (in both paths).
	Idle []string `json:"idle"`
	// CandidateExecutions is how the candidate took the result of each operation it ran.
	CandidateExecutions map[string]string `json:"candidate_executions"`
	Control             json.RawMessage   `json:"control"`
	Candidate           json.RawMessage   `json:"candidate"`
	Diff                json.RawMessage   `json:"diff"`
}

// result is an operation's result as the case draws it: failed where listed, else nothing to
// do where idle lists it, else succeeded.
func (f failures) result(op plan.Operation, idle map[string]bool) Result {
	if r, failed := f[op.Name]; failed {
		return Failure(r.Class, r.Message)
	}
	if idle[op.Name] {
		return NothingToDo()
	}
	return Success()
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

// The Go models decide every case of the shared vectors exactly as the Rust models did
// (tests/suite/shared_vectors.rs, case): the control runs the legacy path, each operation of
// distinct with its legacy code's result; the candidate runs the phased path and takes each
// result as CandidateExecution says (not simulated, or the operation's result).
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
	idleCases := 0
	for _, c := range file.Cases {
		if len(c.Idle) > 0 {
			idleCases++
		}
	}
	if idleCases < 10 {
		t.Fatalf("only %d cases with operations that have nothing to do", idleCases)
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
		distinct := map[string]bool{}
		for _, name := range c.Distinct {
			if _, ok := p.Lookup(name); !ok {
				t.Fatalf("%s: distinct operation %s is not in the plan", c.Name, name)
			}
			distinct[name] = true
		}
		idle := map[string]bool{}
		for _, name := range c.Idle {
			idle[name] = true
		}
		control := Drive(NewSequential(p), func(op plan.Operation) Result {
			if distinct[op.Name] {
				return c.LegacyFailures.result(op, idle)
			}
			return c.Failures.result(op, idle)
		})
		phased, err := NewPhased(p, c.EnforcedGroups)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		executions := map[string]string{}
		candidate := Drive(phased, func(op plan.Operation) Result {
			execution := CandidateExecution(op, control, distinct[op.Name])
			executions[op.Name] = execution
			if execution == ExecutionNotSimulated {
				return NotSimulated()
			}
			return c.Failures.result(op, idle)
		})
		if !reflect.DeepEqual(executions, c.CandidateExecutions) {
			t.Fatalf("%s: the candidate's executions differ\n go:   %v\n rust: %v", c.Name, executions, c.CandidateExecutions)
		}
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
