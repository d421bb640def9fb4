package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const ratioOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: ratio-view
spec:
  controllers:
    - name: ratios
      sources:
        - apiGroup: ""
          kind: ConfigMap
          namespace: e2e-finite
      pipeline:
        "@project":
          metadata:
            name: "$.metadata.name"
            namespace: "$.metadata.namespace"
          status:
            ratio: {"@float": "$.data.ratio"}
      target:
        kind: Ratio
`

const ratioResource = "ratios.ratio-view.view.dcontroller.io"

// TestViewNonFiniteNumber: a source object whose @float is NaN does not
// take the view kind away from its clients. Its output is refused (the
// Operator's status names the expression), the other objects are written,
// and kubectl get (list), a watch running since before and a watch started
// after all keep working; the view API server refuses a write of a number
// JSON cannot hold as a float (1e400) and lists on.
func TestViewNonFiniteNumber(t *testing.T) {
	mustKubectl(t, "", "create", "namespace", "e2e-finite")
	dir := t.TempDir()
	srv := startDctl(t, dir, "start", "--metrics-addr", "0", "--health-addr", "0")
	cfg := filepath.Join(dir, "dev.config")
	writeFile(t, cfg, mustDctlIn(t, dir, "generate-config", "--http", "--user=dev", "--namespaces=*", "--server-address="+srv.addr))
	k := func(args ...string) (string, error) { return viewKubectl(t, dir, cfg, "", args...) }

	mustKubectl(t, ratioOperator, "apply", "-f", "-")
	t.Cleanup(func() { _, _ = kubectl(t, "", "delete", "operators.dcontroller.io", "ratio-view") })
	eventually(t, 30*time.Second, func() string {
		if out, err := k("get", ratioResource, "-n", "e2e-finite"); err != nil {
			return fmt.Sprintf("list: %q %v", out, err)
		}
		return ""
	})
	before := startWatch(t, dir, cfg, "get", ratioResource, "-n", "e2e-finite", "--watch", "-o", "json", "--output-watch-events")
	time.Sleep(time.Second)

	configMap := func(name, ratio string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: e2e-finite}\ndata: {ratio: %q}\n", name, ratio)
	}
	mustKubectl(t, configMap("good", "0.5"), "apply", "-f", "-")
	eventually(t, 20*time.Second, func() string {
		if out, err := k("get", ratioResource, "good", "-n", "e2e-finite", "-o", "jsonpath={.status.ratio}"); err != nil || out != "0.5" {
			return fmt.Sprintf("good: %q %v", out, err)
		}
		return ""
	})
	mustKubectl(t, configMap("bad", "NaN"), "apply", "-f", "-")
	status := func() string {
		out, _ := kubectl(t, "", "get", "operators.dcontroller.io", "ratio-view", "-o",
			`jsonpath={.status.controllers[0].conditions[0].reason} {.status.controllers[0].conditions[0].message}`)
		return out
	}
	// names lists the view with kubectl get -o json: every object must
	// encode; it returns name=ratio of each.
	names := func() string {
		out, err := k("get", ratioResource, "-n", "e2e-finite", "-o", "json")
		if err != nil {
			return "list: " + err.Error()
		}
		var list struct {
			Items []struct {
				Metadata struct{ Name string }
				Status   struct{ Ratio any }
			}
		}
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			return "list does not decode: " + err.Error()
		}
		var got []string
		for _, it := range list.Items {
			got = append(got, fmt.Sprintf("%s=%v", it.Metadata.Name, it.Status.Ratio))
		}
		return strings.Join(got, ",")
	}
	// Once the NaN object is processed (the status names the expression:
	// the last pipeline run failed for it), the list holds the good object
	// alone.
	want := `PipelineError the last pipeline run failed for some objects: spec.controllers[0].pipeline["@project"].status.ratio["@float"]: ` +
		`@float: cannot convert "NaN" to float: not a finite number`
	eventually(t, 30*time.Second, func() string {
		if got := names(); got != "good=0.5" {
			return "list: " + got
		}
		if s := status(); !strings.HasPrefix(s, want) {
			return fmt.Sprintf("status:\n got %s\nwant %s...", s, want)
		}
		return ""
	})
	mustKubectl(t, configMap("fine", "0.25"), "apply", "-f", "-")
	eventually(t, 20*time.Second, func() string {
		if got := names(); got != "fine=0.25,good=0.5" {
			return "list: " + got
		}
		return ""
	})
	base := "http://" + srv.addr + "/apis/ratio-view.view.dcontroller.io/v1alpha1/namespaces/e2e-finite/ratios"
	c := &http.Client{Timeout: 20 * time.Second}
	if code, body, _ := request(t, c, "GET", base, "", "", ""); code != 200 {
		t.Fatalf("HTTP list: %d %s", code, body)
	}
	// A watch that ran all along and one started now (its initial
	// events are the list) both see the objects and stay up.
	after := startWatch(t, dir, cfg, "get", ratioResource, "-n", "e2e-finite", "--watch", "-o", "json", "--output-watch-events")
	for name, w := range map[string]*watchLines{"watch started before": before, "watch started after": after} {
		eventually(t, 20*time.Second, func() string {
			txt := strings.ReplaceAll(w.text(), " ", "")
			if !strings.Contains(txt, `"name":"good"`) || !strings.Contains(txt, `"name":"fine"`) {
				return name + ":\n" + w.text()
			}
			return ""
		})
		if e := w.stderr.String(); e != "" {
			t.Fatalf("%s failed:\n%s", name, w.text())
		}
	}

	// The view API server refuses a number JSON has but float64 has not
	// (its decoder would make +Inf of it), on create and on a merge patch;
	// the stored object and the lists are unchanged.
	create := `{"apiVersion":"ratio-view.view.dcontroller.io/v1alpha1","kind":"Ratio","metadata":{"name":"huge","namespace":"e2e-finite"},"status":{"ratio":1e400}}`
	if code, body, _ := request(t, c, "POST", base, "", "application/json", create); code/100 == 2 {
		t.Errorf("create with 1e400: %d %s", code, body)
	}
	if code, body, _ := request(t, c, "PATCH", base+"/good", "", "application/merge-patch+json", `{"status":{"ratio":-1e400}}`); code/100 == 2 {
		t.Errorf("merge patch with -1e400: %d %s", code, body)
	}
	if code, body, _ := request(t, c, "PATCH", base+"/good", "", "application/json-patch+json", `[{"op":"replace","path":"/status/ratio","value":1e999}]`); code/100 == 2 {
		t.Errorf("JSON patch with 1e999: %d %s", code, body)
	}
	if got := names(); got != "fine=0.25,good=0.5" {
		t.Fatalf("list after the refused writes: %s", got)
	}

	// The refused object is written once its value is a number, and the
	// watches see it.
	mustKubectl(t, configMap("bad", "0.75"), "apply", "-f", "-")
	eventually(t, 20*time.Second, func() string {
		if got := names(); got != "bad=0.75,fine=0.25,good=0.5" {
			return "list: " + got
		}
		for name, w := range map[string]*watchLines{"watch started before": before, "watch started after": after} {
			if !strings.Contains(strings.ReplaceAll(w.text(), " ", ""), `"ratio":0.75`) {
				return name + ":\n" + w.text()
			}
		}
		return ""
	})
}
