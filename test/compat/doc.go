// Package compat runs other systems' own examples, unchanged, on dcontroller:
// kro's examples/kubernetes (taken from the kro Go module at the version
// kroVersion names, fetched into the Go module cache, not kept in this
// repository) through hack/kro-examples.sh, with the steps and expected
// values under kro/. The successor's examples (dbsp/, through
// hack/successor-examples.sh) need a checkout of its repository, which has no
// Go module to fetch, and are run by hand.
package compat
