package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/object"
)

// fuzzBytes hands out the fuzz input a byte at a time; past its end every
// choice is 0, so any input decodes.
type fuzzBytes struct {
	b []byte
	i int
}

func (f *fuzzBytes) next() int {
	if f.i >= len(f.b) {
		return 0
	}
	f.i++
	return int(f.b[f.i-1])
}

// pick returns a choice in [0, n).
func (f *fuzzBytes) pick(n int) int { return f.next() % n }

func (f *fuzzBytes) done() bool { return f.i >= len(f.b) }

// Stages of the fuzzed pipelines, over objects with metadata (labels and
// annotations from small key sets) and spec {k, v: 0..2, list: [ints]}.
var fuzzStages = []string{
	`{"@select": {"@eq": ["$.spec.k", 1]}}`,
	`{"@select": {"@exists": "$.metadata.labels.app"}}`,
	`{"@project": {"metadata": "$.metadata", "spec": "$.spec"}}`,
	// drop the labels, keep the annotations
	`{"@project": {"metadata": {"name": "$.metadata.name", "namespace": "$.metadata.namespace", "annotations": "$.metadata.annotations"}, "spec": "$.spec"}}`,
	// drop the annotations, keep the labels
	`{"@project": {"metadata": {"name": "$.metadata.name", "namespace": "$.metadata.namespace", "labels": "$.metadata.labels"}, "spec": "$.spec"}}`,
	// a label and an annotation computed from the spec
	`{"@project": [{"metadata": "$.metadata", "spec": "$.spec"}, {"metadata": "$.metadata", "spec": "$.spec", "$.metadata.labels.k": {"@string": "$.spec.k"}, "$.metadata.annotations.v": {"@string": "$.spec.v"}}]}`,
	`{"@unwind": "$.spec.list"}`,
	`{"@gather": [{"@concat": ["$.metadata.namespace", "/", {"@string": "$.spec.k"}]}, "$.spec.list"]}`,
	`[{"@groupBy": [{"@definedOr": ["$.spec.k", 0]}, "$.metadata.name"]}, {"@project": {"metadata": {"name": {"@concat": ["g", {"@string": "$.key"}]}, "namespace": "ns0", "labels": {"k": {"@string": "$.key"}}}, "spec": {"names": "$.values"}}}]`,
	`{"@distinct": {}}`,
}

// fuzzJoins are the @join stages of two-source pipelines, each followed by
// a projection back to one object: labels from A, annotations from B.
var fuzzJoins = []string{
	`{"@eq": ["$.A.spec.k", "$.B.spec.k"]}`,
	`{"@and": [{"@eq": ["$.A.spec.k", "$.B.spec.k"]}, {"@eq": ["$.A.metadata.namespace", "$.B.metadata.namespace"]}]}`,
	`{"@eq": ["$.A.metadata.labels.app", "$.B.metadata.labels.app"]}`,
}

const fuzzJoinProject = `{"@project": {"metadata": {"name": {"@concat": ["$.A.metadata.name", "-", "$.B.metadata.name"]}, "namespace": "$.A.metadata.namespace", "labels": "$.A.metadata.labels", "annotations": "$.B.metadata.annotations"}, "spec": {"k": "$.A.spec.k", "v": "$.B.spec.v", "list": "$.A.spec.list"}}}`

// fuzzPatchTarget maps every output to one of the pre-existing objects
// ns0/t0..t2 of a Patcher target. Missing labels and annotations become
// empty maps: a null in a merge patch (RFC 7386) deletes the whole map,
// the target's own keys included, which no later patch can restore.
const fuzzPatchTarget = `{"@project": {"metadata": {"name": {"@concat": ["t", {"@string": {"@definedOr": ["$.spec.k", 0]}}]}, "namespace": "ns0", "labels": {"@definedOr": ["$.metadata.labels", {}]}, "annotations": {"@definedOr": ["$.metadata.annotations", {}]}}, "spec": {"v": "$.spec.v", "list": "$.spec.list"}}}`

var fuzzGroup = "example.com"

