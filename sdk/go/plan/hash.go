package plan

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"sort"
)

// Hash is the plan's content hash: SHA-256 over a canonical encoding of what the models use
// (names, phases, categories, gates, dependencies, shadow policies, retries, code paths, the
// legacy order, the groups) and of what the write comparison records (intended differences,
// volatile fields), the same bytes the Rust crate hashes. Descriptions, reasons, layout and the
// order of dependencies, groups, intended differences and volatile fields do not count.
func (p *Plan) Hash() string { return hex.EncodeToString(p.hash[:]) }

// SameHash says whether two plans have the same content hash, without formatting either.
func (p *Plan) SameHash(other *Plan) bool { return p.hash == other.hash }

// ShortHash is the hash's first 12 hex digits, as metrics label it.
func (p *Plan) ShortHash() string { return p.Hash()[:12] }

type canonical struct{ h hash.Hash }

func (c canonical) count(n int) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(n))
	c.h.Write(b[:])
}

func (c canonical) field(s string) {
	c.count(len(s))
	c.h.Write([]byte(s))
}

func (c canonical) names(p *Plan, ops []int) {
	names := p.SortedNames(ops)
	c.count(len(names))
	for _, n := range names {
		c.field(n)
	}
}

func contentHash(p *Plan) [32]byte {
	c := canonical{sha256.New()}
	c.field(APIVersion)
	c.field(p.Name)
	c.count(len(p.Operations))
	for _, op := range p.Operations {
		c.field(op.Name)
		c.field(uitoa(op.Phase))
		c.field(string(op.Category))
		c.field(string(op.Gate))
		c.names(p, op.DependsOn)
		c.field(string(op.Shadow))
		if op.RetryOnConflict {
			c.field("retry")
		} else {
			c.field("no-retry")
		}
		// Only when set or declared, so that the hash of a plan without them stays what it was;
		// neither marker can be an operation name.
		if op.Only != "" {
			c.field("only:" + string(op.Only))
		}
		if len(op.Intended) > 0 {
			c.field("intended:")
			entries := make([][]string, 0, len(op.Intended))
			for i := range op.Intended {
				entries = append(entries, canonicalIntended(&op.Intended[i]))
			}
			sort.Slice(entries, func(a, b int) bool { return lessStrings(entries[a], entries[b]) })
			c.count(len(entries))
			for _, entry := range entries {
				c.count(len(entry))
				for _, part := range entry {
					c.field(part)
				}
			}
		}
	}
	c.count(len(p.LegacyOrder))
	for _, op := range p.LegacyOrder {
		c.field(p.Operations[op].Name)
	}
	groups := append([]Group(nil), p.Groups...)
	sort.Slice(groups, func(a, b int) bool { return groups[a].Name < groups[b].Name })
	if p.GroupsDeclared {
		c.field("declared")
	} else {
		c.field("implicit")
	}
	c.count(len(groups))
	for _, g := range groups {
		c.field(g.Name)
		c.names(p, g.Operations)
	}
	if len(p.Volatile) > 0 {
		c.field("volatile")
		c.count(len(p.Volatile))
		for _, path := range p.Volatile {
			c.field(path.String())
		}
	}
	var out [32]byte
	copy(out[:], c.h.Sum(nil))
	return out
}

// canonicalIntended is an intended difference as strings: what matches, "*" for a part it
// leaves open, the fields' texts sorted and each once.
func canonicalIntended(i *IntendedDifference) []string {
	open := func(v *string) string {
		if v == nil {
			return "*"
		}
		return *v
	}
	action := func(a WriteAction) string {
		if a == "" {
			return "*"
		}
		return string(a)
	}
	fields := make([]string, 0, len(i.Fields))
	for _, f := range i.Fields {
		fields = append(fields, f.String())
	}
	sort.Strings(fields)
	out := []string{i.Kind, open(i.Name), open(i.Subresource), action(i.Control), action(i.Candidate)}
	for k, f := range fields {
		if k == 0 || f != fields[k-1] {
			out = append(out, f)
		}
	}
	return out
}

// lessStrings orders string lists as Rust orders Vec<String>: element by element, a prefix first.
func lessStrings(a, b []string) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return len(a) < len(b)
}

func uitoa(n uint32) string {
	if n == 0 {
		return "0"
	}
	var b [10]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
