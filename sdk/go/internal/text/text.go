// Package text bounds what diagnostics echo, as the Rust crate does: a huge value never floods
// a terminal, a log line or an Event.
package text

import (
	"fmt"
	"strings"
)

// Bounded is at most limit characters of s, saying how long it was.
func Bounded(s string, limit int) string {
	runes := []rune(s)
	if len(runes) <= limit {
		return s
	}
	return fmt.Sprintf("%s… (%d characters in all)", string(runes[:limit]), len(runes))
}

// BoundedQuotes shortens each quoted value ("..." or `...`) of message by Bounded, so the
// sentence around it stays whole.
func BoundedQuotes(message string, limit int) string {
	var out strings.Builder
	rest := message
	for {
		start := strings.IndexAny(rest, "\"`")
		if start < 0 {
			break
		}
		quote := rest[start]
		after := rest[start+1:]
		end, escaped := -1, false
		for i := 0; i < len(after); i++ {
			c := after[i]
			if quote == '"' && c == '\\' && !escaped {
				escaped = true
				continue
			}
			if c == quote && !escaped {
				end = i
				break
			}
			escaped = false
		}
		if end < 0 {
			break
		}
		out.WriteString(rest[:start+1])
		out.WriteString(Bounded(after[:end], limit))
		out.WriteByte(quote)
		rest = after[end+1:]
	}
	out.WriteString(rest)
	return out.String()
}
