package rbac_test

import (
	"os"
	"strings"

	"github.com/dcontroller/dcontroller/pkg/operator"
	"github.com/dcontroller/dcontroller/pkg/rbac"
)

// The rules of an operator that reads Deployments in one namespace and
// writes ConfigMaps with an Updater. Sources are watched cluster-wide: the
// manager shares one informer per kind between all controllers.
func ExampleCompute() {
	ops, _ := operator.DecodeOperators(strings.NewReader(`apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: summary}
spec:
  controllers:
    - name: deployment-summary
      sources: [{apiGroup: apps, kind: Deployment, namespace: shop}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
          data: {replicas: {"@string": "$.spec.replicas"}}
      target: {apiGroup: "", kind: ConfigMap}
`))
	rules, _ := rbac.Compute(ops, rbac.Options{})
	_ = rules.Explain(os.Stdout)
	_ = rbac.WriteYAML(os.Stdout, rules.Objects(rbac.ObjectOptions{Name: "summary"}))
	// Output:
	// # summary/deployment-summary spec.controllers[0].sources[0] (Watcher source): deployments.apps: get, list, watch
	// # summary/deployment-summary spec.controllers[0].target (Updater target): configmaps: get, list, watch, create, update, delete
	// ---
	// apiVersion: rbac.authorization.k8s.io/v1
	// kind: ClusterRole
	// metadata:
	//   name: summary
	// rules:
	// - apiGroups:
	//   - ""
	//   resources:
	//   - configmaps
	//   verbs:
	//   - get
	//   - list
	//   - watch
	//   - create
	//   - update
	//   - delete
	// - apiGroups:
	//   - apps
	//   resources:
	//   - deployments
	//   verbs:
	//   - get
	//   - list
	//   - watch
}
