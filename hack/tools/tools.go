//go:build tools

// Package tools records the developer tools this module builds (helm, for the
// chart checks of `make test`), so that `go mod tidy` keeps their
// dependencies.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
