// Package plan reads a ReconcilePlan: the operations of a reconciler, their phases, categories,
// gates, dependencies and shadow policies, the legacy order and the rollout groups. It is the Go
// reading of the format the Rust crate defines (docs/plan.md); the content hash is the same, so
// a Go controller and the sidecar agree on which plan a record belongs to.
package plan

import (
	"fmt"
	"os"
	"sort"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/internal/ids"
)

// APIVersion is the plan format's version.
const APIVersion = "shadow-reconciler.io/v1alpha1"

// ImplicitGroup names the one rollout group of a plan that declares none.
const ImplicitGroup = "all"

// Category says whether an operation's failure stops what depends on the critical ones.
type Category string

// Gate says when an operation may run in the phased model.
type Gate string

// ShadowPolicy says how the candidate treats an operation the control did not run.
type ShadowPolicy string

const (
	Critical          Category     = "critical"
	NonCritical       Category     = "non-critical"
	GateNone          Gate         = "none"
	NoCriticalFailure Gate         = "no-critical-failure"
	ShadowDryRun      ShadowPolicy = "dry-run"
	ShadowSkip        ShadowPolicy = "skip"
)

// Operation is one named step of the reconcile.
type Operation struct {
	ID              int
	Name            string
	Description     string
	Phase           uint32
	Category        Category
	Gate            Gate
	DependsOn       []int // operation ids, ascending
	Shadow          ShadowPolicy
	RetryOnConflict bool
}

// Group is a rollout group: the unit the flag enforces.
type Group struct {
	Name        string
	Description string
	Operations  []int // operation ids, ascending
}

// Plan is a validated ReconcilePlan.
type Plan struct {
	Source         string
	Name           string
	Description    string
	Operations     []Operation
	PhasedOrder    []int
	LegacyOrder    []int
	Groups         []Group
	GroupsDeclared bool
	byName         map[string]int
	hash           [32]byte
}

// Load reads and validates the plan in the file at path.
func Load(path string) (*Plan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the plan: %w", err)
	}
	return Parse(path, data)
}

// Parse validates the plan text; source names it in errors. An invalid plan is an
// *InvalidError listing every problem found, each at source:line:column and naming its
// operation, with the Rust crate's rules and words (held equal by the shared vectors of
// tests/data/plan-vectors.json).
func Parse(source string, data []byte) (*Plan, error) {
	return parse(source, data)
}

// Lookup returns the id of the operation called name.
func (p *Plan) Lookup(name string) (int, bool) {
	id, ok := p.byName[name]
	return id, ok
}

// GroupMembers returns the operations of the named rollout groups (ascending ids).
func (p *Plan) GroupMembers(names []string) ([]int, error) {
	var members []int
	for _, name := range names {
		found := false
		for _, g := range p.Groups {
			if g.Name == name {
				found = true
				for _, id := range g.Operations {
					members = ids.Insert(members, id)
				}
			}
		}
		if !found {
			return nil, fmt.Errorf("plan %s has no rollout group %q", p.Name, name)
		}
	}
	return members, nil
}

// SortedNames returns the names of ops, sorted and without repeats.
func (p *Plan) SortedNames(ops []int) []string {
	names := make([]string, 0, len(ops))
	for _, op := range ops {
		names = append(names, p.Operations[op].Name)
	}
	sort.Strings(names)
	out := names[:0]
	for i, n := range names {
		if i == 0 || n != names[i-1] {
			out = append(out, n)
		}
	}
	return out
}
