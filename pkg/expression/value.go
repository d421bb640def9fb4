package expression

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Normalize converts a Go JSON-like value into the data model of this
// package: nil, bool, int64, float64, string, []any and map[string]any.
//
//   - Integers of any Go type become int64 (a uint64 above math.MaxInt64
//     becomes float64); float32 and float64 become float64 and stay float64
//     even when integral.
//   - json.Number becomes int64 when it is an integer literal that fits,
//     otherwise float64; an invalid json.Number stays a string.
//   - Slices and arrays become []any ([]byte becomes its standard base64
//     string, as encoding/json does); maps with string keys (including
//     map[any]any whose keys are all strings) become map[string]any;
//     pointers and interfaces are dereferenced.
//   - Structs and other values are converted through encoding/json; values
//     that cannot be represented (channels, functions, maps with non-string
//     keys) become nil.
//
// Values already in the model are returned as they are, without copying.
func Normalize(v any) any {
	n, _, err := normalize(v, 0)
	if err != nil {
		return nil
	}
	return n
}

const maxNormalizeDepth = 10000

// normalize returns the canonical form of v and whether it differs from v.
func normalize(v any, depth int) (any, bool, error) {
	if depth > maxNormalizeDepth {
		return nil, true, fmt.Errorf("value nested too deeply")
	}
	switch x := v.(type) {
	case nil, bool, int64, float64, string:
		return v, false, nil
	case int:
		return int64(x), true, nil
	case int8:
		return int64(x), true, nil
	case int16:
		return int64(x), true, nil
	case int32:
		return int64(x), true, nil
	case uint:
		return normUint(uint64(x)), true, nil
	case uint8:
		return int64(x), true, nil
	case uint16:
		return int64(x), true, nil
	case uint32:
		return int64(x), true, nil
	case uint64:
		return normUint(x), true, nil
	case float32:
		f, err := strconv.ParseFloat(strconv.FormatFloat(float64(x), 'g', -1, 32), 64)
		if err != nil {
			f = float64(x)
		}
		return f, true, nil
	case json.Number:
		if n, ok := numberFromJSON(x); ok {
			return n, true, nil
		}
		return string(x), true, nil
	case []any:
		var out []any
		for i, e := range x {
			n, changed, err := normalize(e, depth+1)
			if err != nil {
				return nil, true, err
			}
			if changed && out == nil {
				out = make([]any, len(x))
				copy(out, x[:i])
			}
			if out != nil {
				out[i] = n
			}
		}
		if out == nil {
			return x, false, nil
		}
		return out, true, nil
	case map[string]any:
		var out map[string]any
		for k, e := range x {
			n, changed, err := normalize(e, depth+1)
			if err != nil {
				return nil, true, err
			}
			if changed && out == nil {
				out = make(map[string]any, len(x))
				for k2, e2 := range x {
					out[k2] = e2
				}
			}
			if out != nil {
				out[k] = n
			}
		}
		if out == nil {
			return x, false, nil
		}
		return out, true, nil
	case []byte:
		return base64.StdEncoding.EncodeToString(x), true, nil
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			ks, ok := k.(string)
			if !ok {
				return nil, true, fmt.Errorf("map key %v is not a string", k)
			}
			n, _, err := normalize(e, depth+1)
			if err != nil {
				return nil, true, err
			}
			out[ks] = n
		}
		return out, true, nil
	}
	return normalizeReflect(reflect.ValueOf(v), depth)
}

func normUint(u uint64) any {
	if u > math.MaxInt64 {
		return float64(u)
	}
	return int64(u)
}

func numberFromJSON(n json.Number) (any, bool) {
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return i, true
	}
	if f, err := strconv.ParseFloat(string(n), 64); err == nil {
		return f, true
	}
	return nil, false
}

func normalizeReflect(rv reflect.Value, depth int) (any, bool, error) {
	switch rv.Kind() {
	case reflect.Invalid:
		return nil, true, nil
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil, true, nil
		}
		n, _, err := normalize(rv.Elem().Interface(), depth+1)
		return n, true, err
	case reflect.Bool:
		return rv.Bool(), true, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), true, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return normUint(rv.Uint()), true, nil
	case reflect.Float32, reflect.Float64:
		return rv.Float(), true, nil
	case reflect.String:
		return rv.String(), true, nil
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return nil, true, nil
		}
		out := make([]any, rv.Len())
		for i := range out {
			n, _, err := normalize(rv.Index(i).Interface(), depth+1)
			if err != nil {
				return nil, true, err
			}
			out[i] = n
		}
		return out, true, nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return nil, true, fmt.Errorf("map key type %s is not string", rv.Type().Key())
		}
		if rv.IsNil() {
			return nil, true, nil
		}
		out := make(map[string]any, rv.Len())
		it := rv.MapRange()
		for it.Next() {
			n, _, err := normalize(it.Value().Interface(), depth+1)
			if err != nil {
				return nil, true, err
			}
			out[it.Key().String()] = n
		}
		return out, true, nil
	case reflect.Struct:
		if !rv.CanInterface() {
			return nil, true, fmt.Errorf("cannot represent %s", rv.Type())
		}
		b, err := json.Marshal(rv.Interface())
		if err != nil {
			return nil, true, err
		}
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.UseNumber()
		var out any
		if err := dec.Decode(&out); err != nil {
			return nil, true, err
		}
		n, _, err := normalize(out, depth+1)
		return n, true, err
	}
	return nil, true, fmt.Errorf("cannot represent value of type %s", rv.Type())
}

