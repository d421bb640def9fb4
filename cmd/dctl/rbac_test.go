package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRBACOffline(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Execute([]string{"rbac", "--offline", "-f", "../../examples/service-endpoints/operator.yaml",
		"-f", "../../examples/unready-pod-report/operator.yaml", "--service-account", "dcontroller-system:dcontroller", "--user", "alice"}, nil, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	want := `# RBAC for operator service-endpoints, operator unready-pod-report, by dctl rbac.
# service-endpoints/service-endpoints spec.controllers[0].sources[0] (Watcher source): services: get, list, watch
# service-endpoints/service-endpoints spec.controllers[0].sources[1] (Watcher source): pods: get, list, watch
# unready-pod-report/pod-health spec.controllers[0].sources[0] (Watcher source): pods: get, list, watch
# unready-pod-report/namespace-report spec.controllers[1].target (Updater target): configmaps: get, list, watch, create, update, delete
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  labels:
    app.kubernetes.io/part-of: dcontroller
  name: dcontroller-operators
rules:
- apiGroups:
  - ""
  resources:
  - configmaps
  verbs:
  - get
  - list
  - watch
  - create
  - update
  - delete
- apiGroups:
  - ""
  resources:
  - pods
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - ""
  resources:
  - services
  verbs:
  - get
  - list
  - watch
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  labels:
    app.kubernetes.io/part-of: dcontroller
  name: dcontroller-operators
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: dcontroller-operators
subjects:
- kind: ServiceAccount
  name: dcontroller
  namespace: dcontroller-system
- apiGroup: rbac.authorization.k8s.io
  kind: User
  name: alice
`
	if stdout.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", stdout.String(), want)
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr: %s", stderr.String())
	}
}

func TestRBACValuesAndRoles(t *testing.T) {
	op := writeFile(t, "op.yaml", `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: team}
spec:
  controllers:
    - name: c
      sources: [{apiGroup: "", kind: Secret, namespace: team-a}]
      pipeline: {"@project": {metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}}}
      target: {apiGroup: "", kind: ConfigMap, type: Applier}
`)
	var stdout, stderr bytes.Buffer
	if code := Execute([]string{"rbac", "--offline", "-f", op, "-o", "values"}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	want := `rbac:
  mode: scoped
  scoped:
    clusterRules:
    - apiGroups:
      - ""
      resources:
      - configmaps
      verbs:
      - get
      - list
      - watch
      - create
      - patch
    - apiGroups:
      - ""
      resources:
      - secrets
      verbs:
      - get
      - list
      - watch
    namespacedRules: {}
`
	if stdout.String() != want {
		t.Errorf("values:\n%s\nwant:\n%s", stdout.String(), want)
	}
	stdout.Reset()
	if code := Execute([]string{"rbac", "--offline", "-f", op, "--name", "team-rbac"}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	// The namespaced source is watched cluster-wide (one shared informer per kind).
	if !strings.Contains(stdout.String(), "kind: ClusterRole\nmetadata:\n  labels:\n    app.kubernetes.io/part-of: dcontroller\n  name: team-rbac\n") ||
		strings.Contains(stdout.String(), "kind: Role\n") {
		t.Errorf("want one ClusterRole and no Role:\n%s", stdout.String())
	}
}

func TestRBACNoClusterFallsBack(t *testing.T) {
	t.Setenv("KUBECONFIG", "/nonexistent/kubeconfig")
	t.Setenv("HOME", t.TempDir())
	var stdout, stderr bytes.Buffer
	code := Execute([]string{"rbac", "-f", annotator + "operator.yaml"}, nil, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "note: no reachable cluster") || !strings.Contains(stderr.String(), "lowercase-plural rule") {
		t.Errorf("stderr: %s", stderr.String())
	}
	if !strings.Contains(stdout.String(), "  - pods\n  verbs:\n  - get\n  - list\n  - watch\n  - patch\n") {
		t.Errorf("stdout:\n%s", stdout.String())
	}
}

func TestRBACErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"explicit kubeconfig must work", []string{"rbac", "-f", annotator + "operator.yaml", "--kubeconfig", "/nonexistent"}, "--kubeconfig /nonexistent:"},
		{"bad service account", []string{"rbac", "--offline", "-f", annotator + "operator.yaml", "--service-account", "nocolon"}, `want NAMESPACE:NAME`},
		{"bad output", []string{"rbac", "--offline", "-f", annotator + "operator.yaml", "-o", "json"}, `unknown format "json"`},
		{"offline and kubeconfig", []string{"rbac", "--offline", "--kubeconfig", "x", "-f", annotator + "operator.yaml"}, "exclude each other"},
		{"no -f", []string{"rbac"}, `required flag(s) "filename" not set`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := Execute(tc.args, nil, &stdout, &stderr); code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr lacks %q: %s", tc.want, stderr.String())
			}
		})
	}
}

