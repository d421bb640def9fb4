package operator

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dcontroller/dcontroller/pkg/controller"
)

// checkNamespaceLocal checks that controller i of a namespace-sharded
// operator can run split by namespace: its sources and target are
// namespaced kinds (views are), and its pipeline never combines objects
// of two namespaces (pipeline.NamespaceLocal). The error names the spec
// path.
func (r *Runtime) checkNamespaceLocal(c *controller.Controller, i int) error {
	for j, s := range c.Sources() {
		if err := r.namespaced(s.GVK); err != nil {
			return fmt.Errorf("spec.controllers[%d].sources[%d]: %w", i, j, err)
		}
	}
	if err := r.namespaced(c.Target().GVK); err != nil {
		return fmt.Errorf("spec.controllers[%d].target: %w", i, err)
	}
	if err := c.NamespaceLocal(); err != nil {
		return fmt.Errorf("spec.sharding is Namespace, but %w", err)
	}
	return nil
}

// namespaced fails for a cluster-scoped kind: its objects belong to no
// namespace, so no member could run them alone.
func (r *Runtime) namespaced(gvk schema.GroupVersionKind) error {
	if r.isView(gvk) || r.opts.RESTMapper == nil {
		return nil
	}
	m, err := r.opts.RESTMapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return &discoveryError{err: err}
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		return fmt.Errorf("%s is cluster-scoped: an operator with spec.sharding Namespace takes only namespaced sources and targets", gvk.Kind)
	}
	return nil
}
