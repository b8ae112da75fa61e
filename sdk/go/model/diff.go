package model

// The comparison of a candidate's run with the control's.

import "fmt"

// Diff is what the candidate changes against the control.
type Diff struct {
	// Unblocked ran in the candidate, not in the control (candidate order).
	Unblocked []int
	// NewlyBlocked ran in the control, and the candidate blocked or skipped them.
	NewlyBlocked []int
	// Changed ran in both with other outcomes.
	Changed []int
	// Reordered are pairs both ran, in control order, that the candidate ran the other way.
	Reordered [][2]int
}

// Between compares two reports of the same plan. An operation the candidate left unknown
// without running it is in none of the lists, and so is an operation that exists in one of the
// two runs only (only: in the plan).
func Between(control, candidate *Report) (*Diff, error) {
	if control.Plan != candidate.Plan && (control.Plan.Name != candidate.Plan.Name || !control.Plan.SameHash(candidate.Plan)) {
		return nil, fmt.Errorf("cannot compare runs of different plans: %s@%s and %s@%s",
			control.Plan.Name, control.Plan.ShortHash(), candidate.Plan.Name, candidate.Plan.ShortHash())
	}
	d := &Diff{}
	for i := range candidate.Steps {
		// By pointer: a step is a hundred bytes, copied twice per operation otherwise.
		step := &candidate.Steps[i]
		theirs := control.at(step.Op)
		if theirs == nil {
			continue
		}
		switch {
		case !theirs.Executed && step.Executed:
			// A step that had nothing to do is not one the candidate unblocked.
			if step.Outcome.Kind != Idle {
				d.Unblocked = append(d.Unblocked, step.Op)
			}
		case theirs.Executed && !step.Executed && (step.Outcome.Kind == Blocked || step.Outcome.Kind == Skipped):
			d.NewlyBlocked = append(d.NewlyBlocked, step.Op)
		case theirs.Executed && step.Executed && theirs.Outcome.Ran() && step.Outcome.Ran() &&
			!(theirs.Outcome.OK() && step.Outcome.OK()) && !theirs.Outcome.equal(step.Outcome):
			d.Changed = append(d.Changed, step.Op)
		}
	}
	// On the stack for plans of up to 64 operations (every reconcile compares once).
	var positions, boths [64]int
	position := scratch(positions[:], len(control.Plan.Operations))
	for i, s := range candidate.Steps {
		position[s.Op] = i
	}
	both := scratch(boths[:], len(control.Steps))[:0]
	for i := range control.Steps {
		s := &control.Steps[i]
		if k := candidate.at(s.Op); s.Executed && k != nil && k.Executed {
			both = append(both, s.Op)
		}
	}
	// Counted first, so the pairs take one allocation rather than a growing slice's.
	reordered := 0
	for i, a := range both {
		for _, b := range both[i+1:] {
			if position[a] > position[b] {
				reordered++
			}
		}
	}
	if reordered > 0 {
		d.Reordered = make([][2]int, 0, reordered)
		for i, a := range both {
			for _, b := range both[i+1:] {
				if position[a] > position[b] {
					d.Reordered = append(d.Reordered, [2]int{a, b})
				}
			}
		}
	}
	return d, nil
}

// at is the step of op, nil when op is not in the run's code path.
func (r *Report) at(op int) *Step {
	if op < 0 || op >= len(r.index) || r.index[op] < 0 {
		return nil
	}
	return &r.Steps[r.index[op]]
}

// scratch is n ints of buf when they fit, else a new slice.
func scratch(buf []int, n int) []int {
	if n <= len(buf) {
		clear(buf[:n])
		return buf[:n]
	}
	return make([]int, n)
}
