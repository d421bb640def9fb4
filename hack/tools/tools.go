//go:build tools

// Package tools records the developer tools this module builds (helm, for the
// chart checks of `make test`; crane, to push the image `make image` builds),
// so that `go mod tidy` keeps their dependencies. The module's own program
// imagebuild assembles that image.
package tools

import (
	_ "github.com/google/go-containerregistry/cmd/crane"
	_ "helm.sh/helm/v3/cmd/helm"
)
