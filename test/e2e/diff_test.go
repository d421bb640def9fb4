package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"
	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/diff"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/operator"
)

// diffOperator is the operator the dctl diff tests edit: an Updater
// (through a view), a Patcher and an Applier, all of ConfigMaps in
// e2e-diff. Each %s is replaced by the version's part.
const diffOperatorTmpl = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: diff-op
spec:
  controllers:
    - name: view
      sources:
        - {apiGroup: "", kind: ConfigMap, namespace: e2e-diff, labelSelector: {matchLabels: {role: src}}}
      pipeline:
%[1]s
      target: {kind: Src}
    - name: copy
      sources: [{kind: Src}]
      pipeline:
        "@project":
          metadata:
            name: {"@concat": ["$.metadata.name", "-copy"]}
            namespace: "$.metadata.namespace"
          data: %[2]s
      target: {apiGroup: "", kind: ConfigMap}
    - name: mark
      sources:
        - {apiGroup: "", kind: ConfigMap, namespace: e2e-diff, labelSelector: {matchLabels: {role: src}}}
      pipeline:
        "@project":
          metadata:
            name: "$.metadata.name"
            namespace: "$.metadata.namespace"
            annotations: %[3]s
      target: {apiGroup: "", kind: ConfigMap, type: Patcher}
    - name: apply
      sources: [{kind: Src}]
      pipeline:
        - "@select": {"@eq": ["$.metadata.name", "a"]}
        - "@project":
            metadata:
              name: "applied"
              namespace: "$.metadata.namespace"
            data: %[4]s
      target: {apiGroup: "", kind: ConfigMap, type: Applier}
%[5]s`

// diffOperatorV1 and diffOperatorV2: the edit drops source c from the
// view (c-copy is deleted), changes the copies' data, replaces a
// Patcher's annotation (its old one goes), drops a field of the applied
// object (server-side apply removes it) and adds a controller whose
// target is created.
var (
	diffOperatorV1 = fmt.Sprintf(diffOperatorTmpl,
		`        "@select": true`,
		`{tier: "$.data.tier", version: "1"}`,
		`{seen: "v1", old: "yes"}`,
		`{k: "v1", old: "yes"}`, "")
	diffOperatorV2 = fmt.Sprintf(diffOperatorTmpl,
		`        "@select": {"@neq": ["$.metadata.name", "c"]}`,
		`{tier: "$.data.tier", version: "2"}`,
		`{seen: "v2"}`,
		`{k: "v2"}`,
		`    - name: extra
      sources: [{kind: Src}]
      pipeline:
        - "@select": {"@eq": ["$.metadata.name", "a"]}
        - "@project":
            metadata: {name: "a-extra", namespace: "$.metadata.namespace"}
            data: {from: "$.metadata.name"}
      target: {apiGroup: "", kind: ConfigMap}