// fuzzCase is a decoded fuzz input: an operator and a change sequence.
type fuzzCase struct {
	op      *opv1a1.Operator
	patcher bool
	changes []*unstructured.Unstructured // a deletionTimestamp marks a deletion
}

func decodeFuzz(data []byte) (*fuzzCase, error) {
	f := &fuzzBytes{b: data}
	sources := []string{"A"}
	var stages []string
	if f.pick(3) == 0 {
		sources = append(sources, "B")
		stages = append(stages, `{"@join": `+fuzzJoins[f.pick(len(fuzzJoins))]+`}`, fuzzJoinProject)
	}
	for n := f.pick(4); n > 0; n-- {
		s := fuzzStages[f.pick(len(fuzzStages))]
		if strings.HasPrefix(s, "[") {
			stages = append(stages, s[1:len(s)-1])
		} else {
			stages = append(stages, s)
		}
	}
	fc := &fuzzCase{patcher: f.pick(2) == 1}
	target := opv1a1.Target{Resource: opv1a1.Resource{APIGroup: &fuzzGroup, Version: strPtr("v1"), Kind: "Out"}, Type: opv1a1.Updater}
	if fc.patcher {
		target.Type = opv1a1.Patcher
		stages = append(stages, fuzzPatchTarget)
	}
	spec := opv1a1.Controller{Name: "c", Target: target,
		Pipeline: apiextensionsv1.JSON{Raw: []byte("[" + strings.Join(stages, ",") + "]")}}
	for _, kind := range sources {
		spec.Sources = append(spec.Sources, opv1a1.Source{Resource: opv1a1.Resource{APIGroup: &fuzzGroup, Version: strPtr("v1"), Kind: kind}})
	}
	fc.op = &opv1a1.Operator{ObjectMeta: metav1.ObjectMeta{Name: "fuzz"}, Spec: opv1a1.OperatorSpec{Controllers: []opv1a1.Controller{spec}}}

	live := map[string]bool{}
	for len(fc.changes) < 40 && !f.done() {
		kind := sources[f.pick(len(sources))]
		obj := fuzzObject(kind, f)
		id := kind + "/" + obj.GetNamespace() + "/" + obj.GetName()
		if live[id] && f.pick(4) == 0 {
			now := metav1.Now()
			obj.SetDeletionTimestamp(&now)
			delete(live, id)
		} else {
			live[id] = true
		}
		fc.changes = append(fc.changes, obj)
	}
	return fc, nil
}

func strPtr(s string) *string { return &s }

// fuzzObject decodes a source object with random labels, annotations and
// spec.
func fuzzObject(kind string, f *fuzzBytes) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: fuzzGroup, Version: "v1", Kind: kind})
	u.SetNamespace(fmt.Sprintf("ns%d", f.pick(2)))
	u.SetName(fmt.Sprintf("%s%d", strings.ToLower(kind), f.pick(4)))
	bits := f.next()
	labels := map[string]string{}
	for i, k := range []string{"app", "tier", "k"} {
		if bits&(1<<i) != 0 {
			labels[k] = fmt.Sprintf("x%d", f.pick(2))
		}
	}
	annotations := map[string]string{}
	for i, k := range []string{"note", "team"} {
		if bits&(1<<(3+i)) != 0 {
			annotations[k] = fmt.Sprintf("y%d", f.pick(2))
		}
	}
	if len(labels) > 0 {
		u.SetLabels(labels)
	}
	if len(annotations) > 0 {
		u.SetAnnotations(annotations)
	}
	list := make([]any, f.pick(3))
	for i := range list {
		list[i] = int64(f.pick(3))
	}
	u.Object["spec"] = map[string]any{"k": int64(f.pick(3)), "v": int64(f.pick(3)), "list": list}
	return u
}

// patchTargets are the pre-existing objects of a Patcher target, with fields
// the pipelines never set (so removing what a patch set restores them).
func patchTargets() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for i := 0; i < 3; i++ {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"pre": int64(i)}}}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: fuzzGroup, Version: "v1", Kind: "Out"})
		u.SetNamespace("ns0")
		u.SetName(fmt.Sprintf("t%d", i))
		u.SetLabels(map[string]string{"pre": "l"})
		u.SetAnnotations(map[string]string{"pre": "a"})
		out = append(out, u)
	}
	return out
}

