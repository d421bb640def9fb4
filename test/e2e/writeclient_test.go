package e2e

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcontroller/dcontroller/pkg/watchcodec"
)

// TestWriteClientAsControllerRuntime runs the same writes through
// controller-runtime's client and through the manager's
// (watchcodec.NewClient, which sends unstructured writes through a
// one-parse dynamic client) against the API server, each in a namespace
// of its own, and checks that both leave the same objects behind and
// return the same errors: creates of a namespaced and a cluster-scoped
// kind, updates, merge and JSON patches, the status subresource's update
// and patch, a dry run, a conflict, an existing name, a missing object, an
// invalid object, an unknown kind and objects of namespaced kinds without
// a namespace (refused by client-go before sending).
func TestWriteClientAsControllerRuntime(t *testing.T) {
	installCRD(t, "WriteProbe", "writeprobes", "Namespaced")
	plain, err := client.New(restConfig, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ours, err := watchcodec.NewClient(restConfig, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	type step struct {
		obj map[string]any // the object after the step, cleaned
		err string         // the error's reason and message, "" for none
	}
	run := func(c client.Client, tag string) []step {
		ctx := context.Background()
		ns := "writeclient-" + tag
		if err := c.Create(ctx, u(map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}})); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = plain.Delete(context.Background(), u(map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}))
			_ = plain.Delete(context.Background(), u(map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
				"metadata": map[string]any{"name": "writeclient-" + tag}}))
		})
		var steps []step
		record := func(obj *unstructured.Unstructured, err error) {
			s := step{}
			if err != nil {
				s.err = fmt.Sprintf("%s: %s", apierrors.ReasonForError(err), err)
			}
			if obj != nil {
				s.obj = cleaned(obj, ns, tag)
			}
			steps = append(steps, s)
		}
		cm := u(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "cm", "namespace": ns, "labels": map[string]any{"a": "1"}},
			"data":     map[string]any{"k": "v", "n": "1"}})
		record(cm, c.Create(ctx, cm))
		dup := u(cm.Object)
		dup.SetResourceVersion("")
		record(dup, c.Create(ctx, dup))
		cm.Object["data"] = map[string]any{"k": "w"}
		record(cm, c.Update(ctx, cm))
		stale := cm.DeepCopy()
		stale.SetResourceVersion("1")
		record(stale, c.Update(ctx, stale))
		record(cm, c.Patch(ctx, cm, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"x":"y"}},"data":{"m":"2"}}`))))
		record(cm, c.Patch(ctx, cm, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/data/m"}]`))))
		dry := u(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "dry", "namespace": ns}})
		record(dry, c.Create(ctx, dry, client.DryRunAll))
		missing := u(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "missing", "namespace": ns}})
		record(missing, c.Patch(ctx, missing, client.RawPatch(types.MergePatchType, []byte(`{"data":{"a":"b"}}`))))
		bad := u(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "Not_A_Name", "namespace": ns}})
		record(bad, c.Create(ctx, bad))
		unknown := u(map[string]any{"apiVersion": "nowhere.example.com/v1", "kind": "Nothing", "metadata": map[string]any{"name": "n", "namespace": ns}})
		record(nil, c.Create(ctx, unknown))
		role := u(map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
			"metadata": map[string]any{"name": "writeclient-" + tag},
			"rules":    []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "verbs": []any{"get"}}}})
		record(role, c.Create(ctx, role))
		p := u(map[string]any{"apiVersion": "e2e.dcontroller.io/v1", "kind": "WriteProbe",
			"metadata": map[string]any{"name": "p", "namespace": ns}, "spec": map[string]any{"x": int64(1)}})
		record(p, c.Create(ctx, p))
		p.Object["status"] = map[string]any{"ready": true, "count": int64(2)}
		p.Object["spec"] = map[string]any{"x": int64(99)} // not written by a status update
		record(p, c.Status().Update(ctx, p))
		record(p, c.Status().Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(`{"status":{"count":3}}`))))
		gone := u(map[string]any{"apiVersion": "e2e.dcontroller.io/v1", "kind": "WriteProbe", "metadata": map[string]any{"name": "gone", "namespace": ns}})
		record(gone, c.Status().Update(ctx, gone))
		// A namespaced kind without a namespace.
		nons := u(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "nons"}})
		record(nons, c.Create(ctx, nons))
		record(nons, c.Update(ctx, nons))
		record(nons, c.Patch(ctx, nons, client.RawPatch(types.MergePatchType, []byte(`{"data":{"a":"b"}}`))))
		nonsCR := u(map[string]any{"apiVersion": "e2e.dcontroller.io/v1", "kind": "WriteProbe", "metadata": map[string]any{"name": "nons"}})
		record(nonsCR, c.Create(ctx, nonsCR))
		record(nonsCR, c.Status().Update(ctx, nonsCR))
		return steps
	}
	want := run(plain, "plain")
	once0, _ := watchcodec.Counts()
	got := run(ours, "ours")
	// Every successful write of ours (the namespace, and 9 of the steps)
	// decoded its response in one parse.
	if once1, _ := watchcodec.Counts(); once1-once0 < 10 {
		t.Errorf("%d responses decoded in one parse, want 10 or more", once1-once0)
	}
	if len(got) != len(want) {
		t.Fatalf("%d steps, controller-runtime's client %d", len(got), len(want))
	}
	for i := range want {
		t.Logf("step %d: %s", i, want[i].err)
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("step %d:\n got  %+v\n want %+v (controller-runtime's client)", i, got[i], want[i])
		}
	}
	// The steps did what they say (not only the same on both).
	if want[0].err != "" || !strings.HasPrefix(want[1].err, "AlreadyExists") || !strings.HasPrefix(want[3].err, "Conflict") || want[3].err == "" || want[7].err == "" || want[8].err == "" || want[9].err == "" || want[14].err == "" {
		t.Errorf("unexpected outcomes: %+v", want)
	}
	for i := 15; i <= 19; i++ {
		if !strings.Contains(want[i].err, "namespace") && !strings.Contains(want[i].err, "NotFound") {
			t.Errorf("step %d, a write without a namespace: %q", i, want[i].err)
		}
	}
	if data, _, _ := unstructured.NestedStringMap(want[5].obj, "data"); !reflect.DeepEqual(data, map[string]string{"k": "w"}) {
		t.Errorf("after the patches the ConfigMap's data is %v", data)
	}
	if c, _, _ := unstructured.NestedInt64(want[13].obj, "status", "count"); c != 3 {
		t.Errorf("after the status patch the probe's status.count is %d", c)
	}
}

func u(m map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: runtimeDeepCopy(m)}
}

func runtimeDeepCopy(m map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: m}).DeepCopy().Object
}

// cleaned is obj without what differs between two runs in different
// namespaces (uid, resource version, times, the namespace's and the
// run's name).
func cleaned(obj *unstructured.Unstructured, ns, tag string) map[string]any {
	c := obj.DeepCopy()
	for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "managedFields"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	if c.GetNamespace() == ns {
		c.SetNamespace("NS")
	}
	if c.GetName() == "writeclient-"+tag {
		c.SetName("NAME")
	}
	if mf := obj.GetManagedFields(); len(mf) > 0 {
		// Who wrote what, without the times.
		var managers []any
		for _, e := range mf {
			managers = append(managers, e.Manager+"/"+string(e.Operation)+"/"+e.Subresource)
		}
		c.Object["managers"] = managers
	}
	return c.Object
}
