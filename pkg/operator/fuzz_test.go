package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/controller"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/view"
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

// fuzzCase is a decoded fuzz input: an operator and a sequence of steps.
type fuzzCase struct {
	op      *opv1a1.Operator
	patcher bool
	steps   []fuzzStep
	changes []*unstructured.Unstructured // the changes of steps, in order
	// existing are the objects in the store before the first start (the
	// objects of Patcher targets); nil with patcher: patchTargets().
	existing []*unstructured.Unstructured
	// status: the target kinds modelled with the status subresource
	// (OfflineOptions.StatusSubresource).
	status map[string]bool
	// released: the name prefixes of the objects of Applier targets, which
	// stay when the output goes, without the fields the Applier released
	// (see withoutReleased).
	released []string
}

// fuzzStep is one step of a fuzz run: a change of a source object (a
// deletionTimestamp marks a deletion), a resync of every controller (a
// Periodic source's tick), or a restart: the run stops, the next down
// changes are made while no controller runs, and a new run starts over
// the same store (a manager restart).
type fuzzStep struct {
	change *unstructured.Unstructured
	// batch: changes made at once (Offline.ApplyAll, as dctl eval makes
	// them).
	batch  []*unstructured.Unstructured
	resync bool
	// restart, with down: the changes made while stopped.
	restart bool
	down    []*unstructured.Unstructured
}

// Control bytes: where a change's first byte would be, a byte at or above
// fuzzResync is a resync, at or above fuzzRestart a restart that makes the
// next (byte - fuzzRestart) changes while stopped. A change's first byte
// picks the source kind modulo the number of sources, so inputs without
// such bytes decode as they did before steps other than changes existed.
const (
	fuzzResync  = 0xf8
	fuzzRestart = 0xfc
)

func decodeFuzz(data []byte) (*fuzzCase, error) {
	f := &fuzzBytes{b: data}
	if len(data) > 0 && data[0] >= fuzzBranchForm {
		f.next()
		fc, sources := decodeBranchForm(f)
		decodeSteps(f, fc, sources)
		return fc, nil
	}
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
	spec := opv1a1.Controller{Name: "c", Target: &target,
		Pipeline: apiextensionsv1.JSON{Raw: []byte("[" + strings.Join(stages, ",") + "]")}}
	for _, kind := range sources {
		spec.Sources = append(spec.Sources, opv1a1.Source{Resource: opv1a1.Resource{APIGroup: &fuzzGroup, Version: strPtr("v1"), Kind: kind}})
	}
	fc.op = &opv1a1.Operator{ObjectMeta: metav1.ObjectMeta{Name: "fuzz"}, Spec: opv1a1.OperatorSpec{Controllers: []opv1a1.Controller{spec}}}
	decodeSteps(f, fc, sources)
	return fc, nil
}

