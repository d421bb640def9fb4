// Package diff previews what running operators would change in a live
// cluster, without writing anything: the `dctl diff` command.
//
// Run lists, once and read-only, every object of the kinds the operators'
// controllers read and write, runs the controllers on them as a manager
// that (re)starts with these operators runs them (operator.Offline over a
// store seeded with the listed objects: the first list as one batch, then
// a resync that removes what a controller wrote before and no longer
// outputs), and turns each write the controllers make into the API
// server's dry-run request (dryRun=All: the server validates, defaults,
// merges and answers, and persists nothing). The answers are what the run
// reads back, so later decisions see the server's defaults. The result
// compares each target object as listed with its state after the run:
// created, updated and deleted objects, rendered as `kubectl diff` renders
// them (WriteUnified).
package diff
