package e2e

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// ledgerCC is a CompositeController of Ledgers with ConfigMap children
// updated in place and a sync webhook at hookURL.
func ledgerCC(name, hookURL string) string {
	return fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: %s}
spec:
  parentResource: {apiVersion: e2e.dcontroller.io/v1, resource: ledgers}
  generateSelector: true
  childResources:
    - apiVersion: v1
      resource: configmaps
      updateStrategy: {method: InPlace}
  hooks:
    sync:
      webhook: {url: %s}
`, name, hookURL)
}

// ledgerYAML is a Ledger ns/name.
func ledgerYAML(ns, name string) string {
	return fmt.Sprintf("apiVersion: e2e.dcontroller.io/v1\nkind: Ledger\nmetadata: {name: %s, namespace: %s}\nspec: {v: '1'}\n", name, ns)
}

// externalAPI stands for a system outside the cluster in which a hook
// creates an object per parent (a cloud resource): it counts the
// creations per parent.
type externalAPI struct {
	mu      sync.Mutex
	created map[string]int
}

func (x *externalAPI) create(parent string) string {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.created[parent]++
	return fmt.Sprintf("%s-ext-%d", parent, x.created[parent])
}

func (x *externalAPI) count(parent string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.created[parent]
}

// ledgerStatus returns a field of the status of Ledger ns/name.
func ledgerStatus(t *testing.T, ns, name, field string) string {
	p, err := getObj(t, "e2e.dcontroller.io/v1", "Ledger", ns, name)
	if err != nil {
		return "error: " + err.Error()
	}
	return str(path(p.Object, "status."+field))
}

// notSettlingEvents returns the StatusNotSettling Events of object name in
// ns.
func notSettlingEvents(t *testing.T, ns, name string) string {
	return mustKubectl(t, "", "-n", ns, "get", "events", "--field-selector", "involvedObject.name="+name+",reason=StatusNotSettling",
		"-o", "jsonpath={.items[*].message}")
}

// TestMetacontrollerStatusOfEveryAnswer: the status of every sync answer
// is written, also when the answer changes children, so the next request
// carries it (Metacontroller's contract). The hook creates an object in
// an external system when its parent's status has no id yet, records the
// id in the status and in its child: the external object is created once,
// the status holds its id, the child carries it, and the hook settles.
func TestMetacontrollerStatusOfEveryAnswer(t *testing.T) {
	const ns = "e2e-mc-hookstatus"
	installCRD(t, "Ledger", "ledgers", "Namespaced")
	mustKubectl(t, "", "create", "namespace", ns)
	startManager(t)

	ext := &externalAPI{created: map[string]int{}}
	var withoutID atomic.Int64 // requests whose parent had no id in its status
	h := newHookServer(t, func(req map[string]any) any {
		parent, _ := req["parent"].(map[string]any)
		name := str(path(parent, "metadata.name"))
		id := str(path(parent, "status.externalID"))
		if id == "" {
			withoutID.Add(1)
			id = ext.create(name)
		}
		child := map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name + "-conn"}, "data": map[string]any{"externalID": id}}
		return map[string]any{"children": []any{child}, "status": map[string]any{"externalID": id}}
	})
	applyMC(t, ledgerCC("ledgers-external", h.URL))
	t.Cleanup(func() { _, _ = kubectl(t, "", "-n", ns, "delete", "ledgers", "--all", "--wait=false") })

	mustKubectl(t, ledgerYAML(ns, "db"), "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		if got := ledgerStatus(t, ns, "db", "externalID"); got != "db-ext-1" {
			return "status.externalID=" + got + ", want db-ext-1"
		}
		return ""
	})
	settle(t, h.calls.Load)
	if n := ext.count("db"); n != 1 {
		t.Errorf("the external object was created %d times, want once (the follow-up request must carry the status of the first answer)", n)
	}
	if n := withoutID.Load(); n != 1 {
		t.Errorf("%d hook requests without the id in the parent's status, want 1", n)
	}
	cm, err := getObj(t, "v1", "ConfigMap", ns, "db-conn")
	if err != nil {
		t.Fatal(err)
	}
	if got := str(path(cm.Object, "data.externalID")); got != "db-ext-1" {
		t.Errorf("child data.externalID=%q, want db-ext-1", got)
	}
	// A change of the parent: the hook sees the id and creates nothing.
	mustKubectl(t, "", "-n", ns, "annotate", "ledger", "db", "touch=1")
	time.Sleep(time.Second)
	settle(t, h.calls.Load)
	if n := ext.count("db"); n != 1 {
		t.Errorf("after a change of the parent the external object was created %d times, want once", n)
	}
	if ev := notSettlingEvents(t, ns, "db"); ev != "" {
		t.Errorf("a hook that settles got StatusNotSettling: %s", ev)
	}
}

// TestMetacontrollerAnswersNotSettling: a hook whose answer rewrites a
// child on every call (a counter in the child) is not called in a hot
// loop: it gets a StatusNotSettling Warning Event and its follow-ups are
// delayed, while a hook that converges after several rounds (one more
// child per round) is neither flagged nor slowed.
func TestMetacontrollerAnswersNotSettling(t *testing.T) {
	const ns = "e2e-mc-notsettling"
	installCRD(t, "Ledger", "ledgers", "Namespaced")
	mustKubectl(t, "", "create", "namespace", ns)
	startManager(t)

	var counterCalls, stagedCalls atomic.Int64
	h := newHookServer(t, func(req map[string]any) any {
		parent, _ := req["parent"].(map[string]any)
		name := str(path(parent, "metadata.name"))
		kids, _ := path(req, "children").(map[string]any)
		observed, _ := kids["ConfigMap.v1"].(map[string]any)
		if strings.HasPrefix(name, "counter") {
			n := counterCalls.Add(1)
			child := map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": name + "-0"}, "data": map[string]any{"round": fmt.Sprint(n)}}
			return map[string]any{"children": []any{child}, "status": map[string]any{"children": len(observed)}}
		}
		// Staged: one child more than observed, up to 5; converges
		// after 6 writing rounds (the last one writes the status only).
		// (Ledgers of other tests get this answer too.)
		if name == "staged" {
			stagedCalls.Add(1)
		}
		var children []any
		for i := 0; i < min(len(observed)+1, 5); i++ {
			children = append(children, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": fmt.Sprintf("%s-%d", name, i)}, "data": map[string]any{"i": fmt.Sprint(i)}})
		}
		return map[string]any{"children": children, "status": map[string]any{"children": len(observed)}}
	})
	applyMC(t, ledgerCC("ledgers-loop", h.URL))
	t.Cleanup(func() { _, _ = kubectl(t, "", "-n", ns, "delete", "ledgers", "--all", "--wait=false") })

	// The converging hook: five children, the status reports them, no
	// Event, and then no calls.
	mustKubectl(t, ledgerYAML(ns, "staged"), "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		if got := ledgerStatus(t, ns, "staged", "children"); got != "5" {
			return "status.children=" + got + ", want 5"
		}
		return ""
	})
	stable(t, h, 2*time.Second)
	if ev := notSettlingEvents(t, ns, "staged"); ev != "" {
		t.Errorf("a hook that converges in 6 rounds got StatusNotSettling: %s", ev)
	}
	if n := stagedCalls.Load(); n > 8 {
		t.Errorf("the converging hook was called %d times, want at most 8 (6 writing rounds, the settled one, maybe one more)", n)
	}

	// The hook that never settles: bounded calls and a Warning Event.
	start := time.Now()
	mustKubectl(t, ledgerYAML(ns, "counter"), "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		if ev := notSettlingEvents(t, ns, "counter"); !strings.Contains(ev, "wrote to this object or its children") {
			return "no StatusNotSettling event: " + ev
		}
		return ""
	})
	time.Sleep(6*time.Second - time.Since(start))
	n := counterCalls.Load()
	el := time.Since(start)
	t.Logf("the unsettled hook: %d calls in %s", n, el.Round(time.Millisecond))
	// 9 at once, then after 1s, 2s, 4s: about 12 in 6s (a hot loop makes
	// hundreds).
	if n > 20 {
		t.Errorf("the unsettled hook was called %d times in %s, want at most 20", n, el)
	}
	// Its answers are written, status included.
	if got := ledgerStatus(t, ns, "counter", "children"); got != "1" {
		t.Errorf("counter: status.children=%q, want 1", got)
	}
	cm, err := getObj(t, "v1", "ConfigMap", ns, "counter-0")
	if err != nil {
		t.Fatal(err)
	}
	if got := str(path(cm.Object, "data.round")); got == "" || got == "1" {
		t.Errorf("counter-0 data.round=%q, want a later round", got)
	}
	// The staged parent was left alone meanwhile.
	if n := stagedCalls.Load(); n > 8 {
		t.Errorf("the converging hook was called %d times, want at most 8", n)
	}
}
