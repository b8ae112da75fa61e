package plan

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"

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

// pos is a 1-based location.
type pos struct{ line, column int }

func at(n *yaml.Node) pos { return pos{n.Line, n.Column} }

type str struct {
	value string
	pos
}

// rawOperation is an operation as written: a field not given is nil, "" or not set.
type rawOperation struct {
	name         str
	description  string
	only         CodePath
	phase        *uint32
	category     Category
	gate         Gate
	dependsOn    []str
	hasDependsOn bool
	shadow       ShadowPolicy
	retry        *bool
	// Where each given field's value is, for the rules that name it.
	phaseAt, categoryAt, gateAt, dependsOnAt, shadowAt, retryAt pos
	intended                                                    []rawIntended
	hasIntended                                                 bool
	intendedAt                                                  pos
}

// rawIntended is one entry of intendedDifferences as written.
type rawIntended struct {
	at                 pos
	kind               str
	name, subresource  *string
	control, candidate WriteAction
	fields             []str
	reason             string
}

type rawGroup struct {
	name        str
	description string
	operations  []str
	opsAt       pos
}

type rawPlan struct {
	apiVersion, kind, name str
	description            string
	operations             []rawOperation
	operationsAt           pos
	order                  []str
	orderAt                pos
	groups                 []rawGroup
	volatile               []str
}

// schemaError is the first error of reading the document's structure (as serde stops at its
// first error), with the operation it falls in.
type schemaError struct {
	pos
	operation string
	message   string
}

func (e *schemaError) Error() string { return e.message }

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func parse(source string, data []byte) (*Plan, error) {
	invalid := func(d ...Diagnostic) error { return &InvalidError{Diagnostics: d} }
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, invalid(Diagnostic{source, 1, 1, "", "the file holds no YAML document; a plan is one ReconcilePlan document"})
		}
		line, message := 0, strings.TrimPrefix(err.Error(), "yaml: ")
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			line, _ = strconv.Atoi(m[1])
			message = m[2]
		}
		return nil, invalid(Diagnostic{source, line, 0, "", "YAML syntax: " + message})
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, invalid(Diagnostic{source, extra.Line, extra.Column, "", "the file holds more than one YAML document (`---`); it must hold exactly one"})
	}
	raw, err := readPlan(doc.Content[0])
	if err != nil {
		var se *schemaError
		errors.As(err, &se)
		return nil, invalid(diagnostic(source, se.pos, se.operation, se.message))
	}
	return (&validator{source: source}).validate(raw)
}

// ---- the document's structure ----

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a map"
	case yaml.SequenceNode:
		return "a sequence"
	case yaml.AliasNode:
		return "an alias"
	}
	if n.Tag == "!!null" {
		return "null"
	}
	return fmt.Sprintf("%q", n.Value)
}

type reader struct {
	operation string // the operation being read, for attribution
}

func (r *reader) fail(n *yaml.Node, format string, args ...any) error {
	return &schemaError{at(n), r.operation, fmt.Sprintf(format, args...)}
}

// fields reads a mapping key by key in document order, as serde does: an unknown or repeated
// key, or the first bad value (read by handle), stops it; then the required keys must all have
// been seen (a missing one is reported at the mapping's last key, where a reader notices).
func (r *reader) fields(n *yaml.Node, what string, allowed []string, required []string, handle func(key string, value *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return r.fail(n, "invalid type: %s, expected %s", kindName(n), what)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, value := n.Content[i], resolve(n.Content[i+1])
		known := false
		for _, a := range allowed {
			known = known || a == key.Value
		}
		if !known {
			return r.fail(key, "unknown field `%s`, expected one of %s", key.Value, strings.Join(allowed, ", "))
		}
		if seen[key.Value] {
			return r.fail(key, "the key `%s` appears twice in this mapping; keep one", key.Value)
		}
		seen[key.Value] = true
		if err := handle(key.Value, value); err != nil {
			return err
		}
	}
	for _, name := range required {
		if !seen[name] {
			last := n
			if len(n.Content) >= 2 {
				last = n.Content[len(n.Content)-2]
			}
			return r.fail(last, "the required field `%s` is missing", name)
		}
	}
	return nil
}

