package apiserver

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/operator"
)

// OperatorKinds returns the kinds the operators' controllers read and write
// (sources and targets), so that they are served before any object of them
// exists. A resource without apiGroup is a view of its operator, served in
// version v1alpha1. Native kinds are included only with native (standalone
// mode); their version, when the spec omits it, is taken from
// operator.KnownVersions, and kinds whose version cannot be told are left
// out.
func OperatorKinds(ops []*opv1a1.Operator, native bool) []schema.GroupVersionKind {
	seen := map[schema.GroupVersionKind]bool{}
	var out []schema.GroupVersionKind
	add := func(op string, r opv1a1.Resource) {
		if r.Kind == "" {
			return
		}
		gvk := schema.GroupVersionKind{Kind: r.Kind}
		if r.APIGroup == nil {
			gvk.Group, gvk.Version = opv1a1.ViewGroup(op), opv1a1.Version
		} else {
			gvk.Group = *r.APIGroup
			switch {
			case r.Version != nil && *r.Version != "":
				gvk.Version = *r.Version
			case opv1a1.IsViewGroup(gvk.Group):
				gvk.Version = opv1a1.Version
			default:
				gvk.Version = operator.KnownVersions[gvk.Group]
			}
		}
		if gvk.Version == "" || (!native && !opv1a1.IsViewGroup(gvk.Group)) || seen[gvk] {
			return
		}
		seen[gvk] = true
		out = append(out, gvk)
	}
	for _, op := range ops {
		if op == nil {
			continue
		}
		for _, c := range op.Spec.Controllers {
			for _, s := range c.Sources {
				add(op.Name, s.Resource)
			}
			add(op.Name, c.Target.Resource)
		}
	}
	return out
}
