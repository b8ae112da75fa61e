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

// GroupRamp is one rollout group's own mode and ramp (the ConfigMap's groups key): Enforce at a
// share of the objects, or Shadow (not enforced, whatever EnforcedGroups says).
type GroupRamp struct {
	Group GroupRef
	Mode  Mode   // Enforce or Shadow
	Ramp  uint16 // basis points; All for Shadow
}

func (g GroupRamp) String() string {
	if g.Mode == Enforce {
		return fmt.Sprintf("%s: enforce %s%%", g.Group, percent(g.Ramp))
	}
	return fmt.Sprintf("%s: %s", g.Group, g.Mode)
}

func percent(ramp uint16) string { return strconv.FormatFloat(float64(ramp)/100, 'f', -1, 64) }

// Spec is the flag's content: the command line's defaults, or a ConfigMap over them.
type Spec struct {
	Mode           Mode
	EnforcedGroups []GroupRef
	// CandidateGroups nil: every group.
	CandidateGroups     []GroupRef
	Ramp                uint16 // basis points
	AllowObjectOverride bool
	// Groups are per rollout group its own mode and ramp: in mode enforce, a group named here
	// is enforced for the objects inside its ramp (or not at all, Shadow), whatever
	// EnforcedGroups says of it.
	Groups []GroupRamp
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
	line := fmt.Sprintf("mode=%s enforcedGroups=[%s] candidateGroups=%s rampPercent=%s allowObjectOverride=%t",
		s.Mode, list(s.EnforcedGroups), candidate, percent(s.Ramp), s.AllowObjectOverride)
	if len(s.Groups) > 0 {
		entries := make([]string, len(s.Groups))
		for i, g := range s.Groups {
			entries[i] = g.String()
		}
		line += " groups=[" + strings.Join(entries, ", ") + "]"
	}
	return line
}

// FieldError is a refused ConfigMap: which key, its value, and why.
type FieldError struct {
	Field   string // mode, enforcedGroups, candidateGroups, rampPercent, allowObjectOverride, groups, unknown, binaryData
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

var fields = []string{"mode", "enforcedGroups", "candidateGroups", "rampPercent", "allowObjectOverride", "groups"}

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
		case "groups":
			groups, err := parseGroupRamps(value)
			if err != nil {
				return Spec{}, bad(err.Error())
			}
			spec.Groups = groups
		default:
			return Spec{}, bad("unknown key; the flag reads mode, enforcedGroups, candidateGroups, rampPercent, allowObjectOverride and groups")
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
	if err := check("candidateGroups", s.CandidateGroups); err != nil {
		return err
	}
	named := make([]GroupRef, len(s.Groups))
	for i, g := range s.Groups {
		named[i] = g.Group
	}
	return check("groups", named)
}

