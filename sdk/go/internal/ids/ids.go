// Package ids keeps sets of operation ids as ascending slices, the form plans and outcomes use.
package ids

import "sort"

// Insert adds id to the ascending set s and returns it.
func Insert(s []int, id int) []int {
	at := sort.SearchInts(s, id)
	if at < len(s) && s[at] == id {
		return s
	}
	s = append(s, 0)
	copy(s[at+1:], s[at:])
	s[at] = id
	return s
}

// Extend adds every id of more to s.
func Extend(s, more []int) []int {
	for _, id := range more {
		s = Insert(s, id)
	}
	return s
}

// Contains says whether the ascending set s holds id.
func Contains(s []int, id int) bool {
	at := sort.SearchInts(s, id)
	return at < len(s) && s[at] == id
}
