package controller

import (
	"testing"

	"k8s.io/utils/ptr"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
)

func TestViewKindClashes(t *testing.T) {
	view := func(kind string) opv1a1.Resource { return opv1a1.Resource{Kind: kind} }
	in := func(group, kind string) opv1a1.Resource { return opv1a1.Resource{APIGroup: ptr.To(group), Kind: kind} }
	ctrl := func(target opv1a1.Resource, sources ...opv1a1.Resource) opv1a1.Controller {
		c := opv1a1.Controller{Target: &opv1a1.Target{Resource: target}}
		for _, s := range sources {
			c.Sources = append(c.Sources, opv1a1.Source{Resource: s})
		}
		return c
	}
	for _, tc := range []struct {
		name       string
		specs      []opv1a1.Controller
		standalone bool
		want       map[int]string
	}{{
		name:  "source and target of one controller",
		specs: []opv1a1.Controller{ctrl(view("Endpoints"), view("Endpoint"))},
		want:  map[int]string{0: `spec.controllers[0].target.kind: view kind "Endpoints" has the same resource name "endpoints" as "Endpoint" (spec.controllers[0].sources[0].kind); the view API server cannot serve both`},
	}, {
		name: "across controllers, the later one is refused",
		specs: []opv1a1.Controller{
			ctrl(view("AppSummary"), in("", "ConfigMap")),
			ctrl(in("", "ConfigMap"), view("AppSummary"), view("Appsummary")),
		},
		want: map[int]string{1: `spec.controllers[1].sources[1].kind: view kind "Appsummary" has the same resource name "appsummaries" as "AppSummary" (spec.controllers[0].target.kind); the view API server cannot serve both`},
	}, {
		name:  "the operator's own view group named explicitly",
		specs: []opv1a1.Controller{ctrl(in("op.view.dcontroller.io", "Endpoints"), view("Endpoint"))},
		want:  map[int]string{0: `spec.controllers[0].target.kind: view kind "Endpoints" has the same resource name "endpoints" as "Endpoint" (spec.controllers[0].sources[0].kind); the view API server cannot serve both`},
	}, {
		name:  "one kind named twice",
		specs: []opv1a1.Controller{ctrl(view("Endpoint"), view("Endpoint")), ctrl(view("Other"), view("Endpoint"))},
	}, {
		name:  "different view groups",
		specs: []opv1a1.Controller{ctrl(view("Endpoints"), in("other.view.dcontroller.io", "Endpoint"))},
	}, {
		name:  "native kinds are not views of a manager on a cluster",
		specs: []opv1a1.Controller{ctrl(in("", "Endpoints"), in("", "Endpoint"))},
	}, {
		name:       "native kinds are views of a standalone manager",
		specs:      []opv1a1.Controller{ctrl(in("", "Endpoints"), in("", "Endpoint"))},
		standalone: true,
		want:       map[int]string{0: `spec.controllers[0].target.kind: view kind "Endpoints" has the same resource name "endpoints" as "Endpoint" (spec.controllers[0].sources[0].kind); the view API server cannot serve both`},
	}, {
		name:  "empty kinds are left to the controller",
		specs: []opv1a1.Controller{ctrl(view(""), view(""))},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := ViewKindClashes("op", tc.specs, tc.standalone)
			if len(got) != len(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			for i, w := range tc.want {
				if got[i] == nil || got[i].Error() != w {
					t.Errorf("controller %d: got %v\nwant %s", i, got[i], w)
				}
			}
		})
	}
}
