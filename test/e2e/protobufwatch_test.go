package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/dcontroller/dcontroller/pkg/operator"
	"github.com/dcontroller/dcontroller/pkg/watchcodec"
)

// protobufWatchObjects are objects of built-in kinds with the field types
// whose JSON is not their Go value: quantities, int-or-strings, times to
// the second and to the microsecond, durations, bytes (not valid UTF-8),
// raw extensions, maps of slices, and a custom resource (JSON for both
// clients: the API server has no protobuf for it).
const protobufWatchObjects = `
apiVersion: v1
kind: Pod
metadata:
  name: pb-pod
  labels: {app: pb, "example.com/tier": "ja"}
  annotations: {note: "<&> \u00e9\u2028", "example.com/lang": "ünïcode ✓"}
spec:
  containers:
  - name: c
    image: example.invalid/app:1
    command: [sh, -c, "echo hi"]
    env: [{name: A, value: "1"}, {name: B, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]
    ports: [{name: http, containerPort: 8080, protocol: TCP}]
    resources: {requests: {cpu: 250m, memory: 64Mi}, limits: {cpu: "1", memory: 128Mi, ephemeral-storage: 1G}}
    readinessProbe: {httpGet: {path: /healthz, port: http}, periodSeconds: 5}
    livenessProbe: {tcpSocket: {port: 8080}, initialDelaySeconds: 3}
    securityContext: {runAsNonRoot: true, runAsUser: 1000, capabilities: {drop: [ALL]}}
  volumes:
  - {name: scratch, emptyDir: {sizeLimit: 500Mi}}
  - {name: cfg, configMap: {name: pb-cm, defaultMode: 0644}}
  tolerations: [{key: k, operator: Exists, effect: NoExecute, tolerationSeconds: 30}]
  affinity:
    nodeAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 10
        preference: {matchExpressions: [{key: zone, operator: In, values: [a, b]}]}
  terminationGracePeriodSeconds: 0
---
apiVersion: v1
kind: ConfigMap
metadata: {name: pb-cm}
data: {a: "1", "b.json": '{"x": [1, 2.5]}', empty: ""}
binaryData: {bin: "AP/+gA=="}
---
apiVersion: v1
kind: Secret
metadata: {name: pb-secret}
type: Opaque
data: {raw: "/wAB", text: "aGVsbG8="}
---
apiVersion: v1
kind: Service
metadata: {name: pb-svc}
spec:
  selector: {app: pb}
  ports: [{name: http, port: 80, targetPort: http}, {name: alt, port: 81, targetPort: 9090}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: pb-deploy}
spec:
  replicas: 0
  selector: {matchLabels: {app: pb-deploy}}
  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 25%, maxUnavailable: 0}}
  template:
    metadata: {labels: {app: pb-deploy}}
    spec: {containers: [{name: c, image: example.invalid/app:1}]}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: pb-lease}
spec: {holderIdentity: me, leaseDurationSeconds: 15, acquireTime: "2026-01-02T03:04:05.123456Z", renewTime: "2026-01-02T03:04:06.500000Z"}
---
apiVersion: events.k8s.io/v1
kind: Event
metadata: {name: pb-event}
eventTime: "2026-01-02T03:04:05.654321Z"
reportingController: example.com/pb
reportingInstance: pb-1
action: Probe
reason: Probed
type: Normal
note: checked
regarding: {kind: Pod, name: pb-pod, apiVersion: v1}
---
apiVersion: e2e.dcontroller.io/v1
kind: WatchProbe
metadata: {name: pb-custom}
spec: {n: 1, f: 2.5, s: "x", l: [1, "a", null], m: {k: {}}}
`

// contentTypes records the media type of every watch response of the
// clients whose transports it wraps (rest.Config.Wrap(c.wrap)).
type contentTypes struct {
	mu   sync.Mutex
	seen map[string]string // resource (the path's last segment) → Content-Type
}

