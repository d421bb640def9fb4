// Package docs holds dcontroller's documentation (Markdown) and the test
// that keeps it honest: every example of the reference pages is run through
// `dctl eval` and its shown result compared with what dctl prints, and every
// pipeline stage and expression operator must have an example.
package docs