// decodeSteps decodes the rest of f into fc's steps, changes of objects of
// the kinds sources.
func decodeSteps(f *fuzzBytes, fc *fuzzCase, sources []string) {
	live := map[string]bool{}
	change := func(b int) *unstructured.Unstructured {
		kind := sources[b%len(sources)]
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
		return obj
	}
	for len(fc.changes) < 40 && len(fc.steps) < 60 && !f.done() {
		switch b := f.next(); {
		case b >= fuzzRestart:
			st := fuzzStep{restart: true}
			var after []fuzzStep
			for n := b - fuzzRestart; n > 0 && !f.done(); n-- {
				if len(fc.released) > 0 {
					// An Applier keeps no record of what it applied, so an
					// output that goes while the manager is stopped leaves
					// its fields (docs/concepts.md): with an Applier target
					// these changes are made after the start.
					after = append(after, fuzzStep{change: change(f.next())})
				} else {
					st.down = append(st.down, change(f.next()))
				}
			}
			fc.steps = append(append(fc.steps, st), after...)
		case b >= fuzzResync:
			fc.steps = append(fc.steps, fuzzStep{resync: true})
		default:
			fc.steps = append(fc.steps, fuzzStep{change: change(b)})
		}
	}
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

// runFuzz runs steps in order, starting with a fresh offline run of fc's
// operator, and returns the target objects without the owner annotation.
// With
// subresource the target kinds fc.status names are modelled with the
// status subresource (OfflineOptions.StatusSubresource); without, no kind
// has it, as in dctl eval.
func runFuzz(t *testing.T, fc *fuzzCase, steps []fuzzStep, subresource bool) []map[string]any {
	t.Helper()
	ctx := context.Background()
	var status func(schema.GroupVersionKind) bool
	if subresource && len(fc.status) > 0 {
		status = func(gvk schema.GroupVersionKind) bool { return gvk.Group == fuzzGroup && fc.status[gvk.Kind] }
	}
	start := func(store *view.Store) *Offline {
		off, err := NewOffline([]*opv1a1.Operator{fc.op}, OfflineOptions{Store: store, StatusSubresource: status})
		if err != nil {
			t.Fatalf("operator does not compile: %v\npipeline: %s", err, fc.op.Spec.Controllers[0].Pipeline.Raw)
		}
		// Errors of the start, as those of changes, are the same in both
		// runs (an ambiguous output, a failing expression); what is
		// compared is the result.
		_ = off.Start(ctx)
		return off
	}
	off := start(nil)
	existing := fc.existing
	if fc.patcher {
		existing = patchTargets()
	}
	for _, u := range existing {
		if _, err := off.Store.Create(u.DeepCopy()); err != nil {
			t.Fatal(err)
		}
	}
	for _, st := range steps {
		switch {
		case st.change != nil:
			_ = off.Apply(ctx, st.change.DeepCopy())
		case st.batch != nil:
			objs := make([]*unstructured.Unstructured, len(st.batch))
			for i, u := range st.batch {
				objs[i] = u.DeepCopy()
			}
			_ = off.ApplyAll(ctx, objs)
		case st.resync:
			_ = off.Resync(ctx)
		case st.restart:
			off.Stop()
			for _, obj := range st.down {
				_ = off.store(obj.DeepCopy())
			}
			off = start(off.Store)
		}
	}
	var out []map[string]any
	for _, u := range off.Result() {
		m := object.StripServerFields(u.Object)
		if md, ok := m["metadata"].(map[string]any); ok {
			if ann, ok := md["annotations"].(map[string]any); ok {
				delete(ann, opv1a1.OwnerAnnotation)
			}
			// A null status is no status (see controller.Target.Status).
			if v, ok := m["status"]; ok && v == nil {
				delete(m, "status")
			}
			// A null or empty map is no map, as the API server stores it.
			for _, k := range []string{"labels", "annotations"} {
				if v, ok := md[k]; ok && (v == nil || reflect.DeepEqual(v, map[string]any{})) {
					delete(md, k)
				}
			}
		}
		// Compared as the API server serves it, in JSON: a number is a
		// number whatever Go type a write path held it in.
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if m, err = object.FromJSON(b); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return withoutReleased(out, fc.released)
}

// withoutReleased returns objs without the traces of Applier outputs that
// went: an Applier gives up its fields when its output goes and leaves
// the object, with the maps its fields were in (empty), so the objects of
// outputs that came and went depend on the order of the changes, not only
// on the final sources. In the objects whose names start with one of
// prefixes, empty maps are removed, and an object left with nothing but
// its name is dropped.
func withoutReleased(objs []map[string]any, prefixes []string) []map[string]any {
	if len(prefixes) == 0 {
		return objs
	}
	var prune func(v any) (any, bool)
	prune = func(v any) (any, bool) {
		m, ok := v.(map[string]any)
		if !ok {
			return v, true
		}
		out := map[string]any{}
		for k, e := range m {
			if e, keep := prune(e); keep {
				out[k] = e
			}
		}
		return out, len(out) > 0
	}
	var out []map[string]any
	for _, m := range objs {
		md, _ := m["metadata"].(map[string]any)
		name, _ := md["name"].(string)
		if !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
			out = append(out, m)
			continue
		}
		pruned, _ := prune(m)
		p := pruned.(map[string]any)
		pmd, _ := p["metadata"].(map[string]any)
		if len(p) == 3 && len(pmd) == 2 && pmd["namespace"] != nil { // apiVersion, kind, metadata{name, namespace}
			continue
		}
		out = append(out, p)
	}
	return out
}

// changeSteps returns the steps that make the changes objs, in order.
func changeSteps(objs []*unstructured.Unstructured) []fuzzStep {
	steps := make([]fuzzStep, len(objs))
	for i, u := range objs {
		steps[i] = fuzzStep{change: u}
	}
	return steps
}

// batchStep returns the one step that makes the changes objs at once, as
// dctl eval makes them.
func batchStep(objs []*unstructured.Unstructured) []fuzzStep {
	return []fuzzStep{{batch: objs}}
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
// a sequence of changes, resyncs (Periodic ticks) and restarts (a new run
// over the same store, with changes made while stopped) equal those
// computed from scratch on the final sources (as dctl eval computes them),
// labels, annotations (a Patcher's record among them) and deletions
// included, for random pipelines over one or two source kinds and Updater
// and Patcher targets.
func FuzzIncremental(f *testing.F) {
	f.Add([]byte{1, 0, 1, 0, 0, 0, 7, 1, 1, 0, 2, 1, 2})
	f.Add([]byte{1, 2, 4, 6, 0, 1, 0, 1, 3, 1, 2, 2, 0, 0, 1, 0, 1, 3, 1, 2, 2, 1, 1, 0, 0, 1, 0, 0, 0, 0})
	f.Add([]byte{0, 1, 1, 8, 1, 0, 0, 1, 0xff, 1, 0, 1, 0, 1, 2, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 2, 1, 2})
	f.Add([]byte{2, 3, 7, 5, 6, 1, 0, 0, 2, 0x1f, 1, 1, 0, 0, 1, 2, 2, 0, 1, 1, 0, 0, 0, 0, 1, 0, 1, 0, 2})
	// A Patcher (then an Updater) sets a label, an annotation and spec
	// fields on t0 (on a0); the source drops its label and annotation
	// after a resync, while the manager is down, or the source goes while
	// the manager is down.
	for _, target := range []byte{1, 0} {
		set := []byte{0, 0, 0, 9, 0, 0, 0, 0, 0}
		drop := []byte{0, 0, 0, 0, 0, 0, 0, 1}
		gone := []byte{0, 0, 0, 0, 0, 0, 0, 0}
		f.Add(slices.Concat([]byte{1, 0, target}, set, []byte{fuzzResync}, drop))
		f.Add(slices.Concat([]byte{1, 0, target}, set, []byte{fuzzRestart + 1}, drop))
		f.Add(slices.Concat([]byte{1, 0, target}, set, []byte{fuzzRestart + 1}, gone))
	}
	// Branch form (decodeBranchForm): Out Updater, Res Patcher and o2
	// Applier, both kinds with the status subresource, a stream read by
	// two branches, two branches unioned into Out, left joins with either
	// side soft, each status form.
	f.Add(slices.Concat([]byte{0x80, 2, 3, 0, 0, 1, 2, 0, 0, 0},
		[]byte{1, 1, 0, 3, 0, 0, 1, 0, 0}, []byte{2, 0, 0, 4, 1, 0}, []byte{3, 0, 0, 2, 0, 1, 0}, fuzzTail(1)))
	// Two named targets of kind Out (a Patcher o1 with the status
	// subresource, an Updater o2), no stream.
	f.Add(slices.Concat([]byte{0x81, 1, 1, 1, 1, 0, 1},
		[]byte{2, 1, 0, 3, 2, 0, 1, 0, 1, 1}, []byte{3, 0, 1, 4, 0, 2, 6, 7}, fuzzTail(2)))
	// An Applier Out and an Updater Res with the status subresource, a
	// stream from B read by an inner join and unioned with a left join.
	f.Add(slices.Concat([]byte{0x90, 0, 2, 2, 0, 0, 0, 1, 1, 9},
		[]byte{1, 0, 0, 2, 1, 0}, []byte{3, 1, 0, 0, 0, 0, 3, 0, 0}, fuzzTail(3)))
	f.Fuzz(func(t *testing.T, data []byte) {
		fc, err := decodeFuzz(data)
		if err != nil {
			return
		}
		got := runFuzz(t, fc, fc.steps, true)
		want := runFuzz(t, fc, batchStep(finalSources(fc.changes)), true)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("incremental result differs from the result from scratch\n%s", describeFuzz(fc, got, want))
		}
		if slices.Contains(slices.Collect(maps.Values(fc.status)), true) {
			// The status written through the subresource (two calls) is
			// the status written with the object (dctl eval). The
			// Updater's record differs: it says whether the status went
			// through the subresource.
			got = withoutManagedRecord(got)
			want = withoutManagedRecord(runFuzz(t, fc, batchStep(finalSources(fc.changes)), false))
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("result with the status subresource differs from dctl eval's\n%s", describeFuzz(fc, got, want))
			}
		}
	})
}

