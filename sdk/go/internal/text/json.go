package text

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// JSON text as serde_json reads and writes it, where the Go package must accept, refuse and
// print exactly what the Rust crate does: strings with their escapes, and which documents parse
// at all.

// MaxJSONDepth is the deepest nesting of arrays and objects serde_json reads (its recursion limit
// of 128 levels, the last of which fails).
const MaxJSONDepth = 127

// UnquoteJSON decodes the JSON string at the start of s, which starts with '"': control characters,
// unknown escapes and unpaired surrogates are errors. It returns the string and the number of
// bytes it took.
func UnquoteJSON(s string) (string, int, bool) {
	var out strings.Builder
	for i := 1; i < len(s); {
		c := s[i]
		switch {
		case c == '"':
			return out.String(), i + 1, true
		case c < 0x20:
			return "", 0, false
		case c != '\\':
			out.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(s) {
			return "", 0, false
		}
		switch e := s[i+1]; e {
		case '"', '\\', '/':
			out.WriteByte(e)
		case 'b':
			out.WriteByte('\b')
		case 'f':
			out.WriteByte('\f')
		case 'n':
			out.WriteByte('\n')
		case 'r':
			out.WriteByte('\r')
		case 't':
			out.WriteByte('\t')
		case 'u':
			r, ok := hex4(s, i+2)
			if !ok || (r >= 0xDC00 && r <= 0xDFFF) {
				return "", 0, false
			}
			i += 6
			if r >= 0xD800 && r <= 0xDBFF {
				// A leading surrogate: a trailing one must follow as \uXXXX.
				if i+1 >= len(s) || s[i] != '\\' || s[i+1] != 'u' {
					return "", 0, false
				}
				low, ok := hex4(s, i+2)
				if !ok || low < 0xDC00 || low > 0xDFFF {
					return "", 0, false
				}
				r = utf16.DecodeRune(r, low)
				i += 6
			}
			out.WriteRune(r)
			continue
		default:
			return "", 0, false
		}
		i += 2
	}
	return "", 0, false
}

func hex4(s string, at int) (rune, bool) {
	if at+4 > len(s) {
		return 0, false
	}
	var n rune
	for _, c := range []byte(s[at : at+4]) {
		switch {
		case c >= '0' && c <= '9':
			n = n<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			n = n<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			n = n<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return n, true
}

// QuoteJSON is serde_json's string encoding: '"' and '\\' escaped, the control characters as
// \b \t \n \f \r or \u00xx, everything else as it is.
func QuoteJSON(s string) string {
	const hex = "0123456789abcdef"
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			b.WriteString(`\"`)
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\b':
			b.WriteString(`\b`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\f':
			b.WriteString(`\f`)
		case c == '\r':
			b.WriteString(`\r`)
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// ReadableJSON says whether serde_json would refuse data for what encoding/json lets through: text
// that is not UTF-8, a string with an unpaired surrogate escape, nesting deeper than MaxJSONDepth.
// The rest of the grammar is left to encoding/json, which reads it as serde_json does.
func ReadableJSON(data []byte) bool {
	if !utf8.Valid(data) {
		return false
	}
	text := string(data)
	depth := 0
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '"':
			_, n, ok := UnquoteJSON(text[i:])
			if !ok {
				return false
			}
			i += n - 1
		case '[', '{':
			depth++
			if depth > MaxJSONDepth {
				return false
			}
		case ']', '}':
			depth--
		}
	}
	return true
}
