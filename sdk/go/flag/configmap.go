package flag

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/internal/text"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/plan"
)

// Annotation is the object annotation that chooses its mode when the flag allows it.
const Annotation = "shadow-reconciler.io/mode"

// Key is the flag's key in OpenTelemetry's feature-flag attributes.
const Key = "shadow-reconciler.mode"

// GroupRef names a rollout group: in every plan that has it, or in one plan (PLAN/GROUP).
type GroupRef struct {
	Plan  string // empty: every plan
	Group string
}

func (g GroupRef) String() string {
	if g.Plan == "" {
		return g.Group
	}
	return g.Plan + "/" + g.Group
}

// ParseGroupRef reads GROUP or PLAN/GROUP.
func ParseGroupRef(s string) (GroupRef, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return GroupRef{}, false
	}
	p, g, found := strings.Cut(s, "/")
	if !found {
		return GroupRef{Group: s}, true
	}
	if p == "" || g == "" || strings.Contains(g, "/") {
		return GroupRef{}, false
	}
	return GroupRef{Plan: p, Group: g}, true
}

func (g GroupRef) inPlan(p *plan.Plan) bool {
	if g.Plan != "" && g.Plan != p.Name {
		return false
	}
	_, err := p.GroupMembers([]string{g.Group})
	return err == nil
}

// Spec is the flag's content: the command line's defaults, or a ConfigMap over them.
type Spec struct {
	Mode           Mode
	EnforcedGroups []GroupRef
	// CandidateGroups nil: every group.
	CandidateGroups     []GroupRef
	Ramp                uint16 // basis points
	AllowObjectOverride bool
}

// Default is mode shadow for every object, every group evaluated, nothing enforced.
func Default() Spec { return Spec{Mode: Shadow, Ramp: All} }

// Summary is a one-line description for logs and Events, as the Rust crate writes it.
func (s Spec) Summary() string {
	list := func(groups []GroupRef) string {
		names := make([]string, len(groups))
		for i, g := range groups {
			names[i] = g.String()
		}
		return strings.Join(names, ",")
	}
	candidate := "every group"
	if s.CandidateGroups != nil {
		candidate = "[" + list(s.CandidateGroups) + "]"
	}
	return fmt.Sprintf("mode=%s enforcedGroups=[%s] candidateGroups=%s rampPercent=%s allowObjectOverride=%t",
		s.Mode, list(s.EnforcedGroups), candidate, strconv.FormatFloat(float64(s.Ramp)/100, 'f', -1, 64), s.AllowObjectOverride)
}

// FieldError is a refused ConfigMap: which key, its value, and why.
type FieldError struct {
	Field   string // mode, enforcedGroups, candidateGroups, rampPercent, allowObjectOverride, unknown, binaryData
	Key     string
	Value   string
	Message string
}

func (e *FieldError) Error() string {
	prefix := "data."
	if e.Field == "binaryData" {
		prefix = ""
	}
	// Echoed values are bounded, as the Rust crate's.
	return fmt.Sprintf("%s%s: %q: %s", prefix, text.Bounded(e.Key, 100), text.Bounded(e.Value, 100), e.Message)
}

var fields = []string{"mode", "enforcedGroups", "candidateGroups", "rampPercent", "allowObjectOverride"}

// ParseConfigMap reads a flag ConfigMap's data over the defaults and checks every named group
// against the plans, exactly as the Rust crate does (docs/flag.md): the whole ConfigMap is
// refused at its first bad key.
func ParseConfigMap(data map[string]string, binaryData []string, defaults Spec, plans []*plan.Plan) (Spec, error) {
	if len(binaryData) > 0 {
		keys := slices.Clone(binaryData)
		sort.Strings(keys)
		return Spec{}, &FieldError{"binaryData", "binaryData", strings.Join(keys, ","), "the flag reads `data` only; move these keys there"}
	}
	spec := defaults
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the Rust crate reads a BTreeMap: the first bad key is the same
	for _, key := range keys {
		raw := data[key]
		value := strings.TrimSpace(raw)
		field := "unknown"
		if slices.Contains(fields, key) {
			field = key
		}
		bad := func(message string) error { return &FieldError{field, key, raw, message} }
		switch field {
		case "mode":
			switch Mode(value) {
			case Off, Calibrate, Shadow, Enforce:
				spec.Mode = Mode(value)
			default:
				return Spec{}, bad("expected off, calibrate, shadow or enforce")
			}
		case "enforcedGroups":
			groups, err := parseGroups(value)
			if err != nil {
				return Spec{}, bad(err.Error())
			}
			spec.EnforcedGroups = groups
		case "candidateGroups":
			groups, err := parseGroups(value)
			if err != nil {
				return Spec{}, bad(err.Error())
			}
			spec.CandidateGroups = nil
			if len(groups) > 0 {
				spec.CandidateGroups = groups
			}
		case "rampPercent":
			// Decimal only, as Rust's f64 parser: Go's would also read hex floats and '_'.
			percent, err := strconv.ParseFloat(value, 64)
			ramp, ok := RampFromPercent(percent)
			if err != nil || !ok || strings.ContainsAny(value, "xX_pP") {
				return Spec{}, bad("expected a percentage from 0 to 100 with at most two decimals")
			}
			spec.Ramp = ramp
		case "allowObjectOverride":
			switch value {
			case "true":
				spec.AllowObjectOverride = true
			case "false":
				spec.AllowObjectOverride = false
			default:
				return Spec{}, bad("expected true or false")
			}
		default:
			return Spec{}, bad("unknown key; the flag reads mode, enforcedGroups, candidateGroups, rampPercent and allowObjectOverride")
		}
	}
	if err := spec.Validate(plans); err != nil {
		return Spec{}, err
	}
	return spec, nil
}

