package dtest

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Difference is one field where an actual object differs from what a test
// expects.
type Difference struct {
	// Path is the field, as `metadata.annotations["a/b"]` or `spec.ports[1].port`.
	Path string
	// Expected and Actual are the values; Absent says the actual object
	// lacks the field.
	Expected, Actual any
	Absent           bool
}

// Match compares an expected value with an actual one as an assertion of
// a test does, and returns the differences, sorted by path (none: a
// match). The match is partial, as chainsaw's assert: a map matches when
// every key it gives matches (other keys of the actual map are not
// compared; an expected null matches an absent key or a null), a list
// when it has the same length and its elements match one by one, a
// scalar when it is equal (numbers by value: 1 equals 1.0). path is the
// prefix of the paths reported ("" at an object's root).
func Match(expected, actual any, path string) []Difference {
	var out []Difference
	match(expected, actual, path, &out)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func match(expected, actual any, path string, out *[]Difference) {
	switch e := expected.(type) {
	case map[string]any:
		a, ok := actual.(map[string]any)
		if !ok {
			*out = append(*out, Difference{Path: path, Expected: expected, Actual: actual})
			return
		}
		for k, ev := range e {
			av, present := a[k]
			p := fieldPath(path, k)
			if !present {
				if ev != nil {
					*out = append(*out, Difference{Path: p, Expected: ev, Absent: true})
				}
				continue
			}
			match(ev, av, p, out)
		}
	case []any:
		a, ok := actual.([]any)
		if !ok || len(a) != len(e) {
			*out = append(*out, Difference{Path: path, Expected: expected, Actual: actual})
			return
		}
		for i := range e {
			match(e[i], a[i], fmt.Sprintf("%s[%d]", path, i), out)
		}
	default:
		if !scalarEqual(expected, actual) {
			*out = append(*out, Difference{Path: path, Expected: expected, Actual: actual})
		}
	}
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// fieldPath appends key k to path: `.k`, or `["k"]` when k is not an
// identifier.
func fieldPath(path, k string) string {
	if identRE.MatchString(k) {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	return path + "[" + strconv.Quote(k) + "]"
}

func scalarEqual(a, b any) bool {
	if fa, ok := number(a); ok {
		fb, ok := number(b)
		if !ok {
			return false
		}
		if ia, ok := a.(int64); ok {
			if ib, ok := b.(int64); ok {
				return ia == ib
			}
		}
		return fa == fb || (math.IsNaN(fa) && math.IsNaN(fb))
	}
	switch av := a.(type) {
	case nil:
		return b == nil
	case string:
		bv, ok := b.(string)
		return ok && av == bv
	case bool:
		bv, ok := b.(bool)
		return ok && av == bv
	}
	return false
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// maxShown bounds the bytes of one value in a report.
const maxShown = 300

// compact renders v as compact JSON, cut at maxShown bytes.
func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	if len(b) > maxShown {
		return string(b[:maxShown]) + "…"
	}
	return string(b)
}

// FormatDifferences renders differences as a diff, each field as
//
//	<indent>path
//	<indent>  - expected: <JSON>
//	<indent>  + actual:   <JSON, or (absent)>
func FormatDifferences(diffs []Difference, indent string) string {
	var b strings.Builder
	for _, d := range diffs {
		p := d.Path
		if p == "" {
			p = "(the object)"
		}
		actual := compact(d.Actual)
		if d.Absent {
			actual = "(absent)"
		}
		fmt.Fprintf(&b, "%s%s\n%s  - expected: %s\n%s  + actual:   %s\n", indent, p, indent, compact(d.Expected), indent, actual)
	}
	return b.String()
}
