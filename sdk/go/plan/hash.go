package plan

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"sort"
)

// Hash is the plan's content hash: SHA-256 over a canonical encoding of what the models use
// (names, phases, categories, gates, dependencies, shadow policies, retries, the legacy order,
// the groups), the same bytes the Rust crate hashes. Descriptions and layout do not count.
func (p *Plan) Hash() string { return hex.EncodeToString(p.hash[:]) }

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
	var out [32]byte
	copy(out[:], c.h.Sum(nil))
	return out
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
