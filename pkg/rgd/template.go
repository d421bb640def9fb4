package rgd

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// exprOpen and exprClose delimit a CEL expression in a ResourceGraphDefinition
// value (kro's "${" and "}").
const (
	exprOpen  = "${"
	exprClose = '}'
)

// maxScanSteps bounds the characters one ScanString call may look at. An
// unterminated "${" is literal text and the scan resumes right after its "$"
// (as kro does), so a string made of many unterminated openers costs more
// than one pass; past this bound the string is refused.
const maxScanSteps = 1 << 22

// maxTemplateDepth bounds the nesting of maps and lists FindFields walks.
const maxTemplateDepth = 100

// ErrNestedExpression is returned (wrapped, with the offset) for a "${" inside
// an expression that is not inside a string literal of that expression.
var ErrNestedExpression = errors.New(`nested "${" outside a string literal`)

// Part is one piece of a scanned string: literal text, or the CEL source
// between "${" and its matching "}".
type Part struct {
	// Expr is true when Text is CEL source.
	Expr bool
	// Text is the literal text, or the CEL source without its delimiters.
	Text string
	// Offset is the byte offset of the part in the scanned string (of the
	// "${" for an expression).
	Offset int
}

// ScanString splits s into literal and expression parts, in order. An
// expression starts at "${" and ends at the "}" that balances it: braces
// inside the expression are counted (so map literals like
// ${{"a": 1}} work) except inside CEL string literals, which are delimited by
// '"' or '\” with backslash escapes; a "${" inside a string literal is text
// of that literal (kro's way to write a literal "${VAR}" is ${"${VAR}"}).
// There is no other escape ("$${" is "$" followed by an expression). An
// expression that never closes is literal text. A "${" inside an expression
// but outside its string literals is an error wrapping ErrNestedExpression.
//
// Adjacent literal text is returned as one part; a string without "${" is one
// literal part (none for the empty string). The rules follow kro's expression
// delimiters (website/docs/docs/concepts/rgd/03-cel-expressions.md); unlike
// kro, single-quoted CEL strings are recognised too, so ${'}'} is the
// expression '}'.
func ScanString(s string) ([]Part, error) {
	var parts []Part
	lit, pos, steps := 0, 0, 0
	for pos < len(s) {
		i := strings.Index(s[pos:], exprOpen)
		if i < 0 {
			break
		}
		start := pos + i
		end, err := matchClose(s, start+len(exprOpen), &steps)
		if err != nil {
			return nil, err
		}
		if end < 0 {
			// Unterminated: literal text; look for the next opener.
			pos = start + 1
			continue
		}
		if start > lit {
			parts = append(parts, Part{Text: s[lit:start], Offset: lit})
		}
		parts = append(parts, Part{Expr: true, Text: s[start+len(exprOpen) : end], Offset: start})
		pos = end + 1
		lit = pos
	}
	if lit < len(s) {
		parts = append(parts, Part{Text: s[lit:], Offset: lit})
	}
	return parts, nil
}

// matchClose returns the index of the "}" closing an expression whose source
// starts at from, or -1 when the string ends first.
func matchClose(s string, from int, steps *int) (int, error) {
	depth := 1
	var quote byte
	for j := from; j < len(s); j++ {
		*steps++
		if *steps > maxScanSteps {
			return 0, fmt.Errorf("string too long or with too many unterminated %q to scan (more than %d steps)", exprOpen, maxScanSteps)
		}
		c := s[j]
		if quote != 0 {
			switch c {
			case '\\':
				j++
			case quote:
				quote = 0
			}
			continue
		}
		switch c {
		case '"', '\'':
			quote = c
		case '{':
			depth++
		case exprClose:
			depth--
			if depth == 0 {
				return j, nil
			}
		case '$':
			if j+1 < len(s) && s[j+1] == '{' {
				return 0, fmt.Errorf("offset %d: %w", j, ErrNestedExpression)
			}
		}
	}
	return -1, nil
}

