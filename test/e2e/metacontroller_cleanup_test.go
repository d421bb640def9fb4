package e2e

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// finalizeLog records the calls of a finalize-only hook: object name and
// the finalizing flag of each request.
type finalizeLog struct {
	mu    sync.Mutex
	calls []string // "<name>:<finalizing>"
	// hold: names whose finalize answers finalized: false (with a resync).
	hold map[string]bool
	// fail: names whose finalize call fails (HTTP 500).
	fail map[string]bool
}

func newFinalizeLog() *finalizeLog {
	return &finalizeLog{hold: map[string]bool{}, fail: map[string]bool{}}
}

// serve answers a CompositeController or DecoratorController request.
func (l *finalizeLog) serve(req map[string]any) any {
	obj, _ := req["object"].(map[string]any)
	if obj == nil {
		obj, _ = req["parent"].(map[string]any)
	}
	name := str(path(obj, "metadata.name"))
	fin := req["finalizing"] == true
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, fmt.Sprintf("%s:%v", name, fin))
	if fin && l.hold[name] {
		return map[string]any{"finalized": false, "resyncAfterSeconds": 0.3}
	}
	return map[string]any{"finalized": fin, "status": map[string]any{"seen": true}}
}

func (l *finalizeLog) set(m map[string]bool, name string, v bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m[name] = v
}

// count returns how many calls match "<name>:<finalizing>".
func (l *finalizeLog) count(call string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.calls {
		if c == call {
			n++
		}
	}
	return n
}

