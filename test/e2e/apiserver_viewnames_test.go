package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/dcontroller/dcontroller/pkg/object"
)

// portsOperator names each view after its ConfigMap's protocol and port, as
// the successor's EndpointSlice example names its ServiceViews
// ("web-TCP-80"), and copies every PortView into a PortCopy of the same
// name (a view sourced by a view).
const portsOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: ports
spec:
  controllers:
    - name: port-view
      sources: [{apiGroup: "", kind: ConfigMap}]
      pipeline:
        "@project":
          metadata:
            name: {"@concat": ["$.metadata.name", "-", "$.data.protocol", "-", "$.data.port"]}
            namespace: "$.metadata.namespace"
          spec: {service: "$.metadata.name"}
      target: {kind: PortView}
    - name: port-copy
      sources: [{kind: PortView}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
          spec: {source: "$.metadata.name"}
      target: {kind: PortCopy}
`

const (
	pvResource = "portviews.ports.view.dcontroller.io"
	pcResource = "portcopies.ports.view.dcontroller.io"
	pvName     = "portview.ports.view.dcontroller.io/"
)

func portViewYAML(name string, labels map[string]string) string {
	o := map[string]any{"apiVersion": "ports.view.dcontroller.io/v1alpha1", "kind": "PortView",
		"metadata": map[string]any{"name": name, "namespace": "default", "labels": labels}, "spec": map[string]any{"service": "manual"}}
	b, _ := json.Marshal(o)
	return string(b)
}

// TestAPIServerViewNames drives views named with upper case, ':', '_' and
// ',' through kubectl against `dctl run --standalone`: a pipeline writes
// web-TCP-80 and a second controller copies it; get by name, list with
// field and label selectors (in byte order), watch (JSON events and a
// table watch selecting one name) see them; apply and delete by name work;
// the names the view rule refuses ('%', '/', 254 bytes) are refused with
// the rule's message.
func TestAPIServerViewNames(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "op.yaml"), portsOperator)
	srv := startDctlEnv(t, dir, []string{"KUBECONFIG=" + filepath.Join(dir, "none")}, "run", "--standalone", "-f", "op.yaml")
	cfg := filepath.Join(dir, "dev.config")
	writeFile(t, cfg, mustDctlIn(t, dir, "generate-config", "--http", "--insecure", "--user=dev", "--namespaces=*", "--server-address="+srv.addr))
	k := func(stdin string, args ...string) (string, error) { return viewKubectl(t, dir, cfg, stdin, args...) }
	mk := func(stdin string, args ...string) string { return mustViewKubectl(t, dir, cfg, stdin, args...) }
	eventually(t, 20*time.Second, func() string {
		out, err := k("", "api-resources", "--api-group=ports.view.dcontroller.io", "--no-headers")
		if err != nil || !strings.Contains(out, "portviews") || !strings.Contains(out, "portcopies") {
			return fmt.Sprintf("api-resources: %q %v", out, err)
		}
		return ""
	})

	events := startWatch(t, dir, cfg, "get", pvResource, "-n", "default", "--watch", "-o", "json", "--output-watch-events")
	table := startWatch(t, dir, cfg, "get", pcResource, "-n", "default", "--watch", "--field-selector", "metadata.name=web-TCP-80")
	time.Sleep(time.Second)

	// A pipeline names a view web-TCP-80; a controller sourcing it copies it.
	mk("", "create", "configmap", "web", "--from-literal=protocol=TCP", "--from-literal=port=80")
	eventually(t, 20*time.Second, func() string {
		out, err := k("", "get", pcResource, "web-TCP-80", "-n", "default", "-o", "jsonpath={.spec.source}")
		if err != nil || out != "web-TCP-80" {
			return fmt.Sprintf("PortCopy web-TCP-80: %q %v", out, err)
		}
		return ""
	})
	if out := mk("", "get", pvResource, "web-TCP-80", "-n", "default", "-o", "jsonpath={.metadata.name} {.spec.service}"); out != "web-TCP-80 web" {
		t.Errorf("get web-TCP-80: %q", out)
	}
	if out := mk("", "get", pvResource, "-A", "--field-selector", "metadata.name=web-TCP-80", "-o", "name"); strings.TrimSpace(out) != pvName+"web-TCP-80" {
		t.Errorf("field selector metadata.name=web-TCP-80: %q", out)
	}
	if out := mk("", "get", pvResource, "-A", "--field-selector", "metadata.name=web-tcp-80", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Errorf("field selector metadata.name=web-tcp-80 (another name): %q", out)
	}
	eventually(t, 20*time.Second, func() string {
		txt := strings.ReplaceAll(events.text(), " ", "")
		if !strings.Contains(txt, `"type":"ADDED"`) || !strings.Contains(txt, `"name":"web-TCP-80"`) {
			return "JSON watch:\n" + events.text()
		}
		if !strings.Contains(table.text(), "web-TCP-80") {
			return "table watch:\n" + table.text()
		}
		return ""
	})

	// Written through the API server: apply, get by name, list in byte
	// order, field selector with an escaped ',', label selector.
	for _, n := range []string{"Manual:Obj_1", "b-x", "B-x", "A,b"} {
		labels := map[string]string{}
		if n == "Manual:Obj_1" {
			labels["tier"] = "Front"
		}
		mk(portViewYAML(n, labels), "apply", "-f", "-")
	}
	if out := mk("", "get", pvResource, "Manual:Obj_1", "-n", "default", "-o", "jsonpath={.metadata.name}"); out != "Manual:Obj_1" {
		t.Errorf("get Manual:Obj_1: %q", out)
	}
	want := strings.Join([]string{pvName + "A,b", pvName + "B-x", pvName + "Manual:Obj_1", pvName + "b-x", pvName + "web-TCP-80"}, "\n")
	if out := mk("", "get", pvResource, "-n", "default", "-o", "name"); strings.TrimSpace(out) != want {
		t.Errorf("list order:\n%s\nwant\n%s", out, want)
	}
	if out := mk("", "get", pvResource, "-n", "default", "--field-selector", `metadata.name=A\,b`, "-o", "name"); strings.TrimSpace(out) != pvName+"A,b" {
		t.Errorf(`field selector metadata.name=A\,b: %q`, out)
	}
	if out := mk("", "get", pvResource, "-n", "default", "-l", "tier=Front", "-o", "name"); strings.TrimSpace(out) != pvName+"Manual:Obj_1" {
		t.Errorf("label selector: %q", out)
	}
	eventually(t, 20*time.Second, func() string {
		out, err := k("", "get", pcResource, "Manual:Obj_1", "-n", "default", "-o", "jsonpath={.spec.source}")
		if err != nil || out != "Manual:Obj_1" {
			return fmt.Sprintf("PortCopy Manual:Obj_1: %q %v", out, err)
		}
		return ""
	})

	// Delete by name: the watch and the copy follow.
	mk("", "delete", pvResource, "Manual:Obj_1", "-n", "default")
	eventually(t, 20*time.Second, func() string {
		txt := strings.ReplaceAll(events.text(), " ", "")
		if !strings.Contains(txt, `"type":"DELETED"`) || !strings.Contains(txt, `"name":"Manual:Obj_1"`) {
			return "JSON watch after the delete:\n" + events.text()
		}
		if out, err := k("", "get", pcResource, "Manual:Obj_1", "-n", "default"); err == nil || !strings.Contains(err.Error(), "not found") {
			return fmt.Sprintf("PortCopy Manual:Obj_1 after its PortView was deleted: %q %v", out, err)
		}
		return ""
	})
	// The ConfigMap's protocol changes: web-TCP-80 goes, web-UDP-80 comes.
	mk("", "patch", "configmap", "web", "-p", `{"data":{"protocol":"UDP"}}`)
	eventually(t, 20*time.Second, func() string {
		out, err := k("", "get", pcResource, "-n", "default", "-o", "name")
		if err != nil || strings.Contains(out, "/web-TCP-80") || !strings.Contains(out, "/web-UDP-80") {
			return fmt.Sprintf("PortCopies after the protocol changed: %q %v", out, err)
		}
		return ""
	})

	for name, msg := range map[string]string{
		"a%b":                    `may not contain '%'`,
		"a/b":                    `may not contain '/'`,
		"..":                     `may not be '..'`,
		strings.Repeat("A", 254): "must be no more than 253 characters",
	} {
		if _, err := k(portViewYAML(name, nil), "create", "-f", "-"); err == nil || !strings.Contains(err.Error(), "metadata.name: Invalid value") || !strings.Contains(err.Error(), msg) {
			t.Errorf("create %.20q: %v, want Invalid: %s", name, err, msg)
		}
	}
}

// TestViewNameRuleIsKubernetes: kube-apiserver and the view API server
// answer the same to each name: a Role (whose name kube-apiserver checks
// with the path-segment rule) and a view are both created, or both refused
// with the same status and cause field. Offline validation
// (object.ValidateMetadata, dctl eval and standalone mode) never refuses a
// name kube-apiserver accepts for a Role, a ConfigMap or a custom resource.
func TestViewNameRuleIsKubernetes(t *testing.T) {
	installCRD(t, "Probe", "probes", "Namespaced")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "op.yaml"), portsOperator)
	srv := startDctlEnv(t, dir, []string{"KUBECONFIG=" + filepath.Join(dir, "none")}, "run", "--standalone", "-f", "op.yaml")
	kube, err := rest.HTTPClientFor(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	view := &http.Client{Timeout: 10 * time.Second}
	kubeBase := strings.TrimSuffix(restConfig.Host, "/")
	viewURL := "http://" + srv.addr + "/apis/ports.view.dcontroller.io/v1alpha1/namespaces/default/portviews"
	eventually(t, 20*time.Second, func() string {
		if code, body := httpGet(t, view, viewURL); code != 200 {
			return fmt.Sprintf("%d %s", code, body)
		}
		return ""
	})
	type outcome struct {
		Code   int
		Fields []string
	}
	send := func(c *http.Client, url string, obj map[string]any) outcome {
		b, _ := json.Marshal(obj)
		code, _, raw := hostRequest(t, c, "POST", url+"?dryRun=All", "", "", string(b))
		var st struct {
			Details struct{ Causes []struct{ Field string } }
		}
		_ = json.Unmarshal([]byte(raw), &st)
		o := outcome{Code: code}
		for _, cause := range st.Details.Causes {
			o.Fields = append(o.Fields, cause.Field)
		}
		return o
	}
	kinds := []struct {
		apiVersion, kind, url string
	}{
		{"rbac.authorization.k8s.io/v1", "Role", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles"},
		{"v1", "ConfigMap", "/api/v1/namespaces/default/configmaps"},
		{"e2e.dcontroller.io/v1", "Probe", "/apis/e2e.dcontroller.io/v1/namespaces/default/probes"},
	}
	refused := map[string]bool{".": true, "..": true, "a/b": true, "a%b": true, "a%2Fb": true}
	for _, name := range []string{"web-TCP-80", "system:controller:web", "Bad_Name!", "a b", "a\nb", "Ünï", "web-tcp-80", "a.", "-a", ".", "..", "a/b", "a%b", "a%2Fb"} {
		md := map[string]any{"name": name, "namespace": "default"}
		v := send(view, viewURL, map[string]any{"apiVersion": "ports.view.dcontroller.io/v1alpha1", "kind": "PortView", "metadata": md})
		if want := map[bool]int{false: 201, true: 422}[refused[name]]; v.Code != want {
			t.Errorf("view %q: %+v, want %d", name, v, want)
		}
		for _, kd := range kinds {
			obj := map[string]any{"apiVersion": kd.apiVersion, "kind": kd.kind, "metadata": md}
			k := send(kube, kubeBase+kd.url, obj)
			if k.Code != 201 && k.Code != 422 {
				t.Errorf("%s %q: kube-apiserver answered %+v", kd.kind, name, k)
				continue
			}
			if kd.kind == "Role" && (k.Code != v.Code || strings.Join(k.Fields, ",") != strings.Join(v.Fields, ",")) {
				t.Errorf("%q: kube-apiserver (Role) %+v, view API server %+v", name, k, v)
			}
			offline := object.ValidateMetadata(&unstructured.Unstructured{Object: obj}, true)
			if k.Code == 201 && offline != nil {
				t.Errorf("%s %q: kube-apiserver accepts it, offline validation refuses it: %v", kd.kind, name, offline)
			}
		}
	}
}
