package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// cmKeysOperator turns every ConfigMap into a KeyCount view.
const cmKeysOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: cm-keys
spec:
  controllers:
    - name: count
      sources: [{apiGroup: "", kind: ConfigMap}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
          spec: {keys: {"@len": {"@definedOr": ["$.data", {}]}}}
      target: {kind: KeyCount}
`

// hostRequest sends one request with the given Host and Origin headers
// ("" leaves them as the client sets them).
func hostRequest(t *testing.T, c *http.Client, method, url, host, origin, body string) (int, apiStatus, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var st apiStatus
	_ = json.Unmarshal(b, &st)
	return resp.StatusCode, st, string(b)
}

func keyCount(name string) string {
	return fmt.Sprintf(`{"apiVersion":"cm-keys.view.dcontroller.io/v1alpha1","kind":"KeyCount","metadata":{"name":%q},"spec":{"keys":1}}`, name)
}

// TestAPIServerAcceptHosts runs `dctl run --standalone` (development mode,
// no authentication, on loopback) and sends it the requests a DNS-rebinding
// web page makes: a foreign Host header, a foreign Origin. They get 403 with
// a Status; loopback names are served, and so are the names
// --api-server-accept-hosts adds.
func TestAPIServerAcceptHosts(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "op.yaml"), cmKeysOperator)
	c := &http.Client{Timeout: 10 * time.Second}
	start := func(args ...string) (addr, port, url string) {
		srv := startDctlEnv(t, dir, []string{"KUBECONFIG=" + filepath.Join(dir, "none")}, append([]string{"run", "--standalone", "-f", "op.yaml"}, args...)...)
		_, port, _ = strings.Cut(srv.addr, ":")
		url = "http://" + srv.addr + "/apis/cm-keys.view.dcontroller.io/v1alpha1/namespaces/kube-system/keycounts"
		eventually(t, 20*time.Second, func() string {
			if code, _, body := hostRequest(t, c, "GET", url, "", "", ""); code != 200 {
				return fmt.Sprintf("list: %d %s", code, body)
			}
			return ""
		})
		return srv.addr, port, url
	}
	type probe struct {
		host, origin string
		want         int
	}
	check := func(url string, probes []probe) {
		t.Helper()
		for i, tc := range probes {
			code, st, body := hostRequest(t, c, "POST", url, tc.host, tc.origin, keyCount(fmt.Sprintf("k%d", i)))
			if code != tc.want {
				t.Errorf("Host %q Origin %q: %d, want %d: %s", tc.host, tc.origin, code, tc.want, body)
				continue
			}
			if code == 403 && (st.Kind != "Status" || st.Reason != "Forbidden" || st.Code != 403 || !strings.Contains(st.Message, "not accepted")) {
				t.Errorf("Host %q Origin %q: the refusal is not a Forbidden Status: %s", tc.host, tc.origin, body)
			}
		}
	}

	addr, port, url := start()
	check(url, []probe{
		{"attacker.example", "", 403},
		{"attacker.example:" + port, "", 403},
		{"localhost.attacker.example:" + port, "", 403},
		{"", "http://attacker.example:" + port, 403},
		{"localhost:" + port, "http://attacker.example:" + port, 403},
		{"", "null", 403},
		{"", "", 201},
		{"localhost:" + port, "", 201},
		{"[::1]:" + port, "", 201},
		{"localhost:" + port, "http://localhost:" + port, 201},
	})
	// Reads are refused as well: a rebinding page must not read the views.
	if code, _, body := hostRequest(t, c, "GET", url, "attacker.example:"+port, "", ""); code != 403 {
		t.Errorf("GET with a foreign Host: %d %s", code, body)
	}
	if code, _, body := hostRequest(t, c, "GET", url, "", "", ""); code != 200 || strings.Count(body, `"kind":"KeyCount"`) != 4 {
		t.Errorf("objects after the requests: %d %s", code, body)
	}
	// kubectl with a loopback kubeconfig is not affected.
	cfg := filepath.Join(dir, "dev.config")
	writeFile(t, cfg, mustDctlIn(t, dir, "generate-config", "--http", "--user=dev", "--namespaces=*", "--server-address=localhost:"+port))
	if out := mustViewKubectl(t, dir, cfg, "", "get", "keycounts.cm-keys.view.dcontroller.io", "-n", "kube-system", "--no-headers"); strings.Count(out, "\n") != 4 {
		t.Errorf("kubectl get via %s:\n%s", addr, out)
	}

	_, port, url = start(`--api-server-accept-hosts=dev\.example,.*\.test`)
	check(url, []probe{
		{"dev.example:" + port, "", 201},
		{"a.b.test", "https://c.test", 201},
		{"localhost:" + port, "", 201},
		{"devxexample:" + port, "", 403},
		{"dev.example.attacker:" + port, "", 403},
		{"attacker.example:" + port, "", 403},
	})
}

// TestAPIServerProductionPublicPaths runs `dctl start` in production mode
// on loopback: /healthz, /livez, /readyz and /version answer without a
// token (as kube-apiserver's do), everything else is 401 without one, and
// a foreign Host is refused, as the server is on loopback.
func TestAPIServerProductionPublicPaths(t *testing.T) {
	dir := t.TempDir()
	mustDctlIn(t, dir, "generate-keys", "--hostname=localhost", "--hostname=127.0.0.1", "--key-type=ecdsa")
	srv := startDctl(t, dir, "start", "--metrics-addr=0", "--health-addr=0",
		"--api-server-mode=production", "--tls-cert-file=apiserver.crt", "--tls-key-file=apiserver.key")
	c := httpsClient(t, filepath.Join(dir, "apiserver.crt"))
	base := "https://" + srv.addr
	eventually(t, 30*time.Second, func() string {
		if code, _, body := hostRequest(t, c, "GET", base+"/readyz", "", "", ""); code != 200 {
			return fmt.Sprintf("/readyz: %d %s", code, body)
		}
		return ""
	})
	for _, p := range []string{"/healthz", "/livez", "/readyz", "/version", "/readyz?verbose"} {
		if code, _, body := hostRequest(t, c, "GET", base+p, "", "", ""); code != 200 {
			t.Errorf("GET %s without a token: %d %s", p, code, body)
		}
	}
	if _, _, body := hostRequest(t, c, "GET", base+"/version", "", "", ""); !strings.Contains(body, `"gitVersion"`) {
		t.Errorf("/version: %s", body)
	}
	for _, p := range []string{"/apis", "/api", "/openapi/v2", "/readyz/ping", "/apis/cm-keys.view.dcontroller.io/v1alpha1/keycounts"} {
		if code, _, body := hostRequest(t, c, "GET", base+p, "", "", ""); code != 401 {
			t.Errorf("GET %s without a token: %d %s", p, code, body)
		}
	}
	if code, _, _ := request(t, c, "GET", base+"/healthz", "not-a-token", "", ""); code != 401 {
		t.Errorf("/healthz with an invalid token: %d", code)
	}
	if code, st, body := hostRequest(t, c, "GET", base+"/healthz", "attacker.example", "", ""); code != 403 || st.Reason != "Forbidden" {
		t.Errorf("foreign Host on a loopback production server: %d %s", code, body)
	}
}

// firstReady polls url's /readyz every few milliseconds and, at the first
// 200, runs check at once; it returns check's complaint.
func firstReady(t *testing.T, c *http.Client, base string, check func() string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := c.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return check()
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return "never ready"
}

// discoveryHas reports whether the discovery document at path lists the
// resource.
func discoveryHas(t *testing.T, c *http.Client, url, resource string) string {
	t.Helper()
	code, _, body := hostRequest(t, c, "GET", url, "", "", "")
	if code != 200 || !strings.Contains(body, `"name":"`+resource+`"`) {
		return fmt.Sprintf("ready, but %s does not list %s: %d %.300s", url, resource, code, body)
	}
	return ""
}

// TestAPIServerReadyMeansServed: the API server of `dctl start` is ready
// only once the views of the Operators in the cluster are in discovery,
// so an apply right after readiness finds the kind; `dctl run --standalone`
// only once the native kinds and views of its operators are.
func TestAPIServerReadyMeansServed(t *testing.T) {
	c := &http.Client{Timeout: 10 * time.Second}
	t.Run("start", func(t *testing.T) {
		op := `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: ready-probe
spec:
  controllers:
    - name: copy
      sources: [{kind: ReadyInput}]
      pipeline:
        "@project": {metadata: "$.metadata", spec: "$.spec"}
      target: {kind: ReadyOutput}
`
		mustKubectl(t, op, "apply", "-f", "-")
		t.Cleanup(func() {
			_, _ = kubectl(t, "", "delete", "operators.dcontroller.io", "ready-probe", "--ignore-not-found")
		})
		dir := t.TempDir()
		health := freeAddr(t)
		srv := startDctl(t, dir, "start", "--metrics-addr=0", "--health-addr="+health)
		base := "http://" + srv.addr
		// The manager's own /readyz (the chart's readiness probe) waits
		// for the views too.
		if msg := firstReady(t, c, "http://"+health, func() string {
			if msg := discoveryHas(t, c, base+"/apis/ready-probe.view.dcontroller.io/v1alpha1", "readyinputs"); msg != "" {
				_, body := httpGet(t, c, "http://"+health+"/readyz?verbose")
				return msg + "\nmanager readyz:\n" + body
			}
			return ""
		}); msg != "" {
			t.Fatal("manager /readyz: " + msg)
		}
		if _, body := httpGet(t, c, "http://"+health+"/readyz?verbose"); !strings.Contains(body, "[+]views-served ok") {
			t.Errorf("manager readyz:\n%s", body)
		}
		if msg := firstReady(t, c, base, func() string {
			return discoveryHas(t, c, base+"/apis/ready-probe.view.dcontroller.io/v1alpha1", "readyinputs")
		}); msg != "" {
			t.Fatal(msg)
		}
		code, _, body := hostRequest(t, c, "POST", base+"/apis/ready-probe.view.dcontroller.io/v1alpha1/namespaces/default/readyinputs", "", "",
			`{"apiVersion":"ready-probe.view.dcontroller.io/v1alpha1","kind":"ReadyInput","metadata":{"name":"a"},"spec":{"x":1}}`)
		if code != 201 {
			t.Errorf("create right after ready: %d %s", code, body)
		}
		if _, body := httpGet(t, c, base+"/readyz?verbose"); !strings.Contains(body, "[+]views-served ok") {
			t.Errorf("readyz:\n%s", body)
		}
	})
	t.Run("standalone", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "op.yaml"), cmKeysOperator)
		srv := startDctlEnv(t, dir, []string{"KUBECONFIG=" + filepath.Join(dir, "none")}, "run", "--standalone", "-f", "op.yaml")
		base := "http://" + srv.addr
		if msg := firstReady(t, c, base, func() string {
			if msg := discoveryHas(t, c, base+"/api/v1", "configmaps"); msg != "" {
				return msg
			}
			return discoveryHas(t, c, base+"/apis/cm-keys.view.dcontroller.io/v1alpha1", "keycounts")
		}); msg != "" {
			t.Fatal(msg)
		}
	})
}

func httpGet(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	code, _, body := hostRequest(t, c, "GET", url, "", "", "")
	return code, body
}

// TestDctlRunStandaloneMetrics: `dctl run --standalone --metrics-addr`
// serves the operators' Prometheus metrics, as dctl start does.
func TestDctlRunStandaloneMetrics(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "op.yaml"), cmKeysOperator)
	metrics := freeAddr(t)
	srv := startDctlEnv(t, dir, []string{"KUBECONFIG=" + filepath.Join(dir, "none")}, "run", "--standalone", "-f", "op.yaml", "--metrics-addr", metrics)
	cfg := filepath.Join(dir, "dev.config")
	writeFile(t, cfg, mustDctlIn(t, dir, "generate-config", "--http", "--user=dev", "--namespaces=*", "--server-address="+srv.addr))
	c := &http.Client{Timeout: 10 * time.Second}
	eventually(t, 30*time.Second, func() string {
		if _, err := viewKubectl(t, dir, cfg, "", "create", "configmap", "settings", "--from-literal=a=1"); err != nil && !strings.Contains(err.Error(), "AlreadyExists") {
			return err.Error()
		}
		return ""
	})
	want := `dcontroller_deltas_in_total{controller="count",operator="cm-keys"} `
	eventually(t, 30*time.Second, func() string {
		resp, err := c.Get("http://" + metrics + "/metrics")
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) || !strings.Contains(string(b), `dcontroller_view_objects{kind="KeyCount",operator="cm-keys"} 1`) {
			return fmt.Sprintf("metrics: %d\n%.3000s", resp.StatusCode, b)
		}
		return ""
	})
}

// badMetadata are objects whose metadata kube-apiserver refuses for a
// schemaless custom resource and the view rules refuse too. (Names with
// upper case or punctuation are valid views, though not custom resources:
// see TestViewNameRuleIsKubernetes.)
var badMetadata = map[string]string{
	"a slash in the name": `{"name":"a/b"}`,
	"300 characters":      `{"name":"` + strings.Repeat("a", 300) + `"}`,
	"labels as a list":    `{"name":"a","labels":["a"]}`,
	"bad label value":     `{"name":"a","labels":{"a":"b c"}}`,
	"bad annotation key":  `{"name":"a","annotations":{"/x":"y"}}`,
}

// TestAPIServerValidatesLikeKubeAPIServer sends the same bad objects to a
// schemaless custom resource of the real kube-apiserver and to a view of
// the dctl API server: both answer with the same status code, reason and
// cause fields (422 Invalid with field paths, or 400 BadRequest for
// metadata that does not decode, such as labels: ["a"]).
func TestAPIServerValidatesLikeKubeAPIServer(t *testing.T) {
	installCRD(t, "Probe", "probes", "Namespaced")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "op.yaml"), cmKeysOperator)
	srv := startDctlEnv(t, dir, []string{"KUBECONFIG=" + filepath.Join(dir, "none")}, "run", "--standalone", "-f", "op.yaml")
	kube, err := rest.HTTPClientFor(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	view := &http.Client{Timeout: 10 * time.Second}
	viewURL := "http://" + srv.addr + "/apis/cm-keys.view.dcontroller.io/v1alpha1/namespaces/default/keycounts"
	eventually(t, 20*time.Second, func() string {
		if code, body := httpGet(t, view, viewURL); code != 200 {
			return fmt.Sprintf("%d %s", code, body)
		}
		return ""
	})
	type outcome struct {
		Code   int
		Reason string
		Fields []string
	}
	send := func(c *http.Client, url, body string) outcome {
		code, _, raw := hostRequest(t, c, "POST", url, "", "", body)
		var st struct {
			Reason  string
			Details struct{ Causes []struct{ Field string } }
		}
		_ = json.Unmarshal([]byte(raw), &st)
		o := outcome{Code: code, Reason: st.Reason}
		for _, cause := range st.Details.Causes {
			o.Fields = append(o.Fields, cause.Field)
		}
		return o
	}
	for name, md := range badMetadata {
		k := send(kube, strings.TrimSuffix(restConfig.Host, "/")+"/apis/e2e.dcontroller.io/v1/namespaces/default/probes",
			`{"apiVersion":"e2e.dcontroller.io/v1","kind":"Probe","metadata":`+md+`}`)
		v := send(view, viewURL, `{"apiVersion":"cm-keys.view.dcontroller.io/v1alpha1","kind":"KeyCount","metadata":`+md+`}`)
		if k.Code != 422 && k.Code != 400 {
			t.Errorf("%s: kube-apiserver answered %+v; the test expects it to refuse", name, k)
		}
		if !reflect.DeepEqual(k, v) {
			t.Errorf("%s: kube-apiserver %+v, view API server %+v", name, k, v)
		}
	}
}

// TestOperatorInvalidKind: an operator whose kinds are not valid kind
// names (as a CRD's spec.names.kind is checked) gets, for those
// controllers, the status a controller with a bad pipeline gets (Ready
// False, InvalidSpec, the spec path), and no resource is served for them.
func TestOperatorInvalidKind(t *testing.T) {
	op := `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: bad-kinds
spec:
  controllers:
    - name: bad-target
      sources: [{kind: Good}]
      pipeline: {"@project": {metadata: "$.metadata"}}
      target: {kind: "@@@"}
    - name: bad-source
      sources: [{kind: "🙂"}]
      pipeline: {"@project": {metadata: "$.metadata"}}
      target: {kind: Out}
    - name: bad-pipeline
      sources: [{kind: Good}]
      pipeline: {"@frobnicate": {}}
      target: {kind: Out}
    - name: good
      sources: [{kind: Good}]
      pipeline: {"@project": {metadata: "$.metadata"}}
      target: {kind: Out}
`
	mustKubectl(t, op, "apply", "-f", "-")
	t.Cleanup(func() { _, _ = kubectl(t, "", "delete", "operators.dcontroller.io", "bad-kinds", "--ignore-not-found") })
	dir := t.TempDir()
	srv := startDctl(t, dir, "start", "--metrics-addr=0", "--health-addr=0")
	type cond struct{ Status, Reason, Message string }
	conds := map[string]cond{}
	eventually(t, 30*time.Second, func() string {
		out, err := kubectl(t, "", "get", "operators.dcontroller.io", "bad-kinds", "-o", "json")
		if err != nil {
			return err.Error()
		}
		var o struct {
			Status struct {
				Controllers []struct {
					Name       string
					Conditions []cond
				}
			}
		}
		if err := json.Unmarshal([]byte(out), &o); err != nil {
			return err.Error()
		}
		for _, c := range o.Status.Controllers {
			if len(c.Conditions) > 0 {
				conds[c.Name] = c.Conditions[0]
			}
		}
		if len(conds) != 4 {
			return fmt.Sprintf("status: %s", out)
		}
		return ""
	})
	if c := conds["good"]; c.Status != "True" {
		t.Errorf("good controller: %+v", c)
	}
	bad := conds["bad-pipeline"]
	if bad.Status != "False" || bad.Reason != "InvalidSpec" || !strings.HasPrefix(bad.Message, "spec.controllers[2].pipeline") {
		t.Errorf("bad pipeline: %+v", bad)
	}
	for name, path := range map[string]string{"bad-target": `spec.controllers[0].target.kind: Invalid value: "@@@"`, "bad-source": `spec.controllers[1].sources[0].kind: Invalid value: "🙂"`} {
		c := conds[name]
		if c.Status != bad.Status || c.Reason != bad.Reason || !strings.HasPrefix(c.Message, path) {
			t.Errorf("%s: %+v, want Ready %s %s with a message starting %q", name, c, bad.Status, bad.Reason, path)
		}
	}
	c := &http.Client{Timeout: 10 * time.Second}
	eventually(t, 20*time.Second, func() string {
		code, body := httpGet(t, c, "http://"+srv.addr+"/apis/bad-kinds.view.dcontroller.io/v1alpha1")
		if code != 200 || !strings.Contains(body, `"name":"goods"`) || !strings.Contains(body, `"name":"outs"`) {
			return fmt.Sprintf("discovery: %d %s", code, body)
		}
		if strings.Contains(body, `"name":""`) || strings.Contains(body, `@@@`) || strings.Count(body, `"kind":`) != 3 {
			return fmt.Sprintf("an invalid kind is served: %s", body)
		}
		return ""
	})
}
