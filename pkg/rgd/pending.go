package rgd

import (
	"fmt"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
)

// A template resource is pending for an instance while its desired
// objects cannot all be computed: a dependency is missing or not ready,
// its includeWhen cannot be evaluated, its forEach or an expression of its
// template does not resolve (or fails). kro leaves the existing objects of
// a pending resource as they are and prunes only a resource whose
// includeWhen is false (or that the graph no longer has). The compiled
// pipeline does the same with these streams per template resource n:
//
//   - desiredOf(n): the desired objects (resourceBranch), copied to the
//     target n;
//   - completeOf(n): {"instance", "size"} for each instance all of whose
//     desired objects of n are produced (a collection: as many as its
//     forEach has items, size; a forEach that gives no list, or fails,
//     gives nothing);
//   - prunedOf(n): {"instance"} for each instance whose includeWhen (its
//     own or a dependency's) evaluates to false;
//   - a branch writing to the target n, for each instance that is not
//     being deleted, is not complete and is not pruned, the keep marker
//     (opv1a1.KeepAnnotation) of each existing object of n that is not
//     desired: the Updater leaves it as it is.
//
// Each decision to delete rests on a positive fact (complete, pruned, the
// instance gone or being deleted), so a failing evaluation keeps objects.

func desiredOf(id string) string  { return "desired_" + id }
func itemsOf(id string) string    { return "items_" + id }
func producedOf(id string) string { return "produced_" + id }
func expectedOf(id string) string { return "expected_" + id }
func completeOf(id string) string { return "complete_" + id }
func prunedOf(id string) string   { return "pruned_" + id }

// includedSrc returns, by resource id, the CEL saying that the resource is
// included ("true" when nothing can exclude it): its own includeWhen and
// those of its dependencies (a resource whose dependency is excluded is
// excluded too), and the expressions they are made of.
func (c *rgdCompiler) includedSrc() (map[string]string, map[string][]*Expression) {
	src := map[string]string{}
	xs := map[string][]*Expression{}
	for _, id := range c.g.Order {
		n := c.g.Node(id)
		var inc []string
		var x []*Expression
		for _, w := range n.IncludeWhen {
			inc = append(inc, w.Expr.Source)
			x = append(x, w.Expr)
		}
		for _, d := range n.DependsOn {
			if s := src[d]; s != "true" {
				inc = append(inc, s)
				x = append(x, xs[d]...)
			}
		}
		src[id] = conj(inc)
		xs[id] = x
	}
	return src, xs
}

// instanceEq is the join condition of the instance keys at paths a and b
// (each {"name", "namespace"}).
func (c *rgdCompiler) instanceEq(a, b string) []any {
	conds := []any{map[string]any{"@eq": []any{a + ".name", b + ".name"}}}
	if c.inst.Namespaced {
		conds = append(conds, map[string]any{"@eq": []any{a + ".namespace", b + ".namespace"}})
	}
	return conds
}

// objectKeyString is "<namespace>/<name>" of the object at root ("" for
// no namespace).
func objectKeyString(root string) map[string]any {
	return map[string]any{"@concat": []any{
		map[string]any{"@definedOr": []any{root + ".metadata.namespace", ""}}, "/", root + ".metadata.name"}}
}

