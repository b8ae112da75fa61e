// Package plan reads a ReconcilePlan: the operations of a reconciler, their phases, categories,
// gates, dependencies and shadow policies, the legacy order and the rollout groups. It is the Go
// reading of the format the Rust crate defines (docs/plan.md); the content hash is the same, so
// a Go controller and the sidecar agree on which plan a record belongs to.
package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"

	"sigs.k8s.io/yaml"

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

type rawPlan struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	} `json:"metadata"`
	Spec struct {
		Operations []struct {
			Name            string   `json:"name"`
			Description     string   `json:"description"`
			Phase           *uint32  `json:"phase"`
			Category        string   `json:"category"`
			Gate            string   `json:"gate"`
			DependsOn       []string `json:"dependsOn"`
			Shadow          string   `json:"shadow"`
			RetryOnConflict bool     `json:"retryOnConflict"`
		} `json:"operations"`
		Legacy struct {
			Order []string `json:"order"`
		} `json:"legacy"`
		Rollout *struct {
			Groups []struct {
				Name        string   `json:"name"`
				Description string   `json:"description"`
				Operations  []string `json:"operations"`
			} `json:"groups"`
		} `json:"rollout"`
	} `json:"spec"`
}

var validName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]{0,62}$`)

// Load reads and validates the plan in the file at path.
func Load(path string) (*Plan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the plan: %w", err)
	}
	return Parse(path, data)
}

// Parse validates the plan text; source names it in errors.
func Parse(source string, data []byte) (*Plan, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: not a YAML document: %w", source, err)
	}
	var raw rawPlan
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	fail := func(format string, args ...any) (*Plan, error) {
		return nil, fmt.Errorf("%s: "+format, append([]any{source}, args...)...)
	}
	if raw.APIVersion != APIVersion || raw.Kind != "ReconcilePlan" {
		return fail("apiVersion %q, kind %q: expected %s ReconcilePlan", raw.APIVersion, raw.Kind, APIVersion)
	}
	if !validName.MatchString(raw.Metadata.Name) {
		return fail("metadata.name %q is not a valid plan name", raw.Metadata.Name)
	}
	if len(raw.Spec.Operations) == 0 {
		return fail("the plan has no operations; list at least one under spec.operations")
	}
	p := &Plan{Source: source, Name: raw.Metadata.Name, Description: raw.Metadata.Description, byName: map[string]int{}}
	for i, op := range raw.Spec.Operations {
		if !validName.MatchString(op.Name) {
			return fail("spec.operations[%d].name %q is not a valid operation name", i, op.Name)
		}
		if _, dup := p.byName[op.Name]; dup {
			return fail("operation %q is listed twice", op.Name)
		}
		if op.Phase == nil {
			return fail("operation %q has no phase", op.Name)
		}
		gate := Gate(op.Gate)
		if gate == "" {
			gate = GateNone
		}
		category, shadow := Category(op.Category), ShadowPolicy(op.Shadow)
		if category != Critical && category != NonCritical {
			return fail("operation %q: category %q: expected critical or non-critical", op.Name, op.Category)
		}
		if gate != GateNone && gate != NoCriticalFailure {
			return fail("operation %q: gate %q: expected none or no-critical-failure", op.Name, op.Gate)
		}
		if shadow != ShadowDryRun && shadow != ShadowSkip {
			return fail("operation %q: shadow %q: expected dry-run or skip", op.Name, op.Shadow)
		}
		p.byName[op.Name] = i
		p.Operations = append(p.Operations, Operation{
			ID: i, Name: op.Name, Description: op.Description, Phase: *op.Phase,
			Category: category, Gate: gate, Shadow: shadow, RetryOnConflict: op.RetryOnConflict,
		})
	}
	// By phase, then by listing order.
	p.PhasedOrder = make([]int, len(p.Operations))
	for i := range p.PhasedOrder {
		p.PhasedOrder[i] = i
	}
	sort.SliceStable(p.PhasedOrder, func(a, b int) bool {
		return p.Operations[p.PhasedOrder[a]].Phase < p.Operations[p.PhasedOrder[b]].Phase
	})
	position := make([]int, len(p.Operations))
	for pos, id := range p.PhasedOrder {
		position[id] = pos
	}
	for i, op := range raw.Spec.Operations {
		var deps []int
		for _, name := range op.DependsOn {
			dep, ok := p.byName[name]
			if !ok {
				return fail("operation %q depends on %q, which the plan does not declare", op.Name, name)
			}
			if position[dep] >= position[i] {
				return fail("operation %q depends on %q, which does not run before it in the phased order", op.Name, name)
			}
			deps = ids.Insert(deps, dep)
		}
		p.Operations[i].DependsOn = deps
	}
	seen := map[int]bool{}
	for _, name := range raw.Spec.Legacy.Order {
		id, ok := p.byName[name]
		if !ok {
			return fail("spec.legacy.order names %q, which the plan does not declare", name)
		}
		if seen[id] {
			return fail("spec.legacy.order lists %q twice", name)
		}
		seen[id] = true
		p.LegacyOrder = append(p.LegacyOrder, id)
	}
	if len(p.LegacyOrder) != len(p.Operations) {
		return fail("spec.legacy.order must list every operation once")
	}
	p.GroupsDeclared = raw.Spec.Rollout != nil && len(raw.Spec.Rollout.Groups) > 0
	if p.GroupsDeclared {
		inGroup := map[int]string{}
		for _, g := range raw.Spec.Rollout.Groups {
			group := Group{Name: g.Name, Description: g.Description}
			for _, name := range g.Operations {
				id, ok := p.byName[name]
				if !ok {
					return fail("rollout group %q names %q, which the plan does not declare", g.Name, name)
				}
				if other, taken := inGroup[id]; taken {
					return fail("operation %q is in rollout groups %q and %q", name, other, g.Name)
				}
				inGroup[id] = g.Name
				group.Operations = ids.Insert(group.Operations, id)
			}
			p.Groups = append(p.Groups, group)
		}
	} else {
		all := Group{Name: ImplicitGroup, Description: "every operation (the plan declares no rollout groups)"}
		for i := range p.Operations {
			all.Operations = append(all.Operations, i)
		}
		p.Groups = []Group{all}
	}
	p.hash = contentHash(p)
	return p, nil
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