func (r *reader) sequence(n *yaml.Node) error {
	if n.Kind != yaml.SequenceNode {
		return r.fail(n, "expected a list here")
	}
	return nil
}

// resolve follows an alias to its anchored node (serde reads aliases as their values).
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool { return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") }

func (r *reader) string(node *yaml.Node) (str, error) {
	n := resolve(node)
	if isNull(n) {
		return str{}, r.fail(node, "this value is empty; write a value here")
	}
	if n.Kind != yaml.ScalarNode {
		return str{}, r.fail(node, "invalid type: %s, expected a string", kindName(n))
	}
	return str{n.Value, at(node)}, nil
}

func (r *reader) optionalString(n *yaml.Node) (string, error) {
	if isNull(n) {
		return "", nil
	}
	s, err := r.string(n)
	return s.value, err
}

func (r *reader) strings(n *yaml.Node) ([]str, error) {
	if err := r.sequence(n); err != nil {
		return nil, err
	}
	out := make([]str, 0, len(n.Content))
	for _, item := range n.Content {
		s, err := r.string(resolve(item))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (r *reader) enum(n *yaml.Node, variants ...string) (string, error) {
	s, err := r.string(n)
	if err != nil {
		return "", err
	}
	for _, v := range variants {
		if s.value == v {
			return v, nil
		}
	}
	return "", r.fail(n, "unknown value `%s`, expected one of %s", s.value, strings.Join(variants, ", "))
}

func readPlan(root *yaml.Node) (*rawPlan, error) {
	r := &reader{}
	raw := &rawPlan{}
	err := r.fields(root, "struct RawPlan", []string{"apiVersion", "kind", "metadata", "spec"}, []string{"apiVersion", "kind", "metadata", "spec"},
		func(key string, value *yaml.Node) (err error) {
			switch key {
			case "apiVersion":
				raw.apiVersion, err = r.string(value)
			case "kind":
				raw.kind, err = r.string(value)
			case "metadata":
				err = r.fields(value, "struct RawMetadata", []string{"name", "description"}, []string{"name"}, func(key string, value *yaml.Node) (err error) {
					if key == "name" {
						raw.name, err = r.string(value)
					} else {
						raw.description, err = r.optionalString(value)
					}
					return err
				})
			case "spec":
				err = readSpec(r, value, raw)
			}
			return err
		})
	return raw, err
}

func readSpec(r *reader, n *yaml.Node, raw *rawPlan) error {
	return r.fields(n, "struct RawSpec", []string{"operations", "legacy", "rollout", "compare"}, []string{"operations", "legacy"}, func(key string, value *yaml.Node) error {
		switch key {
		case "operations":
			if err := r.sequence(value); err != nil {
				return err
			}
			raw.operationsAt = at(value)
			for _, item := range value.Content {
				op, err := readOperation(resolve(item))
				if err != nil {
					return err
				}
				raw.operations = append(raw.operations, op)
			}
		case "legacy":
			return r.fields(value, "struct RawLegacy", []string{"order"}, []string{"order"}, func(_ string, order *yaml.Node) (err error) {
				raw.orderAt = at(order)
				raw.order, err = r.strings(order)
				return err
			})
		case "rollout":
			if isNull(value) {
				return nil
			}
			return r.fields(value, "struct RawRollout", []string{"groups"}, []string{"groups"}, func(_ string, groups *yaml.Node) error {
				if err := r.sequence(groups); err != nil {
					return err
				}
				for _, item := range groups.Content {
					var group rawGroup
					err := r.fields(resolve(item), "struct RawGroup", []string{"name", "description", "operations"}, []string{"name", "operations"}, func(key string, value *yaml.Node) (err error) {
						switch key {
						case "name":
							group.name, err = r.string(value)
						case "description":
							group.description, err = r.optionalString(value)
						case "operations":
							group.opsAt = at(value)
							group.operations, err = r.strings(value)
						}
						return err
					})
					if err != nil {
						return err
					}
					raw.groups = append(raw.groups, group)
				}
				return nil
			})
		case "compare":
			if isNull(value) {
				return nil
			}
			return r.fields(value, "struct RawCompare", []string{"volatile"}, nil, func(_ string, volatile *yaml.Node) (err error) {
				raw.volatile, err = r.strings(volatile)
				return err
			})
		}
		return nil
	})
}

func readOperation(n *yaml.Node) (rawOperation, error) {
	r := &reader{}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if v := n.Content[i+1]; n.Content[i].Value == "name" && v.Kind == yaml.ScalarNode && !isNull(v) {
				r.operation = v.Value
			}
		}
	}
	var op rawOperation
	err := r.fields(n, "struct RawOperation",
		[]string{"name", "description", "only", "phase", "category", "gate", "dependsOn", "shadow", "retryOnConflict", "intendedDifferences"},
		[]string{"name"},
		func(key string, value *yaml.Node) (err error) {
			if key != "name" && isNull(value) {
				return nil // every other field is optional: null is not given
			}
			var variant string
			switch key {
			case "name":
				op.name, err = r.string(value)
			case "description":
				op.description, err = r.optionalString(value)
			case "only":
				variant, err = r.enum(value, string(PathLegacy), string(PathPhased))
				op.only = CodePath(variant)
			case "phase":
				// Any integer form serde-saphyr reads: decimal, +, 0x, 0o, 0b, '_', quoted.
				n, perr := strconv.ParseInt(value.Value, 0, 64)
				if value.Kind != yaml.ScalarNode || perr != nil || n < 0 || n > 1<<32-1 {
					return r.fail(value, "expected a whole number from 0 to 4294967295")
				}
				phase := uint32(n)
				op.phase, op.phaseAt = &phase, at(value)
			case "category":
				variant, err = r.enum(value, string(Critical), string(NonCritical))
				op.category, op.categoryAt = Category(variant), at(value)
			case "gate":
				variant, err = r.enum(value, string(GateNone), string(NoCriticalFailure))
				op.gate, op.gateAt = Gate(variant), at(value)
			case "dependsOn":
				op.dependsOn, err = r.strings(value)
				op.hasDependsOn, op.dependsOnAt = true, at(value)
			case "shadow":
				variant, err = r.enum(value, string(ShadowDryRun), string(ShadowSkip))
				op.shadow, op.shadowAt = ShadowPolicy(variant), at(value)
			case "retryOnConflict":
				// YAML 1.1's booleans too, quoted or not, as serde-saphyr reads them.
				retry := false
				switch strings.ToLower(value.Value) {
				case "true", "yes", "y", "on":
					retry = true
				case "false", "no", "n", "off":
				default:
					return r.fail(value, "expected true or false")
				}
				if value.Kind != yaml.ScalarNode {
					return r.fail(value, "expected true or false")
				}
				op.retry, op.retryAt = &retry, at(value)
			case "intendedDifferences":
				if err := r.sequence(value); err != nil {
					return err
				}
				op.hasIntended, op.intendedAt = true, at(value)
				for _, item := range value.Content {
					entry, err := readIntended(r, resolve(item))
					if err != nil {
						return err
					}
					op.intended = append(op.intended, entry)
				}
			}
			return err
		})
	return op, err
}

func readIntended(r *reader, n *yaml.Node) (rawIntended, error) {
	entry := rawIntended{at: at(n)}
	optional := func(value *yaml.Node) (*string, error) {
		s, err := r.string(value)
		return &s.value, err
	}
	err := r.fields(n, "struct RawIntended",
		[]string{"kind", "name", "subresource", "control", "candidate", "fields", "reason"},
		[]string{"kind"},
		func(key string, value *yaml.Node) (err error) {
			if key != "kind" && isNull(value) {
				return nil // every other field is optional: null is not given
			}
			var variant string
			switch key {
			case "kind":
				entry.kind, err = r.string(value)
			case "name":
				entry.name, err = optional(value)
			case "subresource":
				entry.subresource, err = optional(value)
			case "control":
				variant, err = r.enum(value, string(ActionNone), string(ActionWrite), string(ActionDelete))
				entry.control = WriteAction(variant)
			case "candidate":
				variant, err = r.enum(value, string(ActionNone), string(ActionWrite), string(ActionDelete))
				entry.candidate = WriteAction(variant)
			case "fields":
				entry.fields, err = r.strings(value)
			case "reason":
				entry.reason, err = r.optionalString(value)
			}
			return err
		})
	return entry, err
}

// ---- the rules ----

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
