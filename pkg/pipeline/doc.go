// Package pipeline compiles a dcontroller pipeline spec into an incremental
// dbsp circuit.
//
// A pipeline is a MongoDB-style aggregation pipeline over Kubernetes objects
// (decoded JSON documents): one stage (a single-key map such as
// {"@select": ...}) or a list of stages applied in order. The stages are
// @join (inner join of several sources into compound documents keyed by
// source kind), @select, @project, @unwind (alias @demux), @gather (alias
// @mux), @groupBy and @distinct; their arguments are expressions of package
// expression, parsed once at compile time.
//
// A compiled Pipeline is a dbsp circuit: Process feeds it the changes
// (Z-set deltas) of the source collections and returns the change of the
// output collection, doing work proportional to the change; Evaluate is its
// snapshot twin that computes the whole output from whole inputs. For
// deterministic expressions the integral of Process outputs always equals
// Evaluate of the integrated inputs. A @project over the source objects
// (only @select before it, no @join) remembers the result it gave each
// live object, so an update evaluates it once, and it retracts exactly what
// it emitted even when it reads the clock (@now) or draws (@rnd).
package pipeline
