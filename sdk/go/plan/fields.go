package plan

import (
	"strconv"
	"strings"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/internal/text"
)

// Field paths of Kubernetes objects (data["tls.crt"], status.conditions[type=Ready].status): how
// write differences name a field, and the patterns a plan lists as volatile or intended. The
// Rust crate's plan::fields, held equal by the shared vectors.
//
// Syntax: segments joined by '.'; a map key that is not a plain word (letters, digits, '_', '-',
// '$') is written as a JSON string in brackets (metadata.labels["app.kubernetes.io/name"]); a
// list element is [N] (by position) or [field=value] (a list of objects keyed by their name or
// type, as Kubernetes merges them); '*' (.* or [*]) matches any one key or element. A pattern
// covers a path when it matches a prefix of it: metadata.annotations covers every annotation.

// SegmentKind is what one step of a field path selects. The kinds are ordered as the Rust
// crate's Segment variants, which orders paths: Key < Index < Keyed < Any.
type SegmentKind uint8

const (
	// SegmentKey is a map key (Key).
	SegmentKey SegmentKind = iota
	// SegmentIndex is a list element by position (Index).
	SegmentIndex
	// SegmentKeyed is a list element by the value of its key field (Field, Value): [type=Ready].
	SegmentKeyed
	// SegmentAny is any one key or element (patterns only).
	SegmentAny
)

// Segment is one step of a field path. Only the fields of its Kind are set, so segments compare
// with ==.
type Segment struct {
	Kind SegmentKind
	// Key is the map key of a SegmentKey.
	Key string
	// Index is the position of a SegmentIndex.
	Index uint64
	// Field and Value are the key field (name or type) and its value of a SegmentKeyed.
	Field, Value string
}

// KeySegment is the map key k.
func KeySegment(k string) Segment { return Segment{Kind: SegmentKey, Key: k} }

// IndexSegment is the list element at position i.
func IndexSegment(i uint64) Segment { return Segment{Kind: SegmentIndex, Index: i} }

// KeyedSegment is the list element whose field has value.
func KeyedSegment(field, value string) Segment {
	return Segment{Kind: SegmentKeyed, Field: field, Value: value}
}

// AnySegment matches any one key or element.
func AnySegment() Segment { return Segment{Kind: SegmentAny} }

// Compare orders segments as the Rust crate's derived Ord: by kind, then by contents (keys and
// values bytewise, indexes numerically); -1, 0 or +1.
func (s Segment) Compare(o Segment) int {
	if s.Kind != o.Kind {
		if s.Kind < o.Kind {
			return -1
		}
		return 1
	}
	switch s.Kind {
	case SegmentKey:
		return strings.Compare(s.Key, o.Key)
	case SegmentIndex:
		switch {
		case s.Index < o.Index:
			return -1
		case s.Index > o.Index:
			return 1
		}
		return 0
	case SegmentKeyed:
		if c := strings.Compare(s.Field, o.Field); c != 0 {
			return c
		}
		return strings.Compare(s.Value, o.Value)
	}
	return 0
}

// FieldPath is a path to a field of an object or, with SegmentAny, a pattern over such paths.
// The zero value is the root (the whole object).
type FieldPath struct {
	segments []Segment
}

// PathError says why a field path does not parse: what is wrong and the byte offset it concerns.
type PathError struct {
	Offset  int
	Message string
}

// Error is the message with the 1-based character it concerns, as plan diagnostics say it.
func (e *PathError) Error() string {
	return e.Message + " (at character " + strconv.Itoa(e.Offset+1) + ")"
}

// NewFieldPath is the path of these segments.
func NewFieldPath(segments ...Segment) FieldPath {
	return FieldPath{append([]Segment(nil), segments...)}
}

// Segments are the path's steps (a copy).
func (p FieldPath) Segments() []Segment { return append([]Segment(nil), p.segments...) }

// Len is the number of segments.
func (p FieldPath) Len() int { return len(p.segments) }

// At is the segment at position i (0 <= i < Len).
func (p FieldPath) At(i int) Segment { return p.segments[i] }

// Child is this path with s appended.
func (p FieldPath) Child(s Segment) FieldPath {
	out := make([]Segment, len(p.segments), len(p.segments)+1)
	copy(out, p.segments)
	return FieldPath{append(out, s)}
}

// Equal says whether both paths have the same segments.
func (p FieldPath) Equal(o FieldPath) bool {
	if len(p.segments) != len(o.segments) {
		return false
	}
	for i := range p.segments {
		if p.segments[i] != o.segments[i] {
			return false
		}
	}
	return true
}

// Compare orders paths as the Rust crate's derived Ord: segment by segment, a prefix first;
// -1, 0 or +1.
func (p FieldPath) Compare(o FieldPath) int {
	for i := 0; i < len(p.segments) && i < len(o.segments); i++ {
		if c := p.segments[i].Compare(o.segments[i]); c != 0 {
			return c
		}
	}
	switch {
	case len(p.segments) < len(o.segments):
		return -1
	case len(p.segments) > len(o.segments):
		return 1
	}
	return 0
}