`)
)

// requestCounter counts the requests of a rest.Config by method, and the
// non-GET ones without dryRun=All.
type requestCounter struct {
	mu       sync.Mutex
	byMethod map[string]int
	writes   []string // non-GET requests that are not dry-run
	dryRuns  int
}

func (c *requestCounter) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			c.mu.Lock()
			c.byMethod[r.Method]++
			if r.Method != http.MethodGet {
				// A DELETE carries its options (dryRun) in its body.
				dry := r.URL.Query().Get("dryRun") == "All"
				if r.Method == http.MethodDelete && r.Body != nil {
					b, err := io.ReadAll(r.Body)
					if err != nil {
						c.mu.Unlock()
						return nil, err
					}
					r.Body = io.NopCloser(bytes.NewReader(b))
					dry = bytes.Contains(b, []byte(`"dryRun":["All"]`))
				}
				if dry {
					c.dryRuns++
				} else {
					c.writes = append(c.writes, r.Method+" "+r.URL.String())
				}
			}
			c.mu.Unlock()
			return rt.RoundTrip(r)
		})
	}
	return cfg
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// diffConfigMaps returns the ConfigMaps of e2e-diff, as diff compares
// them (diff.Compared), by name, and their resourceVersions.
func diffConfigMaps(t *testing.T) (map[string]map[string]any, map[string]string) {
	t.Helper()
	return configMapsIn(t, "e2e-diff")
}

// configMapsIn is diffConfigMaps of namespace ns.
func configMapsIn(t *testing.T, ns string) (map[string]map[string]any, map[string]string) {
	t.Helper()
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion("v1")
	l.SetKind("ConfigMapList")
	if err := k8sClient.List(context.Background(), l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	rvs := map[string]string{}
	for _, u := range l.Items {
		out[u.GetName()] = diff.Compared(u.Object)
		rvs[u.GetName()] = u.GetResourceVersion()
	}
	return out, rvs
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// runDctlCode runs dctl and returns stdout, stderr and the exit status.
func runDctlCode(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(dctlBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := runBounded(cmd)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errb.String(), 0
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	default:
		t.Fatal(err)
		return "", "", -1
	}
}

// TestDiffPreviewsOperatorEdit: with diff-op running, dctl diff of its
// edited version names exactly the objects that change once the edit is
// applied (created, updated, deleted), and each object ends as the diff
// says (the fields the API server manages aside); the diff sends no write
// but dry-run requests, and leaves every object's resourceVersion as it
// was. Once applied, a diff of the same version finds no difference
// (exit 0).
func TestDiffPreviewsOperatorEdit(t *testing.T) {
	startManager(t)
	mustKubectl(t, "", "create", "namespace", "e2e-diff")
	for _, cm := range []struct{ name, tier string }{{"a", "gold"}, {"b", "silver"}, {"c", "bronze"}} {
		mustKubectl(t, "", "-n", "e2e-diff", "create", "configmap", cm.name, "--from-literal=tier="+cm.tier)
		mustKubectl(t, "", "-n", "e2e-diff", "label", "configmap", cm.name, "role=src")
	}
	mustKubectl(t, diffOperatorV1, "apply", "-f", "-")
	deleteOperatorsAtCleanup(t, "diff-op")
	eventually(t, 30*time.Second, func() string {
		cms, _ := diffConfigMaps(t)
		for _, n := range []string{"a-copy", "b-copy", "c-copy", "applied"} {
			if cms[n] == nil {
				return n + " missing"
			}
		}
		for _, n := range []string{"a", "b", "c"} {
			if a, _, _ := unstructured.NestedString(cms[n], "metadata", "annotations", "seen"); a != "v1" {
				return n + " not marked"
			}
		}
		return ""
	})
	// Settled: nothing changes any more.
	var before map[string]map[string]any
	var rvBefore map[string]string
	eventually(t, 20*time.Second, func() string {
		b1, r1 := diffConfigMaps(t)
		time.Sleep(time.Second)
		b2, r2 := diffConfigMaps(t)
		if !reflect.DeepEqual(r1, r2) {
			return "still changing"
		}
		before, rvBefore = b2, r2
		_ = b1
		return ""
	})

	ops, err := operator.DecodeOperators(strings.NewReader(diffOperatorV2))
	if err != nil {
		t.Fatal(err)
	}
	rc := &requestCounter{byMethod: map[string]int{}}
	started := time.Now()
	res, err := diff.Run(context.Background(), diff.Options{Config: rc.wrap(restConfig), Operators: ops})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("diff took %s", time.Since(started).Round(time.Millisecond))
	if len(res.Errors) > 0 || len(res.Conflicts) > 0 {
		t.Fatalf("errors %v conflicts %v", res.Errors, res.Conflicts)
	}
	if len(rc.writes) > 0 {
		t.Errorf("diff sent requests that are not dry-run: %v", rc.writes)
	}
	if rc.dryRuns == 0 || rc.dryRuns != res.DryRuns {
		t.Errorf("dry-run requests: counted %d, diff says %d", rc.dryRuns, res.DryRuns)
	}
	t.Logf("requests %v, dry-run %d, objects listed %d", rc.byMethod, rc.dryRuns, res.Listed)
	// The one deletion is c-copy's: a controller reading a view does not
	// delete its targets on the way (the view's objects are there when
	// it looks for stale ones), as the manager does not.
	if rc.byMethod[http.MethodDelete] != 1 {
		t.Errorf("%d DELETE requests, want 1 (c-copy)", rc.byMethod[http.MethodDelete])
	}
	if _, rvs := diffConfigMaps(t); !reflect.DeepEqual(rvs, rvBefore) {
		t.Errorf("resourceVersions changed during diff: %v, before %v", rvs, rvBefore)
	}

	claims := map[string]diff.Change{}
	var names []string
	for _, ch := range res.Changes {
		if ch.GVK.Kind != "ConfigMap" || ch.Key.Namespace != "e2e-diff" {
			t.Errorf("unexpected change %s %s %s", ch.Action, ch.GVK, ch.Key)
			continue
		}
		claims[ch.Key.Name] = ch
		names = append(names, string(ch.Action)+" "+ch.Key.Name)
	}
	sort.Strings(names)
	want := []string{"create a-extra", "delete c-copy", "update a", "update a-copy", "update applied", "update b", "update b-copy", "update c"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("changes %v, want %v", names, want)
	}

	// The CLI prints the same, kubectl diff style, exit status 1.
	v2file := writeTemp(t, "v2.yaml", diffOperatorV2)
	out, stderr, code := runDctlCode(t, []string{"KUBECONFIG=" + kubeconfig}, "diff", "-f", v2file)
	if code != 1 {
		t.Errorf("dctl diff: exit %d, want 1; stderr %s", code, stderr)
	}
	t.Logf("dctl diff:\n%s", out)
	for _, w := range []string{
		"diff -u -N live/v1.ConfigMap.e2e-diff.c-copy merged/v1.ConfigMap.e2e-diff.c-copy\n",
		"--- live/v1.ConfigMap.e2e-diff.a-extra\n+++ merged/v1.ConfigMap.e2e-diff.a-extra\n@@ -0,0 +1,",
		"-  version: \"1\"\n+  version: \"2\"\n",
		"-  old: \"yes\"\n",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("dctl diff output lacks %q:\n%s", w, out)
		}
	}

	// Apply the edit: every object ends as the diff said, no other changes.
	mustKubectl(t, diffOperatorV2, "apply", "-f", "-")
	waitAsDiffSaid(t, "e2e-diff", before, claims)

	out, stderr, code = runDctlCode(t, []string{"KUBECONFIG=" + kubeconfig}, "diff", "-f", v2file)
	if code != 0 || out != "" {
		t.Errorf("dctl diff after applying: exit %d, output %q, stderr %s", code, out, stderr)
	}
}

// waitAsDiffSaid waits until every ConfigMap of ns is as the diff's
// claims (by name) say, and those it did not name are as before.
func waitAsDiffSaid(t *testing.T, ns string, before map[string]map[string]any, claims map[string]diff.Change) {
	t.Helper()
	eventually(t, 30*time.Second, func() string {
		after, _ := configMapsIn(t, ns)
		var bad []string
		for n := range union(before, after) {
			ch, claimed := claims[n]
			switch {
			case !claimed && !reflect.DeepEqual(before[n], after[n]):
				bad = append(bad, fmt.Sprintf("%s changed but the diff did not say: %v -> %v", n, before[n], after[n]))
			case claimed && !reflect.DeepEqual(ch.Merged, after[n]):
				bad = append(bad, fmt.Sprintf("%s: diff said %v, is %v", n, ch.Merged, after[n]))
			}
		}
		return strings.Join(bad, "; ")
	})
}

func union(a, b map[string]map[string]any) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// TestDiffErrors: a cluster that cannot be reached and an operator file
// that does not compile end dctl diff with exit status 2 and a message
// naming the server, or the file and the spec path.
func TestDiffErrors(t *testing.T) {
	good := writeTemp(t, "good.yaml", diffOperatorV1)
	unreachable := writeTemp(t, "kubeconfig", `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`)
	_, stderr, code := runDctlCode(t, nil, "diff", "--kubeconfig", unreachable, "-f", good)
	if code != 2 || !strings.Contains(stderr, "cannot reach the cluster at https://127.0.0.1:1") {
		t.Errorf("unreachable cluster: exit %d, stderr %s", code, stderr)
	}

	// More objects than --max-objects: an error, nothing printed.
	out, stderr, code := runDctlCode(t, []string{"KUBECONFIG=" + kubeconfig}, "diff", "--max-objects", "1", "-f", good)
	if code != 2 || out != "" || !strings.Contains(stderr, "--max-objects") {
		t.Errorf("--max-objects 1: exit %d, stdout %q, stderr %s", code, out, stderr)
	}

	bad := writeTemp(t, "bad.yaml", strings.Replace(diffOperatorV1, `"@concat"`, `"@frobnicate"`, 1))
	_, stderr, code = runDctlCode(t, []string{"KUBECONFIG=" + kubeconfig}, "diff", "-f", bad)
	if code != 2 || !strings.Contains(stderr, bad+": ") || !strings.Contains(stderr, "spec.controllers[1].pipeline") ||
		!strings.Contains(stderr, "@frobnicate") {
		t.Errorf("bad operator: exit %d, stderr %s", code, stderr)
	}
}

// ownCopyOperator copies each ConfigMap labelled role=src in e2e-diff-own
// to "<name>-copy" (an Updater).
const ownCopyOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: diff-own
spec:
  controllers:
    - name: copy
      sources:
        - {apiGroup: "", kind: ConfigMap, namespace: e2e-diff-own, labelSelector: {matchLabels: {role: src}}}
      pipeline:
        "@project":
          metadata:
            name: {"@concat": ["$.metadata.name", "-copy"]}
            namespace: "$.metadata.namespace"
          data: {from: "$.metadata.name"}
      target: {apiGroup: "", kind: ConfigMap}
`

