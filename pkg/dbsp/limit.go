package dbsp

import "fmt"

// LimitError is the error of a step whose output delta would hold more
// entries than the operator's limit (see SetMaxOutput). An operator that
// reports it stops producing output as soon as the output exceeds the limit,
// so at most limit+1 entries are ever built; it returns no output and leaves
// its state as it was before the step.
type LimitError struct {
	// Limit is the most entries the output delta of one step may hold.
	Limit int
	// Count is how many entries the step would have emitted, when the
	// operator can tell without building them (FlatMap with a SizeFunc);
	// 0 when unknown.
	Count int
}

// Error implements error.
func (e *LimitError) Error() string {
	if e.Count > e.Limit {
		return fmt.Sprintf("the step would emit %d entries, over the limit of %d", e.Count, e.Limit)
	}
	return fmt.Sprintf("the step emits more than %d entries (the limit)", e.Limit)
}

// Limited is implemented by operators that can bound the output of a step
// while producing it: FlatMap and Join, the operators whose output may be
// much larger than their input delta. SetMaxOutput(n) makes every later
// Step fail with a *LimitError, state untouched, as soon as its consolidated
// output holds more than n entries; n <= 0 removes the bound. Snapshot is
// never bounded.
type Limited interface {
	SetMaxOutput(n int)
}

// over reports whether out holds more entries than max (max <= 0: no bound).
func over(out *ZSet, max int) bool { return max > 0 && out.Len() > max }