// withoutManagedRecord returns objs without the Updater's
// ManagedMetadataAnnotation (a copy of what changes).
func withoutManagedRecord(objs []map[string]any) []map[string]any {
	out := make([]map[string]any, len(objs))
	for i, m := range objs {
		md, _ := m["metadata"].(map[string]any)
		ann, _ := md["annotations"].(map[string]any)
		if _, ok := ann[controller.ManagedMetadataAnnotation]; !ok {
			out[i] = m
			continue
		}
		m, md, ann = maps.Clone(m), maps.Clone(md), maps.Clone(ann)
		delete(ann, controller.ManagedMetadataAnnotation)
		md["annotations"] = ann
		if len(ann) == 0 {
			delete(md, "annotations")
		}
		m["metadata"] = md
		out[i] = m
	}
	return out
}

// describeFuzz renders a failing case: its targets, pipeline and steps,
// and the two results compared.
func describeFuzz(fc *fuzzCase, got, want []map[string]any) string {
	g, _ := json.MarshalIndent(got, "", "  ")
	w, _ := json.MarshalIndent(want, "", "  ")
	var steps []string
	for _, st := range fc.steps {
		switch {
		case st.change != nil:
			b, _ := json.Marshal(st.change.Object)
			steps = append(steps, string(b))
		case st.resync:
			steps = append(steps, "resync")
		case st.restart:
			steps = append(steps, "stop")
			for _, u := range st.down {
				b, _ := json.Marshal(u.Object)
				steps = append(steps, "  (while stopped) "+string(b))
			}
			steps = append(steps, "start")
		}
	}
	return fmt.Sprintf("targets: %s\npipeline: %s\nsteps:\n%s\nincremental:\n%s\nfrom scratch:\n%s",
		describeTargets(fc), fc.op.Spec.Controllers[0].Pipeline.Raw, strings.Join(steps, "\n"), g, w)
}
