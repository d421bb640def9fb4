// Package dbsp implements Z-sets and the incremental operators of DBSP
// (Budiu, McSherry, Ryzhyk, Tannen: "DBSP: Automatic Incremental View
// Maintenance for Rich Query Languages", VLDB 2023).
//
// A Z-set (ZSet) is a finite map from documents to non-zero integer weights: a
// multiset in which elements may also appear a negative number of times. A
// change to a collection is itself a Z-set (a delta): an update of document
// old to new is {old: -1, new: +1}. Documents use the JSON data model (nil,
// bool, int64, float64, string, []any, map[string]any) and are identified by
// deep value equality, see Equal and Hash.
//
// The package provides the stream operators of the paper, each named as
// there: Integrate (I), Differentiate (D) and Delay (z^-1); the lifted linear
// operators Map, Filter and FlatMap, which act on deltas directly; and the
// incremental forms of the non-linear operators Distinct, Join (bilinear) and
// GroupBy (grouped aggregation). Every incremental operator has a Snapshot
// method, its snapshot twin, that recomputes the result from whole
// (integrated) inputs without touching the operator's state; the property
// tests check that the integral of the Step outputs equals the Snapshot of
// the integral of the inputs at every step.
//
// Documents stored in Z-sets and passed through operators are treated as
// immutable values: neither this package nor its callers may modify a
// document after it has been inserted into a Z-set.
//
// The package knows nothing of Kubernetes or of the expression language: the
// functions that operators apply are plain Go functions.
package dbsp
