package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/dcontroller/dcontroller/pkg/operator"
	"github.com/dcontroller/dcontroller/pkg/sharding"
)

// The Grafana dashboard shipped in the chart (charts/dcontroller/dashboards)
// must only query what the manager exports: these tests render it with helm
// and compare its PromQL with a real scrape.

const dashboardFile = "charts/dcontroller/dashboards/dcontroller.json"

// dashboardQuery is one PromQL query of the dashboard: a panel target or a
// template variable's label_values().
type dashboardQuery struct {
	where  string // panel title or variable name
	expr   string
	legend string
}

func dashboardQueries(t *testing.T, b []byte) []dashboardQuery {
	t.Helper()
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr         string `json:"expr"`
				LegendFormat string `json:"legendFormat"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	var qs []dashboardQuery
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			qs = append(qs, dashboardQuery{where: "panel " + p.Title, expr: tg.Expr, legend: tg.LegendFormat})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		s, _ := q["query"].(string)
		m := regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_]\w*)\)$`).FindStringSubmatch(s)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(SELECTOR, LABEL)", v.Name, s)
			continue
		}
		qs = append(qs, dashboardQuery{where: "variable " + v.Name, expr: m[1], legend: "{{" + m[2] + "}}"})
	}
	return qs
}

// promqlRefs scans a PromQL expression for the metrics it selects (with the
// label names of their matchers) and the label names of its by/without/on/
// ignoring clauses. It knows enough PromQL for dashboards: selectors,
// function calls, aggregations, range brackets, strings and numbers.
func promqlRefs(expr string) (metrics map[string][]string, grouping []string, err error) {
	metrics = map[string][]string{}
	keywords := map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true,
		"group_right": true, "bool": true, "and": true, "or": true, "unless": true, "offset": true}
	// Aggregations may be followed by by/without before their parentheses.
	aggregations := map[string]bool{"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true,
		"stdvar": true, "count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
		"limitk": true, "limit_ratio": true}
	isIdent := func(c byte, first bool) bool {
		return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
	}
	labelList := func(i int, end byte) ([]string, int, error) {
		// i is after the opening bracket; returns the label names up to end.
		var names []string
		for i < len(expr) && expr[i] != end {
			switch c := expr[i]; {
			case c == '"' || c == '\'' || c == '`':
				j := strings.IndexByte(expr[i+1:], c)
				if j < 0 {
					return nil, 0, fmt.Errorf("unterminated string in %q", expr)
				}
				i += j + 2
			case isIdent(c, true):
				j := i
				for j < len(expr) && isIdent(expr[j], false) {
					j++
				}
				names = append(names, expr[i:j])
				i = j
			default:
				i++
			}
		}
		if i >= len(expr) {
			return nil, 0, fmt.Errorf("unclosed %q in %q", end, expr)
		}
		return names, i + 1, nil
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '[':
			j := strings.IndexByte(expr[i:], ']')
			if j < 0 {
				return nil, nil, fmt.Errorf("unclosed [ in %q", expr)
			}
			i += j + 1
		case c == '"':
			j := strings.IndexByte(expr[i+1:], '"')
			if j < 0 {
				return nil, nil, fmt.Errorf("unterminated string in %q", expr)
			}
			i += j + 2
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (expr[i] >= '0' && expr[i] <= '9' || expr[i] == '.' || expr[i] == 'e') {
				i++
			}
		case isIdent(c, true):
			j := i
			for j < len(expr) && isIdent(expr[j], false) {
				j++
			}
			name := expr[i:j]
			k := j
			for k < len(expr) && expr[k] == ' ' {
				k++
			}
			next := byte(0)
			if k < len(expr) {
				next = expr[k]
			}
			switch {
			case keywords[name] && next == '(' && name != "and" && name != "or" && name != "unless":
				names, end, err := labelList(k+1, ')')
				if err != nil {
					return nil, nil, err
				}
				grouping = append(grouping, names...)
				i = end
			case next == '(' || keywords[name] || aggregations[name] && next != '{':
				i = j // a function or aggregation, or an operator
			case next == '{':
				names, end, err := labelList(k+1, '}')
				if err != nil {
					return nil, nil, err
				}
				// Matchers are NAME OP "VALUE": the names are every other identifier-led token;
				// strings were skipped, so the list is the label names.
				metrics[name] = append(metrics[name], names...)
				i = end
			default:
				metrics[name] = append(metrics[name], nil...)
				i = j
			}
		default:
			i++
		}
	}
	return metrics, grouping, nil
}

// scrapeSeries reads a Prometheus text exposition: the label names of each
// series name (histograms appear as their _bucket, _sum and _count series),
// and each dcontroller_* metric family with its TYPE.
func scrapeSeries(body string) (series map[string]map[string]bool, families map[string]string) {
	series = map[string]map[string]bool{}
	families = map[string]string{}
	labelRE := regexp.MustCompile(`([a-zA-Z_]\w*)="(?:[^"\\]|\\.)*"`)
	for _, line := range strings.Split(body, "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			if strings.HasPrefix(f[2], "dcontroller_") {
				families[f[2]] = f[3]
			}
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		name := line
		labels := ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name = line[:i]
			if line[i] == '{' {
				labels = line[i:strings.LastIndexByte(line, '}')]
			}
		}
		if series[name] == nil {
			series[name] = map[string]bool{}
		}
		for _, m := range labelRE.FindAllStringSubmatch(labels, -1) {
			series[name][m[1]] = true
		}
	}
	return series, families
}

