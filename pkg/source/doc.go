// Package source holds what a controller needs to know about its sources
// beyond their kind: change predicates (which update events pass) and the
// parameters of Periodic sources.
package source
