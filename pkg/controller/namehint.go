package controller

import (
	"errors"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// invalidNameHint says what to write when a target object's metadata.name
// is refused for not being a lower-case DNS name (RFC 1123 or RFC 1035),
// the rule of most native kinds and custom resources, which names built
// for views (upper case allowed, see object.ValidateViewName) may break;
// "" for other errors.
func invalidNameHint(err error) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsInvalid(err) || status.Status().Details == nil {
		return ""
	}
	for _, c := range status.Status().Details.Causes {
		if c.Field == "metadata.name" && (strings.Contains(c.Message, "RFC 1123") || strings.Contains(c.Message, "RFC 1035")) {
			return `; make the pipeline's metadata.name a lower-case name of letters, digits, '-' and '.', e.g. {"@lower": <the name expression>}`
		}
	}
	return ""
}
