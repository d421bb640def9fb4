package operator

import opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"

// maxDeltaEntries returns the bound of the entries one pipeline stage of
// op may emit for one change: the operator's spec.limits.maxDeltaEntries,
// else def (the manager's default; 0 means the controller package's
// default, negative no bound).
func maxDeltaEntries(op *opv1a1.Operator, def int) int {
	if l := op.Spec.Limits; l != nil && l.MaxDeltaEntries != nil && *l.MaxDeltaEntries > 0 {
		return int(*l.MaxDeltaEntries)
	}
	return def
}
