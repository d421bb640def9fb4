package expression

import (
	"fmt"
	"strconv"
)

// Error is the error type of every parse and evaluation failure in this
// package. Path is the location of the offending expression in the spec (see
// Field and Index), Op the operator being parsed or evaluated (e.g. "@len"),
// empty when the failure is not tied to an operator, and Err the cause.
//
// Error renders as `<path>: <op>: <cause>`, omitting the empty parts, e.g.
//
//	spec.x["@len"]: @len: argument must be a list, string or map, got bool
//
// Use errors.As to retrieve it.
type Error struct {
	Path string
	Op   string
	Err  error
}

// Error implements error.
func (e *Error) Error() string {
	msg := "<nil>"
	if e.Err != nil {
		msg = e.Err.Error()
	}
	if e.Op != "" {
		msg = e.Op + ": " + msg
	}
	if e.Path != "" {
		msg = e.Path + ": " + msg
	}
	return msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

func newError(path, op string, format string, args ...any) *Error {
	return &Error{Path: path, Op: op, Err: fmt.Errorf(format, args...)}
}

// Field returns the spec path of the member key of the object at parent.
// Keys that are identifiers ([A-Za-z_][A-Za-z0-9_]*) are appended as `.key`
// (or just `key` when parent is empty); any other key is appended as a quoted
// bracket selector, e.g. Field("pipeline", "@project") is
// `pipeline["@project"]` and Field(`pipeline["@project"]`, "metadata") is
// `pipeline["@project"].metadata`.
func Field(parent, key string) string {
	if isIdentifier(key) {
		if parent == "" {
			return key
		}
		return parent + "." + key
	}
	return parent + "[" + strconv.Quote(key) + "]"
}

// Index returns the spec path of element i of the list at parent: `parent[i]`.
func Index(parent string, i int) string {
	return parent + "[" + strconv.Itoa(i) + "]"
}

func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
