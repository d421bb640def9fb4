package e2e

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

const servicePerPodDC = `apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata:
  name: service-per-pod
spec:
  resources:
    - apiVersion: apps/v1
      resource: statefulsets
      annotationSelector:
        matchExpressions:
          - {key: service-per-pod-label, operator: Exists}
          - {key: service-per-pod-ports, operator: Exists}
  attachments:
    - apiVersion: v1
      resource: services
      updateStrategy: {method: InPlace}
  hooks:
    sync:
      webhook: {url: %[1]s/sync}
    finalize:
      webhook: {url: %[1]s/finalize}
`

func statefulSetYAML(replicas int, annotated bool) string {
	ann := ""
	if annotated {
		ann = `  annotations:
    service-per-pod-label: statefulset.kubernetes.io/pod-name
    service-per-pod-ports: "80:8080"
`
	}
	return fmt.Sprintf(`apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: nginx
  namespace: e2e-mc-decorator
%sspec:
  serviceName: nginx
  replicas: %d
  selector:
    matchLabels: {app: nginx}
  template:
    metadata:
      labels: {app: nginx}
    spec:
      containers:
        - name: nginx
          image: nginx:1.27
`, ann, replicas)
}

// TestMetacontrollerDecoratorServicePerPod ports Metacontroller's
// service-per-pod example: a DecoratorController gives every Pod of an
// annotated StatefulSet its own Service (an attachment), labels the
// StatefulSet, follows scaling, and when the StatefulSet opts out (the
// annotation is removed) its finalize hook removes the Services before the
// finalizer is released.
func TestMetacontrollerDecoratorServicePerPod(t *testing.T) {
	const ns = "e2e-mc-decorator"
	mustKubectl(t, "", "create", "namespace", ns)
	startManager(t)
	h := newHookServer(t, func(req map[string]any) any {
		sts, _ := req["object"].(map[string]any)
		finalizing, _ := req["finalizing"].(bool)
		if finalizing {
			attached, _ := path(req, "attachments").(map[string]any)["Service.v1"].(map[string]any)
			return map[string]any{"attachments": []any{}, "finalized": len(attached) == 0,
				"labels": map[string]any{"decorated": nil}}
		}
		name := str(path(sts, "metadata.name"))
		label := str(path(sts, "metadata.annotations.service-per-pod-label"))
		ports := strings.SplitN(str(path(sts, "metadata.annotations.service-per-pod-ports")), ":", 2)
		port, _ := strconv.Atoi(ports[0])
		target, _ := strconv.Atoi(ports[1])
		replicas, _ := path(sts, "spec.replicas").(float64)
		var services []any
		for i := 0; i < int(replicas); i++ {
			pod := fmt.Sprintf("%s-%d", name, i)
			services = append(services, map[string]any{
				"apiVersion": "v1", "kind": "Service",
				"metadata": map[string]any{"name": pod},
				"spec": map[string]any{
					"selector": map[string]any{label: pod},
					"ports":    []any{map[string]any{"port": port, "targetPort": target}},
				},
			})
		}
		return map[string]any{"attachments": services, "labels": map[string]any{"decorated": "service-per-pod"}}
	})
	applyMC(t, fmt.Sprintf(servicePerPodDC, h.URL))
	mustKubectl(t, statefulSetYAML(3, true), "apply", "-f", "-")

	services := func() []string {
		var names []string
		for _, s := range listObjs(t, "v1", "Service", ns) {
			if s.GetDeletionTimestamp() == nil {
				names = append(names, s.GetName())
			}
		}
		sort.Strings(names)
		return names
	}
	eventually(t, 30*time.Second, func() string {
		if got := strings.Join(services(), ","); got != "nginx-0,nginx-1,nginx-2" {
			return "services " + got
		}
		sts, err := getObj(t, "apps/v1", "StatefulSet", ns, "nginx")
		if err != nil {
			return err.Error()
		}
		if sts.GetLabels()["decorated"] != "service-per-pod" {
			return fmt.Sprintf("statefulset labels %v", sts.GetLabels())
		}
		if fins := sts.GetFinalizers(); len(fins) != 1 || fins[0] != "metacontroller.io/decoratorcontroller-service-per-pod" {
			return fmt.Sprintf("finalizers %v", fins)
		}
		return ""
	})
	sts, _ := getObj(t, "apps/v1", "StatefulSet", ns, "nginx")
	svc, _ := getObj(t, "v1", "Service", ns, "nginx-1")
	refs := svc.GetOwnerReferences()
	if len(refs) != 1 || refs[0].UID != sts.GetUID() || refs[0].Kind != "StatefulSet" ||
		svc.GetAnnotations()["metacontroller.k8s.io/decorator-controller"] != "service-per-pod" {
		t.Errorf("attachment owner %+v annotations %v", refs, svc.GetAnnotations())
	}
	if sel, _ := path(svc.Object, "spec.selector").(map[string]any); str(sel["statefulset.kubernetes.io/pod-name"]) != "nginx-1" {
		t.Errorf("selector %v", sel)
	}
	stable(t, h, 2*time.Second)

	// Scaling down removes the extra attachment.
	mustKubectl(t, statefulSetYAML(2, true), "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		if got := strings.Join(services(), ","); got != "nginx-0,nginx-1" {
			return "services " + got
		}
		return ""
	})

	// Opting out: the finalize hook removes the services, then the
	// finalizer goes and the label with it.
	mustKubectl(t, statefulSetYAML(2, false), "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		if got := services(); len(got) != 0 {
			return "services " + strings.Join(got, ",")
		}
		sts, err := getObj(t, "apps/v1", "StatefulSet", ns, "nginx")
		if err != nil {
			return err.Error()
		}
		if len(sts.GetFinalizers()) != 0 || sts.GetLabels()["decorated"] != "" {
			return fmt.Sprintf("finalizers %v labels %v", sts.GetFinalizers(), sts.GetLabels())
		}
		return ""
	})
	stable(t, h, 2*time.Second)
}