// TestDiffOwnerConflict: an object that another operator's running
// controller owns is reported as a conflict and not changed, one whose
// owner is gone is adopted (an update), as the manager does once the
// operator is applied; the diff names exactly what then changes.
func TestDiffOwnerConflict(t *testing.T) {
	const ns = "e2e-diff-own"
	mustKubectl(t, "", "create", "namespace", ns)
	// diff-other exists as an Operator with a controller copy (nothing
	// runs it here): its mark counts as a running owner's.
	mustKubectl(t, `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: diff-other}
spec:
  controllers:
    - name: copy
      sources: [{apiGroup: "", kind: Secret, namespace: e2e-diff-none}]
      pipeline: {"@select": true}
      target: {apiGroup: "", kind: Secret}
`, "apply", "-f", "-")
	deleteOperatorsAtCleanup(t, "diff-other")
	for _, n := range []string{"x", "y", "z"} {
		mustKubectl(t, "", "-n", ns, "create", "configmap", n)
		mustKubectl(t, "", "-n", ns, "label", "configmap", n, "role=src")
	}
	mustKubectl(t, "", "-n", ns, "create", "configmap", "x-copy", "--from-literal=from=other")
	mustKubectl(t, "", "-n", ns, "annotate", "configmap", "x-copy", opv1a1.OwnerAnnotation+"=diff-other/copy")
	mustKubectl(t, "", "-n", ns, "create", "configmap", "z-copy", "--from-literal=from=gone")
	mustKubectl(t, "", "-n", ns, "annotate", "configmap", "z-copy", opv1a1.OwnerAnnotation+"=diff-gone/copy")
	before, _ := configMapsIn(t, ns)

	file := writeTemp(t, "own.yaml", ownCopyOperator)
	out, stderr, code := runDctlCode(t, []string{"KUBECONFIG=" + kubeconfig}, "diff", "-f", file)
	if code != 2 {
		t.Fatalf("exit %d, want 2 (a conflict is an error the manager would report); stderr %s", code, stderr)
	}
	wantConflict := `conflict: operator "diff-own": controller "copy": spec.controllers[0].target: ConfigMap e2e-diff-own/x-copy is owned by diff-other/copy`
	if !strings.Contains(stderr, wantConflict) {
		t.Errorf("stderr lacks %q:\n%s", wantConflict, stderr)
	}
	if strings.Contains(out, "x-copy") || !strings.Contains(out, "merged/v1.ConfigMap.e2e-diff-own.y-copy") ||
		!strings.Contains(out, "+    dcontroller.io/owner: diff-own/copy") {
		t.Errorf("output:\n%s", out)
	}

	ops, err := operator.DecodeOperators(strings.NewReader(ownCopyOperator))
	if err != nil {
		t.Fatal(err)
	}
	res, err := diff.Run(context.Background(), diff.Options{Config: restConfig, Operators: ops})
	if err != nil {
		t.Fatal(err)
	}
	claims := map[string]diff.Change{}
	var names []string
	for _, ch := range res.Changes {
		if ch.Key.Namespace != ns {
			t.Errorf("unexpected change %s %s %s", ch.Action, ch.GVK, ch.Key)
			continue
		}
		claims[ch.Key.Name] = ch
		names = append(names, string(ch.Action)+" "+ch.Key.Name)
	}
	sort.Strings(names)
	if want := []string{"create y-copy", "update z-copy"}; !reflect.DeepEqual(names, want) {
		t.Errorf("changes %v, want %v", names, want)
	}

	startManager(t)
	mustKubectl(t, ownCopyOperator, "apply", "-f", "-")
	deleteOperatorsAtCleanup(t, "diff-own")
	waitAsDiffSaid(t, ns, before, claims)
}

