package e2e

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// widgetCC is a CompositeController of Widgets with ConfigMap children and
// the given extra spec lines (indented two spaces).
func widgetCC(name, hookURL, extra string) string {
	return fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: %s}
spec:
  parentResource: {apiVersion: e2e.dcontroller.io/v1, resource: widgets}
  childResources:
    - apiVersion: v1
      resource: configmaps
      updateStrategy: {method: InPlace}
%s  hooks:
    sync:
      webhook: {url: %s}
`, name, extra, hookURL)
}

// conditionsMention checks that the status conditions of Widget ns/name
// mention every part.
func conditionsMention(t *testing.T, ns, name string, parts ...string) func() string {
	return func() string {
		p, err := getObj(t, "e2e.dcontroller.io/v1", "Widget", ns, name)
		if err != nil {
			return err.Error()
		}
		c := str(path(p.Object, "status.conditions"))
		for _, part := range parts {
			if !strings.Contains(c, part) {
				return "conditions " + c + ", want " + part
			}
		}
		return ""
	}
}

// TestMetacontrollerMisuse: inputs that must not hurt. The API server
// refuses a webhook timeout that is not a duration (it would stop the
// informer of every CompositeController); a parent with an empty selector
// is refused instead of adopting and deleting every ConfigMap of its
// namespace; a hook that answers `null` deletes nothing; resyncAfterSeconds
// does not pile up timers, has a floor and a cap; several refused children
// give a stable condition and a shortened Event; a hook whose status changes on
// every call is not called in a loop (its follow-ups are delayed); a second controller of the same
// parents gets a warning; a controller with a resync period can be changed
// and deleted (its ticker stops).
func TestMetacontrollerMisuse(t *testing.T) {
	const ns = "e2e-mc-misuse"
	installCRD(t, "Widget", "widgets", "Namespaced")
	mustKubectl(t, "", "create", "namespace", ns)
	startManager(t)

	// Refused at admission, with the field named.
	out, err := kubectl(t, widgetCC("bad-timeout", "http://127.0.0.1:1", "")+"", "apply", "-f", "-")
	if err != nil {
		t.Fatalf("a valid controller is refused: %v %s", err, out)
	}
	mustKubectl(t, "", "delete", "compositecontroller", "bad-timeout")
	bad := strings.Replace(widgetCC("bad-timeout", "http://127.0.0.1:1", ""), "webhook: {url: http://127.0.0.1:1}", "webhook: {url: http://127.0.0.1:1, timeout: banana}", 1)
	if out, err := kubectl(t, bad, "apply", "-f", "-"); err == nil || !strings.Contains(out+err.Error(), "spec.hooks.sync.webhook.timeout") {
		t.Errorf("timeout: banana: %v %s", err, out)
	}

	var mode atomic.Value
	mode.Store("ok")
	h := newHookServer(t, func(req map[string]any) any {
		parent, _ := req["parent"].(map[string]any)
		name := str(path(parent, "metadata.name"))
		child := map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name + "-0", "labels": map[string]any{"widget": name}}, "data": map[string]any{"v": "1"}}
		switch mode.Load().(string) {
		case "null":
			return nil // encoded as `null`
		case "far":
			// Far beyond any duration: capped, not overflowed into a loop.
			return map[string]any{"children": []any{child}, "resyncAfterSeconds": 1e308}
		case "badnames":
			// Six children the API server refuses (invalid names): the
			// Event note is longer than an Event may be.
			kids := []any{child}
			for _, n := range []string{"BAD_A", "BAD_B", "BAD_C", "BAD_D", "BAD_E", "BAD_F"} {
				kids = append(kids, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
					"metadata": map[string]any{"name": n, "labels": map[string]any{"widget": name}}})
			}
			return map[string]any{"children": kids}
		case "mismatch":
			child["metadata"].(map[string]any)["labels"] = map[string]any{"widget": "other"}
			return map[string]any{"children": []any{child}}
		case "resync":
			return map[string]any{"children": []any{child}, "resyncAfterSeconds": 0.001}
		case "clock":
			return map[string]any{"children": []any{child}, "status": map[string]any{"now": time.Now().Format(time.RFC3339Nano)}}
		}
		return map[string]any{"children": []any{child}}
	})
	applyMC(t, widgetCC("widgets", h.URL, "  resyncPeriodSeconds: 60\n"))

	// An empty selector: refused; the bystander is neither adopted nor
	// deleted.
	mustKubectl(t, "", "-n", ns, "create", "configmap", "bystander", "--from-literal=a=b")
	mustKubectl(t, `apiVersion: e2e.dcontroller.io/v1