func (l *finalizeLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// finalizersOf returns the finalizers of a Gadget, or an error text.
func finalizersOf(t *testing.T, ns, name string) ([]string, error) {
	t.Helper()
	o, err := getObj(t, "e2e.dcontroller.io/v1", "Gadget", ns, name)
	if err != nil {
		return nil, err
	}
	return o.GetFinalizers(), nil
}

// waitFinalizers waits until Gadget ns/name has exactly the finalizers want.
func waitFinalizers(t *testing.T, ns, name string, want ...string) {
	t.Helper()
	eventually(t, 30*time.Second, func() string {
		f, err := finalizersOf(t, ns, name)
		if err != nil {
			return err.Error()
		}
		if strings.Join(f, ",") != strings.Join(want, ",") {
			return fmt.Sprintf("%s finalizers %v, want %v", name, f, want)
		}
		return ""
	})
}

// waitGone waits until the object is not found.
func waitGone(t *testing.T, apiVersion, kind, ns, name string) {
	t.Helper()
	eventually(t, 60*time.Second, func() string {
		if _, err := getObj(t, apiVersion, kind, ns, name); !isNotFound(err) {
			return fmt.Sprintf("%s %s still there (%v)", kind, name, err)
		}
		return ""
	})
}

// eventNotes returns the notes of the Events with reason on the object
// named name (any namespace).
func eventNotes(t *testing.T, name, reason string) string {
	t.Helper()
	return mustKubectl(t, "", "get", "events", "-A", "--field-selector", "involvedObject.name="+name+",reason="+reason,
		"-o", "jsonpath={range .items[*]}{.type}: {.message}{\"\\n\"}{end}")
}

// waitEvent waits for an Event with reason on name whose line contains
// every part.
func waitEvent(t *testing.T, name, reason string, parts ...string) {
	t.Helper()
	eventually(t, 30*time.Second, func() string {
		notes := eventNotes(t, name, reason)
		for _, p := range parts {
			if !strings.Contains(notes, p) {
				return fmt.Sprintf("events %s on %s: %q, want %q", reason, name, notes, p)
			}
		}
		return ""
	})
}

func gadget(ns, name, labels string) string {
	return fmt.Sprintf("apiVersion: e2e.dcontroller.io/v1\nkind: Gadget\nmetadata: {name: %q, namespace: %s, labels: {%s}}\nspec: {}\n", name, ns, labels)
}

func readyOf(t *testing.T, kind, name string) string {
	t.Helper()
	out, _ := kubectl(t, "", "get", kind, name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}/{.status.conditions[?(@.type=="Ready")].reason}/{.metadata.finalizers}`)
	return out
}

const finalizeOnlyDC = `apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata:
  name: %[2]s
spec:
  resources:
    - apiVersion: e2e.dcontroller.io/v1
      resource: gadgets
      labelSelector:
        matchLabels: {cleanup: %[2]s}
  hooks:
    finalize:
      webhook: {url: %[1]s}
`

// TestMetacontrollerFinalizeOnlyDecorator: a DecoratorController with only
// a finalize hook runs (Ready=True, Metacontroller accepts it too), puts its
// finalizer on the objects it matches without calling anything, and calls
// finalize when one is deleted or stops matching.
func TestMetacontrollerFinalizeOnlyDecorator(t *testing.T) {
	const ns, name = "e2e-mc-fin-only-dc", "fin-only-dc"
	const fin = "metacontroller.io/decoratorcontroller-" + name
	installCRD(t, "Gadget", "gadgets", "Namespaced")
	mustKubectl(t, "", "create", "namespace", ns)
	log := newFinalizeLog()
	h := newHookServer(t, log.serve)
	startManager(t)
	applyMC(t, fmt.Sprintf(finalizeOnlyDC, h.URL, name))
	mustKubectl(t, gadget(ns, "x", "cleanup: "+name)+"---\n"+gadget(ns, "y", "cleanup: "+name), "apply", "-f", "-")

	eventually(t, 30*time.Second, func() string {
		if got := readyOf(t, "decoratorcontroller", name); got != `True/Running/["dcontroller.io/metacontroller-cleanup"]` {
			return "Ready/reason/finalizers " + got
		}
		return ""
	})
	waitFinalizers(t, ns, "x", fin)
	waitFinalizers(t, ns, "y", fin)
	stable(t, h, time.Second)
	if n := h.calls.Load(); n != 0 {
		t.Fatalf("%d hook calls for live objects without a sync hook: %v", n, log.all())
	}

	mustKubectl(t, "", "-n", ns, "delete", "gadget.e2e.dcontroller.io", "x", "--wait=false")
	waitGone(t, "e2e.dcontroller.io/v1", "Gadget", ns, "x")
	if n := log.count("x:true"); n < 1 {
		t.Errorf("x: no finalize call (%v)", log.all())
	}

	// y stops matching: finalized, kept, no finalizer.
	mustKubectl(t, "", "-n", ns, "label", "gadget.e2e.dcontroller.io", "y", "cleanup=off", "--overwrite")
	waitFinalizers(t, ns, "y")
	if n := log.count("y:true"); n != 1 {
		t.Errorf("y: %d finalize calls, want 1 (%v)", n, log.all())
	}
	if n := log.count("x:false") + log.count("y:false"); n != 0 {
		t.Errorf("%d sync calls (finalizing=false) without a sync hook: %v", n, log.all())
	}
	deleteController(t, "decoratorcontroller", name)
}

// deleteController deletes a controller and waits until it is gone (its
// cleanup done while this test's manager runs).
func deleteController(t *testing.T, kind, name string) {
	t.Helper()
	mustKubectl(t, "", "delete", kind, name, "--wait=false")
	eventually(t, 60*time.Second, func() string {
		if out, _ := kubectl(t, "", "get", kind, name, "--ignore-not-found", "-o", "name"); out != "" {
			return out + " still there"
		}
		return ""
	})
}

const finalizeOnlyCC = `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: %[2]s
spec:
  generateSelector: true
  parentResource:
    apiVersion: e2e.dcontroller.io/v1
    resource: gadgets
    labelSelector:
      matchLabels: {cleanup: %[2]s}
  childResources:
    - apiVersion: v1
      resource: configmaps
  hooks:
    finalize:
      webhook: {url: %[1]s}
`

// TestMetacontrollerFinalizeOnlyComposite: the same for a
// CompositeController: finalizer on its parents, no call while they live,
// finalize on deletion and when a parent stops matching
// parentResource.labelSelector.
func TestMetacontrollerFinalizeOnlyComposite(t *testing.T) {
	const ns, name = "e2e-mc-fin-only-cc", "fin-only-cc"
	const fin = "metacontroller.io/compositecontroller-" + name
	installCRD(t, "Gadget", "gadgets", "Namespaced")
	mustKubectl(t, "", "create", "namespace", ns)
	log := newFinalizeLog()
	h := newHookServer(t, log.serve)
	startManager(t)
	applyMC(t, fmt.Sprintf(finalizeOnlyCC, h.URL, name))
	mustKubectl(t, gadget(ns, "p", "cleanup: "+name)+"---\n"+gadget(ns, "q", "cleanup: "+name), "apply", "-f", "-")

	eventually(t, 30*time.Second, func() string {
		if got := readyOf(t, "compositecontroller", name); got != `True/Running/["dcontroller.io/metacontroller-cleanup"]` {
			return "Ready/reason/finalizers " + got
		}
		return ""
	})
	waitFinalizers(t, ns, "p", fin)
	waitFinalizers(t, ns, "q", fin)
	stable(t, h, time.Second)
	if n := h.calls.Load(); n != 0 {
		t.Fatalf("%d hook calls for live parents without a sync hook: %v", n, log.all())
	}

	mustKubectl(t, "", "-n", ns, "delete", "gadget.e2e.dcontroller.io", "p", "--wait=false")
	waitGone(t, "e2e.dcontroller.io/v1", "Gadget", ns, "p")
	if n := log.count("p:true"); n < 1 {
		t.Errorf("p: no finalize call (%v)", log.all())
	}
	mustKubectl(t, "", "-n", ns, "label", "gadget.e2e.dcontroller.io", "q", "cleanup=off", "--overwrite")
	waitFinalizers(t, ns, "q")
	if n := log.count("q:true"); n != 1 {
		t.Errorf("q: %d finalize calls after it stopped matching, want 1 (%v)", n, log.all())
	}
	deleteController(t, "compositecontroller", name)
}

// A DecoratorController with sync and finalize hooks (the cleanup tests).
const cleanupDC = `apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata:
  name: %[2]s
  annotations: {dcontroller.io/cleanup-timeout: %[3]s}
spec:
  resources:
    - apiVersion: e2e.dcontroller.io/v1
      resource: gadgets
      labelSelector:
        matchLabels: {cleanup: %[2]s}
  hooks:
    sync:
      webhook: {url: %[1]s}
    finalize:
      webhook: {url: %[1]s}
`

// cleanupSetup creates three decorated Gadgets a, b and c, c being deleted
// with its finalize hook holding (finalized: false).
func cleanupSetup(t *testing.T, ns, name string, log *finalizeLog) {
	t.Helper()
	fin := "metacontroller.io/decoratorcontroller-" + name
	log.set(log.hold, "c", true)
	lbl := "cleanup: " + name
	mustKubectl(t, gadget(ns, "a", lbl)+"---\n"+gadget(ns, "b", lbl)+"---\n"+gadget(ns, "c", lbl), "apply", "-f", "-")
	for _, n := range []string{"a", "b", "c"} {
		waitFinalizers(t, ns, n, fin)
	}
	mustKubectl(t, "", "-n", ns, "delete", "gadget.e2e.dcontroller.io", "c", "--wait=false")
	eventually(t, 30*time.Second, func() string {
		if log.count("c:true") < 2 {
			return fmt.Sprintf("c finalize calls: %v", log.all())
		}
		return ""
	})
}

// TestMetacontrollerControllerDeletionCleanup: deleting a DecoratorController
// with a finalize hook removes its finalizer from the live objects (Normal
// FinalizerRemoved, no hook call), keeps calling finalize for the object
// being deleted until it is finalized, then lets the controller go
// (CleanupStarted, CleanupDone).
func TestMetacontrollerControllerDeletionCleanup(t *testing.T) {
	const ns, name = "e2e-mc-cleanup", "cleanup-dc"
	const fin = "metacontroller.io/decoratorcontroller-" + name
	installCRD(t, "Gadget", "gadgets", "Namespaced")
	mustKubectl(t, "", "create", "namespace", ns)
	log := newFinalizeLog()
	h := newHookServer(t, log.serve)
	startManager(t)
	manifest := fmt.Sprintf(cleanupDC, h.URL, name, "2m")
	applyMC(t, manifest)
	cleanupSetup(t, ns, name, log)
	syncsBefore := log.count("a:false") + log.count("b:false")

	mustKubectl(t, manifest, "delete", "--wait=false", "-f", "-")
	// a and b lose the finalizer without a call; c is still finalizing.
	waitFinalizers(t, ns, "a")
	waitFinalizers(t, ns, "b")
	if got := readyOf(t, "decoratorcontroller", name); !strings.Contains(got, "dcontroller.io/metacontroller-cleanup") {
		t.Fatalf("the controller went before c was finalized: %q", got)
	}
	waitEvent(t, name, "CleanupStarted", "Normal: deleted: finalizing 1 object(s) being deleted (for at most 2m0s) and removing finalizer "+fin+" from 2 other object(s)")
	waitEvent(t, "a", "FinalizerRemoved", "Normal: the DecoratorController "+name+" is being deleted: finalizer "+fin+" removed without a finalize call")
	waitEvent(t, "b", "FinalizerRemoved", "Normal: the DecoratorController "+name+" is being deleted")

	finalizedBefore := log.count("c:true")
	log.set(log.hold, "c", false)
	waitGone(t, "e2e.dcontroller.io/v1", "Gadget", ns, "c")
	waitGone(t, "metacontroller.k8s.io/v1alpha1", "DecoratorController", "", name)
	if log.count("c:true") <= finalizedBefore {
		t.Errorf("c got no finalize call after the controller was deleted: %v", log.all())
	}
	if n := log.count("a:false") + log.count("b:false"); n != syncsBefore {
		t.Errorf("%d sync calls after the controller was deleted: %v", n-syncsBefore, log.all())
	}
	if n := log.count("a:true") + log.count("b:true"); n != 0 {
		t.Errorf("%d finalize calls for live objects: %v", n, log.all())
	}
	waitEvent(t, name, "CleanupDone", "Normal: finalizer "+fin+" removed from every object")
	for _, n := range []string{"a", "b"} {
		waitFinalizers(t, ns, n)
		if ev := eventNotes(t, n, "FinalizeTimedOut"); ev != "" {
			t.Errorf("%s: %s", n, ev)
		}
	}
}

// TestMetacontrollerControllerDeletedWhileManagerDown: the cleanup also
// runs for a controller deleted while no manager ran, from the next start.
func TestMetacontrollerControllerDeletedWhileManagerDown(t *testing.T) {
	const ns, name = "e2e-mc-cleanup-down", "cleanup-down-dc"
	installCRD(t, "Gadget", "gadgets", "Namespaced")
	mustKubectl(t, "", "create", "namespace", ns)
	log := newFinalizeLog()
	h := newHookServer(t, log.serve)
	stop := startManager(t)
	manifest := fmt.Sprintf(cleanupDC, h.URL, name, "2m")
	applyMC(t, manifest)
	cleanupSetup(t, ns, name, log)
	stop()

	mustKubectl(t, manifest, "delete", "--wait=false", "-f", "-")
	log.set(log.hold, "c", false)
	before := log.count("c:true")
	// Nothing runs: the controller waits for its cleanup.
	if got := readyOf(t, "decoratorcontroller", name); !strings.Contains(got, "dcontroller.io/metacontroller-cleanup") {
		t.Fatalf("controller %q without its finalizer", got)
	}
	startManager(t)
	waitGone(t, "e2e.dcontroller.io/v1", "Gadget", ns, "c")
	waitGone(t, "metacontroller.k8s.io/v1alpha1", "DecoratorController", "", name)
	waitFinalizers(t, ns, "a")
	waitFinalizers(t, ns, "b")
	if log.count("c:true") <= before {
		t.Errorf("c was not finalized after the restart: %v", log.all())
	}
	waitEvent(t, name, "CleanupDone", "removed from every object")
}

// TestMetacontrollerControllerCleanupTimeout: a finalize hook that never
// finishes does not block the deletion of its controller: after
// dcontroller.io/cleanup-timeout the object being deleted loses the
// finalizer (Warning FinalizeTimedOut) and the controller goes (Warning
// CleanupTimedOut).
func TestMetacontrollerControllerCleanupTimeout(t *testing.T) {
	const ns, name = "e2e-mc-cleanup-timeout", "cleanup-timeout-dc"
	const fin = "metacontroller.io/decoratorcontroller-" + name
	installCRD(t, "Gadget", "gadgets", "Namespaced")
	mustKubectl(t, "", "create", "namespace", ns)
	log := newFinalizeLog()
	h := newHookServer(t, log.serve)
	startManager(t)
	manifest := fmt.Sprintf(cleanupDC, h.URL, name, "3s")
	applyMC(t, manifest)
	cleanupSetup(t, ns, name, log) // c holds for ever

	mustKubectl(t, manifest, "delete", "--wait=false", "-f", "-")
	waitGone(t, "metacontroller.k8s.io/v1alpha1", "DecoratorController", "", name)
	waitGone(t, "e2e.dcontroller.io/v1", "Gadget", ns, "c")
	waitEvent(t, "c", "FinalizeTimedOut", "Warning: the DecoratorController "+name+" was deleted and its finalize hook had not finalized this object within 3s: finalizer "+fin+" removed without this object's cleanup")
	waitEvent(t, name, "CleanupTimedOut", "Warning: cleanup not done within 3s (dcontroller.io/cleanup-timeout): finalizer "+fin+" removed from 1 object(s)")
	waitFinalizers(t, ns, "a")
	waitFinalizers(t, ns, "b")
}

// TestMetacontrollerFinalizeHookDropped: a spec that drops its finalize
// hook removes the finalizer from its objects, then the controller's own.
func TestMetacontrollerFinalizeHookDropped(t *testing.T) {
	const ns, name = "e2e-mc-fin-dropped", "fin-dropped-dc"
	const fin = "metacontroller.io/decoratorcontroller-" + name
	installCRD(t, "Gadget", "gadgets", "Namespaced")
	mustKubectl(t, "", "create", "namespace", ns)
	log := newFinalizeLog()
	h := newHookServer(t, log.serve)
	startManager(t)
	applyMC(t, fmt.Sprintf(cleanupDC, h.URL, name, "2m"))
	mustKubectl(t, gadget(ns, "a", "cleanup: "+name), "apply", "-f", "-")
	waitFinalizers(t, ns, "a", fin)

	mustKubectl(t, fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata:
  name: %[2]s
spec:
  resources:
    - apiVersion: e2e.dcontroller.io/v1
      resource: gadgets
      labelSelector:
        matchLabels: {cleanup: %[2]s}
  hooks:
    sync:
      webhook: {url: %[1]s}
`, h.URL, name), "apply", "-f", "-")
	waitFinalizers(t, ns, "a")
	eventually(t, 30*time.Second, func() string {
		if got := readyOf(t, "decoratorcontroller", name); got != "True/Running/" {
			return "Ready/reason/finalizers " + got
		}
		return ""
	})
}