// keepMarker is the output object that keeps the existing object at root
// as it is (opv1a1.KeepAnnotation).
func (c *rgdCompiler) keepMarker(n *Node, root string) map[string]any {
	gvk := c.resourceGVK(n)
	md := map[string]any{
		"name":        root + ".metadata.name",
		"annotations": map[string]any{opv1a1.KeepAnnotation: opv1a1.KeepValue},
	}
	if c.namespaced(gvk) {
		md["namespace"] = root + ".metadata.namespace"
	}
	return map[string]any{"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind, "metadata": md}
}

// pendingBranches are the branches of template resource n besides its
// desired objects (see above): the copy of desiredOf(n) to the target,
// completeOf(n) (with producedOf and expectedOf for a collection),
// prunedOf(n) when some includeWhen can exclude n, and the keep markers.
func (c *rgdCompiler) pendingBranches(n *Node) ([][]any, error) {
	ik := c.inst.Kind
	var out [][]any
	out = append(out, []any{
		map[string]any{"@inputs": []any{desiredOf(n.ID)}},
		map[string]any{"@select": true},
		map[string]any{"@output": n.ID},
	})
	if n.Collection {
		// Produced: the keys of the desired objects per instance.
		out = append(out, []any{
			map[string]any{"@inputs": []any{desiredOf(n.ID)}},
			map[string]any{"@groupBy": []any{c.instanceKeyFromLabels("$"), objectKeyString("$")}},
			map[string]any{"@project": map[string]any{"instance": "$.key", "keys": "$.values"}},
			map[string]any{"@output": producedOf(n.ID)},
		})
		// Expected: the number of items of the forEach per instance.
		compound := len(n.DependsOn) > 0 || len(c.dependents[n.ID]) > 0
		instRoot := "$.ctx"
		if compound {
			instRoot += "." + ik
		}
		out = append(out, []any{
			map[string]any{"@inputs": []any{itemsOf(n.ID)}},
			map[string]any{"@select": map[string]any{"@not": map[string]any{"@isnil": "$.items"}}},
			map[string]any{"@project": map[string]any{"instance": c.instanceKey(instRoot), "size": map[string]any{"@len": "$.items"}}},
			map[string]any{"@output": expectedOf(n.ID)},
		})
		e, p := "$."+expectedOf(n.ID), "$."+producedOf(n.ID)
		out = append(out, []any{
			map[string]any{"@inputs": []any{expectedOf(n.ID), producedOf(n.ID)}},
			map[string]any{"@join": []any{map[string]any{"@and": c.instanceEq(e+".instance", p+".instance")}, map[string]any{"soft": []any{producedOf(n.ID)}}}},
			map[string]any{"@select": map[string]any{"@or": []any{
				map[string]any{"@eq": []any{e + ".size", 0}},
				map[string]any{"@gte": []any{map[string]any{"@len": p + ".keys"}, e + ".size"}},
			}}},
			map[string]any{"@project": map[string]any{"instance": e + ".instance", "size": e + ".size"}},
			map[string]any{"@output": completeOf(n.ID)},
		})
	} else {
		out = append(out, []any{
			map[string]any{"@inputs": []any{desiredOf(n.ID)}},
			map[string]any{"@project": map[string]any{"instance": c.instanceKeyFromLabels("$"), "size": 1}},
			map[string]any{"@output": completeOf(n.ID)},
		})
	}
	incSrc, incX := c.includedSrc()
	excludable := incSrc[n.ID] != "true"
	if excludable {
		// Pruned: the includeWhen conjunction evaluates to false.
		var deps []*Node
		nm := names(incX[n.ID]...)
		for _, name := range nm {
			if d := c.g.Node(name); d != nil {
				deps = append(deps, d)
			}
		}
		inputs := []any{ik}
		var conds, soft []any
		for _, d := range deps {
			inputs = append(inputs, observed(d.ID))
			conds = append(conds, c.instanceEq("$."+observed(d.ID)+".instance", "$."+ik+".metadata")...)
			soft = append(soft, observed(d.ID))
		}
		stages := []any{map[string]any{"@inputs": inputs}}
		compound := len(deps) > 0
		if compound {
			stages = append(stages, map[string]any{"@join": []any{map[string]any{"@and": conds}, map[string]any{"soft": soft}}})
		}
		b := c.binding("$", compound, deps)
		instRoot := b.vars[SchemaVar].(string)
		call, err := b.celCall(fmt.Sprintf("!(%s)", incSrc[n.ID]), nm)
		if err != nil {
			return nil, errorf(n.Path, "%v", err)
		}
		stages = append(stages,
			map[string]any{"@select": map[string]any{"@not": map[string]any{"@exists": instRoot + ".metadata.deletionTimestamp"}}},
			map[string]any{"@select": map[string]any{"@eq": []any{call, true}}},
			map[string]any{"@project": map[string]any{"instance": c.instanceKey(instRoot)}},
			map[string]any{"@output": prunedOf(n.ID)})
		out = append(out, stages)
	}
	// Keep: the existing objects of an instance that is neither complete
	// nor pruned nor being deleted.
	inst := "$." + ik + ".metadata"
	obs := "$." + observed(n.ID)
	inputs := []any{ik, observed(n.ID), completeOf(n.ID)}
	conds := c.instanceEq(obs+".instance", inst)
	conds = append(conds, c.instanceEq("$."+completeOf(n.ID)+".instance", inst)...)
	soft := []any{completeOf(n.ID)}
	sel := []any{
		map[string]any{"@not": map[string]any{"@exists": inst + ".deletionTimestamp"}},
		map[string]any{"@not": map[string]any{"@exists": "$." + completeOf(n.ID)}},
	}
	if excludable {
		inputs = append(inputs, prunedOf(n.ID))
		conds = append(conds, c.instanceEq("$."+prunedOf(n.ID)+".instance", inst)...)
		soft = append(soft, prunedOf(n.ID))
		sel = append(sel, map[string]any{"@not": map[string]any{"@exists": "$." + prunedOf(n.ID)}})
	}
	if n.Collection {
		inputs = append(inputs, producedOf(n.ID))
		conds = append(conds, c.instanceEq("$."+producedOf(n.ID)+".instance", inst)...)
		soft = append(soft, producedOf(n.ID))
	}
	stages := []any{
		map[string]any{"@inputs": inputs},
		map[string]any{"@join": []any{map[string]any{"@and": conds}, map[string]any{"soft": soft}}},
		map[string]any{"@select": map[string]any{"@and": sel}},
	}
	if n.Collection {
		item := obs + ".items"
		stages = append(stages,
			map[string]any{"@unwind": item},
			map[string]any{"@select": map[string]any{"@not": map[string]any{"@in": []any{
				objectKeyString(item), map[string]any{"@definedOr": []any{"$." + producedOf(n.ID) + ".keys", []any{}}}}}}},
			map[string]any{"@project": c.keepMarker(n, item)})
	} else {
		stages = append(stages, map[string]any{"@project": c.keepMarker(n, obs+".object")})
	}
	out = append(out, append(stages, map[string]any{"@output": n.ID}))
	return out, nil
}