kind: Widget
metadata: {name: open, namespace: `+ns+`}
spec: {selector: {}}
`, "apply", "-f", "-")
	eventually(t, 30*time.Second, conditionsMention(t, ns, "open", "InvalidParent", "empty selector"))
	if bs, err := getObj(t, "v1", "ConfigMap", ns, "bystander"); err != nil || len(bs.GetOwnerReferences()) != 0 {
		t.Fatalf("the bystander was touched: %v %v", err, bs.GetOwnerReferences())
	}

	// A working parent, then its hook answers null: nothing is deleted.
	mustKubectl(t, `apiVersion: e2e.dcontroller.io/v1
kind: Widget
metadata: {name: w, namespace: `+ns+`}
spec: {selector: {matchLabels: {widget: w}}, v: "1"}
`, "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		if _, err := getObj(t, "v1", "ConfigMap", ns, "w-0"); err != nil {
			return err.Error()
		}
		return ""
	})
	mode.Store("null")
	mustKubectl(t, "", "-n", ns, "patch", "widget", "w", "--type=merge", "-p", `{"spec":{"v":"2"}}`)
	eventually(t, 30*time.Second, conditionsMention(t, ns, "w", "SyncHookFailed", "must be a JSON object"))
	if _, err := getObj(t, "v1", "ConfigMap", ns, "w-0"); err != nil {
		t.Fatalf("a null answer deleted the child: %v", err)
	}

	// A child whose labels the parent's selector does not match: refused
	// with its index, nothing written.
	mode.Store("mismatch")
	mustKubectl(t, "", "-n", ns, "patch", "widget", "w", "--type=merge", "-p", `{"spec":{"v":"3"}}`)
	eventually(t, 30*time.Second, conditionsMention(t, ns, "w", "SyncHookFailed", "children[0] (ConfigMap w-0): labels map[widget:other] do not match"))
	if cm, err := getObj(t, "v1", "ConfigMap", ns, "w-0"); err != nil || cm.GetLabels()["widget"] != "w" {
		t.Fatalf("the child was changed or deleted: %v %v", err, cm.GetLabels())
	}

	// callsAfterChange switches the hook to mode m, changes the parent
	// (touches == number of annotation changes in a row), waits 2s and
	// returns the hook calls of the next window.
	callsAfterChange := func(m string, touches int, window time.Duration) int64 {
		mode.Store(m)
		for i := 0; i < touches; i++ {
			mustKubectl(t, "", "-n", ns, "annotate", "--overwrite", "widget", "w", fmt.Sprintf("touch=%s-%d", m, i))
		}
		time.Sleep(2 * time.Second)
		c0 := h.calls.Load()
		time.Sleep(window)
		return h.calls.Load() - c0
	}
	// resyncAfterSeconds: 0.001 is held to the 100ms floor, and changes of
	// the parent do not add timers.
	if n := callsAfterChange("resync", 5, 5*time.Second); n < 10 || n > 55 {
		t.Errorf("resyncAfterSeconds 0.001: %d calls in 5s, want at most 10 a second", n)
	}
	// resyncAfterSeconds: 1e308 is capped: no resync soon, no loop.
	if n := callsAfterChange("far", 1, 3*time.Second); n > 0 {
		t.Errorf("resyncAfterSeconds 1e308: %d calls in 3s", n)
	}
	// A status that changes on every call: a few follow-ups at once, then
	// delayed ones (1s, 2s, 4s, ...: one in this window), with a Warning
	// Event.
	if n := callsAfterChange("clock", 1, 3*time.Second); n > 2 {
		t.Errorf("a status that never settles: %d calls in 3s from 2s after the change, want at most 2", n)
	}
	eventually(t, 10*time.Second, func() string {
		if ev := mustKubectl(t, "", "-n", ns, "get", "events", "--field-selector", "involvedObject.name=w,reason=StatusNotSettling", "-o", "name"); ev == "" {
			return "no StatusNotSettling event"
		}
		return ""
	})

	// Several refused children: one condition whose message does not
	// change from one retry to the next (no StatusNotSettling), retries
	// with backoff, and a CreateError Event (Metacontroller's reason for a
	// refused creation) cut to what an Event may hold.
	notSettling := func() string {
		return mustKubectl(t, "", "-n", ns, "get", "events", "--field-selector", "involvedObject.name=w,reason=StatusNotSettling",
			"-o", "jsonpath={range .items[*]}{.metadata.name}/{.count}/{.series.count} {end}")
	}
	before := notSettling()
	failed := func() float64 {
		return metricSum(t, "dcontroller_metacontroller_syncs_total", map[string]string{"controller": "compositecontroller/widgets", "result": "failed"})
	}
	failed0 := failed()
	mode.Store("badnames")
	mustKubectl(t, "", "-n", ns, "annotate", "--overwrite", "widget", "w", "touch=badnames")
	eventually(t, 30*time.Second, conditionsMention(t, ns, "w", "ChildWriteFailed", "BAD_A", "BAD_F"))
	eventually(t, 30*time.Second, func() string {
		ev := mustKubectl(t, "", "-n", ns, "get", "events", "--field-selector", "involvedObject.name=w,reason=CreateError", "-o", "jsonpath={.items[*].message}")
		if !strings.Contains(ev, "ChildWriteFailed") || !strings.Contains(ev, "BAD_A") || !strings.HasSuffix(strings.TrimSpace(ev), "...") {
			return "no shortened CreateError event: " + ev
		}
		return ""
	})
	c0 := h.calls.Load()
	time.Sleep(3 * time.Second)
	if n := h.calls.Load() - c0; n > 4 {
		t.Errorf("refused children: %d calls in 3s, want backoff", n)
	}
	if failed() <= failed0 {
		t.Errorf("syncs_total{result=failed} did not count the refused writes: %v -> %v", failed0, failed())
	}
	if after := notSettling(); after != before {
		t.Errorf("refused children raised StatusNotSettling: %q -> %q", before, after)
	}

	// A second controller of the same parents is started, with a
	// warning (its hook is down: it changes nothing).
	applyMC(t, widgetCC("widgets-twin", "http://127.0.0.1:1", ""))
	eventually(t, 30*time.Second, func() string {
		ev := mustKubectl(t, "", "get", "events", "-A", "--field-selector", "involvedObject.name=widgets-twin,reason=ParentsShared", "-o", "jsonpath={.items[*].message}")
		if !strings.Contains(ev, "widgets also manage widgets parents") {
			return "no ParentsShared event: " + ev
		}
		return ""
	})
	eventually(t, 30*time.Second, func() string {
		if hookErrors(t, "compositecontroller/widgets-twin", "Unavailable") == 0 {
			return "no hook errors counted for widgets-twin"
		}
		return ""
	})
	mustKubectl(t, "", "delete", "compositecontroller", "widgets-twin")
	// A deleted controller leaves no metric series behind.
	eventually(t, 30*time.Second, func() string {
		if n := hookErrors(t, "compositecontroller/widgets-twin", "Unavailable"); n != 0 {
			return fmt.Sprintf("widgets-twin still has %v hook errors in the metrics", n)
		}
		return ""
	})

	// The controller (with a resync period) is changed, then deleted: both
	// take effect; a controller created afterwards starts.
	mode.Store("ok")
	applyMC(t, widgetCC("widgets", h.URL, "  resyncPeriodSeconds: 5\n"))
	mustKubectl(t, "", "annotate", "compositecontroller", "widgets", "touch=1")
	mustKubectl(t, "", "delete", "compositecontroller", "widgets")
	// An int32 field out of range is refused at admission too.
	if out, err := kubectl(t, widgetCC("huge", h.URL, "  resyncPeriodSeconds: 99999999999\n"), "apply", "-f", "-"); err == nil {
		t.Errorf("resyncPeriodSeconds: 99999999999 accepted: %s", out)
	}
	applyMC(t, widgetCC("probe", h.URL, ""))
	eventually(t, 30*time.Second, func() string {
		out := mustKubectl(t, "", "get", "compositecontroller", "probe", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		if out != "True" {
			return "probe Ready=" + out
		}
		return ""
	})
}
