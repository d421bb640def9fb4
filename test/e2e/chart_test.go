package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/dcontroller/dcontroller/pkg/operator"
	"github.com/dcontroller/dcontroller/pkg/rbac"
)

// The chart tests run the helm that `make tools` builds into bin/helm and
// apply what it renders to the test control plane with the built kubectl.

func helmBin(t *testing.T) string {
	t.Helper()
	p := filepath.Join(repoRoot, "bin", "helm")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing; run 'make tools' (make test does it)", p)
	}
	return p
}

func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBin(t), args...)
	cmd.Dir = repoRoot
	// Keep helm away from the user's helm configuration and caches.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := runBounded(cmd); err != nil {
		return out.String(), fmt.Errorf("helm %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

// decodeStream parses a YAML stream into objects, skipping empty documents.
func decodeStream(t *testing.T, s string) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(s), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("decoding manifests: %v\n%s", err, s)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

func objKey(o *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
}

func indexObjects(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	m := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		m[objKey(o)] = o
	}
	return m
}

func objectKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// containerArgs returns the args of the first container of the Deployment.
func containerArgs(t *testing.T, d *unstructured.Unstructured) []string {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(cs) == 0 {
		t.Fatalf("%s has no containers", objKey(d))
	}
	raw, _ := cs[0].(map[string]any)["args"].([]any)
	out := make([]string, len(raw))
	for i, a := range raw {
		out[i] = fmt.Sprint(a)
	}
	return out
}

// applyManifests applies a YAML stream with the built kubectl: first a
// server-side dry run (validation and admission by the API server), then for
// real. The namespaces of namespaced objects are created first.
func applyManifests(t *testing.T, manifests string) {
	t.Helper()
	for _, o := range decodeStream(t, manifests) {
		if o.GetNamespace() != "" {
			ensureNamespace(t, o.GetNamespace())
		}
	}
	mustKubectl(t, manifests, "apply", "--dry-run=server", "-f", "-")
	mustKubectl(t, manifests, "apply", "-f", "-")
}

func ensureNamespace(t *testing.T, ns string) {
	t.Helper()
	if _, err := kubectl(t, "", "get", "namespace", ns); err != nil {
		mustKubectl(t, "", "create", "namespace", ns)
	}
}

const serviceMonitorCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  names: {kind: ServiceMonitor, listKind: ServiceMonitorList, plural: servicemonitors, singular: servicemonitor}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

func TestChartLint(t *testing.T) {
	out, err := helm(t, "lint", "--strict", "charts/dcontroller")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") {
		t.Errorf("helm lint:\n%s", out)
	}
	// The schema rejects values outside the documented enums.
	for _, set := range []string{"rbac.mode=partial", "apiServer.mode=debug", "apiServer.service.type=ExternalName", "replicas=0",
		"sharding.leaseDuration=ten", "sharding.renewDeadline=10", "sharding.retryPeriod=-2s", "sharding.ring=Ring_A", "sharding.replicas=3",
		"extraArgs={start}", "extraArgs=--"} {
		_, err := helm(t, "template", "dcontroller", "charts/dcontroller", "--set", set)
		if err == nil || !strings.Contains(err.Error(), "values don't meet the specifications of the schema") {
			t.Errorf("--set %s: want a schema error, got %v", set, err)
		}
	}
	// extraArgs end up in the manager's command line, after the chart's own.
	out, err = helm(t, "template", "dcontroller", "charts/dcontroller", "--set", "extraArgs={--kube-api-qps=50,--kube-api-content-type=application/json}")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "        - \"--kube-api-qps=50\"\n        - \"--kube-api-content-type=application/json\"\n") {
		t.Errorf("extraArgs not in the manager's args:\n%s", out)
	}
}

