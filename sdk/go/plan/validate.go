package plan

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/internal/ids"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/internal/text"
)

// Diagnostic is one problem in a plan, located at Source:Line:Column (0 when unknown), naming
// the operation it concerns when there is one.
type Diagnostic struct {
	Source       string
	Line, Column int
	Operation    string
	Message      string
}

func (d Diagnostic) String() string {
	op := ""
	if d.Operation != "" {
		op = "operation " + d.Operation + ": "
	}
	return fmt.Sprintf("%s:%d:%d: %s%s", d.Source, d.Line, d.Column, op, d.Message)
}

// InvalidError is a plan that does not validate: every problem found, in file order of the
// checks.
type InvalidError struct {
	Diagnostics []Diagnostic
}

func (e *InvalidError) Error() string {
	lines := make([]string, len(e.Diagnostics))
	for i, d := range e.Diagnostics {
		lines[i] = d.String()
	}
	return strings.Join(lines, "\n")
}

// maxNameLen is the longest plan, group or operation name (a Kubernetes label value's limit).
const maxNameLen = 63

const kind = "ReconcilePlan"

func validName(name string) bool {
	if name == "" || len(name) > maxNameLen || !isLetter(name[0]) {
		return false
	}
	for i := 1; i < len(name); i++ {
		c := name[i]
		if !isLetter(c) && !isDigit(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

func validPlanName(name string) bool {
	if name == "" || len(name) > maxNameLen || name[0] < 'a' || name[0] > 'z' || strings.HasSuffix(name, "-") {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if (c < 'a' || c > 'z') && !isDigit(c) && c != '-' {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

type validator struct {
	source      string
	diagnostics []Diagnostic
}

func (v *validator) error(p pos, operation string, format string, args ...any) {
	v.diagnostics = append(v.diagnostics, diagnostic(v.source, p, operation, fmt.Sprintf(format, args...)))
}

// Longest operation name (and quoted value) a diagnostic repeats, and longest message: a 4 MB
// name never floods the output. The same bounds as the Rust crate's.
const (
	maxEcho    = 100
	maxMessage = 400
)

func diagnostic(source string, p pos, operation, message string) Diagnostic {
	return Diagnostic{source, p.line, p.column, text.Bounded(operation, maxEcho), text.Bounded(text.BoundedQuotes(message, maxEcho), maxMessage)}
}

// debug formats a string as the Rust crate's {:?} does: '"' and '\\' escaped, \t \r \n \0,
// other control and unprintable characters as \u{hex}.
func debug(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteRune(c)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == 0:
			b.WriteString(`\0`)
		case c >= 0x20 && c < 0x7f:
			b.WriteRune(c)
		case c < 0x80 || !unicode.IsPrint(c) || unicode.In(c, unicode.Mn, unicode.Me):
			fmt.Fprintf(&b, `\u{%x}`, c)
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// resolved is an operation's classification with the defaults filled in.
type resolved struct {
	only            CodePath
	phase           uint32
	category        Category
	gate            Gate
	shadow          ShadowPolicy
	retryOnConflict bool
}

func (v *validator) validate(raw *rawPlan) (*Plan, error) {
	if raw.apiVersion.value != APIVersion {
		v.error(raw.apiVersion.pos, "", "apiVersion is %s; expected %s", debug(raw.apiVersion.value), debug(APIVersion))
	}
	if raw.kind.value != kind {
		v.error(raw.kind.pos, "", "kind is %s; expected %s", debug(raw.kind.value), debug(kind))
	}
	if !validPlanName(raw.name.value) {
		v.error(raw.name.pos, "", "metadata.name %s is not a valid plan name: use lowercase letters, digits and '-', start with a letter, at most %d characters", debug(raw.name.value), maxNameLen)
	}
	ops := raw.operations
	if len(ops) == 0 {
		v.error(raw.operationsAt, "", "the plan has no operations; list at least one under spec.operations")
	}
	byName := v.indexNames(ops)
	res := make([]resolved, len(ops))
	for i := range ops {
		res[i] = v.resolve(&ops[i])
	}
	// The phased path's operations by phase, then by listing order (a stable sort).
	var phased []int
	for i := range ops {
		if res[i].only != PathLegacy {
			phased = append(phased, i)
		}
	}
	sort.SliceStable(phased, func(a, b int) bool { return res[phased[a]].phase < res[phased[b]].phase })
	position := make([]int, len(ops))
	for i := range position {
		position[i] = math.MaxInt
	}
	for p, id := range phased {
		position[id] = p
	}
	dependsOn := v.dependencies(ops, res, byName, position)
	legacy := v.legacyOrder(raw, byName, res)
	declared := len(raw.groups) > 0
	var groups []Group
	if declared {
		groups = v.groups(raw.groups, byName, res)
	} else {
		all := Group{Name: ImplicitGroup, Description: "every operation (the plan declares no rollout groups)"}
		all.Operations = ids.Extend(nil, phased)
		groups = []Group{all}
	}
	intended := make([][]IntendedDifference, len(ops))
	for i := range ops {
		intended[i] = v.intended(&ops[i], res[i].only)
	}
	volatile := v.volatile(raw.volatile)
	if len(v.diagnostics) > 0 {
		return nil, &InvalidError{Diagnostics: v.diagnostics}
	}
	p := &Plan{Source: v.source, Name: raw.name.value, Description: raw.description, byName: byName,
		PhasedOrder: phased, LegacyOrder: legacy, Groups: groups, GroupsDeclared: declared, Volatile: volatile}
	for i, op := range ops {
		r := res[i]
		p.Operations = append(p.Operations, Operation{
			ID: i, Name: op.name.value, Description: op.description, Phase: r.phase, Category: r.category,
			Gate: r.gate, DependsOn: dependsOn[i], Shadow: r.shadow, RetryOnConflict: r.retryOnConflict,
			Only: r.only, Intended: intended[i],
		})
	}
	p.hash = contentHash(p)
	return p, nil
}

// resolve fills in an operation's defaults, checking which fields its code path allows and
// needs: an operation of the phased path needs a phase, a category and a shadow policy; one
// with only: legacy is scheduled by the legacy loop alone and takes none of the phased model's
// fields.
func (v *validator) resolve(op *rawOperation) resolved {
	name := op.name.value
	if op.only == PathLegacy {
		given := []struct {
			field string
			set   bool
			at    pos
		}{
			{"phase", op.phase != nil, op.phaseAt},
			{"category", op.category != "", op.categoryAt},
			{"gate", op.gate != "", op.gateAt},
			{"dependsOn", op.hasDependsOn, op.dependsOnAt},
			{"shadow", op.shadow != "", op.shadowAt},
			{"retryOnConflict", op.retry != nil, op.retryAt},
		}
		for _, g := range given {
			if g.set {
				v.error(g.at, name, "`%s` is a field of the phased model, and an operation with `only: legacy` runs in the legacy loop alone (fail-fast, in legacy.order); remove it", g.field)
			}
		}
		return resolved{only: PathLegacy, category: Critical, gate: NoCriticalFailure, shadow: ShadowSkip}
	}
	missing := func(field string) {
		v.error(op.name.pos, name, "the required field `%s` is missing (every operation of the phased path needs one; only an operation with `only: legacy` goes without)", field)
	}
	r := resolved{only: op.only, category: op.category, gate: op.gate, shadow: op.shadow}
	if op.phase == nil {
		missing("phase")
	} else {
		r.phase = *op.phase
	}
	if r.category == "" {
		missing("category")
		r.category = Critical
	}
	if r.shadow == "" {
		missing("shadow")
		r.shadow = ShadowDryRun
	}
	if r.gate == "" {
		r.gate = GateNone
	}
	r.retryOnConflict = op.retry != nil && *op.retry
	return r
}

// intended checks intendedDifferences: each entry names a kind and says how the write differs.
func (v *validator) intended(op *rawOperation, only CodePath) []IntendedDifference {
	if !op.hasIntended {
		return nil
	}
	name := op.name.value
	if only != "" {
		v.error(op.intendedAt, name, "an operation with `only: %s` exists in one code path, so every write of it is a difference the plan already declares; remove intendedDifferences", only)
		return nil
	}
	var out []IntendedDifference
	for i := range op.intended {
		if d, ok := v.intendedEntry(name, &op.intended[i]); ok {
			out = append(out, d)
		}
	}
	return out
}

func (v *validator) intendedEntry(op string, raw *rawIntended) (IntendedDifference, bool) {
	ok := true
	if strings.TrimSpace(raw.kind.value) == "" {
		v.error(raw.kind.pos, op, "an intended difference needs the kind of the object it concerns (e.g. Secret)")
		ok = false
	}
	control, candidate := raw.control, raw.candidate
	givenFields := len(raw.fields) > 0
	if control == "" && candidate == "" && !givenFields {
		v.error(raw.at, op, "an intended difference says what differs: `control` and `candidate` (none, write, delete) or `fields`")
		ok = false
	}
	if control == candidate && control != "" && !givenFields {
		v.error(raw.at, op, "`control` and `candidate` are both %s: that is no difference; give `fields` for a write whose content differs", control)
		ok = false
	}
	if givenFields && ((control != "" && control != ActionWrite) || (candidate != "" && candidate != ActionWrite)) {
		v.error(raw.at, op, "`fields` differ only where both sides write the object; with `fields`, `control` and `candidate` may only be write")
		ok = false
	}
	var fields []FieldPath
	for _, field := range raw.fields {
		path, err := ParseFieldPath(field.value)
		if err != nil {
			pe := err.(*PathError)
			v.error(field.pos, op, "field path %s: %s (at character %d)", debug(field.value), pe.Message, pe.Offset+1)
			ok = false
			continue
		}
		fields = append(fields, path)
	}
	if !ok {
		return IntendedDifference{}, false
	}
	return IntendedDifference{Kind: raw.kind.value, Name: raw.name, Subresource: raw.subresource,
		Control: control, Candidate: candidate, Fields: fields, Reason: raw.reason}, true
}

// volatile checks compare.volatile: field paths the write comparison ignores, sorted by text,
// each once.
func (v *validator) volatile(entries []str) []FieldPath {
	var paths []FieldPath
	for _, entry := range entries {
		path, err := ParseFieldPath(entry.value)
		if err != nil {
			pe := err.(*PathError)
			v.error(entry.pos, "", "compare.volatile: field path %s: %s (at character %d)", debug(entry.value), pe.Message, pe.Offset+1)
			continue
		}
		paths = append(paths, path)
	}
	texts := make([]string, len(paths))
	for i, p := range paths {
		texts[i] = p.String()
	}
	order := make([]int, len(paths))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return texts[order[a]] < texts[order[b]] })
	var out []FieldPath
	for _, i := range order {
		if len(out) == 0 || !out[len(out)-1].Equal(paths[i]) {
			out = append(out, paths[i])
		}
	}
	return out
}

func (v *validator) indexNames(ops []rawOperation) map[string]int {
	byName := make(map[string]int, len(ops))
	for i, op := range ops {
		name := op.name
		if !validName(name.value) {
			v.error(name.pos, name.value, "%s is not a valid operation name: start with a letter, then letters, digits, '-', '_' or '.', at most %d characters", debug(name.value), maxNameLen)
		}
		if first, dup := byName[name.value]; dup {
			v.error(name.pos, name.value, "duplicate operation name; it is first defined at line %d", ops[first].name.line)
		} else {
			byName[name.value] = i
		}
	}
	return byName
}

type edge struct {
	target int
	at     pos
}

func (v *validator) dependencies(ops []rawOperation, res []resolved, byName map[string]int, position []int) [][]int {
	edges := make([][]edge, len(ops))
	for i, op := range ops {
		if res[i].only == PathLegacy {
			continue // reported by resolve
		}
		for _, dep := range op.dependsOn {
			target, ok := byName[dep.value]
			switch {
			case !ok:
				v.error(dep.pos, op.name.value, "dependsOn names %s, which is not an operation of this plan", debug(dep.value))
			case hasTarget(edges[i], target):
				v.error(dep.pos, op.name.value, "dependsOn lists %s twice", debug(dep.value))
			case res[target].only == PathLegacy:
				v.error(dep.pos, op.name.value, "dependsOn names %s, which runs in the legacy loop alone (`only: legacy`): the phased model never runs it", debug(dep.value))
			default:
				edges[i] = append(edges[i], edge{target, dep.pos})
			}
		}
	}
	inCycle := v.cycles(ops, edges)
	out := make([][]int, len(ops))
	for i, es := range edges {
		for _, e := range es {
			out[i] = ids.Insert(out[i], e.target)
			if inCycle[i] && inCycle[e.target] {
				continue
			}
			if position[e.target] >= position[i] {
				op, dep := ops[i], ops[e.target]
				v.error(e.at, op.name.value, "depends on %s, which does not come earlier in phased order (%s is in phase %d, this operation in phase %d); move it to an earlier phase or list it first",
					debug(dep.name.value), debug(dep.name.value), res[e.target].phase, res[i].phase)
			}
		}
	}
	return out
}

func hasTarget(es []edge, target int) bool {
	for _, e := range es {
		if e.target == target {
			return true
		}
	}
	return false
}

// cycles reports every dependency cycle once, as the Rust crate's depth-first search finds
// them; it returns which operations are on one.
func (v *validator) cycles(ops []rawOperation, edges [][]edge) []bool {
	const (
		fresh = iota
		active
		done
	)
	mark := make([]int, len(ops))
	inCycle := make([]bool, len(ops))
	type frame struct{ node, next int }
	for root := range ops {
		if mark[root] != fresh {
			continue
		}
		path := []frame{{root, 0}}
		mark[root] = active
		for len(path) > 0 {
			top := &path[len(path)-1]
			node := top.node
			if top.next >= len(edges[node]) {
				mark[node] = done
				path = path[:len(path)-1]
				continue
			}
			e := edges[node][top.next]
			top.next++
			switch mark[e.target] {
			case fresh:
				mark[e.target] = active
				path = append(path, frame{e.target, 0})
			case active:
				start := 0
				for k, f := range path {
					if f.node == e.target {
						start = k
						break
					}
				}
				var names []string
				for _, f := range path[start:] {
					names = append(names, ops[f.node].name.value)
					inCycle[f.node] = true
				}
				names = append(names, ops[e.target].name.value)
				v.error(e.at, ops[node].name.value, "dependency cycle: %s", strings.Join(names, " -> "))
			}
		}
	}
	return inCycle
}

func (v *validator) legacyOrder(raw *rawPlan, byName map[string]int, res []resolved) []int {
	seen := make([]bool, len(raw.operations))
	var legacy []int
	for _, entry := range raw.order {
		id, ok := byName[entry.value]
		switch {
		case !ok:
			v.error(entry.pos, entry.value, "legacy.order names %s, which is not an operation of this plan", debug(entry.value))
		case seen[id]:
			v.error(entry.pos, entry.value, "legacy.order lists this operation twice; it must list every operation of the legacy path exactly once")
		case res[id].only == PathPhased:
			seen[id] = true
			v.error(entry.pos, entry.value, "legacy.order names an operation with `only: phased`: the legacy loop does not run it; remove it from legacy.order or drop `only`")
		default:
			seen[id] = true
			legacy = append(legacy, id)
		}
	}
	for i, op := range raw.operations {
		if id, ok := byName[op.name.value]; !seen[i] && res[i].only != PathPhased && ok && id == i {
			v.error(raw.orderAt, op.name.value, "missing from legacy.order, which must list every operation of the legacy path exactly once (mark one the legacy loop does not have `only: phased`)")
		}
	}
	return legacy
}

func (v *validator) groups(raw []rawGroup, byName map[string]int, res []resolved) []Group {
	owner := map[int]string{}
	lines := map[string]int{}
	var out []Group
	for _, g := range raw {
		name := g.name.value
		if !validName(name) {
			v.error(g.name.pos, "", "rollout group name %s is not valid: start with a letter, then letters, digits, '-', '_' or '.'", debug(name))
		}
		if line, dup := lines[name]; dup {
			v.error(g.name.pos, "", "duplicate rollout group %s; it is first defined at line %d", debug(name), line)
		} else {
			lines[name] = g.name.line
		}
		if len(g.operations) == 0 {
			v.error(g.opsAt, "", "rollout group %s has no operations", debug(name))
		}
		group := Group{Name: name, Description: g.description}
		for _, entry := range g.operations {
			id, ok := byName[entry.value]
			if !ok {
				v.error(entry.pos, entry.value, "rollout group %s names %s, which is not an operation of this plan", debug(name), debug(entry.value))
				continue
			}
			if res[id].only == PathLegacy {
				v.error(entry.pos, entry.value, "rollout group %s names an operation with `only: legacy`; groups are the phased model's, which never runs it", debug(name))
				continue
			}
			switch other, taken := owner[id]; {
			case taken && other == name:
				v.error(entry.pos, entry.value, "rollout group %s lists this operation twice", debug(name))
			case taken:
				v.error(entry.pos, entry.value, "rollout groups overlap: this operation is in %s and %s; an operation belongs to at most one group", debug(other), debug(name))
			default:
				owner[id] = name
				group.Operations = ids.Insert(group.Operations, id)
			}
		}
		out = append(out, group)
	}
	return out
}
