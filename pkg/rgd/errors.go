package rgd

import (
	"fmt"

	"github.com/dcontroller/dcontroller/pkg/expression"
)

// Error is a failure to compile a ResourceGraphDefinition, tied to the place
// in the RGD that caused it. Path is the field path from the RGD's root
// (`spec.schema.spec.replicas`, `spec.resources[2].template.spec.replicas`),
// built with Field and Index; Err is the cause. It renders as
// `<path>: <cause>`. Use errors.As to retrieve it.
type Error struct {
	Path string
	Err  error
}

// Error implements error.
func (e *Error) Error() string {
	msg := "<nil>"
	if e.Err != nil {
		msg = e.Err.Error()
	}
	if e.Path == "" {
		return msg
	}
	return e.Path + ": " + msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

func errorf(path, format string, args ...any) *Error {
	return &Error{Path: path, Err: fmt.Errorf(format, args...)}
}

// Field returns the path of member key of the object at parent: `parent.key`
// for an identifier key, `parent["key"]` for any other (the notation of
// pkg/expression's spec paths).
func Field(parent, key string) string { return expression.Field(parent, key) }

// Index returns the path of element i of the list at parent: `parent[i]`.
func Index(parent string, i int) string { return expression.Index(parent, i) }
