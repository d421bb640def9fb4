package object

import (
	"strings"

	"github.com/gobuffalo/flect"
)

// ResourceName returns the resource (URL path segment) a kind is served as
// by the view API server: the lowercase plural of the kind, pluralised with
// the English rules of github.com/gobuffalo/flect exactly as controller-gen
// names CRDs (DeploymentSummary -> deploymentsummaries, Gateway -> gateways,
// Endpoints -> endpoints). Distinct kinds may share one resource name
// (Endpoint and Endpoints -> endpoints); only one of them can be served in a
// group.
func ResourceName(kind string) string {
	return flect.Pluralize(strings.ToLower(kind))
}
