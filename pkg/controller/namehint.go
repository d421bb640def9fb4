package controller

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// invalidNameHint says what to write when a target object's metadata.name
// is refused (views follow the API server's rule for object names, which
// operators written for Δ-controller may not); "" for other errors.
func invalidNameHint(err error) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsInvalid(err) || status.Status().Details == nil {
		return ""
	}
	for _, c := range status.Status().Details.Causes {
		if c.Field == "metadata.name" {
			return `; make the pipeline's metadata.name a lower-case name of letters, digits, '-' and '.', e.g. {"@lower": <the name expression>}`
		}
	}
	return ""
}
