package watchcodec

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends the JSON encoding of v to buf: the bytes
// encoding/json's Marshal makes of v (object keys sorted, <, > and &
// escaped as \u003c, \u003e and \u0026, U+2028 and U+2029 escaped,
// invalid UTF-8 as U+FFFD, floats in the shortest form that reads back
// the same, exponent form below 1e-6 and from 1e21), for the values an
// unstructured object holds (map[string]any, []any, string, bool, nil,
// int64, float64 and the other Go numbers, json.Number) walked without
// reflection; any other value is encoded by encoding/json. It returns an
// error where Marshal would (a NaN or infinite float, an invalid
// json.Number, a value encoding/json refuses) and a nesting deeper than
// maxDepth.
func AppendJSON(buf []byte, v any) ([]byte, error) {
	return appendValue(buf, v, 0)
}

// errDepth is AppendJSON's error for a value nested deeper than maxDepth.
type errDepth struct{}

func (errDepth) Error() string { return "json: value nested too deeply" }

func appendValue(buf []byte, v any, depth int) ([]byte, error) {
	if depth > maxDepth {
		return buf, errDepth{}
	}
	switch x := v.(type) {
	case nil:
		return append(buf, "null"...), nil
	case string:
		return appendString(buf, x), nil
	case bool:
		if x {
			return append(buf, "true"...), nil
		}
		return append(buf, "false"...), nil
	case int64:
		return strconv.AppendInt(buf, x, 10), nil
	case int:
		return strconv.AppendInt(buf, int64(x), 10), nil
	case int32:
		return strconv.AppendInt(buf, int64(x), 10), nil
	case float64:
		return appendFloat(buf, x, 64)
	case map[string]any:
		if x == nil {
			return append(buf, "null"...), nil
		}
		var small [16]string
		keys := small[:0]
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		buf = append(buf, '{')
		for i, k := range keys {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendString(buf, k)
			buf = append(buf, ':')
			var err error
			if buf, err = appendValue(buf, x[k], depth+1); err != nil {
				return buf, err
			}
		}
		return append(buf, '}'), nil
	case []any:
		if x == nil {
			return append(buf, "null"...), nil
		}
		buf = append(buf, '[')
		for i, e := range x {
			if i > 0 {
				buf = append(buf, ',')
			}
			var err error
			if buf, err = appendValue(buf, e, depth+1); err != nil {
				return buf, err
			}
		}
		return append(buf, ']'), nil
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return buf, err
		}
		return append(buf, b...), nil
	}
}

// appendFloat writes f as encoding/json does: 'f' format, or 'e' format
// below 1e-6 and from 1e21 with a two-digit negative exponent shortened
// (1e-07 is 1e-7).
func appendFloat(buf []byte, f float64, bits int) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return buf, &json.UnsupportedValueError{Str: strconv.FormatFloat(f, 'g', -1, bits)}
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	start := len(buf)
	buf = strconv.AppendFloat(buf, f, format, -1, bits)
	if format == 'e' {
		// clean up e-09 to e-9
		n := len(buf) - start
		if n >= 4 && buf[len(buf)-4] == 'e' && buf[len(buf)-3] == '-' && buf[len(buf)-2] == '0' {
			buf[len(buf)-2] = buf[len(buf)-1]
			buf = buf[:len(buf)-1]
		}
	}
	return buf, nil
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string the way encoding/json does with
// HTML escaping on.
func appendString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch b {
			case '\\', '"':
				buf = append(buf, '\\', b)
			case '\b':
				buf = append(buf, '\\', 'b')
			case '\f':
				buf = append(buf, '\\', 'f')
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			buf = append(buf, s[start:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}