func TestRBACMetacontroller(t *testing.T) {
	file := writeFile(t, "mc.yaml", `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: bluegreen}
spec:
  parentResource: {apiVersion: ctl.example.com/v1, resource: bluegreendeployments}
  childResources:
    - {apiVersion: v1, resource: services}
    - {apiVersion: apps/v1, resource: replicasets}
  hooks:
    sync:
      webhook:
        url: https://hooks.example.com/sync
        caBundle: {secretRef: {name: hook-ca, namespace: hooks}}
    customize:
      webhook: {url: https://hooks.example.com/customize}
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata: {name: service-per-pod}
spec:
  resources: [{apiVersion: apps/v1, resource: statefulsets}]
  attachments: [{apiVersion: v1, resource: services}]
  hooks:
    sync: {webhook: {url: http://hooks.example.com/sps}}
`)
	var stdout, stderr bytes.Buffer
	if code := Execute([]string{"rbac", "--offline", "-f", file, "-f", annotator + "operator.yaml"}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"# RBAC for operator pod-container-num-annotator, CompositeController bluegreen, DecoratorController service-per-pod, by dctl rbac.\n",
		"# bluegreen/CompositeController spec.parentResource (parent): bluegreendeployments.ctl.example.com: get, list, watch, update, patch\n",
		"# bluegreen/CompositeController spec.parentResource (owner of children with blockOwnerDeletion): bluegreendeployments.ctl.example.com/finalizers: update\n",
		"# bluegreen/CompositeController spec.childResources[1] (child): replicasets.apps: get, list, watch, create, update, patch, delete\n",
		"# bluegreen/CompositeController spec.hooks.sync.webhook.caBundle.secretRef (webhook connection setting): secrets \"hook-ca\" in namespace hooks: get\n",
		"# service-per-pod/DecoratorController spec.resources[0] (parent): statefulsets.apps: get, list, watch, update, patch\n",
		"# warning: CompositeController bluegreen: the related resources of the customize hook are chosen at run time",
		"- apiGroups:\n  - apps\n  resources:\n  - statefulsets/status\n  verbs:\n  - update\n",
		"kind: Role\nmetadata:\n  labels:\n    app.kubernetes.io/part-of: dcontroller\n  name: dcontroller-operators\n  namespace: hooks\nrules:\n- apiGroups:\n  - \"\"\n  resourceNames:\n  - hook-ca\n  resources:\n  - secrets\n  verbs:\n  - get\n",
		// services: children of both controllers, merged.
		"- apiGroups:\n  - \"\"\n  resources:\n  - services\n  verbs:\n  - get\n  - list\n  - watch\n  - create\n  - update\n  - patch\n  - delete\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	bad := writeFile(t, "bad.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
	stdout.Reset()
	stderr.Reset()
	if code := Execute([]string{"rbac", "--offline", "-f", bad}, nil, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "object 1 (ConfigMap x): dctl rbac takes Operator") {
		t.Errorf("exit %d: %s", code, stderr.String())
	}
	typo := writeFile(t, "typo.yaml", "apiVersion: metacontroller.k8s.io/v1alpha1\nkind: DecoratorController\nmetadata: {name: x}\nspec: {resourcez: []}\n")
	stderr.Reset()
	if code := Execute([]string{"rbac", "--offline", "-f", typo}, nil, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), `unknown field "resourcez"`) {
		t.Errorf("exit %d: %s", code, stderr.String())
	}
}
