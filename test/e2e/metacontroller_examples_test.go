package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func readExample(t *testing.T, dir, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "examples", dir, file))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestMetacontrollerMigrationGuide runs the steps of
// docs/metacontroller.md on the examples: an unchanged Metacontroller
// CompositeController (examples/metacontroller-podservice, its Python
// hook) runs on dcontroller; then the same controller with its hook
// rewritten as an inline pipeline (examples/metacontroller-podservice-
// pipeline) takes over the same parents and children without rewriting
// them, and keeps working on new parents.
func TestMetacontrollerMigrationGuide(t *testing.T) {
	const ns = "e2e-mc-migrate"
	base := startPythonHook(t, "podservice_hook.py")
	// Step 1 (CRDs from config/crd) is done by the test control plane;
	// step 2 is `dctl start`.
	startManager(t)
	mustKubectl(t, "", "create", "namespace", ns)
	// Step 3: apply the existing manifests unchanged (the hook URL points
	// at the local Python server instead of the in-cluster Service).
	mustKubectl(t, readExample(t, "metacontroller-podservice", "crd.yaml"), "apply", "-f", "-")
	mustKubectl(t, "", "wait", "--for=condition=Established", "--timeout=60s", "crd/podservices.examples.dcontroller.io")
	webhook := strings.Replace(readExample(t, "metacontroller-podservice", "controller.yaml"),
		"http://podservice-hook.metacontroller", base, 1)
	applyMC(t, webhook)
	mustKubectl(t, readExample(t, "metacontroller-podservice", "podservice.yaml"), "-n", ns, "apply", "-f", "-")

	converged := func(name, image string) func() string {
		return func() string {
			p, err := getObj(t, "examples.dcontroller.io/v1", "PodService", ns, name)
			if err != nil {
				return err.Error()
			}
			if got := fmt.Sprintf("%s %s %s", str(path(p.Object, "status.pods")), str(path(p.Object, "status.services")), str(path(p.Object, "status.image"))); got != "1 1 "+image {
				return "status " + got
			}
			pod, err := getObj(t, "v1", "Pod", ns, name+"-pod")
			if err != nil {
				return err.Error()
			}
			if c, _ := path(pod.Object, "spec.containers").([]any); len(c) != 1 || str(path(c[0].(map[string]any), "image")) != image {
				return fmt.Sprintf("pod containers %v", c)
			}
			if _, err := getObj(t, "v1", "Service", ns, name+"-svc"); err != nil {
				return err.Error()
			}
			return ""
		}
	}
	eventually(t, 30*time.Second, converged("web", "nginx:1.27"))
	pod, _ := getObj(t, "v1", "Pod", ns, "web-pod")
	svc, _ := getObj(t, "v1", "Service", ns, "web-svc")

	// Step 4: replace the webhook controller by the pipeline one.
	mustKubectl(t, "", "delete", "compositecontroller", "podservice-controller")
	applyMC(t, readExample(t, "metacontroller-podservice-pipeline", "controller.yaml"))
	mustKubectl(t, strings.Replace(readExample(t, "metacontroller-podservice-pipeline", "podservice.yaml"), "name: web", "name: api", 1),
		"-n", ns, "apply", "-f", "-")
	eventually(t, 30*time.Second, converged("api", "nginx:1.27"))
	// The pipeline computes the same desired state as the Python hook: the
	// children it took over are not rewritten.
	time.Sleep(time.Second)
	pod2, _ := getObj(t, "v1", "Pod", ns, "web-pod")
	svc2, _ := getObj(t, "v1", "Service", ns, "web-svc")
	if pod2.GetResourceVersion() != pod.GetResourceVersion() || svc2.GetResourceVersion() != svc.GetResourceVersion() {
		t.Errorf("children rewritten by the pipeline controller: pod %s -> %s, service %s -> %s",
			pod.GetResourceVersion(), pod2.GetResourceVersion(), svc.GetResourceVersion(), svc2.GetResourceVersion())
	}
	mustKubectl(t, "", "-n", ns, "patch", "podservice.examples.dcontroller.io", "web", "--type=merge", "-p", `{"spec":{"image":"nginx:1.28"}}`)
	eventually(t, 30*time.Second, converged("web", "nginx:1.28"))
	// A port change cannot be made to a Pod in place: the Recreate
	// strategy of the example replaces it.
	before, _ := getObj(t, "v1", "Pod", ns, "web-pod")
	mustKubectl(t, "", "-n", ns, "patch", "podservice.examples.dcontroller.io", "web", "--type=merge", "-p", `{"spec":{"port":9090}}`)
	eventually(t, 30*time.Second, func() string {
		pod, err := getObj(t, "v1", "Pod", ns, "web-pod")
		if err != nil {
			return err.Error()
		}
		c, _ := path(pod.Object, "spec.containers").([]any)
		ports, _ := path(c[0].(map[string]any), "ports").([]any)
		if pod.GetUID() == before.GetUID() || len(ports) != 1 || str(path(ports[0].(map[string]any), "containerPort")) != "9090" {
			return fmt.Sprintf("pod %s ports %v", pod.GetUID(), ports)
		}
		return ""
	})
}

// TestMetacontrollerDecoratorExample runs the steps of
// examples/metacontroller-decorator-pipeline: a labelled ConfigMap gets a
// copy (an attachment owned by it) and an annotation naming the copy; the
// copy follows a change of the original's data.
func TestMetacontrollerDecoratorExample(t *testing.T) {
	const ns = "e2e-mc-decorator-example"
	startManager(t)
	mustKubectl(t, "", "create", "namespace", ns)
	applyMC(t, readExample(t, "metacontroller-decorator-pipeline", "controller.yaml"))
	mustKubectl(t, readExample(t, "metacontroller-decorator-pipeline", "configmap.yaml"), "-n", ns, "apply", "-f", "-")
	copied := func(color string) func() string {
		return func() string {
			cp, err := getObj(t, "v1", "ConfigMap", ns, "settings-backup")
			if err != nil {
				return err.Error()
			}
			if got := str(path(cp.Object, "data.color")) + "," + str(path(cp.Object, "data.size")); got != color+",large" {
				return "settings-backup data " + got
			}
			if refs := cp.GetOwnerReferences(); len(refs) != 1 || refs[0].Name != "settings" {
				return fmt.Sprintf("owner references %v", refs)
			}
			src, err := getObj(t, "v1", "ConfigMap", ns, "settings")
			if err != nil {
				return err.Error()
			}
			if a := src.GetAnnotations()["backup.example.com/copy"]; a != "settings-backup" {
				return "annotation " + a
			}
			return ""
		}
	}
	eventually(t, 30*time.Second, copied("blue"))
	mustKubectl(t, "", "-n", ns, "patch", "configmap", "settings", "--type=merge", "-p", `{"data":{"color":"green"}}`)
	eventually(t, 30*time.Second, copied("green"))
	// The copy is not decorated itself (it has no backup=true label).
	if _, err := getObj(t, "v1", "ConfigMap", ns, "settings-backup-backup"); !isNotFound(err) {
		t.Errorf("the copy was copied: %v", err)
	}
}
