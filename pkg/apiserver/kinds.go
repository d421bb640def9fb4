package apiserver

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/controller"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/operator"
)

// OperatorKinds returns the kinds the operators' controllers read and write
// (sources and targets), so that they are served before any object of them
// exists. A resource without apiGroup is a view of its operator, served in
// version v1alpha1. Native kinds are included only with native (standalone
// mode); their version, when the spec omits it, is taken from
// operator.KnownVersions, and kinds whose version cannot be told are left
// out, and so are kinds that are not valid kind names (object.ValidateKind),
// whose controllers do not run, and the kinds of controllers over lim
// (controller.KindLimitErrors), which do not run either: one operator makes
// the server serve at most lim.MaxViewKinds view kinds.
func OperatorKinds(ops []*opv1a1.Operator, native bool, lim controller.KindLimits) []schema.GroupVersionKind {
	seen := map[schema.GroupVersionKind]bool{}
	var out []schema.GroupVersionKind
	add := func(op string, r opv1a1.Resource) {
		if r.Kind == "" || len(object.ValidateKind(r.Kind, field.NewPath("kind"))) > 0 {
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
		over := controller.KindLimitErrors(op.Name, op.Spec.Controllers, lim)
		for i, c := range op.Spec.Controllers {
			if over[i] != nil {
				continue
			}
			for _, s := range c.Sources {
				add(op.Name, s.Resource)
			}
			for _, t := range c.AllTargets() {
				add(op.Name, t.Resource)
			}
		}
	}
	return out
}

// KindsOf returns an Options.Kinds function serving the kinds of the
// operators list returns (see OperatorKinds).
func KindsOf(list func() []*opv1a1.Operator, native bool, lim controller.KindLimits) func() []schema.GroupVersionKind {
	return func() []schema.GroupVersionKind { return OperatorKinds(list(), native, lim) }
}

// ExpectedKindsOf returns an Options.ExpectedKinds function: the kinds of
// the operators list returns (see OperatorKinds), which list may fail while
// the operators are not known yet.
func ExpectedKindsOf(list func(context.Context) ([]*opv1a1.Operator, error), native bool, lim controller.KindLimits) func(context.Context) ([]schema.GroupVersionKind, error) {
	return func(ctx context.Context) ([]schema.GroupVersionKind, error) {
		ops, err := list(ctx)
		if err != nil {
			return nil, err
		}
		return OperatorKinds(ops, native, lim), nil
	}
}

// StaticOperators returns ops, for ExpectedKindsOf (dctl run loads its
// operators from files at start).
func StaticOperators(ops []*opv1a1.Operator) func(context.Context) ([]*opv1a1.Operator, error) {
	return func(context.Context) ([]*opv1a1.Operator, error) { return ops, nil }
}

// AllClusterOperators returns every Operator object of a cluster that is
// not being deleted, read through r (the manager's cached client: it fails
// until the cache is started and waits at most timeout for it to sync).
func AllClusterOperators(r client.Reader, timeout time.Duration) func(context.Context) ([]*opv1a1.Operator, error) {
	return func(ctx context.Context) ([]*opv1a1.Operator, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		var l opv1a1.OperatorList
		if err := r.List(ctx, &l); err != nil {
			return nil, fmt.Errorf("listing Operators: %w", err)
		}
		var ops []*opv1a1.Operator
		for i := range l.Items {
			if l.Items[i].DeletionTimestamp.IsZero() {
				ops = append(ops, &l.Items[i])
			}
		}
		return ops, nil
	}
}

// RunningOperators returns the operators of ops that rt runs.
func RunningOperators(rt *operator.Runtime, ops []*opv1a1.Operator) func() []*opv1a1.Operator {
	return func() []*opv1a1.Operator {
		running := map[string]bool{}
		for _, n := range rt.Names() {
			running[n] = true
		}
		var out []*opv1a1.Operator
		for _, op := range ops {
			if running[op.Name] {
				out = append(out, op)
			}
		}
		return out
	}
}

// ClusterOperators returns the Operator objects of a cluster that rt runs
// (every one when rt is nil: a member of a ring answers for all),
// read through r (the manager's cached client, so a call costs no request).
func ClusterOperators(ctx context.Context, r client.Reader, rt *operator.Runtime) func() []*opv1a1.Operator {
	return func() []*opv1a1.Operator {
		var l opv1a1.OperatorList
		if err := r.List(ctx, &l); err != nil {
			return nil
		}
		ops := make([]*opv1a1.Operator, len(l.Items))
		for i := range l.Items {
			ops[i] = &l.Items[i]
		}
		if rt == nil {
			return ops
		}
		return RunningOperators(rt, ops)()
	}
}
