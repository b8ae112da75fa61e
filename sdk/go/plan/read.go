package plan

// Reading a plan's YAML into its raw form: the document's structure, each field's type and
// allowed values, with every error located at file:line:column (validate.go then checks what
// the raw plan says).

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

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
