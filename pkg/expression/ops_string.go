package expression

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// String operators. Character positions are Unicode code points.

// maxStringLen bounds the length in bytes of strings built by @concat, @join
// and @replace.
const maxStringLen = 1 << 24

// opConcat concatenates its operands converted as by @string; the result
// is allocated once, at its length.
func opConcat(c *call, vs []any) (any, error) {
	var one [4]string
	ss, n := one[:0], 0
	for _, v := range vs {
		s := toString(v)
		if n += len(s); n > maxStringLen {
			return nil, c.errorf("result longer than %d bytes", maxStringLen)
		}
		ss = append(ss, s)
	}
	var b strings.Builder
	b.Grow(n)
	for _, s := range ss {
		b.WriteString(s)
	}
	return b.String(), nil
}

func (c *call) twoStrings(a, b any) (string, string, error) {
	x, err := c.str(a, "argument 1")
	if err != nil {
		return "", "", err
	}
	y, err := c.str(b, "argument 2")
	if err != nil {
		return "", "", err
	}
	return x, y, nil
}

// opSplit implements @split [str, sep] as strings.Split: an empty separator
// splits into characters.
func opSplit(c *call, ctx *Context, a, b any) (any, error) {
	s, sep, err := c.twoStrings(a, b)
	if err != nil {
		return nil, err
	}
	// Count the parts before making them: an empty separator makes one
	// per character.
	n := utf8.RuneCountInString(s)
	if sep != "" {
		n = strings.Count(s, sep) + 1
	}
	if err := c.charge(ctx, 0, int64(n), 16*int64(n)); err != nil {
		return nil, err
	}
	parts := strings.Split(s, sep)
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out, nil
}

// opJoin implements @join [list, sep]; elements are converted as by @string.
func opJoin(c *call, a, b any) (any, error) {
	list, err := c.list(a, "argument 1")
	if err != nil {
		return nil, err
	}
	sep, err := c.str(b, "argument 2")
	if err != nil {
		return nil, err
	}
	var sb strings.Builder
	for i, e := range list {
		s := toString(e)
		if sb.Len()+len(sep)+len(s) > maxStringLen {
			return nil, c.errorf("result longer than %d bytes", maxStringLen)
		}
		if i > 0 {
			sb.WriteString(sep)
		}
		sb.WriteString(s)
	}
	return sb.String(), nil
}

func stringFunc(f func(string) string) func(c *call, v any) (any, error) {
	return func(c *call, v any) (any, error) {
		s, err := c.str(v, "argument")
		if err != nil {
			return nil, err
		}
		return f(s), nil
	}
}

var (
	opUpper = stringFunc(strings.ToUpper)
	opLower = stringFunc(strings.ToLower)
	opTrim  = stringFunc(strings.TrimSpace)
)

// opReplace implements @replace [str, old, new]: all non-overlapping
// occurrences, as strings.ReplaceAll.
func opReplace(c *call, vs []any) (any, error) {
	var ss [3]string
	for i, v := range vs {
		s, err := c.str(v, argName(i, 3))
		if err != nil {
			return nil, err
		}
		ss[i] = s
	}
	s, old, repl := ss[0], ss[1], ss[2]
	n := strings.Count(s, old)
	if len(repl) > len(old) && n > 0 && len(s)+n*(len(repl)-len(old)) > maxStringLen {
		return nil, c.errorf("result longer than %d bytes", maxStringLen)
	}
	return strings.ReplaceAll(s, old, repl), nil
}

// opSubstring implements @substring [str, start] and [str, start, end):
// positions are code point indexes clamped to the string.
func opSubstring(c *call, vs []any) (any, error) {
	s, err := c.str(vs[0], "argument 1")
	if err != nil {
		return nil, err
	}
	start, err := c.integer(vs[1], "argument 2")
	if err != nil {
		return nil, err
	}
	n := int64(utf8.RuneCountInString(s))
	end := n
	if len(vs) == 3 {
		if end, err = c.integer(vs[2], "argument 3"); err != nil {
			return nil, err
		}
	}
	start = min(max(start, 0), n)
	end = min(max(end, start), n)
	return runeSlice(s, start, end, n), nil
}

// runeSlice returns the code points start to end-1 of s, which has n code
// points; 0 <= start <= end <= n.
func runeSlice(s string, start, end, n int64) string {
	if n == int64(len(s)) { // ASCII
		return s[start:end]
	}
	var b strings.Builder
	var i int64
	for _, r := range s {
		if i >= end {
			break
		}
		if i >= start {
			b.WriteRune(r)
		}
		i++
	}
	return b.String()
}

func opStartsWith(c *call, a, b any) (any, error) {
	s, p, err := c.twoStrings(a, b)
	if err != nil {
		return nil, err
	}
	return strings.HasPrefix(s, p), nil
}

func opEndsWith(c *call, a, b any) (any, error) {
	s, p, err := c.twoStrings(a, b)
	if err != nil {
		return nil, err
	}
	return strings.HasSuffix(s, p), nil
}

// opContains implements @contains [str, sub] (substring test) and
// [list, x] (membership by DeepEqual); a null first argument contains
// nothing.
func opContains(c *call, ctx *Context, a, b any) (any, error) {
	switch x := a.(type) {
	case string:
		sub, err := c.str(b, "argument 2")
		if err != nil {
			return nil, err
		}
		return strings.Contains(x, sub), nil
	case []any:
		return c.member(ctx, b, x)
	case nil:
		return false, nil
	}
	return nil, c.errorf("argument 1 must be a string or a list, got %s", typeName(a))
}

// prepareRegexp compiles a literal pattern at parse time.
func prepareRegexp(c *call) error {
	lit, ok := c.args[0].(*literal)
	if !ok {
		return nil
	}
	p, ok := lit.v.(string)
	if !ok {
		return c.errorf("argument 1 must be a string, got %s", typeName(lit.v))
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return c.errorf("invalid regular expression: %v", err)
	}
	c.re = re
	return nil
}

// opRegexp implements @regexp [pattern, str]: whether str contains a match
// of the RE2 pattern (Go regexp syntax); anchor with ^ and $ for a full
// match.
func opRegexp(c *call, a, b any) (any, error) {
	re := c.re
	if re == nil {
		p, err := c.str(a, "argument 1")
		if err != nil {
			return nil, err
		}
		if re, err = regexp.Compile(p); err != nil {
			return nil, c.errorf("invalid regular expression: %v", err)
		}
	}
	s, err := c.str(b, "argument 2")
	if err != nil {
		return nil, err
	}
	return re.MatchString(s), nil
}
