package expression

import (
	"errors"
	"strconv"
	"strings"
)

// rewriteIn rewrites the filter membership operator of Δ-controller's
// JSONPath, `x in [a, b, ...]` inside a filter selector, into the RFC 9535
// filter `(x==a || x==b || ...)`; RFC 9535 itself has no `in`. The left
// operand x is the text from the previous boundary at the same nesting
// level (`?`, `(`, `,`, `&&`, `||`, `!` or a comparison operator) up to
// `in`; the right operand must be a list of literals (strings, numbers,
// true, false, null). `x in []` becomes a comparison that is always false.
// Text outside filters and inside string literals is left as it is, so a
// member named "in" (`$.in`, `$['in']`) is not affected.
func rewriteIn(text string) (string, error) {
	if !strings.Contains(text, "in") {
		return text, nil
	}
	type frame struct {
		filter bool // a filter selector is open in this bracket
		start  int  // output offset where the current operand starts
	}
	var (
		out    strings.Builder
		stack  []frame
		top    = frame{}
		inside = func() bool {
			if top.filter {
				return true
			}
			for _, f := range stack {
				if f.filter {
					return true
				}
			}
			return false
		}
	)
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == '\'' || c == '"':
			j := stringEnd(text, i)
			out.WriteString(text[i:j])
			i = j
		case c == '(' || c == '[':
			out.WriteByte(c)
			stack = append(stack, top)
			top = frame{start: out.Len()}
			i++
		case c == ')' || c == ']':
			out.WriteByte(c)
			if n := len(stack); n > 0 {
				top, stack = stack[n-1], stack[:n-1]
			}
			i++
		case c == '?':
			out.WriteByte(c)
			top.filter, top.start = true, out.Len()
			i++
		case c == ',':
			out.WriteByte(c)
			top.filter, top.start = false, out.Len()
			i++
		case strings.IndexByte("=!<>&|", c) >= 0:
			out.WriteByte(c)
			top.start = out.Len()
			i++
		case isFilterSpace(c):
			out.WriteByte(c)
			i++
		default:
			j := i
			for j < len(text) && isWordByte(text[j]) {
				j++
			}
			if text[i:j] != "in" || !inside() {
				out.WriteString(text[i:j])
				i = j
				continue
			}
			written := out.String()
			lhsRaw := written[top.start:]
			lhs := strings.TrimSpace(lhsRaw)
			if lhs == "" {
				return "", errors.New(`"in" needs a left-hand operand`)
			}
			items, end, err := inList(text, j)
			if err != nil {
				return "", err
			}
			out.Reset()
			out.WriteString(written[:top.start])
			out.WriteString(lhsRaw[:len(lhsRaw)-len(strings.TrimLeft(lhsRaw, " \t\n\r"))])
			out.WriteByte('(')
			if len(items) == 0 {
				out.WriteString("0==1")
			}
			for k, item := range items {
				if k > 0 {
					out.WriteString(" || ")
				}
				out.WriteString(lhs)
				out.WriteString("==")
				out.WriteString(item)
			}
			out.WriteByte(')')
			// Comparisons do not chain: an operand after this one starts
			// here, so `x in [a] in [b]` has no left operand.
			top.start = out.Len()
			i = end
		}
	}
	return out.String(), nil
}

// inList parses the list literal right of "in", starting at text[i:]
// (after the keyword). It returns the literals as written and the offset
// just past the closing bracket.
func inList(text string, i int) ([]string, int, error) {
	for i < len(text) && isFilterSpace(text[i]) {
		i++
	}
	if i >= len(text) || text[i] != '[' {
		return nil, 0, errors.New(`the right-hand side of "in" must be a list literal such as ['a', 'b']`)
	}
	i++
	var items []string
	itemStart := i
	for i < len(text) {
		switch c := text[i]; {
		case c == '\'' || c == '"':
			i = stringEnd(text, i)
		case c == ',' || c == ']':
			item := strings.TrimSpace(text[itemStart:i])
			if item == "" && (c == ',' || len(items) > 0) {
				return nil, 0, errors.New(`empty element in the list right of "in"`)
			}
			if item != "" {
				if !isFilterLiteral(item) {
					return nil, 0, errors.New(`the list right of "in" must hold literals (strings, numbers, true, false, null), got ` + item)
				}
				items = append(items, item)
			}
			i++
			if c == ']' {
				return items, i, nil
			}
			itemStart = i
		default:
			i++
		}
	}
	return nil, 0, errors.New(`unterminated list right of "in"`)
}

// isFilterLiteral reports whether s is an RFC 9535 literal: a string in
// single or double quotes, a number, true, false or null.
func isFilterLiteral(s string) bool {
	switch s {
	case "true", "false", "null":
		return true
	}
	if c := s[0]; c == '\'' || c == '"' {
		return stringEnd(s, 0) == len(s) && len(s) >= 2 && s[len(s)-1] == c
	}
	_, err := strconv.ParseFloat(s, 64)
	return err == nil && strings.IndexFunc(s, func(r rune) bool {
		return !strings.ContainsRune("0123456789+-.eE", r)
	}) < 0
}

// stringEnd returns the offset just past the string literal that starts
// with the quote at text[i] (backslash escapes skipped), or len(text) when
// it is not terminated.
func stringEnd(text string, i int) int {
	q := text[i]
	for j := i + 1; j < len(text); j++ {
		switch text[j] {
		case '\\':
			j++
		case q:
			return j + 1
		}
	}
	return len(text)
}

func isFilterSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isWordByte(c byte) bool {
	return !isFilterSpace(c) && strings.IndexByte("'\"()[]?,=!<>&|", c) < 0
}