// TestDiffHookController: dctl diff of a CompositeController (the inline
// pipeline PodService of examples/metacontroller-podservice-pipeline,
// restricted to parents labelled diff=yes) names the Pod and Service it
// would create and the parent's status, and exactly these change once the
// controller is applied; then nothing is left to change (exit 0). A
// Service's clusterIP is the one the dry-run would allocate, not the one
// the real create allocates, so it is left out of the comparison.
func TestDiffHookController(t *testing.T) {
	const ns = "e2e-diff-hook"
	mustKubectl(t, readExample(t, "metacontroller-podservice-pipeline", "crd.yaml"), "apply", "-f", "-")
	mustKubectl(t, "", "wait", "--for=condition=Established", "--timeout=60s", "crd/podservices.examples.dcontroller.io")
	mustKubectl(t, "", "create", "namespace", ns)
	ctl := strings.Replace(readExample(t, "metacontroller-podservice-pipeline", "controller.yaml"),
		"name: podservice-pipeline", "name: diff-podservice", 1)
	ctl = strings.Replace(ctl, "    resource: podservices\n", "    resource: podservices\n    labelSelector: {matchLabels: {diff: \"yes\"}}\n", 1)
	mustKubectl(t, readExample(t, "metacontroller-podservice-pipeline", "podservice.yaml"), "-n", ns, "apply", "-f", "-")
	mustKubectl(t, "", "-n", ns, "label", "podservice.examples.dcontroller.io", "web", "diff=yes")
	file := writeTemp(t, "controller.yaml", ctl)

	out, stderr, code := runDctlCode(t, []string{"KUBECONFIG=" + kubeconfig}, "diff", "-f", file)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr %s\n%s", code, stderr, out)
	}
	t.Logf("dctl diff:\n%s", out)
	var heads []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "diff -u -N ") {
			heads = append(heads, strings.Fields(l)[3])
		}
	}
	want := []string{"live/examples.dcontroller.io.v1.PodService." + ns + ".web",
		"live/v1.Pod." + ns + ".web-pod", "live/v1.Service." + ns + ".web-svc"}
	if !reflect.DeepEqual(heads, want) {
		t.Errorf("objects %v, want %v", heads, want)
	}
	if !strings.Contains(out, "+  pods: 1\n") || !strings.Contains(out, "+  services: 1\n") {
		t.Errorf("the parent's status is not in the diff:\n%s", out)
	}

	// The same through the package, to compare with what the manager does.
	var cc mcv1a1.CompositeController
	if err := yaml.UnmarshalStrict([]byte(ctl), &cc); err != nil {
		t.Fatal(err)
	}
	rc := &requestCounter{byMethod: map[string]int{}}
	res, err := diff.RunHooks(context.Background(), diff.HookOptions{Config: rc.wrap(restConfig), Controllers: []client.Object{&cc}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) > 0 || len(rc.writes) > 0 {
		t.Fatalf("errors %v, writes %v", res.Errors, rc.writes)
	}
	noIP := func(m map[string]any) map[string]any {
		if m == nil || m["kind"] != "Service" {
			return m
		}
		m = object.DeepCopyMap(m)
		unstructured.RemoveNestedField(m, "spec", "clusterIP")
		unstructured.RemoveNestedField(m, "spec", "clusterIPs")
		return m
	}
	objects := func() map[string]map[string]any {
		out := map[string]map[string]any{}
		for _, k := range []struct{ apiVersion, kind string }{{"v1", "Pod"}, {"v1", "Service"}, {"examples.dcontroller.io/v1", "PodService"}} {
			l := &unstructured.UnstructuredList{}
			l.SetAPIVersion(k.apiVersion)
			l.SetKind(k.kind + "List")
			if err := k8sClient.List(context.Background(), l, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			for _, u := range l.Items {
				out[k.kind+"/"+u.GetName()] = noIP(diff.Compared(u.Object))
			}
		}
		return out
	}
	before := objects()
	claims := map[string]map[string]any{}
	for _, ch := range res.Changes {
		claims[ch.GVK.Kind+"/"+ch.Key.Name] = noIP(ch.Merged)
	}

	startManager(t)
	applyMC(t, ctl)
	eventually(t, 30*time.Second, func() string {
		after := objects()
		var bad []string
		for k := range union(before, after) {
			want, claimed := claims[k]
			if !claimed {
				want = before[k]
			}
			if !reflect.DeepEqual(want, after[k]) {
				bad = append(bad, fmt.Sprintf("%s: want %v, is %v", k, want, after[k]))
			}
		}
		return strings.Join(bad, "; ")
	})
	out, stderr, code = runDctlCode(t, []string{"KUBECONFIG=" + kubeconfig}, "diff", "-f", file)
	if code != 0 || out != "" {
		t.Errorf("after applying: exit %d, output %q, stderr %s", code, out, stderr)
	}
}

// TestDiffRGD: dctl diff of a ResourceGraphDefinition file previews its
// instance CRD (a create before it is applied, with the spec the RGD
// runtime then applies) and, once instances run, an edit of a resource
// template as the update of exactly the instances' resources that
// change, ending as the diff says.
func TestDiffRGD(t *testing.T) {
	const ns, crdName = "e2e-diff-rgd", "diffwebapps.kro.run"
	v1 := strings.NewReplacer("name: webapplication", "name: diff-webapp", "kind: WebApplication", "kind: DiffWebApp").
		Replace(readExample(t, "kro-webapp", "operator.yaml"))
	v2 := strings.Replace(v1, "          name: ${schema.spec.name}\n        spec:\n          replicas:",
		"          name: ${schema.spec.name}\n          labels: {tier: web}\n        spec:\n          replicas:", 1)
	if v2 == v1 {
		t.Fatal("the Deployment template of examples/kro-webapp changed; adjust the edit")
	}
	run := func(src string) *diff.Result {
		t.Helper()
		var g krov1a1.ResourceGraphDefinition
		if err := yaml.Unmarshal([]byte(src), &g); err != nil {
			t.Fatal(err)
		}
		rc := &requestCounter{byMethod: map[string]int{}}
		res, err := diff.Run(context.Background(), diff.Options{Config: rc.wrap(restConfig), RGDs: []*krov1a1.ResourceGraphDefinition{&g}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Errors) > 0 || len(rc.writes) > 0 {
			t.Fatalf("errors %v, writes %v", res.Errors, rc.writes)
		}
		return res
	}
	actions := func(res *diff.Result) []string {
		var out []string
		for _, ch := range res.Changes {
			out = append(out, fmt.Sprintf("%s %s %s", ch.Action, ch.GVK.Kind, ch.Key))
		}
		return out
	}

	// Not applied yet: the CRD would be created, there are no instances.
	file := writeTemp(t, "rgd.yaml", v1)
	out, stderr, code := runDctlCode(t, []string{"KUBECONFIG=" + kubeconfig}, "diff", "-f", file)
	if code != 1 || !strings.HasPrefix(out, "diff -u -N live/apiextensions.k8s.io.v1.CustomResourceDefinition.."+crdName+" ") {
		t.Fatalf("exit %d, stderr %s, output:\n%s", code, stderr, out)
	}
	res := run(v1)
	if got, want := actions(res), []string{"create CustomResourceDefinition " + crdName}; !reflect.DeepEqual(got, want) {
		t.Fatalf("changes %v, want %v", got, want)
	}
	crdSpec := res.Changes[0].Merged["spec"]

	startRGDManager(t)
	cleanupRGD(t, "diff-webapp", crdName)
	mustKubectl(t, v1, "apply", "-f", "-")
	// The RGD runtime creates the CRD once it has seen the RGD.
	eventually(t, 60*time.Second, func() string {
		out, err := kubectl(t, "", "get", "crd", crdName, "-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
		if err != nil || out != "True" {
			return fmt.Sprintf("CRD %s not established: %q %v", crdName, out, err)
		}
		return ""
	})
	live := &unstructured.Unstructured{}
	live.SetAPIVersion("apiextensions.k8s.io/v1")
	live.SetKind("CustomResourceDefinition")
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Name: crdName}, live); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(diff.Compared(live.Object)["spec"], crdSpec) {
		t.Errorf("CRD spec applied %v, the diff said %v", live.Object["spec"], crdSpec)
	}

	// An instance runs; the edit adds a label to its Deployment only.
	mustKubectl(t, "", "create", "namespace", ns)
	mustKubectl(t, "apiVersion: kro.run/v1alpha1\nkind: DiffWebApp\nmetadata: {name: shop, namespace: "+ns+"}\nspec: {name: shop}\n", "apply", "-f", "-")
	deployment := func() map[string]any {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("apps/v1")
		u.SetKind("Deployment")
		if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "shop"}, u); err != nil {
			return nil
		}
		return diff.Compared(u.Object)
	}
	eventually(t, 30*time.Second, func() string {
		if deployment() == nil {
			return "no Deployment"
		}
		if r := run(v1); len(r.Changes) > 0 {
			var b strings.Builder
			_ = r.WriteUnified(&b)
			return fmt.Sprintf("not settled:\n%s", b.String())
		}
		return ""
	})
	res = run(v2)
	if got, want := actions(res), []string{"update Deployment " + ns + "/shop"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("changes %v, want %v", got, want)
	}
	wantLabels := res.Changes[0].Merged["metadata"].(map[string]any)["labels"]
	mustKubectl(t, v2, "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		d := deployment()
		if d == nil {
			return "no Deployment"
		}
		if got := d["metadata"].(map[string]any)["labels"]; !reflect.DeepEqual(got, wantLabels) {
			return fmt.Sprintf("labels %v, the diff said %v", got, wantLabels)
		}
		if !reflect.DeepEqual(d["spec"], res.Changes[0].Merged["spec"]) {
			return fmt.Sprintf("spec %v, the diff said %v", d["spec"], res.Changes[0].Merged["spec"])
		}
		return ""
	})
}
