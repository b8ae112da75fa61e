// Package plan reads a ReconcilePlan: the operations of a reconciler, their phases, categories,
// gates, dependencies and shadow policies, the code path of those in one path only and the
// write differences they intend, the legacy order, the rollout groups and the fields the write
// comparison ignores. It is the Go reading of the format the Rust crate defines (docs/plan.md);
// the content hash is the same, so a Go controller and the sidecar agree on which plan a record
// belongs to.
package plan

import (
	"fmt"
	"os"
	"sort"
	"strings"

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

// CodePath is one of the two code paths a reconciler may keep side by side: the legacy loop
// (legacy.order, the sequential model) and the phased reconcile (the phased model).
type CodePath string

// WriteAction is what one side of a write comparison did to an object.
type WriteAction string

const (
	Critical          Category     = "critical"
	NonCritical       Category     = "non-critical"
	GateNone          Gate         = "none"
	NoCriticalFailure Gate         = "no-critical-failure"
	ShadowDryRun      ShadowPolicy = "dry-run"
	ShadowSkip        ShadowPolicy = "skip"
)

const (
	// PathLegacy is the legacy loop's code path.
	PathLegacy CodePath = "legacy"
	// PathPhased is the phased reconcile's code path.
	PathPhased CodePath = "phased"
)

const (
	// ActionNone: no accepted write.
	ActionNone WriteAction = "none"
	// ActionWrite: created, updated or patched the object.
	ActionWrite WriteAction = "write"
	// ActionDelete: deleted the object.
	ActionDelete WriteAction = "delete"
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
	// Only is the one code path the operation exists in (only:), "" when it is in both. An
	// operation with only: legacy reads as phase 0, critical, gate no-critical-failure, shadow
	// skip, no retry.
	Only CodePath
	// Intended are the write differences the phased code of this operation is meant to make
	// (intendedDifferences).
	Intended []IntendedDifference
}

// InPath says whether the operation exists in the code path.
func (o Operation) InPath(path CodePath) bool { return o.Only == "" || o.Only == path }

// IntendedDifference is a write difference the plan declares intended: the phased code writes
// differently from the legacy code on purpose (a fix), so the difference does not hold back the
// operation's rollout group.
type IntendedDifference struct {
	// Kind is the object kind it concerns (Secret).
	Kind string
	// Name is the object name, nil when it names none.
	Name *string
	// Subresource is the subresource written (status), nil when it names none.
	Subresource *string
	// Control and Candidate are what each side did to the object, "" when not given.
	Control, Candidate WriteAction
	// Fields are patterns that cover every differing field, empty when not given.
	Fields []FieldPath
	// Reason is free text: why the difference is intended.
	Reason string
}

// Matches says whether a difference on an object of kind, name and subresource ("" for the
// object itself), where the control did control and the candidate candidate, with these
// differing fields, is this declared one. Every given part must match; declared fields are
// patterns that must cover every differing field, and match only a difference of fields (both
// sides wrote the object).
// NameMatches says whether a declared name matches an object's name: equal, or, with `*` in it,
// each `*` matching any run of characters (`monitoring-*`; a name the server generated from
// `generateName: root-ca-` is recorded as `root-ca-*`).
func NameMatches(pattern, name string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == name
	}
	if !strings.HasPrefix(name, parts[0]) {
		return false
	}
	rest := name[len(parts[0]):]
	for _, part := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, part)
		if i < 0 {
			return false
		}
		rest = rest[i+len(part):]
	}
	return strings.HasSuffix(rest, parts[len(parts)-1])
}

func (i *IntendedDifference) Matches(kind, name, subresource string, control, candidate WriteAction, fields []FieldPath) bool {
	if i.Kind != kind || (i.Name != nil && !NameMatches(*i.Name, name)) || (i.Subresource != nil && *i.Subresource != subresource) ||
		(i.Control != "" && i.Control != control) || (i.Candidate != "" && i.Candidate != candidate) {
		return false
	}
	if len(i.Fields) == 0 {
		return true
	}
	if len(fields) == 0 {
		return false
	}
	for _, f := range fields {
		covered := false
		for _, pattern := range i.Fields {
			if pattern.Covers(f) {
				covered = true
				break
			}
		}
		if !covered {
			return false
		}
	}
	return true
}

// Group is a rollout group: the unit the flag enforces.
type Group struct {
	Name        string
	Description string
	Operations  []int // operation ids, ascending
}

// Plan is a validated ReconcilePlan.
type Plan struct {
	Source      string
	Name        string
	Description string
	Operations  []Operation
	// PhasedOrder is the phased path's operations (all but only: legacy) by phase, then by
	// listing order.
	PhasedOrder []int
	// LegacyOrder is legacy.order: the legacy path's operations (all but only: phased).
	LegacyOrder []int
	// Groups are the rollout groups; a plan that declares none has ImplicitGroup, holding the
	// phased path's operations.
	Groups         []Group
	GroupsDeclared bool
	// Volatile are the field paths the write comparison ignores besides the built-in ones
	// (compare.volatile), sorted by text, each once.
	Volatile []FieldPath
	byName   map[string]int
	hash     [32]byte
}

// Order is the order in which the model of path considers its operations.
func (p *Plan) Order(path CodePath) []int {
	if path == PathLegacy {
		return p.LegacyOrder
	}
	return p.PhasedOrder
}

// HasOneSided says whether some operation exists in one code path only.
func (p *Plan) HasOneSided() bool {
	for _, op := range p.Operations {
		if op.Only != "" {
			return true
		}
	}
	return false
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