// TestMetacontrollerDecoratorEmptyStatus: a hook that answers status {}
// for an object without a status gets it written, as Metacontroller does:
// an absent status and an empty one are different states, and the next
// sync sees the empty one.
func TestMetacontrollerDecoratorEmptyStatus(t *testing.T) {
	const ns = "e2e-mc-empty-status"
	installCRD(t, "Blank", "blanks", "Namespaced")
	mustKubectl(t, "", "create", "namespace", ns)
	startManager(t)
	h := newHookServer(t, func(req map[string]any) any {
		if obj, _ := req["object"].(map[string]any); obj["status"] == nil {
			return map[string]any{"status": map[string]any{}}
		}
		return map[string]any{}
	})
	applyMC(t, fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata: {name: blank-decorator}
spec:
  resources:
    - apiVersion: e2e.dcontroller.io/v1
      resource: blanks
  hooks:
    sync:
      webhook: {url: %s}
`, h.URL))
	mustKubectl(t, `apiVersion: e2e.dcontroller.io/v1
kind: Blank
metadata: {name: b, namespace: `+ns+`}
spec: {v: "1"}
`, "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		p, err := getObj(t, "e2e.dcontroller.io/v1", "Blank", ns, "b")
		if err != nil {
			return err.Error()
		}
		if s, ok := p.Object["status"].(map[string]any); !ok || len(s) != 0 {
			return fmt.Sprintf("status %#v (hook calls %d), want {}", p.Object["status"], h.calls.Load())
		}
		return ""
	})
	// The next sync sees the empty status.
	mustKubectl(t, "", "-n", ns, "annotate", "blanks.e2e.dcontroller.io", "b", "touch=1")
	eventually(t, 30*time.Second, func() string {
		last := h.last()
		if str(path(last, "object.metadata.annotations.touch")) != "1" {
			return "no sync after the change yet"
		}
		if s, ok := path(last, "object.status").(map[string]any); !ok || len(s) != 0 {
			return fmt.Sprintf("the hook saw status %#v, want {}", path(last, "object.status"))
		}
		return ""
	})
	stable(t, h, 2*time.Second)
}
