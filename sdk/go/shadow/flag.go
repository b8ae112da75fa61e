package shadow

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/flag"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/model"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/plan"
)

// Flag decides each reconcile's mode: the defaults (the command line's, in a controller), and,
// when it names a ConfigMap, that ConfigMap over them, read through the controller's cache at
// every reconcile. The ConfigMap's semantics are the Rust crate's (docs/flag.md): an invalid
// ConfigMap is refused as a whole and the last valid flag stays in force (reason `stale`);
// a deleted one gives the defaults back.
type Flag struct {
	defaults flag.Spec
	plans    []*plan.Plan
	reader   client.Reader
	key      types.NamespacedName
	log      logr.Logger

	mu       sync.Mutex
	state    FlagState
	refused  string // the resourceVersion last refused, to log a refusal once
	observed string // the resourceVersion last applied
}

// FlagState is the flag in force.
type FlagState struct {
	Spec flag.Spec
	// FromConfigMap: the ConfigMap decided (else the defaults).
	FromConfigMap bool
	// Version is the ConfigMap's resourceVersion.
	Version string
	// Stale: a newer ConfigMap was refused; Error says why.
	Stale bool
	Error string
	// Generation counts the changes of the flag in force.
	Generation uint64
}

// StaticFlag is a flag that never changes (no ConfigMap). Its groups must exist in the plans.
func StaticFlag(spec flag.Spec, plans ...*plan.Plan) (*Flag, error) {
	if err := spec.Validate(plans); err != nil {
		return nil, fmt.Errorf("the flag: %w", err)
	}
	return &Flag{defaults: spec, plans: plans, state: FlagState{Spec: spec}, log: logr.Discard()}, nil
}

// ConfigMapFlag reads the flag from the ConfigMap key through reader (the manager's client or
// cache), over defaults. The manager's cache then watches ConfigMaps; restrict it to this one
// with cache.Options.ByObject and a field selector on metadata.name (see docs/flag.md).
func ConfigMapFlag(reader client.Reader, key types.NamespacedName, defaults flag.Spec, log logr.Logger, plans ...*plan.Plan) (*Flag, error) {
	f, err := StaticFlag(defaults, plans...)
	if err != nil {
		return nil, err
	}
	f.reader, f.key, f.log = reader, key, log
	return f, nil
}

// Current is the flag in force now: the ConfigMap is read from the reader (a cache read, no
// request) and applied when its resourceVersion changed.
func (f *Flag) Current(ctx context.Context) FlagState {
	if f.reader == nil {
		return f.state
	}
	// One reconcile at a time reads and applies, so a reconcile that read an older version
	// cannot apply it after another applied a newer one (a cache read: no request).
	f.mu.Lock()
	defer f.mu.Unlock()
	cm := &corev1.ConfigMap{}
	err := f.reader.Get(ctx, f.key, cm)
	switch {
	case apierrors.IsNotFound(err):
		if f.state.FromConfigMap || f.state.Stale {
			f.change(FlagState{Spec: f.defaults})
		}
		f.observed, f.refused = "", ""
	case err != nil:
		// The cache cannot answer (not synced, no permission): the flag in force stays.
		f.log.Error(err, "cannot read the flag ConfigMap; keeping the flag in force", "configmap", f.key.String())
	case cm.ResourceVersion == f.observed || cm.ResourceVersion == f.refused:
	default:
		binary := make([]string, 0, len(cm.BinaryData))
		for k := range cm.BinaryData {
			binary = append(binary, k)
		}
		spec, perr := flag.ParseConfigMap(cm.Data, binary, f.defaults, f.plans)
		if perr != nil {
			f.refused = cm.ResourceVersion
			f.log.Info("refused the flag ConfigMap; keeping the last valid flag", "configmap", f.key.String(),
				"resourceVersion", cm.ResourceVersion, "error", perr.Error(), "kept", f.state.Spec.Summary())
			next := f.state
			next.Stale, next.Error = true, perr.Error()
			f.state = next
			return f.state
		}
		f.observed, f.refused = cm.ResourceVersion, ""
		f.change(FlagState{Spec: spec, FromConfigMap: true, Version: cm.ResourceVersion})
	}
	return f.state
}

func (f *Flag) change(next FlagState) {
	next.Generation = f.state.Generation
	if !sameSpec(next.Spec, f.state.Spec) {
		next.Generation++
		f.log.Info("flag changed", "from", f.state.Spec.Summary(), "to", next.Spec.Summary())
	}
	f.state = next
}

func sameSpec(a, b flag.Spec) bool {
	return a.Mode == b.Mode && a.Ramp == b.Ramp && a.AllowObjectOverride == b.AllowObjectOverride &&
		slices.Equal(a.EnforcedGroups, b.EnforcedGroups) && slices.Equal(a.CandidateGroups, b.CandidateGroups) &&
		slices.Equal(a.Groups, b.Groups) &&
		(a.CandidateGroups == nil) == (b.CandidateGroups == nil)
}

// policies are the engine's policies under one flag: built once per flag generation.
type policies struct {
	generation uint64
	spec       flag.Spec
	flag       flag.PlanFlag
	sequential *model.Policy
	// enforce is the control in mode enforce, per set of enforced groups an object can get
	// (keyed by the names joined with commas).
	enforce   map[string]*model.Policy
	candidate *model.Policy
}

// enforceFor is the control enforcing groups (every set an evaluation gives is built: the
// fallback, nothing enforced, never serves).
func (p *policies) enforceFor(groups []string) *model.Policy {
	if pol, ok := p.enforce[strings.Join(groups, ",")]; ok {
		return pol
	}
	return p.enforce[""]
}

func (e *Engine[T, S]) policiesFor(state FlagState) (*policies, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.policies != nil && e.policies.generation == state.Generation && sameSpec(e.policies.spec, state.Spec) {
		return e.policies, nil
	}
	pf := state.Spec.ForPlan(e.plan)
	enforce := map[string]*model.Policy{}
	for _, set := range pf.EnforcedSets() {
		pol, err := model.NewPhased(e.plan, set)
		if err != nil {
			return nil, err
		}
		enforce[strings.Join(set, ",")] = pol
	}
	candidate := model.NewPhasedAll(e.plan)
	if pf.CandidateGroups != nil {
		var err error
		if candidate, err = model.NewPhased(e.plan, pf.CandidateGroups); err != nil {
			return nil, err
		}
	}
	e.policies = &policies{state.Generation, state.Spec, pf, model.NewSequential(e.plan), enforce, candidate}
	return e.policies, nil
}