// shallow makes sure a value taken from a subject is in the model. It is a
// no-op (no allocation) for model values, which is the common case.
func shallow(v any) any {
	switch v.(type) {
	case nil, bool, int64, float64, string, []any, map[string]any:
		return v
	}
	return Normalize(v)
}

// typeName is the name of a value's type in error messages.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case string:
		return "string"
	case []any:
		return "list"
	case map[string]any:
		return "map"
	}
	if _, isInt, ok := numberOf(v); ok {
		if isInt {
			return "int"
		}
		return "float"
	}
	return fmt.Sprintf("%T", v)
}

// number is a numeric value: i when isInt, else f.
type number struct {
	i     int64
	f     float64
	isInt bool
}

func (n number) float() float64 {
	if n.isInt {
		return float64(n.i)
	}
	return n.f
}

func (n number) value() any {
	if n.isInt {
		return n.i
	}
	return n.f
}

func intNum(i int64) number     { return number{i: i, isInt: true} }
func floatNum(f float64) number { return number{f: f} }

// numberOf returns v as a number; ok is false when v is not numeric.
func numberOf(v any) (n number, isInt bool, ok bool) {
	switch x := v.(type) {
	case int64:
		return intNum(x), true, true
	case float64:
		return floatNum(x), false, true
	case int:
		return intNum(int64(x)), true, true
	case int32:
		return intNum(int64(x)), true, true
	case int16:
		return intNum(int64(x)), true, true
	case int8:
		return intNum(int64(x)), true, true
	case uint8:
		return intNum(int64(x)), true, true
	case uint16:
		return intNum(int64(x)), true, true
	case uint32:
		return intNum(int64(x)), true, true
	case uint:
		if uint64(x) > math.MaxInt64 {
			return floatNum(float64(x)), false, true
		}
		return intNum(int64(x)), true, true
	case uint64:
		if x > math.MaxInt64 {
			return floatNum(float64(x)), false, true
		}
		return intNum(int64(x)), true, true
	case float32:
		return floatNum(float64(x)), false, true
	case json.Number:
		switch n := Normalize(x).(type) {
		case int64:
			return intNum(n), true, true
		case float64:
			return floatNum(n), false, true
		}
	}
	return number{}, false, false
}

// compareNumbers orders numbers by value; int64 and float64 are compared
// exactly (no rounding of large integers). NaN sorts before every other
// number and equals itself, as in cmp.Compare.
func compareNumbers(a, b number) int {
	switch {
	case a.isInt && b.isInt:
		return cmp.Compare(a.i, b.i)
	case !a.isInt && !b.isInt:
		return cmp.Compare(a.f, b.f)
	case a.isInt:
		return compareIntFloat(a.i, b.f)
	default:
		return -compareIntFloat(b.i, a.f)
	}
}

func compareIntFloat(a int64, b float64) int {
	switch {
	case math.IsNaN(b):
		return 1
	case b >= 9223372036854775808.0: // 2^63
		return -1
	case b < -9223372036854775808.0:
		return 1
	}
	t := math.Trunc(b)
	bi := int64(t)
	if a != bi {
		return cmp.Compare(a, bi)
	}
	return cmp.Compare(t, b)
}

// DeepEqual reports whether a and b are equal JSON values. Numbers compare
// by value regardless of representation (int64(1) equals float64(1)), lists
// element-wise, maps key-wise; values outside the model are normalized
// first (see Normalize).
func DeepEqual(a, b any) bool { return deepEqual(a, b, nil) }

