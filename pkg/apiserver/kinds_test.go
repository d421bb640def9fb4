package apiserver

import (
	"fmt"
	"strings"
	"testing"

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
	views := fmt.Sprint(OperatorKinds(ops, false))
	if views != "[shop.view.dcontroller.io/v1alpha1, Kind=Cart other.view.dcontroller.io/v1alpha1, Kind=Report shop.view.dcontroller.io/v1alpha1, Kind=Order]" {
		t.Errorf("views: %s", views)
	}
	all := fmt.Sprint(OperatorKinds(ops, true))
	for _, want := range []string{"/v1, Kind=Pod", "apps/v1, Kind=Deployment", "example.com/v2, Kind=Gadget", "Kind=Order"} {
		if !strings.Contains(all, want) {
			t.Errorf("native kinds %s lack %s", all, want)
		}
	}
	if strings.Contains(all, "Widget") {
		t.Errorf("a kind of unknown version is served: %s", all)
	}
}
