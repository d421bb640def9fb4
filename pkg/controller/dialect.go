package controller

import (
	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/expression"
)

// DialectOf returns the expression dialect a controller's pipeline runs in
// (see expression.Dialect): Δ-controller's for a controller written with
// `target:`, and expression.DialectDBSP for one written in the successor's
// form (`targets:`).
func DialectOf(spec opv1a1.Controller) expression.Dialect {
	if spec.Targets != nil {
		return expression.DialectDBSP
	}
	return expression.DialectDeltaController
}