// TestChartCRDsMatchConfig checks that the chart's crds/ and the kustomize
// CRD list hold exactly the CRDs controller-gen writes into config/crd.
func TestChartCRDsMatchConfig(t *testing.T) {
	generated, err := filepath.Glob(filepath.Join(repoRoot, "config", "crd", "*_*.yaml"))
	if err != nil || len(generated) == 0 {
		t.Fatalf("no CRDs in config/crd (%v)", err)
	}
	inChart, _ := filepath.Glob(filepath.Join(repoRoot, "charts", "dcontroller", "crds", "*.yaml"))
	if len(inChart) != len(generated) {
		t.Errorf("charts/dcontroller/crds has %d files, config/crd %d; run make generate", len(inChart), len(generated))
	}
	kust, err := os.ReadFile(filepath.Join(repoRoot, "config", "crd", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range generated {
		want, _ := os.ReadFile(g)
		got, err := os.ReadFile(filepath.Join(repoRoot, "charts", "dcontroller", "crds", filepath.Base(g)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("charts/dcontroller/crds/%s differs from config/crd (err %v); run make generate", filepath.Base(g), err)
		}
		if !bytes.Contains(kust, []byte("- "+filepath.Base(g)+"\n")) {
			t.Errorf("config/crd/kustomization.yaml does not list %s", filepath.Base(g))
		}
	}
}

// normalized drops what legitimately differs between the Helm and the
// kustomize renderings: labels, annotations and the pod template's
// annotations (the chart's RBAC checksum).
func normalized(o *unstructured.Unstructured) map[string]any {
	c := o.DeepCopy()
	unstructured.RemoveNestedField(c.Object, "metadata", "labels")
	unstructured.RemoveNestedField(c.Object, "metadata", "annotations")
	unstructured.RemoveNestedField(c.Object, "spec", "template", "metadata", "annotations")
	b, _ := json.Marshal(c.Object)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// TestKustomizeMatchesChart renders config/default with kubectl's built-in
// kustomize and the chart with its default values, checks that they are the
// same objects, and applies both to the control plane.
func TestKustomizeMatchesChart(t *testing.T) {
	kust := mustKubectl(t, "", "kustomize", filepath.Join(repoRoot, "config", "default"))
	chart, err := helm(t, "template", "dcontroller", "charts/dcontroller", "--namespace", "dcontroller-system", "--include-crds")
	if err != nil {
		t.Fatal(err)
	}
	k, h := indexObjects(decodeStream(t, kust)), indexObjects(decodeStream(t, chart))
	if _, ok := k["Namespace /dcontroller-system"]; !ok {
		t.Errorf("kustomize renders no Namespace dcontroller-system: %v", objectKeys(k))
	}
	delete(k, "Namespace /dcontroller-system")
	if !reflect.DeepEqual(objectKeys(k), objectKeys(h)) {
		t.Fatalf("different objects\nkustomize: %v\nhelm:      %v", objectKeys(k), objectKeys(h))
	}
	for _, key := range objectKeys(k) {
		if a, b := normalized(k[key]), normalized(h[key]); !reflect.DeepEqual(a, b) {
			ja, _ := yaml.Marshal(a)
			jb, _ := yaml.Marshal(b)
			t.Errorf("%s differs\n--- kustomize\n%s--- helm\n%s", key, ja, jb)
		}
	}

	// The CRDs are installed already; validate them with a dry run only.
	crds, rest := splitCRDs(t, kust)
	if strings.Count(crds, "kind: CustomResourceDefinition") != 5 {
		t.Errorf("kustomize renders %d CRDs, want 5", strings.Count(crds, "kind: CustomResourceDefinition"))
	}
	mustKubectl(t, crds, "apply", "--dry-run=server", "-f", "-")
	applyManifests(t, rest)
	got := mustKubectl(t, "", "-n", "dcontroller-system", "get", "deployment/dcontroller-manager", "serviceaccount/dcontroller",
		"service/dcontroller-apiserver", "service/dcontroller-metrics", "role/dcontroller-leader-election", "-o", "name")
	if strings.Count(got, "\n") != 5 {
		t.Errorf("kubectl get after applying config/default:\n%s", got)
	}
	// Applying the chart's rendering over it changes only labels.
	_, chartRest := splitCRDs(t, chart)
	applyManifests(t, chartRest)
	if by := mustKubectl(t, "", "-n", "dcontroller-system", "get", "deployment/dcontroller-manager",
		"-o", "jsonpath={.metadata.labels.app\\.kubernetes\\.io/managed-by}"); by != "Helm" {
		t.Errorf("managed-by label %q after applying the chart", by)
	}
}

// splitCRDs splits a YAML stream into its CRDs and everything else.
func splitCRDs(t *testing.T, manifests string) (crds, rest string) {
	t.Helper()
	var c, r []string
	for _, o := range decodeStream(t, manifests) {
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		if o.GetKind() == "CustomResourceDefinition" {
			c = append(c, string(b))
		} else {
			r = append(r, string(b))
		}
	}
	return strings.Join(c, "---\n"), strings.Join(r, "---\n")
}

// scopedValues writes the Helm values `dctl rbac -o values` prints for the
// example operators.
func scopedValues(t *testing.T) (string, *rbac.Rules) {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "examples", "service-endpoints", "operator.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ops, err := operator.DecodeOperators(f)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := rbac.Compute(ops, rbac.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Sources are granted cluster-wide (shared informers); a namespaced
	// rule, as a hook's Secret reference needs, makes the values carry a Role.
	rules.Namespaced["chart-team"] = []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"hook-ca"}, Verbs: []string{"get"},
	}}
	vals, err := rules.HelmValues()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "rbac-values.yaml")
	if err := os.WriteFile(p, vals, 0o644); err != nil {
		t.Fatal(err)
	}
	return p, rules
}

