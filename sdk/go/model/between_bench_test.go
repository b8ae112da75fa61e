package model

import (
	"testing"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/plan"
)

// One reconcile's comparison on the happy path (every operation succeeds): the sequential
// control against the phased candidate of the hostedcluster plan.
func BenchmarkBetween(b *testing.B) {
	p := hostedCluster(&testing.T{})
	succeed := func(_ plan.Operation) Result { return Success() }
	control := Drive(NewSequential(p), succeed)
	candidate := Drive(NewPhasedAll(p), succeed)
	d, _ := Between(control, candidate)
	b.Logf("unblocked %d, reordered %d", len(d.Unblocked), len(d.Reordered))
	b.ReportAllocs()
	for b.Loop() {
		_, _ = Between(control, candidate)
	}
}
