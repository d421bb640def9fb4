package controller

import (
	"fmt"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/object"
)

// ViewKindClashes checks that the view kinds named by an operator's
// controllers can all be served by the view API server, which serves a kind
// as the resource object.ResourceName(kind) of its group: two distinct kinds
// of one view group with the same resource name (Endpoint and Endpoints ->
// endpoints) cannot both be served. A view kind is a source or target without
// apiGroup (a view of the operator itself) or with a view group; when
// standalone is true every kind is a view (a standalone manager serves all
// kinds itself), whatever its group.
//
// specs are the operator's spec.controllers. The result maps a controller's
// index to the error of its first source or target (sources first, in spec
// order) whose kind clashes with one named earlier in spec order, e.g.
//
//	spec.controllers[0].target.kind: view kind "Endpoints" has the same resource name "endpoints" as "Endpoint" (spec.controllers[0].sources[0].kind)
//
// It is empty when nothing clashes. Kinds that are empty or unnamed are left
// to the controller's own validation.
func ViewKindClashes(operator string, specs []opv1a1.Controller, standalone bool) map[int]error {
	type named struct{ kind, path string }
	type groupResource struct{ group, resource string }
	seen := map[groupResource]named{}
	out := map[int]error{}
	check := func(r opv1a1.Resource, path string) error {
		if r.Kind == "" {
			return nil
		}
		group := opv1a1.ViewGroup(operator)
		if r.APIGroup != nil {
			group = *r.APIGroup
			if !standalone && !opv1a1.IsViewGroup(group) {
				return nil
			}
		}
		key := groupResource{group, object.ResourceName(r.Kind)}
		prev, ok := seen[key]
		if !ok {
			seen[key] = named{r.Kind, path + ".kind"}
			return nil
		}
		if prev.kind == r.Kind {
			return nil
		}
		return fmt.Errorf("%s.kind: view kind %q has the same resource name %q as %q (%s); the view API server cannot serve both",
			path, r.Kind, key.resource, prev.kind, prev.path)
	}
	for i, spec := range specs {
		path := fmt.Sprintf("spec.controllers[%d]", i)
		for j, s := range spec.Sources {
			if err := check(s.Resource, fmt.Sprintf("%s.sources[%d]", path, j)); err != nil && out[i] == nil {
				out[i] = err
			}
		}
		for j, t := range spec.AllTargets() {
			if err := check(t.Resource, path+"."+spec.TargetField(j)); err != nil && out[i] == nil {
				out[i] = err
			}
		}
	}
	return out
}
