package e2e

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// runSpecific matches the uid, times and resource version in an object
// quoted (as escaped JSON) by an error message.
var runSpecific = regexp.MustCompile(`\\"(uid|resourceVersion|creationTimestamp|time)\\":\\"[^\\]*\\"`)

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
		// Who wrote what, without the times. The API server orders the
		// entries by operation, then by the second of their time, then by
		// manager: two writes in one second or in two come out in
		// different orders, so the names are sorted.
		names := make([]string, 0, len(mf))
		for _, e := range mf {
			names = append(names, e.Manager+"/"+string(e.Operation)+"/"+e.Subresource)
		}
		sort.Strings(names)
		managers := make([]any, len(names))
		for i, n := range names {
			managers[i] = n
		}
		c.Object["managers"] = managers
	}
	return c.Object
}

// TestPatchAnswerlessAsMetadataClient sends the same patches through
// controller-runtime's client with PartialObjectMetadata objects (its
// metadata client, which decodes every answer) and through the manager
// client's PatchAnswerless (which reads only the answer's status), each in
// a namespace of its own, and checks that both leave the same objects
// behind and return the same errors: merge and JSON patches with a field
// manager, a dry run, the status subresource, a cluster-scoped kind, a
// missing object, a malformed patch, a patch making the object invalid,
// strict field validation, force on a merge patch, an unknown kind and a
// namespaced kind without a namespace.
func TestPatchAnswerlessAsMetadataClient(t *testing.T) {
	installCRD(t, "WriteProbe", "writeprobes", "Namespaced")
	plain, err := client.New(restConfig, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	oursClient, err := watchcodec.NewClient(restConfig, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ours, ok := oursClient.(watchcodec.AnswerlessPatcher)
	if !ok {
		t.Fatalf("watchcodec.NewClient's client (%T) is no AnswerlessPatcher", oursClient)
	}
	type patchFunc func(ctx context.Context, gvk schema.GroupVersionKind, ns, name string, pt types.PatchType, data []byte, subresource string, opts ...client.PatchOption) error
	viaMetadata := func(ctx context.Context, gvk schema.GroupVersionKind, ns, name string, pt types.PatchType, data []byte, subresource string, opts ...client.PatchOption) error {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(gvk)
		m.SetNamespace(ns)
		m.SetName(name)
		if subresource != "" {
			o := (&client.PatchOptions{}).ApplyOptions(opts)
			return plain.SubResource(subresource).Patch(ctx, m, client.RawPatch(pt, data), &client.SubResourcePatchOptions{PatchOptions: *o})
		}
		return plain.Patch(ctx, m, client.RawPatch(pt, data), opts...)
	}
	type step struct {
		obj map[string]any // the patched object read back, cleaned
		err string         // the error's reason and message, "" for none
	}
	configMap := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	probe := schema.GroupVersionKind{Group: "e2e.dcontroller.io", Version: "v1", Kind: "WriteProbe"}
	role := schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}
	run := func(patch patchFunc, tag string) []step {
		ctx := context.Background()
		ns := "patchanswerless-" + tag
		roleName := "patchanswerless-" + tag
		for _, o := range []map[string]any{
			{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}},
			{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cm", "namespace": ns}, "data": map[string]any{"k": "v"}},
			{"apiVersion": "e2e.dcontroller.io/v1", "kind": "WriteProbe", "metadata": map[string]any{"name": "p", "namespace": ns}, "spec": map[string]any{"x": int64(1)}},
			{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": map[string]any{"name": roleName}},
		} {
			if err := plain.Create(ctx, u(o)); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() {
			_ = plain.Delete(context.Background(), u(map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}))
			_ = plain.Delete(context.Background(), u(map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": map[string]any{"name": roleName}}))
		})
		var steps []step
		do := func(gvk schema.GroupVersionKind, ns, name string, pt types.PatchType, data, subresource string, opts ...client.PatchOption) {
			s := step{}
			if err := patch(ctx, gvk, ns, name, pt, []byte(data), subresource, opts...); err != nil {
				// Without what differs between the runs: the namespace, and
				// the uid, times and resource version of the object an
				// Invalid error quotes.
				msg := strings.ReplaceAll(err.Error(), "patchanswerless-"+tag, "NS")
				s.err = fmt.Sprintf("%s: %s", apierrors.ReasonForError(err), runSpecific.ReplaceAllString(msg, ""))
			}
			if name == roleName {
				name = "patchanswerless-plain"
			}
			obj := &unstructured.Unstructured{}
			obj.SetGroupVersionKind(gvk)
			if err := plain.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj); err == nil {
				s.obj = cleaned(obj, ns, tag)
			}
			steps = append(steps, s)
		}
		do(configMap, ns, "cm", types.MergePatchType, `{"metadata":{"annotations":{"a":"1"}},"data":{"m":"2"}}`, "", client.FieldOwner("writer-a"))
		do(configMap, ns, "cm", types.JSONPatchType, `[{"op":"remove","path":"/data/m"}]`, "", client.FieldOwner("writer-b"))
		do(configMap, ns, "cm", types.MergePatchType, `{"data":{"dry":"run"}}`, "", client.DryRunAll)
		do(configMap, ns, "missing", types.MergePatchType, `{"data":{"a":"b"}}`, "")
		do(configMap, ns, "cm", types.MergePatchType, `{"data":`, "")
		do(configMap, ns, "cm", types.MergePatchType, `{"metadata":{"labels":{"bad label":"x"}}}`, "")
		do(configMap, ns, "cm", types.MergePatchType, `{"data2":{"a":"b"}}`, "", client.FieldValidation("Strict"))
		do(configMap, ns, "cm", types.MergePatchType, `{"data":{"f":"g"}}`, "", client.ForceOwnership)
		do(probe, ns, "p", types.MergePatchType, `{"status":{"count":3},"spec":{"x":99}}`, "status", client.FieldOwner("writer-s"))
		do(probe, ns, "p", types.MergePatchType, `{"spec":{"x":2}}`, "")
		do(probe, ns, "gone", types.MergePatchType, `{"status":{"count":3}}`, "status")
		do(role, "", roleName, types.MergePatchType, `{"metadata":{"labels":{"l":"1"}}}`, "")
		do(schema.GroupVersionKind{Group: "nowhere.example.com", Version: "v1", Kind: "Nothing"}, ns, "n", types.MergePatchType, `{}`, "")
		do(configMap, "", "cm", types.MergePatchType, `{"data":{"a":"b"}}`, "")
		return steps
	}
	want := run(viaMetadata, "plain")
	got := run(ours.PatchAnswerless, "ours")
	if len(got) != len(want) {
		t.Fatalf("%d steps, the metadata client's %d", len(got), len(want))
	}
	for i := range want {
		t.Logf("step %d: %s", i, want[i].err)
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("step %d:\n got  %+v\n want %+v (controller-runtime's metadata client)", i, got[i], want[i])
		}
	}
	// The steps did what they say (not only the same on both).
	for i, reason := range map[int]string{3: "NotFound", 4: "BadRequest", 5: "Invalid", 6: "Invalid", 7: "Invalid", 10: "NotFound", 13: "NotFound"} {
		if !strings.HasPrefix(want[i].err, reason) {
			t.Errorf("step %d: error %q, want %s", i, want[i].err, reason)
		}
	}
	for _, i := range []int{0, 1, 2, 8, 9, 11} {
		if want[i].err != "" {
			t.Errorf("step %d failed: %s", i, want[i].err)
		}
	}
	if want[12].err == "" {
		t.Errorf("an unknown kind was not refused")
	}
	if data, _, _ := unstructured.NestedStringMap(want[2].obj, "data"); !reflect.DeepEqual(data, map[string]string{"k": "v"}) {
		t.Errorf("after the patches and the dry run the ConfigMap's data is %v", data)
	}
	if c, _, _ := unstructured.NestedInt64(want[8].obj, "status", "count"); c != 3 {
		t.Errorf("after the status patch the probe's status.count is %d", c)
	}
	if x, _, _ := unstructured.NestedInt64(want[8].obj, "spec", "x"); x != 1 {
		t.Errorf("the status patch wrote spec.x: %d", x)
	}
}