// deepEqual is DeepEqual; pay, when set, is told the length of every list
// and map about to be compared and stops the comparison (false) by
// returning false.
func deepEqual(a, b any, pay func(n int) bool) bool {
	if needsNormalize(a) {
		a = Normalize(a)
	}
	if needsNormalize(b) {
		b = Normalize(b)
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) || pay != nil && !pay(len(x)) {
			return false
		}
		for i := range x {
			if !deepEqual(x[i], y[i], pay) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) || pay != nil && !pay(len(x)) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !deepEqual(xv, yv, pay) {
				return false
			}
		}
		return true
	}
	if na, _, ok := numberOf(a); ok {
		nb, _, ok := numberOf(b)
		return ok && compareNumbers(na, nb) == 0
	}
	return false
}

// needsNormalize reports whether v is outside the model and not a number
// (numbers of any Go type are handled directly).
func needsNormalize(v any) bool {
	switch v.(type) {
	case nil, bool, string, []any, map[string]any:
		return false
	}
	_, _, isNum := numberOf(v)
	return !isNum
}

// Compare orders two values: numbers numerically (int64 and float64 compare
// by value), strings lexically by bytes (UTF-8 code point order). It returns
// -1, 0 or +1, and an error for any other combination of types, including
// mixed numbers and strings.
func Compare(a, b any) (int, error) {
	if sa, ok := a.(string); ok {
		if sb, ok := b.(string); ok {
			return strings.Compare(sa, sb), nil
		}
	} else if na, _, ok := numberOf(a); ok {
		if nb, _, ok := numberOf(b); ok {
			return compareNumbers(na, nb), nil
		}
	}
	return 0, fmt.Errorf("cannot compare %s and %s", typeName(a), typeName(b))
}

// formatFloat renders f in the shortest form that round-trips, using the
// same rules as encoding/json (ECMAScript number-to-string): plain decimal
// for 1e-6 <= |f| < 1e21, exponent form otherwise. NaN and infinities are
// rendered as "NaN", "+Inf" and "-Inf".
func formatFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	s := strconv.FormatFloat(f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		n := len(s)
		if n >= 4 && s[n-4] == 'e' && s[n-3] == '-' && s[n-2] == '0' {
			s = s[:n-2] + s[n-1:]
		}
	}
	return s
}

// toString implements the @string conversion.
func toString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	case bool:
		return strconv.FormatBool(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return formatFloat(x)
	}
	if n, _, ok := numberOf(v); ok {
		if n.isInt {
			return strconv.FormatInt(n.i, 10)
		}
		return formatFloat(n.f)
	}
	var b strings.Builder
	writeCanonical(&b, v, 0)
	return b.String()
}

// canonicalJSON renders v as compact JSON with map keys sorted.
func canonicalJSON(v any) string {
	var b strings.Builder
	writeCanonical(&b, v, 0)
	return b.String()
}

// writeCanonical writes compact JSON with sorted map keys (the canonical
// form used by @string and @hash). Non-finite floats, which JSON cannot
// represent, are written as the strings "NaN", "+Inf" and "-Inf". Writing
// stops once b holds more than maxStringLen bytes, whose callers refuse
// such a result: a value whose lists and maps are shared many times over
// costs at most that much to render.
func writeCanonical(b *strings.Builder, v any, depth int) {
	if depth > maxNormalizeDepth {
		b.WriteString("null")
		return
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case string:
		writeJSONString(b, x)
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			writeJSONString(b, formatFloat(x))
		} else {
			b.WriteString(formatFloat(x))
		}
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if b.Len() > maxStringLen {
				return // the caller refuses the result as too long
			}
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonical(b, e, depth+1)
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if b.Len() > maxStringLen {
				return // the caller refuses the result as too long
			}
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, k)
			b.WriteByte(':')
			writeCanonical(b, x[k], depth+1)
		}
		b.WriteByte('}')
	default:
		n := Normalize(v)
		if needsNormalize(n) {
			b.WriteString("null")
			return
		}
		if nn, _, ok := numberOf(n); ok {
			writeCanonical(b, nn.value(), depth+1)
			return
		}
		writeCanonical(b, n, depth+1)
	}
}

const hexDigits = "0123456789abcdef"

// writeJSONString writes s as a JSON string (RFC 8259), escaping only what
// JSON requires; invalid UTF-8 becomes U+FFFD.
func writeJSONString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"':
				b.WriteString(`\"`)
			case c == '\\':
				b.WriteString(`\\`)
			case c == '\n':
				b.WriteString(`\n`)
			case c == '\r':
				b.WriteString(`\r`)
			case c == '\t':
				b.WriteString(`\t`)
			case c < 0x20:
				b.WriteString(`\u00`)
				b.WriteByte(hexDigits[c>>4])
				b.WriteByte(hexDigits[c&0xf])
			default:
				b.WriteByte(c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString(`\ufffd`)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	b.WriteByte('"')
}

// deepCopy copies lists and maps so that callers may modify the result.
func deepCopy(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	}
	return v
}