func TestPromqlRefs(t *testing.T) {
	metrics, grouping, err := promqlRefs(`histogram_quantile(0.99, sum by (operator, le) (rate(a_bucket{operator=~"$op",x!="}"}[$__rate_interval]))) / on (operator) b + 2 * sum without(c) (d)`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"a_bucket": {"operator", "x"}, "b": nil, "d": nil}
	if !reflect.DeepEqual(metrics, want) || !reflect.DeepEqual(grouping, []string{"operator", "le", "operator", "c"}) {
		t.Errorf("metrics %v grouping %v", metrics, grouping)
	}
}

// TestGrafanaDashboardChart renders the chart with grafanaDashboard.enabled
// and checks the ConfigMap: the sidecar label, the dashboard JSON of
// dashboards/dcontroller.json, and that the API server accepts it.
func TestGrafanaDashboardChart(t *testing.T) {
	want, err := os.ReadFile(filepath.Join(repoRoot, dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	out, err := helm(t, "template", "dcontroller", "charts/dcontroller", "--namespace", "dcontroller-system")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range decodeStream(t, out) {
		if o.GetKind() == "ConfigMap" {
			t.Errorf("the default values render a ConfigMap %s: the dashboard is off by default", o.GetName())
		}
	}
	const ns = "e2e-grafana"
	out, err = helm(t, "template", "dcontroller", "charts/dcontroller", "--namespace", "dcontroller-system",
		"--set", "grafanaDashboard.enabled=true", "--set", "grafanaDashboard.namespace="+ns,
		"--set", "grafanaDashboard.annotations.grafana_folder=dcontroller")
	if err != nil {
		t.Fatal(err)
	}
	idx := indexObjects(decodeStream(t, out))
	cm, ok := idx["ConfigMap "+ns+"/dcontroller-dashboard"]
	if !ok {
		t.Fatalf("no ConfigMap %s/dcontroller-dashboard in %v", ns, objectKeys(idx))
	}
	if got := cm.GetLabels()["grafana_dashboard"]; got != "1" {
		t.Errorf("label grafana_dashboard=%q, want \"1\"", got)
	}
	if got := cm.GetLabels()["app.kubernetes.io/part-of"]; got != "dcontroller" {
		t.Errorf("the ConfigMap lacks the chart's labels: %v", cm.GetLabels())
	}
	if got := cm.GetAnnotations()["grafana_folder"]; got != "dcontroller" {
		t.Errorf("annotations %v lack grafana_folder", cm.GetAnnotations())
	}
	data, _ := cm.Object["data"].(map[string]any)
	got, _ := data["dcontroller.json"].(string)
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("the ConfigMap's dcontroller.json is not JSON: %v", err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("the ConfigMap's dashboard differs from %s", dashboardFile)
	}
	if len(dashboardQueries(t, []byte(got))) == 0 {
		t.Errorf("the dashboard has no queries")
	}
	ensureNamespace(t, ns)
	applyManifests(t, out[strings.Index(out, "# Source: dcontroller/templates/dashboard.yaml"):])
	if got := mustKubectl(t, "", "-n", ns, "get", "configmap", "-l", "grafana_dashboard=1", "-o", "name"); strings.TrimSpace(got) != "configmap/dcontroller-dashboard" {
		t.Errorf("configmaps with grafana_dashboard=1: %q", got)
	}
	mustKubectl(t, "", "-n", ns, "delete", "configmap", "dcontroller-dashboard")
}

// TestGrafanaDashboardMetrics runs a manager with a small operator and two
// DecoratorControllers (one whose hook fails), scrapes its metrics endpoint
// once every dcontroller_* family has series, and checks that every query
// of the dashboard selects series the manager exports, filters and groups
// by labels they have, and that every exported family is on the dashboard.
func TestGrafanaDashboardMetrics(t *testing.T) {
	const ns = "e2e-dashboard"
	b, err := os.ReadFile(filepath.Join(repoRoot, dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	queries := dashboardQueries(t, b)

	addr := freeAddr(t)
	startManagerWith(t, operator.ManagerOptions{MetricsAddr: addr})
	mustKubectl(t, "", "create", "namespace", ns)
	t.Cleanup(func() { _, _ = kubectl(t, "", "delete", "namespace", ns, "--wait=false") })
	// A one-member ring, for the scale-out metrics (dctl start --sharding).
	cs, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := sharding.New(sharding.Options{Client: cs, Namespace: ns, Ring: "dashboard", Identity: "dashboard-member"})
	if err != nil {
		t.Fatal(err)
	}
	ringCtx, stopRing := context.WithCancel(context.Background())
	ringDone := make(chan error, 1)
	go func() { ringDone <- ring.Start(ringCtx) }()
	t.Cleanup(func() {
		stopRing()
		if err := <-ringDone; err != nil {
			t.Errorf("ring: %v", err)
		}
	})

	// A declarative operator: a view of the ConfigMaps, a Patcher that labels
	// them (skipped for those already labelled) and a controller whose
	// outputs have no name (output errors).
	const op = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: dashboard
spec:
  controllers:
    - name: copy
      sources: [{apiGroup: "", kind: ConfigMap, namespace: e2e-dashboard}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
          spec: {data: "$.data"}
      target: {kind: ConfigCopy}
    - name: label
      sources: [{kind: ConfigCopy}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace", labels: {copied: "yes"}}
      target: {apiGroup: "", kind: ConfigMap, type: Patcher}
    - name: nameless
      sources: [{kind: ConfigCopy}]
      pipeline:
        "@project":
          metadata: {namespace: "$.metadata.namespace"}
      target: {kind: Nameless}
`
	mustKubectl(t, op, "apply", "-f", "-")
	t.Cleanup(func() { _, _ = kubectl(t, "", "delete", "operators.dcontroller.io", "dashboard", "--ignore-not-found") })

	// Metacontroller side: a DecoratorController whose hook labels its
	// ConfigMaps, and one whose hook answers 500.
	ok := newHookServer(t, func(map[string]any) any {
		return map[string]any{"labels": map[string]any{"decorated": "yes"}}
	})
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	t.Cleanup(failing.Close)
	applyMC(t, fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata:
  name: dashboard-decorate
spec:
  resources:
    - apiVersion: v1
      resource: configmaps
      labelSelector: {matchLabels: {decorate: "ok"}}
  hooks:
    sync: {webhook: {url: %s/sync}}
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata:
  name: dashboard-fail
spec:
  resources:
    - apiVersion: v1
      resource: configmaps
      labelSelector: {matchLabels: {decorate: "fail"}}
  hooks:
    sync: {webhook: {url: %s/sync}}
`, ok.URL, failing.URL))

	mustKubectl(t, "", "-n", ns, "create", "configmap", "plain", "--from-literal=k=v")
	mustKubectl(t, `apiVersion: v1
kind: ConfigMap
metadata: {name: labelled, namespace: e2e-dashboard, labels: {copied: "yes", decorate: "ok"}}
data: {k: v}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: failing, namespace: e2e-dashboard, labels: {decorate: "fail"}}
data: {k: v}
`, "apply", "-f", "-")

	// Every family the dashboard queries has series once each path ran.
	wantFamilies := map[string]bool{}
	for _, q := range queries {
		m, _, err := promqlRefs(q.expr)
		if err != nil {
			t.Fatalf("%s: %v", q.where, err)
		}
		for name := range m {
			wantFamilies[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")] = true
		}
	}
	var series map[string]map[string]bool
	var families map[string]string
	eventually(t, 60*time.Second, func() string {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		series, families = scrapeSeries(string(body))
		var missing []string
		for f := range families {
			if _, ok := series[f]; !ok && families[f] != "histogram" {
				missing = append(missing, f)
			}
			if _, ok := series[f+"_count"]; !ok && families[f] == "histogram" {
				missing = append(missing, f)
			}
		}
		for f := range wantFamilies {
			if _, ok := families[f]; !ok {
				missing = append(missing, f)
			}
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			return fmt.Sprintf("no series yet of %v", missing)
		}
		return ""
	})

	for _, q := range queries {
		metrics, grouping, err := promqlRefs(q.expr)
		if err != nil {
			t.Fatal(err)
		}
		if len(metrics) == 0 {
			t.Errorf("%s: %q selects no metric", q.where, q.expr)
		}
		// Prometheus adds the target labels instance and job to every
		// series it scrapes (the members of a ring differ by instance).
		have := map[string]bool{"instance": true, "job": true}
		for name, matchers := range metrics {
			labels, ok := series[name]
			if !ok {
				t.Errorf("%s: %s is not a series the manager exports (query %q)", q.where, name, q.expr)
				continue
			}
			for l := range labels {
				have[l] = true
			}
			for _, l := range matchers {
				if !labels[l] {
					t.Errorf("%s: %s has no label %q (query %q)", q.where, name, l, q.expr)
				}
			}
		}
		for _, l := range grouping {
			if !have[l] {
				t.Errorf("%s: groups by %q, which none of its series has (query %q)", q.where, l, q.expr)
			}
		}
		for _, m := range regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`).FindAllStringSubmatch(q.legend, -1) {
			if !have[m[1]] || len(grouping) > 0 && !slices.Contains(grouping, m[1]) {
				t.Errorf("%s: legend %q names %q, which the query's result lacks", q.where, q.legend, m[1])
			}
		}
	}
	var notShown []string
	for f := range families {
		if !wantFamilies[f] {
			notShown = append(notShown, f)
		}
	}
	sort.Strings(notShown)
	if len(notShown) > 0 {
		t.Errorf("the manager exports %v, which the dashboard does not show", notShown)
	}
	if ok.calls.Load() == 0 {
		t.Errorf("the decorating hook was never called")
	}
}
