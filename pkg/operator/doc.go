// Package operator loads Operator specs and runs their controllers. Offline
// runs every controller of a set of operators against an in-memory store until
// nothing changes any more; it backs `dctl eval`.
package operator
