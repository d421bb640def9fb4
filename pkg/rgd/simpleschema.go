package rgd

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// typeKind is the shape of a SimpleSchema type.
type typeKind int

const (
	kindAtomic typeKind = iota // string, integer, boolean, float (number)
	kindObject                 // object: any object, unknown fields kept
	kindSlice                  // []T
	kindMap                    // map[string]T
	kindNamed                  // a name resolved against spec.schema.types
)

// ssType is a parsed SimpleSchema type: an atomic type, object, a slice or a
// map of an element type, or a reference to a custom type by name.
type ssType struct {
	kind typeKind
	name string  // kindAtomic: the OpenAPI type; kindNamed: the type's name
	elem *ssType // kindSlice, kindMap
}

// marker is one `key=value` of a field string, value unquoted.
type marker struct {
	key, value string
}

// field is a parsed field string: "<type> | <marker> <marker> ...".
type field struct {
	typ     *ssType
	markers []marker
}

// maxTypeDepth bounds the nesting of []/map[string] in one type string
// (kro's limit is the same), so a hostile "[][][]...string" costs nothing.
const maxTypeDepth = 16

// atomicTypes maps SimpleSchema's atomic type names to OpenAPI types. kro
// names the decimal type float; OpenAPI calls it number.
var atomicTypes = map[string]string{
	"string":  "string",
	"integer": "integer",
	"boolean": "boolean",
	"float":   "number",
}

// markerKeys are the markers kro defines (its pkg/simpleschema markers and
// the SimpleSchema reference): anything else is an error.
var markerKeys = map[string]bool{
	"required": true, "default": true, "description": true,
	"minimum": true, "maximum": true, "validation": true, "enum": true,
	"immutable": true, "pattern": true, "uniqueItems": true,
	"minLength": true, "maxLength": true, "minItems": true, "maxItems": true,
	"listType": true, "listMapKey": true,
}

// parseField parses a SimpleSchema field string. The type is everything
// before the first "|"; the markers, after it, are whitespace-separated
// `key=value` pairs. A value may be double-quoted (backslash escapes \" and
// \\; other backslashes are kept) and may hold {...} or [...] with spaces
// (JSON defaults). Errors: an empty or malformed type, a marker without
// "=", an unknown marker, an unclosed quote or bracket.
func parseField(s string) (field, error) {
	typStr, markerStr, hasMarkers := strings.Cut(s, "|")
	t, err := parseType(strings.TrimSpace(typStr), 0)
	if err != nil {
		return field{}, err
	}
	f := field{typ: t}
	if hasMarkers {
		if f.markers, err = parseMarkers(markerStr); err != nil {
			return field{}, err
		}
	}
	return f, nil
}

// parseType parses a type string: an atomic name, object, []T,
// map[string]T, or any other word, taken as the name of a custom type.
func parseType(s string, depth int) (*ssType, error) {
	if depth > maxTypeDepth {
		return nil, fmt.Errorf("type nested more than %d levels deep", maxTypeDepth)
	}
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		if depth == 0 {
			return nil, errors.New("empty type")
		}
		return nil, errors.New("missing element type")
	case atomicTypes[s] != "":
		return &ssType{kind: kindAtomic, name: atomicTypes[s]}, nil
	case s == "object":
		return &ssType{kind: kindObject}, nil
	case strings.HasPrefix(s, "[]"):
		elem, err := parseType(s[2:], depth+1)
		if err != nil {
			return nil, err
		}
		return &ssType{kind: kindSlice, elem: elem}, nil
	case strings.HasPrefix(s, "map["):
		rest, ok := strings.CutPrefix(s, "map[string]")
		if !ok {
			return nil, fmt.Errorf("type %q: map keys must be string", s)
		}
		elem, err := parseType(rest, depth+1)
		if err != nil {
			return nil, err
		}
		return &ssType{kind: kindMap, elem: elem}, nil
	}
	if strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || strings.ContainsRune("[]{}\"'=,", r) }) {
		return nil, fmt.Errorf("malformed type %q", s)
	}
	return &ssType{kind: kindNamed, name: s}, nil
}

// parseMarkers splits the marker part of a field string into markers, in
// order. The scan is one pass over s: linear in its length.
func parseMarkers(s string) ([]marker, error) {
	var (
		out      []marker
		buf      strings.Builder
		key      string
		haveKey  bool
		inQuotes bool
		escaped  bool
		depth    int
	)
	flush := func() {
		out = append(out, marker{key: key, value: markerValue(buf.String())})
		buf.Reset()
		haveKey = false
	}
	for _, r := range s {
		switch {
		case inQuotes && escaped:
			escaped = false
			buf.WriteRune(r)
		case inQuotes && r == '\\':
			escaped = true
			buf.WriteRune(r)
		case r == '"':
			inQuotes = !inQuotes
			buf.WriteRune(r)
		case inQuotes:
			buf.WriteRune(r)
		case r == '=' && !haveKey && depth == 0:
			key = strings.TrimSpace(buf.String())
			if key == "" {
				return nil, errors.New("marker without a name before \"=\"")
			}
			if !markerKeys[key] {
				return nil, fmt.Errorf("unknown marker %q", key)
			}
			haveKey = true
			buf.Reset()
		case r == '{' || r == '[':
			depth++
			buf.WriteRune(r)
		case r == '}' || r == ']':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("unmatched %q", r)
			}
			buf.WriteRune(r)
		case unicode.IsSpace(r) && depth == 0:
			if haveKey {
				flush()
			} else if strings.TrimSpace(buf.String()) != "" {
				return nil, fmt.Errorf("marker %q has no value (want name=value)", strings.TrimSpace(buf.String()))
			}
		default:
			buf.WriteRune(r)
		}
	}
	switch {
	case inQuotes:
		return nil, errors.New("unclosed quote")
	case depth > 0:
		return nil, errors.New("unclosed bracket")
	case haveKey:
		flush()
	case strings.TrimSpace(buf.String()) != "":
		return nil, fmt.Errorf("marker %q has no value (want name=value)", strings.TrimSpace(buf.String()))
	}
	return out, nil
}

// markerValue unquotes a value written in double quotes ("a b" is a b,
// \" is ", \\ is \, any other backslash stays); any other value is trimmed.
func markerValue(v string) string {
	v = strings.TrimSpace(v)
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return v
	}
	var b strings.Builder
	escaped := false
	for _, r := range v[1 : len(v)-1] {
		switch {
		case escaped:
			if r != '"' && r != '\\' {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
			escaped = false
		case r == '\\':
			escaped = true
		default:
			b.WriteRune(r)
		}
	}
	if escaped {
		b.WriteByte('\\')
	}
	return b.String()
}
