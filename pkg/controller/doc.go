// Package controller runs one declarative controller: it turns change events
// of its sources into Z-set deltas, feeds them through the compiled pipeline,
// and hands each output delta to the target of its name, which writes it
// (Updater, Patcher or Applier) through a Client, making no write when the
// target already holds the desired state.
//
// Files by concern: controller.go (the Controller, its spec and its
// accessors), change.go (the path of a change: batch, deltas, pipeline,
// outputs by target, with its undo and limits), target.go (one target: its
// outputs, syncs, failed keys and counters), updater.go, patcher.go and
// applier.go (the write path of each target type), written.go, managed.go
// and patchrecord.go (the record of what a target wrote), drift.go (drift
// repair: restores, owner conflicts, contested objects, Resync).
package controller