// Validate checks that every named group exists in one of the plans: a typo is an error.
func (s Spec) Validate(plans []*plan.Plan) error {
	check := func(field string, groups []GroupRef) error {
		for _, g := range groups {
			if !slices.ContainsFunc(plans, g.inPlan) {
				var known []string
				for _, p := range plans {
					for _, group := range p.Groups {
						known = append(known, p.Name+"/"+group.Name)
					}
				}
				return &FieldError{field, field, g.String(), "no plan has this rollout group; known: " + strings.Join(known, ", ")}
			}
		}
		return nil
	}
	if err := check("enforcedGroups", s.EnforcedGroups); err != nil {
		return err
	}
	return check("candidateGroups", s.CandidateGroups)
}

func parseGroups(value string) ([]GroupRef, error) {
	var out []GroupRef
	items := strings.FieldsFunc(value, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	for _, item := range items {
		g, ok := ParseGroupRef(item)
		if !ok {
			return nil, fmt.Errorf("%q is not GROUP or PLAN/GROUP", item)
		}
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out, nil
}

// PlanFlag is the flag as one plan sees it: group names resolved in that plan.
type PlanFlag struct {
	Mode           Mode
	EnforcedGroups []string
	// CandidateGroups nil: every group.
	CandidateGroups     []string
	Ramp                uint16
	AllowObjectOverride bool
}

// ForPlan resolves the groups of p. A plan the candidate list does not name evaluates every
// group.
func (s Spec) ForPlan(p *plan.Plan) PlanFlag {
	names := func(groups []GroupRef) []string {
		var out []string
		for _, g := range groups {
			if g.inPlan(p) {
				out = append(out, g.Group)
			}
		}
		return out
	}
	f := PlanFlag{Mode: s.Mode, EnforcedGroups: names(s.EnforcedGroups), Ramp: s.Ramp, AllowObjectOverride: s.AllowObjectOverride}
	if s.CandidateGroups != nil {
		if named := names(s.CandidateGroups); len(named) > 0 {
			f.CandidateGroups = named
		}
	}
	return f
}

// Reason is why an object got its mode (OpenTelemetry's feature_flag.result.reason).
type Reason string

const (
	Static         Reason = "static"          // the ConfigMap's mode, every object
	DefaultReason  Reason = "default"         // the defaults' mode (no ConfigMap)
	Split          Reason = "split"           // the ramp placed the object
	TargetingMatch Reason = "targeting_match" // the object's annotation chose
	Stale          Reason = "stale"           // the ConfigMap is invalid: the last valid flag decided
	ErrorReason    Reason = "error"           // the annotation is not a mode: ignored
)

// Evaluation is one object's mode and why.
type Evaluation struct {
	Mode   Mode
	Reason Reason
	// Version is the ConfigMap's resourceVersion; empty for the defaults.
	Version string
}

// Evaluate decides an object's mode: its annotation when allowed and valid, else its bucket.
// fromConfigMap and stale say where the flag came from (for the reason).
func (f PlanFlag) Evaluate(uid, annotation string, hasAnnotation, fromConfigMap, stale bool, version string) Evaluation {
	chosen := hasAnnotation && f.AllowObjectOverride
	if chosen {
		switch m := Mode(annotation); m {
		case Off, Shadow, Enforce:
			return Evaluation{m, TargetingMatch, version}
		}
	}
	mode := ModeFor(f.Mode, f.Ramp, uid)
	reason := Static
	switch {
	case chosen:
		reason = ErrorReason
	case stale:
		reason = Stale
	case f.Ramp != All:
		reason = Split
	case !fromConfigMap:
		reason = DefaultReason
	}
	return Evaluation{mode, reason, version}
}