// TemplateField is one string value of a template that holds at least one
// expression.
type TemplateField struct {
	// Path is where the value sits, from the root given to FindFields, in
	// the notation of Field and Index
	// (spec.resources[2].template.metadata.labels["app.kubernetes.io/name"]).
	Path string
	// Source is the string as written.
	Source string
	// Parts are the scanned parts of Source.
	Parts []Part
	// Standalone is true when Source is exactly one expression: its value
	// replaces the field and keeps its CEL type (an int stays an int, a map a
	// map). Otherwise the field is a string template: the concatenation of its
	// literal parts and expression values, each of which must be a string.
	Standalone bool
}

// CEL returns the single CEL expression that computes the field's value: the
// expression itself when standalone, else the concatenation
// "lit" + (expr) + "lit" ... of the parts, so a non-string value in a string
// template is a CEL "no such overload" error, as in kro.
func (f *TemplateField) CEL() string {
	if f.Standalone {
		return f.Parts[0].Text
	}
	var b strings.Builder
	for i, p := range f.Parts {
		if i > 0 {
			b.WriteString(" + ")
		}
		if p.Expr {
			b.WriteString("(")
			b.WriteString(p.Text)
			b.WriteString(")")
		} else {
			b.WriteString(strconv.Quote(p.Text))
		}
	}
	return b.String()
}

// Expressions returns the CEL source of each expression of the field, in
// order.
func (f *TemplateField) Expressions() []string {
	var out []string
	for _, p := range f.Parts {
		if p.Expr {
			out = append(out, p.Text)
		}
	}
	return out
}

// ParseField scans one string value at path. It returns nil (and no error)
// when the string holds no expression. Errors are *Error at path.
func ParseField(path, s string) (*TemplateField, error) {
	parts, err := ScanString(s)
	if err != nil {
		return nil, &Error{Path: path, Err: err}
	}
	hasExpr := false
	for _, p := range parts {
		if p.Expr {
			hasExpr = true
			break
		}
	}
	if !hasExpr {
		return nil, nil
	}
	return &TemplateField{
		Path:       path,
		Source:     s,
		Parts:      parts,
		Standalone: len(parts) == 1,
	}, nil
}

// ParseStandalone returns the CEL source of s, which must be exactly one
// expression (kro's rule for includeWhen, readyWhen, forEach and status
// conditions; a trailing newline from a YAML block scalar breaks it, use
// "|-"). Errors are *Error at path.
func ParseStandalone(path, s string) (string, error) {
	f, err := ParseField(path, s)
	if err != nil {
		return "", err
	}
	if f == nil || !f.Standalone {
		return "", errorf(path, "must be exactly one ${...} expression, got %q", s)
	}
	return f.Parts[0].Text, nil
}

// FindFields walks a decoded JSON/YAML value (map[string]any, []any and
// scalars) and returns every string value holding an expression, with paths
// starting at root (built with Field and Index). Map keys are visited in sorted order, so the result is
// stable; keys themselves are never expressions (kro does not evaluate them).
// Errors are *Error with the path of the value that caused them.
func FindFields(v any, root string) ([]TemplateField, error) {
	var out []TemplateField
	err := findFields(v, root, 0, &out)
	return out, err
}

func findFields(v any, path string, depth int, out *[]TemplateField) error {
	if depth > maxTemplateDepth {
		return errorf(path, "nested more than %d levels deep", maxTemplateDepth)
	}
	switch x := v.(type) {
	case string:
		f, err := ParseField(path, x)
		if err != nil {
			return err
		}
		if f != nil {
			*out = append(*out, *f)
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if err := findFields(x[k], Field(path, k), depth+1, out); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range x {
			if err := findFields(e, Index(path, i), depth+1, out); err != nil {
				return err
			}
		}
	}
	return nil
}
