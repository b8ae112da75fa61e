package model

import (
	"path/filepath"
	"testing"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/plan"
)

func hostedCluster(t *testing.T) *plan.Plan {
	t.Helper()
	p, err := plan.Load(filepath.Join(root, "deploy/plans/hostedcluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func lookup(t *testing.T, p *plan.Plan, name string) int {
	t.Helper()
	id, ok := p.Lookup(name)
	if !ok {
		t.Fatalf("no operation %s", name)
	}
	return id
}

// Each model runs its code path's operations; a report has no step for the other path's.
func TestEachModelRunsItsCodePath(t *testing.T) {
	p := hostedCluster(t)
	phasedOnly, legacyOnly := lookup(t, p, "ManagedHSMVersionCheck"), lookup(t, p, "ValidConfigurationCondition")
	succeed := func(plan.Operation) Result { return Success() }

	sequential := NewSequential(p)
	if sequential.Path() != plan.PathLegacy {
		t.Fatalf("sequential runs the %s path", sequential.Path())
	}
	control := Drive(sequential, succeed)
	if len(control.Steps) != len(p.LegacyOrder) {
		t.Fatalf("the control decided %d operations, the legacy path has %d", len(control.Steps), len(p.LegacyOrder))
	}
	if _, ok := control.Get(phasedOnly); ok {
		t.Fatal("the control has a step for a phased-only operation")
	}
	if s := control.Step(phasedOnly); s.Op != phasedOnly || s.Executed || s.Outcome.Kind != "" {
		t.Fatalf("Step of an operation outside the path: %+v", s)
	}
	if s, ok := control.Get(legacyOnly); !ok || !s.Executed || !s.Critical {
		t.Fatalf("the control's legacy-only step: %+v %v", s, ok)
	}

	all := NewPhasedAll(p)
	if all.Path() != plan.PathPhased {
		t.Fatalf("phased runs the %s path", all.Path())
	}
	for _, id := range all.Enforced {
		if p.Operations[id].Only == plan.PathLegacy {
			t.Fatalf("NewPhasedAll enforces the legacy-only %s", p.Operations[id].Name)
		}
	}
	if len(all.Enforced) != len(p.PhasedOrder) {
		t.Fatalf("NewPhasedAll enforces %d of the %d phased operations", len(all.Enforced), len(p.PhasedOrder))
	}
	candidate := Drive(all, succeed)
	if _, ok := candidate.Get(legacyOnly); ok {
		t.Fatal("the candidate has a step for a legacy-only operation")
	}
	diff, err := Between(control, candidate)
	if err != nil {
		t.Fatal(err)
	}
	if len(diff.Unblocked)+len(diff.NewlyBlocked)+len(diff.Changed) != 0 {
		t.Fatalf("one-sided operations make a difference: %+v", diff)
	}
}

func TestCandidateExecution(t *testing.T) {
	p := hostedCluster(t)
	control := Drive(NewSequential(p), func(op plan.Operation) Result {
		if op.Name == "PullSecretSync" {
			return Failure("conflict", "boom")
		}
		return Success()
	})
	ran, stopped := lookup(t, p, "CPOImageAndNamespace"), control.Steps[len(control.Steps)-1].Op
	if control.Step(stopped).Executed {
		t.Fatal("the control ran its last operation after a failure")
	}
	phasedOnly := p.Operations[lookup(t, p, "ManagedHSMVersionCheck")]
	for _, c := range []struct {
		op       plan.Operation
		distinct bool
		want     string
	}{
		{p.Operations[ran], false, ExecutionReused},
		{p.Operations[ran], true, ExecutionDryRun},
		{phasedOnly, false, ExecutionDryRun},
	} {
		if got := CandidateExecution(c.op, control, c.distinct); got != c.want {
			t.Errorf("%s (distinct %v): %s, want %s", c.op.Name, c.distinct, got, c.want)
		}
	}
	skip := p.Operations[stopped]
	skip.Shadow = plan.ShadowSkip
	if got := CandidateExecution(skip, control, false); got != ExecutionNotSimulated {
		t.Errorf("a skipped shadow: skip operation: %s", got)
	}
	skip.Shadow = plan.ShadowDryRun
	if got := CandidateExecution(skip, control, false); got != ExecutionDryRun {
		t.Errorf("a skipped dry-run operation: %s", got)
	}
}