// TestChartInstall renders the chart with several value sets, applies each
// rendering to the control plane and reads back what matters.
func TestChartInstall(t *testing.T) {
	valuesFile, scopedRules := scopedValues(t)
	mustKubectl(t, serviceMonitorCRD, "apply", "-f", "-")
	mustKubectl(t, "", "wait", "--for=condition=established", "--timeout=30s", "crd/servicemonitors.monitoring.coreos.com")

	for _, tc := range []struct {
		name, release, ns string
		args              []string
		check             func(t *testing.T, objs map[string]*unstructured.Unstructured, fullname, ns string)
	}{{
		name: "defaults", release: "dcontroller", ns: "dcontroller-system",
		check: func(t *testing.T, objs map[string]*unstructured.Unstructured, fullname, ns string) {
			args := containerArgs(t, objs["Deployment "+ns+"/dcontroller-manager"])
			for _, want := range []string{"start", "--leader-elect", "--leader-election-namespace=" + ns,
				"--api-server-mode=development", "--api-server-addr=127.0.0.1:8443", "--metrics-addr=:8080"} {
				if !hasArg(args, want) {
					t.Errorf("args %q lack %q", args, want)
				}
			}
			rules := mustKubectl(t, "", "get", "clusterrole", fullname+"-operators", "-o", "jsonpath={.rules}")
			if rules != `[{"apiGroups":["*"],"resources":["*"],"verbs":["*"]}]` {
				t.Errorf("rbac.mode=full rules: %s", rules)
			}
			if typ := mustKubectl(t, "", "-n", ns, "get", "service", fullname+"-apiserver", "-o", "jsonpath={.spec.type}"); typ != "ClusterIP" {
				t.Errorf("apiserver service type %q", typ)
			}
		},
	}, {
		name: "scoped RBAC from dctl rbac", release: "dcontroller-scoped", ns: "dcontroller-scoped",
		args: []string{"-f", valuesFile},
		check: func(t *testing.T, objs map[string]*unstructured.Unstructured, fullname, ns string) {
			var cr rbacv1.ClusterRole
			if err := json.Unmarshal([]byte(mustKubectl(t, "", "get", "clusterrole", fullname+"-operators", "-o", "json")), &cr); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cr.Rules, scopedRules.Cluster) {
				t.Errorf("scoped ClusterRole rules\n got %v\nwant %v", cr.Rules, scopedRules.Cluster)
			}
			var role rbacv1.Role
			if err := json.Unmarshal([]byte(mustKubectl(t, "", "-n", "chart-team", "get", "role", fullname+"-operators", "-o", "json")), &role); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(role.Rules, scopedRules.Namespaced["chart-team"]) || len(role.Rules) == 0 {
				t.Errorf("scoped Role rules\n got %v\nwant %v", role.Rules, scopedRules.Namespaced["chart-team"])
			}
			subj := mustKubectl(t, "", "-n", "chart-team", "get", "rolebinding", fullname+"-operators", "-o", "jsonpath={.subjects[0].namespace}/{.subjects[0].name}")
			if subj != ns+"/"+fullname {
				t.Errorf("RoleBinding subject %q", subj)
			}
		},
	}, {
		name: "production API server behind a NodePort", release: "dcontroller-prod", ns: "dcontroller-prod",
		args: []string{"--set", "apiServer.mode=production", "--set", "apiServer.service.type=NodePort",
			"--set", "apiServer.service.nodePort=30443", "--set", "apiServer.tls.secretName=prod-tls"},
		check: func(t *testing.T, objs map[string]*unstructured.Unstructured, fullname, ns string) {
			args := containerArgs(t, objs["Deployment "+ns+"/"+fullname+"-manager"])
			for _, want := range []string{"--api-server-mode=production", "--api-server-addr=:8443",
				"--tls-cert-file=/etc/dcontroller/tls/tls.crt", "--tls-key-file=/etc/dcontroller/tls/tls.key"} {
				if !hasArg(args, want) {
					t.Errorf("args %q lack %q", args, want)
				}
			}
			secret := mustKubectl(t, "", "-n", ns, "get", "deployment", fullname+"-manager", "-o", "jsonpath={.spec.template.spec.volumes[0].secret.secretName}")
			if secret != "prod-tls" {
				t.Errorf("TLS secret volume %q", secret)
			}
			svc := mustKubectl(t, "", "-n", ns, "get", "service", fullname+"-apiserver", "-o", "jsonpath={.spec.type} {.spec.ports[0].name} {.spec.ports[0].nodePort}")
			if svc != "NodePort https 30443" {
				t.Errorf("apiserver service %q", svc)
			}
		},
	}, {
		name: "replicas, LoadBalancer, ServiceMonitor", release: "dc-ha", ns: "dcontroller-ha",
		args: []string{"--set", "replicas=3", "--set", "leaderElection.enabled=false", "--set", "apiServer.service.type=LoadBalancer",
			"--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.serviceMonitor.labels.release=prom",
			"--set", "resources.limits.memory=1Gi"},
		check: func(t *testing.T, objs map[string]*unstructured.Unstructured, fullname, ns string) {
			if fullname != "dc-ha-dcontroller" {
				t.Errorf("fullname %q", fullname)
			}
			d := mustKubectl(t, "", "-n", ns, "get", "deployment", fullname+"-manager",
				"-o", "jsonpath={.spec.replicas} {.spec.template.spec.containers[0].resources.limits.memory}")
			if d != "3 1Gi" {
				t.Errorf("deployment %q", d)
			}
			// More than one replica always elects a leader.
			if args := containerArgs(t, objs["Deployment "+ns+"/"+fullname+"-manager"]); !hasArg(args, "--leader-elect") {
				t.Errorf("args %q lack --leader-elect", args)
			}
			sm := mustKubectl(t, "", "-n", ns, "get", "servicemonitor", fullname, "-o", "jsonpath={.metadata.labels.release} {.spec.endpoints[0].port}")
			if sm != "prom metrics" {
				t.Errorf("servicemonitor %q", sm)
			}
			if typ := mustKubectl(t, "", "-n", ns, "get", "service", fullname+"-apiserver", "-o", "jsonpath={.spec.type}"); typ != "LoadBalancer" {
				t.Errorf("apiserver service type %q", typ)
			}
		},
	}, {
		// leaderElection.enabled keeps its default, true: sharding wins.
		// rbac.mode=scoped with no rules leaves the Role of the ring as the
		// only grant on Leases.
		name: "sharding with three active replicas", release: "dc-shard", ns: "dcontroller-shard",
		args: []string{"--set", "sharding.enabled=true", "--set", "replicas=3", "--set", "sharding.ring=blue", "--set", "rbac.mode=scoped",
			"--set", "sharding.leaseDuration=20s", "--set", "sharding.renewDeadline=0m12.5s", "--set", "sharding.retryPeriod=1500ms"},
		check: func(t *testing.T, objs map[string]*unstructured.Unstructured, fullname, ns string) {
			d := objs["Deployment "+ns+"/"+fullname+"-manager"]
			args := containerArgs(t, d)
			for _, want := range []string{"--sharding", "--sharding-namespace=" + ns, "--sharding-ring=blue",
				"--sharding-identity=$(POD_NAME)", "--sharding-address=$(POD_IP):8443", "--sharding-lease-duration=20s",
				"--sharding-renew-deadline=0m12.5s", "--sharding-retry-period=1500ms"} {
				if !hasArg(args, want) {
					t.Errorf("args %q lack %q", args, want)
				}
			}
			for _, a := range args {
				if strings.HasPrefix(a, "--leader-elect") {
					t.Errorf("args %q pass %s with --sharding", args, a)
				}
			}
			// The API server keeps the Deployment's env as rendered.
			env := mustKubectl(t, "", "-n", ns, "get", "deployment", fullname+"-manager", "-o",
				`jsonpath={range .spec.template.spec.containers[0].env[*]}{.name}={.valueFrom.fieldRef.fieldPath} {end}`)
			if env != "POD_NAME=metadata.name POD_IP=status.podIP " {
				t.Errorf("env %q", env)
			}
			if r := mustKubectl(t, "", "-n", ns, "get", "deployment", fullname+"-manager", "-o", "jsonpath={.spec.replicas}"); r != "3" {
				t.Errorf("replicas %q", r)
			}
			if _, ok := objs["Role "+ns+"/"+fullname+"-leader-election"]; ok {
				t.Errorf("the leader-election Role is rendered with sharding")
			}
			// The API server's authorizer decides what the ServiceAccount may do.
			sa := "system:serviceaccount:" + ns + ":" + fullname
			for _, c := range []struct {
				verb, resource, ns, want string
			}{
				{"delete", "leases.coordination.k8s.io", ns, "yes"},
				{"create", "leases.coordination.k8s.io", ns, "yes"},
				{"update", "leases.coordination.k8s.io", ns, "yes"},
				{"watch", "leases.coordination.k8s.io", ns, "yes"},
				{"create", "events", ns, "yes"},
				{"patch", "events.events.k8s.io", ns, "yes"},
				{"delete", "leases.coordination.k8s.io", "default", "no"},
			} {
				got, _ := kubectl(t, "", "auth", "can-i", c.verb, c.resource, "-n", c.ns, "--as", sa)
				if strings.TrimSpace(got) != c.want {
					t.Errorf("can %s %s %s in %s: %q, want %q", sa, c.verb, c.resource, c.ns, strings.TrimSpace(got), c.want)
				}
			}
		},
	}, {
		name: "no leader election, no API server, no metrics", release: "dcontroller-min", ns: "dcontroller-min",
		args: []string{"--set", "leaderElection.enabled=false", "--set", "apiServer.enabled=false", "--set", "metrics.enabled=false"},
		check: func(t *testing.T, objs map[string]*unstructured.Unstructured, fullname, ns string) {
			args := containerArgs(t, objs["Deployment "+ns+"/"+fullname+"-manager"])
			if hasArg(args, "--leader-elect") || !hasArg(args, "--disable-api-server") || !hasArg(args, "--metrics-addr=0") {
				t.Errorf("args %q", args)
			}
			for _, k := range []string{"Role " + ns + "/" + fullname + "-leader-election", "Role " + ns + "/" + fullname + "-sharding",
				"Service " + ns + "/" + fullname + "-apiserver", "Service " + ns + "/" + fullname + "-metrics"} {
				if _, ok := objs[k]; ok {
					t.Errorf("%s rendered", k)
				}
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"template", tc.release, "charts/dcontroller", "--namespace", tc.ns}, tc.args...)
			out, err := helm(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			objs := decodeStream(t, out)
			idx := indexObjects(objs)
			fullname := tc.release
			if !strings.Contains(tc.release, "dcontroller") {
				fullname = tc.release + "-dcontroller"
			}
			for _, o := range objs {
				if l := o.GetLabels()["app.kubernetes.io/instance"]; l != tc.release {
					t.Errorf("%s: instance label %q", objKey(o), l)
				}
			}
			applyManifests(t, out)
			checkDctlFlags(t, containerArgs(t, idx["Deployment "+tc.ns+"/"+fullname+"-manager"]))
			tc.check(t, idx, fullname, tc.ns)
		})
	}
}