func (c *contentTypes) wrap(rt http.RoundTripper) http.RoundTripper {
	return recordingTransport{rt: rt, c: c}
}

type recordingTransport struct {
	rt http.RoundTripper
	c  *contentTypes
}

func (r recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.rt.RoundTrip(req)
	if err == nil && req.URL.Query().Get("watch") == "true" {
		r.c.mu.Lock()
		parts := strings.Split(req.URL.Path, "/")
		r.c.seen[parts[len(parts)-1]] = resp.Header.Get("Content-Type")
		r.c.mu.Unlock()
	}
	return resp, err
}

// TestProtobufWatchAsJSON watches objects of built-in kinds and of a
// custom resource through watchcodec's protobuf client (the cache's, with
// Options.Protobuf) and its JSON client side by side against the API
// server, through creation, label and status changes and deletion: every
// event carries the same object in both (the cache's objects do not depend
// on the media type), the built-in kinds came in protobuf and the custom
// resource in JSON.
func TestProtobufWatchAsJSON(t *testing.T) {
	installCRD(t, "WatchProbe", "watchprobes", "Namespaced")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := fmt.Sprintf("pbwatch-%d", time.Now().UnixNano()%1000000)
	if err := k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	ct := &contentTypes{seen: map[string]string{}}
	pbCfg := rest.CopyConfig(restConfig)
	pbCfg.Wrap(ct.wrap)
	pbDyn, err := watchcodec.NewDynamicWithOptions(pbCfg, nil, watchcodec.Options{Protobuf: true})
	if err != nil {
		t.Fatal(err)
	}
	jsonDyn, err := watchcodec.NewDynamic(restConfig, nil)
	if err != nil {
		t.Fatal(err)
	}

	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(protobufWatchObjects, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		u.SetNamespace(ns)
		if u.GetKind() == "Event" {
			_ = unstructured.SetNestedField(u.Object, ns, "regarding", "namespace")
		}
		objs = append(objs, u)
	}
	resourceOf := func(u *unstructured.Unstructured) schema.GroupVersionResource {
		m, err := k8sClient.RESTMapper().RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
		if err != nil {
			t.Fatal(err)
		}
		return m.Resource
	}

	type watched struct {
		res      schema.GroupVersionResource
		pb, json watch.Interface
	}
	var ws []watched
	for _, u := range objs {
		res := resourceOf(u)
		open := func(d dynamic.Interface) watch.Interface {
			w, err := d.Resource(res).Namespace(ns).Watch(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatalf("watching %v: %v", res, err)
			}
			return w
		}
		ws = append(ws, watched{res, open(pbDyn), open(jsonDyn)})
	}
	defer func() {
		for _, w := range ws {
			w.pb.Stop()
			w.json.Stop()
		}
	}()

	// Three events per object (four for the pod): created, labelled, (its
	// status changed), deleted.
	for _, u := range objs {
		if _, err := jsonDyn.Resource(resourceOf(u)).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s: %v", u.GetName(), err)
		}
	}
	want := map[string]int{}
	for _, u := range objs {
		res := resourceOf(u)
		if _, err := jsonDyn.Resource(res).Namespace(ns).Patch(ctx, u.GetName(), types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"changed":"yes"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		want[res.Resource] = 3
		if u.GetKind() == "Pod" {
			if _, err := jsonDyn.Resource(res).Namespace(ns).Patch(ctx, u.GetName(), types.MergePatchType,
				[]byte(`{"status":{"conditions":[{"type":"Example","status":"True","lastTransitionTime":"2026-01-02T03:04:05Z","message":"ok"}]}}`),
				metav1.PatchOptions{}, "status"); err != nil {
				t.Fatal(err)
			}
			want[res.Resource] = 4
		}
		zero := int64(0)
		if err := jsonDyn.Resource(res).Namespace(ns).Delete(ctx, u.GetName(), metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}

	next := func(w watch.Interface, what string) watch.Event {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("%s: the watch ended", what)
			}
			return ev
		case <-ctx.Done():
			t.Fatalf("%s: no event", what)
		}
		return watch.Event{}
	}
	events := 0
	for _, w := range ws {
		for i := 0; i < want[w.res.Resource]; i++ {
			pbEv, jsonEv := next(w.pb, w.res.Resource+" in protobuf"), next(w.json, w.res.Resource+" in JSON")
			pbObj, ok1 := pbEv.Object.(*unstructured.Unstructured)
			jsonObj, ok2 := jsonEv.Object.(*unstructured.Unstructured)
			if !ok1 || !ok2 {
				t.Fatalf("%s event %d: %T (protobuf) and %T (JSON), want Unstructured", w.res.Resource, i, pbEv.Object, jsonEv.Object)
			}
			if pbEv.Type != jsonEv.Type || !reflect.DeepEqual(pbObj.Object, jsonObj.Object) {
				t.Fatalf("%s event %d:\nprotobuf %s %#v\nJSON     %s %#v", w.res.Resource, i, pbEv.Type, pbObj.Object, jsonEv.Type, jsonObj.Object)
			}
			events++
		}
	}
	ct.mu.Lock()
	defer ct.mu.Unlock()
	for _, w := range ws {
		wantType := "application/vnd.kubernetes.protobuf"
		if w.res.Resource == "watchprobes" {
			wantType = "application/json"
		}
		if got := ct.seen[w.res.Resource]; !strings.HasPrefix(got, wantType) {
			t.Errorf("the protobuf client's watch of %s came as %q, want %s", w.res.Resource, got, wantType)
		}
	}
	t.Logf("%d events alike in protobuf and JSON over %d kinds", events, len(ws))
}