// runFuzz applies objs in order to a fresh offline run of fc's operator and
// returns the target objects without the owner annotation.
func runFuzz(t *testing.T, fc *fuzzCase, objs []*unstructured.Unstructured) []map[string]any {
	t.Helper()
	ctx := context.Background()
	off, err := NewOffline([]*opv1a1.Operator{fc.op}, OfflineOptions{})
	if err != nil {
		t.Fatalf("operator does not compile: %v\npipeline: %s", err, fc.op.Spec.Controllers[0].Pipeline.Raw)
	}
	if err := off.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if fc.patcher {
		for _, u := range patchTargets() {
			if _, err := off.Store.Create(u); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, obj := range objs {
		// Evaluation errors (an ambiguous output, a failing expression) are
		// the same in both runs; what is compared is the result.
		_ = off.Apply(ctx, obj.DeepCopy())
	}
	var out []map[string]any
	for _, u := range off.Result() {
		if u.GetKind() != "Out" {
			continue
		}
		m := object.StripServerFields(u.Object)
		if md, ok := m["metadata"].(map[string]any); ok {
			// A null map is no map, as the API server stores it.
			for _, k := range []string{"labels", "annotations"} {
				if v, ok := md[k]; ok && v == nil {
					delete(md, k)
				}
			}
			if ann, ok := md["annotations"].(map[string]any); ok {
				delete(ann, opv1a1.OwnerAnnotation)
				if len(ann) == 0 {
					delete(md, "annotations")
				}
			}
		}
		out = append(out, m)
	}
	return out
}

// finalSources returns the source objects left after the changes, in
// order of kind, namespace and name.
func finalSources(changes []*unstructured.Unstructured) []*unstructured.Unstructured {
	live := map[string]*unstructured.Unstructured{}
	for _, u := range changes {
		id := u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
		if u.GetDeletionTimestamp() != nil {
			delete(live, id)
		} else {
			live[id] = u
		}
	}
	ids := make([]string, 0, len(live))
	for id := range live {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]*unstructured.Unstructured, len(ids))
	for i, id := range ids {
		out[i] = live[id]
	}
	return out
}

// FuzzIncremental checks the controller invariant: the target objects after
// a sequence of changes equal those computed from scratch on the final
// sources (as dctl eval computes them), labels and annotations included,
// for random pipelines over one or two source kinds and Updater and
// Patcher targets.
func FuzzIncremental(f *testing.F) {
	f.Add([]byte{1, 0, 1, 0, 0, 0, 7, 1, 1, 0, 2, 1, 2})
	f.Add([]byte{1, 2, 4, 6, 0, 1, 0, 1, 3, 1, 2, 2, 0, 0, 1, 0, 1, 3, 1, 2, 2, 1, 1, 0, 0, 1, 0, 0, 0, 0})
	f.Add([]byte{0, 1, 1, 8, 1, 0, 0, 1, 0xff, 1, 0, 1, 0, 1, 2, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 2, 1, 2})
	f.Add([]byte{2, 3, 7, 5, 6, 1, 0, 0, 2, 0x1f, 1, 1, 0, 0, 1, 2, 2, 0, 1, 1, 0, 0, 0, 0, 1, 0, 1, 0, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		fc, err := decodeFuzz(data)
		if err != nil {
			return
		}
		got := runFuzz(t, fc, fc.changes)
		want := runFuzz(t, fc, finalSources(fc.changes))
		if !reflect.DeepEqual(got, want) {
			g, _ := json.MarshalIndent(got, "", "  ")
			w, _ := json.MarshalIndent(want, "", "  ")
			var steps []string
			for _, u := range fc.changes {
				b, _ := json.Marshal(u.Object)
				steps = append(steps, string(b))
			}
			t.Fatalf("incremental result differs from the result from scratch\npipeline (%s): %s\nchanges:\n%s\nincremental:\n%s\nfrom scratch:\n%s",
				fc.op.Spec.Controllers[0].Target.Type, fc.op.Spec.Controllers[0].Pipeline.Raw, strings.Join(steps, "\n"), g, w)
		}
	})
}
