package apiserver

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dcontroller/dcontroller/pkg/controller"
	"github.com/dcontroller/dcontroller/pkg/operator"
)

func TestOperatorKinds(t *testing.T) {
	ops, err := operator.DecodeOperators(strings.NewReader(`apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: shop}
spec:
  controllers:
    - name: a
      sources:
        - {apiGroup: "", kind: Pod}
        - {apiGroup: apps, kind: Deployment}
        - {kind: Cart}
        - {apiGroup: other.view.dcontroller.io, kind: Report}
        - {apiGroup: example.com, kind: Widget}
        - {apiGroup: example.com, version: v2, kind: Gadget}
      pipeline: {"@project": {metadata: {name: x}}}
      target: {kind: Order}
`))
	if err != nil {
		t.Fatal(err)
	}
	views := fmt.Sprint(OperatorKinds(ops, false, controller.KindLimits{}))
	if views != "[shop.view.dcontroller.io/v1alpha1, Kind=Cart other.view.dcontroller.io/v1alpha1, Kind=Report shop.view.dcontroller.io/v1alpha1, Kind=Order]" {
		t.Errorf("views: %s", views)
	}
	all := fmt.Sprint(OperatorKinds(ops, true, controller.KindLimits{}))
	for _, want := range []string{"/v1, Kind=Pod", "apps/v1, Kind=Deployment", "example.com/v2, Kind=Gadget", "Kind=Order"} {
		if !strings.Contains(all, want) {
			t.Errorf("native kinds %s lack %s", all, want)
		}
	}
	if strings.Contains(all, "Widget") {
		t.Errorf("a kind of unknown version is served: %s", all)
	}
}

// The kinds of a controller over the kind limits are not served; those of
// the operator's other controllers are.
func TestOperatorKindsWithinLimits(t *testing.T) {
	ops, err := operator.DecodeOperators(strings.NewReader(`apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: op}
spec:
  controllers:
    - name: narrow
      sources: [{kind: In}]
      pipeline: {"@project": "$."}
      target: {kind: Out}
    - name: wide
      sources: [{kind: In}]
      pipeline: {"@project": "$."}
      targets: [{kind: A}, {kind: B}, {kind: C}]
`))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(OperatorKinds(ops, false, controller.KindLimits{MaxTargets: 2}))
	if want := "[op.view.dcontroller.io/v1alpha1, Kind=In op.view.dcontroller.io/v1alpha1, Kind=Out]"; got != want {
		t.Errorf("kinds %s, want %s", got, want)
	}
	if got := len(OperatorKinds(ops, false, controller.KindLimits{MaxTargets: 3, MaxViewKinds: 4})); got != 2 {
		t.Errorf("with 4 view kinds: %d kinds served, want 2", got)
	}
	if got := len(OperatorKinds(ops, false, controller.KindLimits{MaxTargets: -1, MaxViewKinds: -1})); got != 5 {
		t.Errorf("no bounds: %d kinds served, want 5", got)
	}
}
