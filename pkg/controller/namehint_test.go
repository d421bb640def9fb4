package controller

import (
	"context"
	"strings"
	"testing"

	"github.com/dcontroller/dcontroller/pkg/view"
)

// TestInvalidViewNameSaysWhatToWrite: a view object whose name the API
// server's rule refuses (upper case, as operators written for Δ-controller
// may produce) fails its write with the target's spec path and what to
// write instead.
func TestInvalidViewNameSaysWhatToWrite(t *testing.T) {
	const y = `
name: upper
sources: [{apiGroup: "", version: v1, kind: Pod}]
pipeline:
  "@project":
    metadata:
      name: {"@concat": ["$.metadata.name", "-TCP-80"]}
      namespace: "$.metadata.namespace"
target: {kind: Summary}
`
	store := view.NewStore()
	c := mustNew(t, y, newClock().opts(StoreClient{Store: store}))
	err := c.Handle(context.Background(), nil, obj(podGVK, "ns", "p", nil))
	if err == nil {
		t.Fatal("an upper-case view name was written")
	}
	for _, want := range []string{
		`spec.controllers[0].target: Summary ns/p-TCP-80`,
		`metadata.name: Invalid value: "p-TCP-80"`,
		`make the pipeline's metadata.name a lower-case name of letters, digits, '-' and '.', e.g. {"@lower": <the name expression>}`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q\ndoes not contain %q", err, want)
		}
	}
}
