package expression

import (
	"math/rand/v2"
	"time"
)

// Expression is a parsed expression. It is immutable and safe for concurrent
// evaluation.
type Expression interface {
	// Eval evaluates the expression in ctx. Values use the JSON data model:
	// nil, bool, int64, float64, string, []any, map[string]any.
	Eval(ctx *Context) (any, error)
	// Path is the location of the expression in the spec, e.g.
	// `spec.controllers[0].pipeline["@project"].metadata.name`.
	Path() string
}

// Context carries the subjects of an evaluation.
type Context struct {
	// Subject is the global subject, addressed as `$`.
	Subject any
	// Local is the local subject inside list operators, addressed as `$$`.
	Local any
	// Now returns the current time (defaults to time.Now).
	Now func() time.Time
	// Rand is the random source of @rnd (defaults to a global source).
	Rand *rand.Rand
	// Budget bounds the work of the evaluation and carries the context
	// that cancels it (see Budget and Limits). When nil, each operator
	// call, list literal or map literal evaluated with this context runs
	// under a fresh budget of DefaultLimits.
	Budget *Budget
}
