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
	want := `# RBAC for operators service-endpoints, unready-pod-report, by dctl rbac.
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
      - patch
    namespacedRules:
      team-a:
      - apiGroups:
        - ""
        resources:
        - secrets
        verbs:
        - get
        - list
        - watch
`
	if stdout.String() != want {
		t.Errorf("values:\n%s\nwant:\n%s", stdout.String(), want)
	}
	stdout.Reset()
	if code := Execute([]string{"rbac", "--offline", "-f", op, "--name", "team-rbac"}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "kind: Role\nmetadata:\n  labels:\n    app.kubernetes.io/part-of: dcontroller\n  name: team-rbac\n  namespace: team-a\n") {
		t.Errorf("no Role in team-a:\n%s", stdout.String())
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