// parseGroupRamps reads the groups key: entries separated by newlines or commas, each
// "GROUP: enforce PERCENT" (the percentage optional, 100 by default, with or without %) or
// "GROUP: shadow", as the Rust crate does.
func parseGroupRamps(value string) ([]GroupRamp, error) {
	const form = "expected `GROUP: enforce PERCENT` or `GROUP: shadow`"
	var out []GroupRamp
	entries := strings.FieldsFunc(value, func(r rune) bool { return r == '\n' || r == ',' })
	n := 0
	for _, entry := range entries {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		n++
		name, rest, found := strings.Cut(entry, ":")
		if !found {
			return nil, fmt.Errorf("entry %d: %s", n, form)
		}
		group, ok := ParseGroupRef(name)
		if !ok {
			return nil, fmt.Errorf("entry %d: %s is not GROUP or PLAN/GROUP", n, quote(strings.TrimSpace(name)))
		}
		words := strings.Fields(rest)
		g := GroupRamp{Group: group, Ramp: All}
		switch {
		case len(words) >= 1 && len(words) <= 2 && words[0] == "enforce":
			g.Mode = Enforce
			if len(words) == 2 {
				p := strings.TrimSuffix(words[1], "%")
				parsed, err := strconv.ParseFloat(p, 64)
				ramp, ok := RampFromPercent(parsed)
				if err != nil || !ok || strings.ContainsAny(p, "xX_pP") {
					return nil, fmt.Errorf("entry %d: %s is not a percentage from 0 to 100 with at most two decimals", n, quote(words[1]))
				}
				g.Ramp = ramp
			}
		case len(words) == 1 && words[0] == "shadow":
			g.Mode = Shadow
		case len(words) >= 2 && words[0] == "shadow":
			return nil, fmt.Errorf("entry %d: a group in shadow takes no percentage (its objects are all in shadow)", n)
		default:
			return nil, fmt.Errorf("entry %d: %s", n, form)
		}
		if slices.ContainsFunc(out, func(o GroupRamp) bool { return o.Group == group }) {
			return nil, fmt.Errorf("entry %d: %s is named twice", n, group)
		}
		out = append(out, g)
	}
	return out, nil
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

// EnforcedGroup is a group of a plan the control enforces in mode enforce, for the objects
// inside its ramp.
type EnforcedGroup struct {
	Group string
	Ramp  uint16
}

// PlanFlag is the flag as one plan sees it: group names resolved in that plan.
type PlanFlag struct {
	Mode Mode
	// Enforced are the groups the control enforces in mode enforce, each with its ramp, in the
	// plan's order.
	Enforced []EnforcedGroup
	// Named: the flag names a group of this plan (enforcedGroups or groups), so an object in
	// mode enforce outside every enforced group's ramp runs in shadow. A plan the flag names no
	// group of runs its phased control with nothing enforced.
	Named bool
	// CandidateGroups nil: every group.
	CandidateGroups     []string
	Ramp                uint16
	AllowObjectOverride bool
}

// EnforcedGroups are the groups enforced at some share of the objects.
func (f PlanFlag) EnforcedGroups() []string {
	out := make([]string, 0, len(f.Enforced))
	for _, g := range f.Enforced {
		out = append(out, g.Group)
	}
	return out
}

// EnforcedFor are the groups enforced for an object in bucket b.
func (f PlanFlag) EnforcedFor(b uint16) []string {
	out := []string{}
	for _, g := range f.Enforced {
		if b < g.Ramp {
			out = append(out, g.Group)
		}
	}
	return out
}

// EnforcedSets are every set of groups an object's control can enforce under this flag: none,
// all of them (the annotation's), and the groups of each ramp and above.
func (f PlanFlag) EnforcedSets() [][]string {
	sets := [][]string{{}, f.EnforcedGroups()}
	for _, g := range f.Enforced {
		var set []string
		for _, o := range f.Enforced {
			if o.Ramp >= g.Ramp {
				set = append(set, o.Group)
			}
		}
		if !slices.ContainsFunc(sets, func(s []string) bool { return slices.Equal(s, set) }) {
			sets = append(sets, set)
		}
	}
	return sets
}

// ForPlan resolves the groups of p: a group's entry in Groups decides it (PLAN/GROUP before
// GROUP); else EnforcedGroups enforces it at every object of the flag's ramp. A plan the
// candidate list does not name evaluates every group.
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
	f := PlanFlag{Mode: s.Mode, Ramp: s.Ramp, AllowObjectOverride: s.AllowObjectOverride}
	for _, group := range p.Groups {
		var entry *GroupRamp
		for i := range s.Groups {
			e := &s.Groups[i]
			if e.Group.Group == group.Name && (e.Group.Plan == "" || e.Group.Plan == p.Name) &&
				(entry == nil || e.Group.Plan != "") {
				entry = e
			}
		}
		switch {
		case entry != nil:
			f.Named = true
			if entry.Mode == Enforce {
				f.Enforced = append(f.Enforced, EnforcedGroup{group.Name, entry.Ramp})
			}
		case slices.ContainsFunc(s.EnforcedGroups, func(g GroupRef) bool {
			return g.Group == group.Name && (g.Plan == "" || g.Plan == p.Name)
		}):
			f.Named = true
			f.Enforced = append(f.Enforced, EnforcedGroup{group.Name, All})
		}
	}
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
	// EnforcedGroups are, in mode enforce, the groups the control enforces for this object
	// (each group's ramp put the object inside it); empty in every other mode.
	EnforcedGroups []string
}

// Evaluate decides an object's mode: its annotation when allowed and valid, else the flag's
// ramp, then in mode enforce each group's own ramp. fromConfigMap and stale say where the flag
// came from (for the reason).
func (f PlanFlag) Evaluate(uid, annotation string, hasAnnotation, fromConfigMap, stale bool, version string) Evaluation {
	chosen := hasAnnotation && f.AllowObjectOverride
	if chosen {
		switch m := Mode(annotation); m {
		case Off, Shadow, Enforce:
			// A canary: every group the flag enforces, whatever its ramp.
			groups := []string{}
			if m == Enforce {
				groups = f.EnforcedGroups()
			}
			return Evaluation{m, TargetingMatch, version, groups}
		}
	}
	b := Bucket(uid)
	mode := f.Mode
	if f.Ramp != All && b >= f.Ramp {
		mode = Below(f.Mode)
	}
	split := f.Ramp != All
	groups := []string{}
	if mode == Enforce && f.Named {
		groups = f.EnforcedFor(b)
		for _, g := range f.Enforced {
			split = split || g.Ramp != All
		}
		if len(groups) == 0 {
			// Outside every enforced group's ramp (or every group named is in shadow).
			mode = Shadow
		}
	}
	reason := Static
	switch {
	case chosen:
		reason = ErrorReason
	case stale:
		reason = Stale
	case split:
		reason = Split
	case !fromConfigMap:
		reason = DefaultReason
	}
	return Evaluation{mode, reason, version, groups}
}

// quote writes a value as the Rust crate's {:?} does (the same for printable text).
func quote(s string) string { return strconv.Quote(s) }