// TestManagerWatchContentType runs the getting-started annotator with the
// manager's default watch media type and with JSON
// (ManagerOptions.WatchContentType): both annotate the pods, and the
// manager's pod watch came in protobuf by default and in JSON when asked.
func TestManagerWatchContentType(t *testing.T) {
	op, err := os.ReadFile(filepath.Join(repoRoot, "examples", "pod-container-num-annotator", "operator.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct{ option, want string }{
		{"", "application/vnd.kubernetes.protobuf"},
		{"application/json", "application/json"},
	} {
		ns := fmt.Sprintf("pbmanager-%d-%d", i, time.Now().UnixNano()%1000000)
		mustKubectl(t, "", "create", "namespace", ns)
		ct := &contentTypes{seen: map[string]string{}}
		cfg := rest.CopyConfig(restConfig)
		cfg.Wrap(ct.wrap)
		stop := startManagerFor(t, cfg, operator.ManagerOptions{WatchContentType: c.option})
		spec := strings.Replace(string(op), "namespace: default", "namespace: "+ns, 1)
		spec = strings.Replace(spec, "name: pod-container-num-annotator\nspec", "name: pbmanager\nspec", 1)
		mustKubectl(t, spec, "apply", "-f", "-")
		mustKubectl(t, podYAML("two", ns, 2), "apply", "-f", "-")
		mustKubectl(t, podYAML("three", ns, 3), "apply", "-f", "-")
		for name, want := range map[string]string{"two": "2", "three": "3"} {
			eventually(t, 30*time.Second, func() string {
				if got, err := annotation(t, ns, name); err != nil || got != want {
					return fmt.Sprintf("%q: pod %s annotation %q (err %v), want %q", c.option, name, got, err, want)
				}
				return ""
			})
		}
		mustKubectl(t, "", "delete", "operators.dcontroller.io", "pbmanager")
		stop()
		ct.mu.Lock()
		got := ct.seen["pods"]
		ct.mu.Unlock()
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("WatchContentType %q: the manager's pod watch came as %q, want %s", c.option, got, c.want)
		}
	}
}