func hasArg(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

var flagRE = regexp.MustCompile(`(?m)^\s+(?:-\w, )?(--[a-z0-9-]+)`)

// checkDctlFlags checks that every flag the chart passes is a flag of the
// dctl start that the image runs, so that the chart cannot drift from the
// command.
func checkDctlFlags(t *testing.T, args []string) {
	t.Helper()
	if len(args) == 0 || args[0] != "start" {
		t.Fatalf("the container does not run dctl start: %q", args)
	}
	known := map[string]bool{}
	for _, m := range flagRE.FindAllStringSubmatch(dctlStartHelp(t), -1) {
		known[m[1]] = true
	}
	if !known["--metrics-addr"] {
		t.Fatalf("could not read the flags of dctl start:\n%s", dctlStartHelp(t))
	}
	for _, a := range args[1:] {
		name, _, _ := strings.Cut(a, "=")
		if !known[name] {
			t.Errorf("the chart passes %s, which dctl start does not have", name)
		}
	}
}

var startHelp string

// dctlStartHelp returns `dctl start --help`.
func dctlStartHelp(t *testing.T) string {
	t.Helper()
	if startHelp == "" {
		out, err := runDctl(t, "start", "--help")
		if err != nil {
			t.Fatal(err)
		}
		startHelp = out
	}
	return startHelp
}

// TestChartRulesMatchCode checks that the manager's and the leader
// election's rules in the chart (and so in config/, which TestKustomizeMatchesChart
// compares with it) are those of package rbac.
func TestChartRulesMatchCode(t *testing.T) {
	out, err := helm(t, "template", "dcontroller", "charts/dcontroller", "--namespace", "dcontroller-system")
	if err != nil {
		t.Fatal(err)
	}
	idx := indexObjects(decodeStream(t, out))
	for key, want := range map[string][]rbacv1.PolicyRule{
		"ClusterRole /dcontroller-manager":                    rbac.ManagerRules(),
		"ClusterRole /dcontroller-operators":                  rbac.FullRules(),
		"Role dcontroller-system/dcontroller-leader-election": rbac.LeaderElectionRules(),
	} {
		o, ok := idx[key]
		if !ok {
			t.Errorf("%s not rendered", key)
			continue
		}
		b, _ := json.Marshal(o.Object["rules"])
		var got []rbacv1.PolicyRule
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s rules\n got %v\nwant %v", key, got, want)
		}
	}
}