// Covers says whether the pattern p matches a prefix of path (equal segments, SegmentAny
// matching any one).
func (p FieldPath) Covers(path FieldPath) bool {
	if len(p.segments) > len(path.segments) {
		return false
	}
	for i, s := range p.segments {
		if s.Kind != SegmentAny && s != path.segments[i] {
			return false
		}
	}
	return true
}

func plainKey(key string) bool {
	if key == "" {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !isLetter(c) && !isDigit(c) && c != '_' && c != '-' && c != '$' {
			return false
		}
	}
	return true
}

// ParseFieldPath reads the syntax of a field path; an error is a *PathError.
func ParseFieldPath(text string) (FieldPath, error) {
	fail := func(offset int, message string) (FieldPath, error) {
		return FieldPath{}, &PathError{offset, message}
	}
	if strings.TrimSpace(text) == "" {
		return fail(0, "the field path is empty")
	}
	var segments []Segment
	for i := 0; i < len(text); {
		switch {
		case text[i] == '[':
			segment, next, err := bracket(text, i)
			if err != nil {
				return FieldPath{}, err
			}
			segments = append(segments, segment)
			i = next
		case text[i] == '.' && len(segments) == 0:
			return fail(i, "a field path starts with a key, not with `.`")
		default:
			start := i
			if text[i] == '.' {
				start = i + 1
			} else if i > 0 {
				return fail(i, "expected `.` or `[` between the segments")
			}
			end := len(text)
			if n := strings.IndexAny(text[start:], ".["); n >= 0 {
				end = start + n
			}
			key := text[start:end]
			switch {
			case key == "*":
				segments = append(segments, AnySegment())
			case plainKey(key):
				segments = append(segments, KeySegment(key))
			case key == "":
				return fail(start, "a key is missing here")
			default:
				return fail(start, "a key with characters other than letters, digits, `_`, `-` and `$` is written as a JSON string in brackets, e.g. data[\"tls.crt\"]")
			}
			i = end
		}
	}
	return FieldPath{segments}, nil
}

// MustParseFieldPath is ParseFieldPath for paths known to be valid; it panics on an error.
func MustParseFieldPath(text string) FieldPath {
	p, err := ParseFieldPath(text)
	if err != nil {
		panic("field path " + strconv.Quote(text) + ": " + err.Error())
	}
	return p
}

// bracket reads the bracketed segment starting at open (the '['); it returns the segment and
// the offset after the ']'.
func bracket(src string, open int) (Segment, int, error) {
	fail := func(offset int, message string) (Segment, int, error) {
		return Segment{}, 0, &PathError{offset, message}
	}
	innerStart := open + 1
	rest := src[innerStart:]
	if strings.HasPrefix(rest, "\"") {
		key, n, ok := text.UnquoteJSON(rest)
		if !ok {
			return fail(innerStart, "a bracketed key is an unterminated JSON string")
		}
		after := innerStart + n
		if !strings.HasPrefix(src[after:], "]") {
			return fail(after, "expected `]` after the bracketed key")
		}
		return KeySegment(key), after + 1, nil
	}
	closing := strings.IndexByte(rest, ']')
	if closing < 0 {
		return fail(open, "a `[` is not closed by `]`")
	}
	inner := rest[:closing]
	next := innerStart + closing + 1
	if inner == "*" {
		return AnySegment(), next, nil
	}
	if inner != "" && strings.Trim(inner, "0123456789") == "" {
		index, err := strconv.ParseUint(inner, 10, 64)
		if err != nil {
			return fail(innerStart, "the list index is too large")
		}
		return IndexSegment(index), next, nil
	}
	if field, value, ok := strings.Cut(inner, "="); ok && plainKey(field) && value != "" {
		return KeyedSegment(field, value), next, nil
	}
	return fail(innerStart, "inside brackets write a list index ([0]), a keyed element ([type=Ready]), a JSON string key ([\"tls.crt\"]) or [*]")
}

// String is the path in the syntax ParseFieldPath reads; equal paths have equal texts.
func (p FieldPath) String() string {
	var b strings.Builder
	for i, s := range p.segments {
		switch s.Kind {
		case SegmentKey:
			if plainKey(s.Key) {
				if i > 0 {
					b.WriteByte('.')
				}
				b.WriteString(s.Key)
			} else {
				b.WriteByte('[')
				b.WriteString(text.QuoteJSON(s.Key))
				b.WriteByte(']')
			}
		case SegmentIndex:
			b.WriteByte('[')
			b.WriteString(strconv.FormatUint(s.Index, 10))
			b.WriteByte(']')
		case SegmentKeyed:
			b.WriteByte('[')
			b.WriteString(s.Field)
			b.WriteByte('=')
			b.WriteString(s.Value)
			b.WriteByte(']')
		case SegmentAny:
			b.WriteString("[*]")
		}
	}
	return b.String()
}
