package expression

import (
	"slices"
)

// Dialect selects the meaning of the operators whose meaning changed between
// Δ-controller and its successor (l7mp/dbsp). Operators outside that set mean
// the same in every dialect.
//
// The operators that differ, Δ-controller's meaning first, the successor's
// second (facts from each project's documentation and tests):
//
//   - @range n: [0, ..., n-1] / [1, ..., n] (the two-argument [start, end)
//     form is ours in both);
//   - @substring [s, a, b]: code points a to b-1 counted from 0 / b code
//     points from position a counted from 1 (a negative a counts from the
//     end);
//   - @hash: 6 base36 digits of the MD5 of the value's JSON / 16 hex digits
//     (the first 8 bytes) of its SHA-256;
//   - @div of two integers: exact (an integer when it divides evenly, else
//     a float) / truncated integer division;
//   - @rnd [min, max] of integers: min ≤ r < max / min ≤ r ≤ max (and
//     floats give a float);
//   - @sortBy [e, list]: e is a key computed per element / e is a
//     comparator of $$.a and $$.b giving -1, 0 or 1;
//   - @definedOr: exactly [x, default] / any number of arguments, the first
//     that is not null and does not fail;
//   - @noop x: x taken literally / null (x must be null or {}).
//
// The pipeline stages follow the dialect too (see pipeline.Options.Dialect):
// @unwind suffixes metadata.name with "-<index>" / leaves it alone, and
// @groupBy emits {key, values} / {key, values, documents}.
type Dialect string

const (
	// DialectDeltaController is Δ-controller's meaning, for controllers
	// written with `target:`. The zero Dialect means it too.
	DialectDeltaController Dialect = "deltacontroller"
	// DialectDBSP is the meaning of Δ-controller's successor (l7mp/dbsp),
	// for controllers written with `targets:`.
	DialectDBSP Dialect = "dbsp"
)

// Successor reports whether d is the successor's dialect (DialectDBSP).
func (d Dialect) Successor() bool { return d == DialectDBSP }

// String names the dialect for messages and traces: "deltacontroller" (also
// for the zero Dialect) or "dbsp".
func (d Dialect) String() string {
	if d == "" {
		return string(DialectDeltaController)
	}
	return string(d)
}

// ParseOptions configures ParseWith.
type ParseOptions struct {
	// Dialect selects the operator meanings; the zero value is
	// DialectDeltaController.
	Dialect Dialect
}

// successorOperators are the operators whose meaning in DialectDBSP differs
// from the table operators; filled in init with it.
var successorOperators map[string]*opDef

// lookupOperator returns the definition of operator name in dialect d.
func lookupOperator(name string, d Dialect) (*opDef, bool) {
	if d.Successor() {
		if def, ok := successorOperators[name]; ok {
			return def, true
		}
	}
	def, ok := operators[name]
	return def, ok
}

// operatorNames returns the names of the operators of every dialect,
// sorted.
func operatorNames() []string {
	names := make([]string, 0, len(operators))
	for k := range operators {
		names = append(names, k)
	}
	for k := range successorOperators {
		if _, ok := operators[k]; !ok {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	return names
}