// TestHelmInstallUpgradeUninstall installs the chart on the control plane
// with helm itself, moves it to rbac.mode=scoped with the values dctl rbac
// prints, and uninstalls it.
func TestHelmInstallUpgradeUninstall(t *testing.T) {
	const ns, release = "helm-real", "dcontroller-real"
	out, err := helm(t, "install", release, "charts/dcontroller", "--kubeconfig", kubeconfig,
		"--namespace", ns, "--create-namespace")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"STATUS: deployed", "RBAC mode: full.", "kubectl -n helm-real port-forward deployment/dcontroller-real-manager 8443:8443"} {
		if !strings.Contains(out, want) {
			t.Errorf("helm install output lacks %q:\n%s", want, out)
		}
	}
	if rules := mustKubectl(t, "", "get", "clusterrole", release+"-operators", "-o", "jsonpath={.rules}"); rules != `[{"apiGroups":["*"],"resources":["*"],"verbs":["*"]}]` {
		t.Errorf("rules after install: %s", rules)
	}

	values, err := runDctl(t, "rbac", "-f", filepath.Join(repoRoot, "examples", "unready-pod-report", "operator.yaml"), "--kubeconfig", kubeconfig, "-o", "values")
	if err != nil {
		t.Fatal(err)
	}
	valuesFile := filepath.Join(t.TempDir(), "rbac-values.yaml")
	if err := os.WriteFile(valuesFile, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = helm(t, "upgrade", release, "charts/dcontroller", "--kubeconfig", kubeconfig, "--namespace", ns,
		"--reuse-values", "-f", valuesFile, "--set", "apiServer.mode=production")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"REVISION: 2", "RBAC mode: scoped.", "dctl rbac -f OPERATOR.yaml -o values", "View API server (production: HTTPS + JWT)"} {
		if !strings.Contains(out, want) {
			t.Errorf("helm upgrade output lacks %q:\n%s", want, out)
		}
	}
	rules := mustKubectl(t, "", "get", "clusterrole", release+"-operators", "-o", "jsonpath={range .rules[*]}{.resources[0]}:{.verbs}{\"\\n\"}{end}")
	want := "configmaps:[\"get\",\"list\",\"watch\",\"create\",\"update\",\"delete\"]\npods:[\"get\",\"list\",\"watch\"]\n"
	if rules != want {
		t.Errorf("rules after the scoped upgrade:\n%s\nwant:\n%s", rules, want)
	}
	if mode := mustKubectl(t, "", "-n", ns, "get", "deployment", release+"-manager", "-o", "jsonpath={.spec.template.spec.containers[0].args}"); !strings.Contains(mode, "--api-server-mode=production") {
		t.Errorf("args after the upgrade: %s", mode)
	}

	if _, err := helm(t, "uninstall", release, "--kubeconfig", kubeconfig, "--namespace", ns); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []string{"clusterrole/" + release + "-operators", "clusterrole/" + release + "-manager"} {
		if _, err := kubectl(t, "", "get", obj); err == nil || !strings.Contains(err.Error(), "NotFound") {
			t.Errorf("%s after uninstall: %v", obj, err)
		}
	}
	// Helm never deletes CRDs: the Operators of the cluster survive an uninstall.
	mustKubectl(t, "", "get", "crd", "operators.dcontroller.io")
}
