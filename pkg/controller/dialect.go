package controller

import (
	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/expression"
)

// DialectOf returns the expression dialect a controller's pipeline runs in
// (see expression.Dialect): Δ-controller's for a controller written with
// `target:`, as every controller is while the Controller type has no
// `targets:` field; a controller written in the successor's form
// (`targets:`) is to get expression.DialectDBSP.
func DialectOf(spec opv1a1.Controller) expression.Dialect {
	_ = spec
	return expression.DialectDeltaController
}
