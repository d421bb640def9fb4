package controller

import (
	"fmt"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
)

// Defaults of KindLimits. The view API server holds each view kind it
// serves (its handlers, discovery entry and its part of the OpenAPI
// documents): about 85 KB per kind, measured by pkg/apiserver's
// TestHeapPerViewKind, so 256 view kinds of one operator cost the server
// some 22 MB.
const (
	DefaultMaxTargets   = 64
	DefaultMaxViewKinds = 256
)

// KindLimits bound how many kinds one operator makes the manager serve, so
// that no single Operator takes unbounded memory.
type KindLimits struct {
	// MaxTargets is the most targets (target or targets) of one
	// controller: DefaultMaxTargets when 0, no bound when negative.
	MaxTargets int
	// MaxViewKinds is the most distinct view kinds (sources and targets
	// without apiGroup or with a view group) the controllers of one
	// operator name together: DefaultMaxViewKinds when 0, no bound when
	// negative.
	MaxViewKinds int
}

func (l KindLimits) maxTargets() int {
	if l.MaxTargets == 0 {
		return DefaultMaxTargets
	}
	return l.MaxTargets
}

func (l KindLimits) maxViewKinds() int {
	if l.MaxViewKinds == 0 {
		return DefaultMaxViewKinds
	}
	return l.MaxViewKinds
}

// KindLimitErrors checks an operator's controllers (specs, its
// spec.controllers) against lim, in spec order. The result maps the index
// of each controller over a limit to its error; such a controller does not
// run and its kinds are not served, and the others are checked as if it
// were absent. A controller is over a limit when it has more targets than
// lim.MaxTargets, e.g.
//
//	spec.controllers[0].targets: Too many: 2000: must have at most 64 targets (dctl --max-targets)
//
// or when the view kinds it names that no earlier running controller of the
// operator named would take the operator over lim.MaxViewKinds, e.g.
//
//	spec.controllers[300].target.kind: view kind "View0300" would be the operator's view kind number 257, over the limit of 256 (dctl --max-view-kinds)
//
// It is empty when every controller is within the limits.
func KindLimitErrors(operator string, specs []opv1a1.Controller, lim KindLimits) map[int]error {
	out := map[int]error{}
	maxTargets, maxKinds := lim.maxTargets(), lim.maxViewKinds()
	type groupKind struct{ group, kind string }
	seen := map[groupKind]bool{}
	for i := range specs {
		spec := &specs[i]
		path := fmt.Sprintf("spec.controllers[%d]", i)
		targets := spec.AllTargets()
		if maxTargets > 0 && len(targets) > maxTargets {
			out[i] = fmt.Errorf("%s.targets: Too many: %d: must have at most %d targets (dctl --max-targets)", path, len(targets), maxTargets)
			continue
		}
		if maxKinds < 0 {
			continue
		}
		added := map[groupKind]bool{}
		check := func(r opv1a1.Resource, field string) error {
			if r.Kind == "" {
				return nil
			}
			group := opv1a1.ViewGroup(operator)
			if r.APIGroup != nil {
				if group = *r.APIGroup; !opv1a1.IsViewGroup(group) {
					return nil
				}
			}
			k := groupKind{group, r.Kind}
			if seen[k] || added[k] {
				return nil
			}
			added[k] = true
			if n := len(seen) + len(added); n > maxKinds {
				return fmt.Errorf("%s.%s.kind: view kind %q would be the operator's view kind number %d, over the limit of %d (dctl --max-view-kinds)",
					path, field, r.Kind, n, maxKinds)
			}
			return nil
		}
		var err error
		for j, s := range spec.Sources {
			if err = check(s.Resource, fmt.Sprintf("sources[%d]", j)); err != nil {
				break
			}
		}
		for j := 0; err == nil && j < len(targets); j++ {
			err = check(targets[j].Resource, spec.TargetField(j))
		}
		if err != nil {
			out[i] = err
			continue
		}
		for k := range added {
			seen[k] = true
		}
	}
	return out
}
