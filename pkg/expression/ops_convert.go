package expression

import (
	"crypto/md5"
	"encoding/json"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Conversion and utility operators.

// opString converts to a string: strings unchanged, integers in decimal,
// floats in the shortest form that round-trips (as encoding/json), bools as
// "true"/"false", null as "", lists and maps as compact JSON with sorted keys.
func opString(c *call, v any) (any, error) {
	s := toString(v)
	if len(s) > maxStringLen {
		return nil, c.errorf("result longer than %d bytes", maxStringLen)
	}
	return s, nil
}

// opInt converts to an int64: floats are truncated toward zero, strings are
// parsed as decimal integers or else as floats (then truncated), true is 1,
// false and null are 0.
func opInt(c *call, v any) (any, error) {
	switch x := v.(type) {
	case nil:
		return int64(0), nil
	case bool:
		if x {
			return int64(1), nil
		}
		return int64(0), nil
	case string:
		s := strings.TrimSpace(x)
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, c.errorf("cannot convert %q to int", x)
		}
		i, ok := floatToInt(f)
		if !ok {
			return nil, c.errorf("cannot convert %q to int: out of range", x)
		}
		return i, nil
	}
	if n, _, ok := numberOf(v); ok {
		if n.isInt {
			return n.i, nil
		}
		i, ok := floatToInt(n.f)
		if !ok {
			return nil, c.errorf("cannot convert %s to int: out of range", formatFloat(n.f))
		}
		return i, nil
	}
	return nil, c.errorf("argument must be a number, string or bool, got %s", typeName(v))
}

// opFloat converts to a float64: strings are parsed with strconv.ParseFloat,
// true is 1, false and null are 0. A string naming a non-finite number
// ("NaN", "Inf", "+Inf", "-Infinity", any case) or one out of the float64
// range ("1e400") is an error, as is a NaN or ±Inf argument: JSON (RFC 8259
// §6) and the Kubernetes API have no such numbers.
func opFloat(c *call, v any) (any, error) {
	switch x := v.(type) {
	case nil:
		return float64(0), nil
	case bool:
		if x {
			return float64(1), nil
		}
		return float64(0), nil
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil {
			return nil, c.errorf("cannot convert %q to float", x)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, c.errorf("cannot convert %q to float: not a finite number (%s)", x, nonFiniteHint)
		}
		return f, nil
	}
	if n, _, ok := numberOf(v); ok {
		return c.finite(floatNum(n.float()))
	}
	return nil, c.errorf("argument must be a number, string or bool, got %s", typeName(v))
}

// opBool converts to a bool: the strings "true" and "false", numbers (true
// when non-zero), null is false.
func opBool(c *call, v any) (any, error) {
	switch x := v.(type) {
	case nil:
		return false, nil
	case bool:
		return x, nil
	case string:
		switch x {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, c.errorf("cannot convert %q to bool", x)
	}
	if n, _, ok := numberOf(v); ok {
		return !isZero(n), nil
	}
	return nil, c.errorf("argument must be a bool, string or number, got %s", typeName(v))
}

// evalExists implements @exists: for a JSONPath argument, whether it
// selects a non-null value (for a filter-only query, whether the first
// selected value is non-null; for a list-valued query, any non-null node);
// for any other argument, whether it evaluates to non-null.
func evalExists(c *call, ctx *Context) (any, error) {
	if q, ok := c.args[0].(*Query); ok {
		var root any
		if ctx != nil {
			if q.local {
				root = ctx.Local
			} else {
				root = ctx.Subject
			}
		}
		if q.singular || q.first {
			v, _ := q.Get(root)
			return v != nil, nil
		}
		for _, n := range q.jp.Select(root) {
			if n != nil {
				return true, nil
			}
		}
		return false, nil
	}
	v, err := c.args[0].Eval(ctx)
	if err != nil {
		return nil, err
	}
	return v != nil, nil
}

func opIsNil(_ *call, v any) (any, error) { return v == nil, nil }

// hashLen is the number of base36 digits of @hash.
const hashLen = 6

// md5Base36Len is the number of base36 digits of a 128-bit MD5 sum.
const md5Base36Len = 25

// opHash is Δ-controller's @hash: the MD5 of the value's JSON encoding
// (encoding/json: compact, map keys sorted, <, > and & escaped) read as a
// big-endian 128-bit integer, written in lowercase base 36 zero-padded to 25
// digits, of which the first 6 are kept. Values that encoding/json cannot
// encode (NaN, ±Inf) are hashed from their canonical JSON (see @string).
// A value whose JSON is longer than maxStringLen is an error.
func opHash(c *call, v any) (any, error) {
	if len(canonicalJSON(v)) > maxStringLen { // bounded, unlike json.Marshal
		return nil, c.errorf("argument longer than %d bytes as JSON", maxStringLen)
	}
	js, err := json.Marshal(v)
	if err != nil {
		js = []byte(canonicalJSON(v))
	}
	return hashBytes(js), nil
}

// hashBytes returns the first hashLen base36 digits of the MD5 of b.
func hashBytes(b []byte) string {
	sum := md5.Sum(b)
	h := new(big.Int).SetBytes(sum[:]).Text(36)
	h = strings.Repeat("0", md5Base36Len-len(h)) + h
	return h[:hashLen]
}

// opRnd implements @rnd [min, max): a uniformly distributed integer, from
// ctx.Rand when set.
func opRnd(c *call, ctx *Context, a, b any) (any, error) {
	lo, err := c.integer(a, "argument 1")
	if err != nil {
		return nil, err
	}
	hi, err := c.integer(b, "argument 2")
	if err != nil {
		return nil, err
	}
	if hi <= lo {
		return nil, c.errorf("empty range [%d, %d)", lo, hi)
	}
	span := uint64(hi) - uint64(lo)
	var r uint64
	if ctx != nil && ctx.Rand != nil {
		r = ctx.Rand.Uint64N(span)
	} else {
		r = rand.Uint64N(span)
	}
	return int64(uint64(lo) + r), nil
}

// parseNow accepts @now with no argument: null or an empty list.
func parseNow(c *call, arg any, _ scope) error {
	if l, ok := arg.([]any); arg != nil && (!ok || len(l) != 0) {
		return c.errorf("expects no arguments")
	}
	return nil
}

// evalNow returns the current time (ctx.Now, else time.Now) in UTC as an
// RFC 3339 string with second precision, e.g. "2024-10-03T13:30:11Z" (the
// format of Kubernetes metav1.Time).
func evalNow(_ *call, ctx *Context) (any, error) {
	now := time.Now
	if ctx != nil && ctx.Now != nil {
		now = ctx.Now
	}
	return now().UTC().Format(time.RFC3339), nil
}
