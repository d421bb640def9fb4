// Package build tests the project's build scripts under hack/: the
// prerequisite check that make runs first and the wrapper that announces
// and times long build steps; and that `make image` assembles the image
// again for another IMAGE_REPO.
package build
