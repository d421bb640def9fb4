package rgd

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/operator"
	"github.com/dcontroller/dcontroller/pkg/view"
)

// rgdFuzzShape is one RGD the fuzz target runs: the file under
// testdata/compile, a random instance spec, and the outside world's change
// (a dependency's status, an external object), nil when the RGD has none.
type rgdFuzzShape struct {
	file, kind string
	spec       func(f *rgdFuzzBytes, name string) map[string]any
	world      func(f *rgdFuzzBytes) rgdWorldChange
}

// rgdWorldChange is a change made by someone else than the user of the
// instances: the status of the i-th (modulo their number) object of kind
// gvk set to status (kube-controller-manager reporting a Deployment's
// replicas), or an object of a kind the RGD only reads created, updated or
// deleted (an externalRef).
type rgdWorldChange struct {
	statusOf schema.GroupVersionKind
	i        int
	status   map[string]any
	obj      *unstructured.Unstructured
}

var (
	deploymentGVK = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	configMapGVK  = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
)

// rgdFuzzShapes: a Deployment with readyWhen and a Service that depends on
// it, the status from both (dependencies, readiness, status fields, one
// failing while no replica is available); an
// Ingress behind includeWhen; a two-dimensional forEach read by a
// resource; a chain of three (ConfigMap, Deployment, Service) for the
// deletion order; an externalRef by name; an externalRef by selector.
var rgdFuzzShapes = []rgdFuzzShape{
	{file: "webapp-status", kind: "WebApp",
		spec: func(f *rgdFuzzBytes, name string) map[string]any {
			return map[string]any{"name": name + []string{"", "-x"}[f.pick(2)], "image": []string{"nginx", "httpd"}[f.pick(2)],
				"port": int64(8080 + f.pick(2)), "replicas": int64(1 + f.pick(2))}
		},
		world: func(f *rgdFuzzBytes) rgdWorldChange {
			st := map[string]any{}
			if n := f.pick(4); n > 0 {
				st["availableReplicas"] = int64(n - 1)
			}
			return rgdWorldChange{statusOf: deploymentGVK, i: f.pick(4), status: st}
		}},
	{file: "ingress", kind: "Site",
		spec: func(f *rgdFuzzBytes, name string) map[string]any {
			return map[string]any{"name": name + []string{"", "-x"}[f.pick(2)], "ingress": map[string]any{"enabled": f.pick(2) == 1}}
		}},
	{file: "collection", kind: "Fleet",
		spec: func(f *rgdFuzzBytes, _ string) map[string]any {
			bits := f.next()
			var regions, tiers []any
			for i, r := range []string{"us", "eu"} {
				if bits&(1<<i) != 0 {
					regions = append(regions, r)
				}
			}
			for i, r := range []string{"web", "db"} {
				if bits&(4<<i) != 0 {
					tiers = append(tiers, r)
				}
			}
			if bits&16 != 0 {
				slices.Reverse(regions)
			}
			spec := map[string]any{"regions": regions, "tiers": tiers}
			if regions == nil {
				spec["regions"] = []any{}
			}
			if tiers == nil {
				spec["tiers"] = []any{}
			}
			return spec
		}},
	{file: "chain", kind: "Chain",
		spec: func(f *rgdFuzzBytes, name string) map[string]any {
			return map[string]any{"name": name + []string{"", "-x"}[f.pick(2)]}
		}},
	{file: "external", kind: "ConfiguredApp",
		spec: func(f *rgdFuzzBytes, name string) map[string]any {
			return map[string]any{"name": name, "configName": fmt.Sprintf("cfg%d", f.pick(2))}
		},
		world: func(f *rgdFuzzBytes) rgdWorldChange {
			cm := rgdFuzzConfigMap(f, fmt.Sprintf("cfg%d", f.pick(2)))
			if f.pick(2) == 0 {
				cm.Object["data"] = map[string]any{"logLevel": []string{"debug", "info"}[f.pick(2)]}
			}
			return rgdWorldChange{obj: cm}
		}},
	{file: "external-selector", kind: "Team",
		spec: func(f *rgdFuzzBytes, _ string) map[string]any {
			return map[string]any{"team": []string{"a", "b"}[f.pick(2)]}
		},
		world: func(f *rgdFuzzBytes) rgdWorldChange {
			cm := rgdFuzzConfigMap(f, fmt.Sprintf("cm%d", f.pick(3)))
			if l := f.pick(3); l < 2 {
				cm.SetLabels(map[string]string{"team": []string{"a", "b"}[l]})
			}
			return rgdWorldChange{obj: cm}
		}},
}

// rgdFuzzConfigMap returns the ConfigMap name in ns0 or ns1, marked for
// deletion one time in four.
func rgdFuzzConfigMap(f *rgdFuzzBytes, name string) *unstructured.Unstructured {
	cm := &unstructured.Unstructured{Object: map[string]any{}}
	cm.SetGroupVersionKind(configMapGVK)
	cm.SetNamespace(fmt.Sprintf("ns%d", f.pick(2)))
	cm.SetName(name)
	if f.pick(4) == 0 {
		now := metav1.Now()
		cm.SetDeletionTimestamp(&now)
	}
	return cm
}

// rgdFuzzBytes hands out the fuzz input a byte at a time; past its end
// every choice is 0, so any input decodes.
type rgdFuzzBytes struct {
	b []byte
	i int
}

func (f *rgdFuzzBytes) next() int {
	if f.i >= len(f.b) {
		return 0
	}
	f.i++
	return int(f.b[f.i-1])
}

func (f *rgdFuzzBytes) pick(n int) int { return f.next() % n }

// Control bytes of a step, as in pkg/operator's FuzzIncremental: at or
// above rgdFuzzResync a resync, at or above rgdFuzzRestart a restart that
// makes the next (byte - rgdFuzzRestart) changes while stopped.
const (
	rgdFuzzResync  = 0xf8
	rgdFuzzRestart = 0xfc
)

// rgdFuzzStep is one step: an instance change (a deletionTimestamp marks a
// deletion), a world change, a resync, or a restart with the changes made
// while stopped.
type rgdFuzzStep struct {
	instance *unstructured.Unstructured
	world    *rgdWorldChange
	resync   bool
	restart  bool
	down     []rgdFuzzStep
}

type rgdFuzzCase struct {
	shape    rgdFuzzShape
	op       *opv1a1.Operator
	instGVK  schema.GroupVersionKind
	steps    []rgdFuzzStep
	final    map[string]*unstructured.Unstructured // the live instances and external objects, by kind/ns/name
	finalIDs []string
}

// decodeRGDFuzz decodes data into a case: the first byte picks the shape,
// the rest are steps.
func decodeRGDFuzz(t *testing.T, data []byte, ops map[string]*opv1a1.Operator) *rgdFuzzCase {
	f := &rgdFuzzBytes{b: data}
	shape := rgdFuzzShapes[f.pick(len(rgdFuzzShapes))]
	fc := &rgdFuzzCase{shape: shape, op: ops[shape.file], final: map[string]*unstructured.Unstructured{},
		instGVK: schema.GroupVersionKind{Group: "kro.run", Version: "v1alpha1", Kind: shape.kind}}
	id := func(u *unstructured.Unstructured) string {
		return u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
	}
	record := func(u *unstructured.Unstructured) {
		if u.GetDeletionTimestamp() != nil && len(u.GetFinalizers()) == 0 {
			delete(fc.final, id(u))
		} else {
			fc.final[id(u)] = u
		}
	}
	change := func(b int) rgdFuzzStep {
		if shape.world != nil && b%4 == 3 {
			w := shape.world(f)
			if w.obj != nil {
				if w.obj.GetDeletionTimestamp() != nil && fc.final[id(w.obj)] == nil {
					w.obj.SetDeletionTimestamp(nil) // nothing to delete: a create
				}
				record(w.obj)
			}
			return rgdFuzzStep{world: &w}
		}
		u := &unstructured.Unstructured{Object: map[string]any{}}
		u.SetGroupVersionKind(fc.instGVK)
		u.SetNamespace(fmt.Sprintf("ns%d", f.pick(2)))
		u.SetName(fmt.Sprintf("i%d", f.pick(3)))
		u.SetUID(types.UID("uid-" + u.GetNamespace() + "-" + u.GetName()))
		// A deletion first sets the deletionTimestamp, held by the
		// instance finalizer (the spec stays); the next one removes the
		// finalizer, and the instance goes. An update of an instance
		// being deleted keeps both, as the API server does.
		old := fc.final[id(u)]
		switch {
		case old != nil && b%4 == 2 && old.GetDeletionTimestamp() == nil:
			now := metav1.Now()
			u.SetDeletionTimestamp(&now)
			u.SetFinalizers([]string{InstanceFinalizer})
			u.Object["spec"] = old.Object["spec"]
		case old != nil && b%4 == 2:
			u.SetDeletionTimestamp(old.GetDeletionTimestamp())
		default:
			u.Object["spec"] = shape.spec(f, u.GetName())
			if old != nil && old.GetDeletionTimestamp() != nil {
				u.SetDeletionTimestamp(old.GetDeletionTimestamp())
				u.SetFinalizers(old.GetFinalizers())
			}
		}
		record(u)
		return rgdFuzzStep{instance: u}
	}
	for len(fc.steps) < 40 && f.i < len(f.b) {
		switch b := f.next(); {
		case b >= rgdFuzzRestart:
			st := rgdFuzzStep{restart: true}
			for n := b - rgdFuzzRestart; n > 0 && f.i < len(f.b); n-- {
				st.down = append(st.down, change(f.next()))
			}
			fc.steps = append(fc.steps, st)
		case b >= rgdFuzzResync:
			fc.steps = append(fc.steps, rgdFuzzStep{resync: true})
		default:
			fc.steps = append(fc.steps, change(b))
		}
	}
	for k := range fc.final {
		fc.finalIDs = append(fc.finalIDs, k)
	}
	sort.Strings(fc.finalIDs)
	return fc
}

// decodeRGDTB is decodeRGD for a fuzz target or a benchmark.
func decodeRGDTB(t testing.TB, y string) *krov1a1.ResourceGraphDefinition {
	t.Helper()
	r := &krov1a1.ResourceGraphDefinition{}
	if err := yaml.UnmarshalStrict([]byte(y), r); err != nil {
		t.Fatalf("RGD: %v", err)
	}
	return r
}

// rgdFuzzRun is one offline run over a store that outlives restarts.
type rgdFuzzRun struct {
	t     *testing.T
	fc    *rgdFuzzCase
	off   *operator.Offline
	store *view.Store
}

func (r *rgdFuzzRun) options() operator.OfflineOptions {
	return operator.OfflineOptions{Store: r.store,
		Versions: map[string]string{"kro.run/" + r.fc.shape.kind: "v1alpha1"},
		// As dctl eval and a cluster: every kind that is not a view has
		// the status subresource (the instance CRD gives it one).
		StatusSubresource: operator.InputStatusSubresource(nil)}
}

func (r *rgdFuzzRun) start() {
	off, err := operator.NewOffline([]*opv1a1.Operator{r.fc.op}, r.options())
	if err != nil {
		r.t.Fatalf("the compiled Operator does not load: %v", err)
	}
	r.off, r.store = off, off.Store
	// Errors (none expected) are the same in both runs; the result is
	// compared.
	_ = off.Start(context.Background())
}

// put writes u to the store as the API server would: an instance update
// keeps the status (the status subresource); a deletion of what is not
// there is nothing.
func (r *rgdFuzzRun) put(u *unstructured.Unstructured) {
	u = u.DeepCopy()
	key := object.Key{Namespace: u.GetNamespace(), Name: u.GetName()}
	old, err := r.store.Get(u.GroupVersionKind(), key)
	switch {
	case err != nil && !apierrors.IsNotFound(err):
		r.t.Fatal(err)
	case u.GetDeletionTimestamp() != nil && len(u.GetFinalizers()) == 0:
		if err == nil {
			if err := r.store.Delete(u.GroupVersionKind(), key); err != nil {
				r.t.Fatal(err)
			}
		}
	case err == nil:
		if u.GroupVersionKind() == r.fc.instGVK {
			// A user's kubectl apply: the status and the annotations
			// others wrote (the Patcher's record) stay.
			if st, ok := old.Object["status"]; ok {
				u.Object["status"] = st
			}
			if ann := old.GetAnnotations(); len(ann) > 0 {
				u.SetAnnotations(ann)
			}
		}
		if _, err := r.store.Update(u); err != nil {
			r.t.Fatal(err)
		}
	default:
		if _, err := r.store.Create(u); err != nil {
			r.t.Fatal(err)
		}
	}
}

// setStatus sets the status of the i-th object of gvk (modulo their
// number; nothing when there is none), as its controller in the cluster
// would, and reports whether there was one.
func (r *rgdFuzzRun) setStatus(gvk schema.GroupVersionKind, i int, status map[string]any) bool {
	objs := r.store.List(gvk)
	if len(objs) == 0 {
		return false
	}
	sort.Slice(objs, func(a, b int) bool {
		return objs[a].GetNamespace()+"/"+objs[a].GetName() < objs[b].GetNamespace()+"/"+objs[b].GetName()
	})
	u := objs[i%len(objs)].DeepCopy()
	u.Object["status"] = object.DeepCopyMap(status)
	if _, err := r.store.Update(u); err != nil {
		r.t.Fatal(err)
	}
	return true
}

// step makes one change in the store; the caller runs the controllers.
func (r *rgdFuzzRun) change(st rgdFuzzStep) {
	switch {
	case st.instance != nil:
		r.put(st.instance)
	case st.world != nil && st.world.obj != nil:
		r.put(st.world.obj)
	case st.world != nil:
		r.setStatus(st.world.statusOf, st.world.i, st.world.status)
	}
}

// runSteps runs the steps from an empty store.
func (r *rgdFuzzRun) runSteps(steps []rgdFuzzStep) {
	ctx := context.Background()
	r.start()
	for _, st := range steps {
		switch {
		case st.resync:
			_ = r.off.Resync(ctx)
		case st.restart:
			r.off.Stop()
			for _, d := range st.down {
				r.change(d)
			}
			r.start()
		default:
			r.change(st)
			// Runs the controllers on the store's events, as Apply does.
			_ = r.off.ApplyAll(ctx, nil)
		}
	}
}

// result returns every target object, as the API server would serve it,
// without what differs between runs by construction: server fields and
// the instances' observedGeneration (a generation counts the updates). It
// fails when an instance's condition observes another generation than
// the instance's.
func (r *rgdFuzzRun) result() []map[string]any {
	var out []map[string]any
	for _, gvk := range r.off.TargetKinds() {
		objs := r.store.List(gvk)
		sort.Slice(objs, func(a, b int) bool {
			return objs[a].GetNamespace()+"/"+objs[a].GetName() < objs[b].GetNamespace()+"/"+objs[b].GetName()
		})
		for _, u := range objs {
			m := object.StripServerFields(u.Object)
			if conds, ok, _ := unstructured.NestedSlice(m, "status", "conditions"); ok {
				for _, c := range conds {
					cm := c.(map[string]any)
					if g, ok := cm["observedGeneration"]; ok && fmt.Sprint(g) != fmt.Sprint(u.GetGeneration()) {
						r.t.Fatalf("%s %s/%s: condition %v observes generation %v, the instance has %d",
							gvk.Kind, u.GetNamespace(), u.GetName(), cm["type"], g, u.GetGeneration())
					}
					delete(cm, "observedGeneration")
				}
				_ = unstructured.SetNestedSlice(m, conds, "status", "conditions")
			}
			if md, ok := m["metadata"].(map[string]any); ok {
				if ann, ok := md["annotations"].(map[string]any); ok {
					delete(ann, opv1a1.OwnerAnnotation)
					if len(ann) == 0 {
						delete(md, "annotations")
					}
				}
			}
			b, err := json.Marshal(m)
			if err != nil {
				r.t.Fatal(err)
			}
			if m, err = object.FromJSON(b); err != nil {
				r.t.Fatal(err)
			}
			out = append(out, m)
		}
	}
	return out
}

// loadRGDFuzzOperators compiles every shape's RGD.
func loadRGDFuzzOperators(t testing.TB) map[string]*opv1a1.Operator {
	ops := map[string]*opv1a1.Operator{}
	for _, s := range rgdFuzzShapes {
		src, err := os.ReadFile(filepath.Join("testdata", "compile", s.file+".rgd.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		c, err := Compile(decodeRGDTB(t, string(src)))
		if err != nil {
			t.Fatalf("%s: %v", s.file, err)
		}
		ops[s.file] = c.Operator
	}
	return ops
}

// FuzzRGDIncremental checks the controller invariant for compiled RGDs:
// after random sequences of instance creates, updates and deletes (first
// a deletionTimestamp held by the instance finalizer, the resources
// going dependents first, then the instance itself),
// dependency status changes (a Deployment's available replicas, which its
// readyWhen reads), external objects that appear, change and go, resyncs
// and restarts (changes made while stopped), every resource and every
// instance status equal what a run from scratch computes on the final
// instances, external objects and resources (dctl eval's ApplyAll, then a
// resync; the resources are inputs because a pending resource keeps its
// existing object) with the final dependency statuses set on its
// resources; and every instance status
// conforms to the typed schema of the instance CRD.
func FuzzRGDIncremental(f *testing.F) {
	ops := loadRGDFuzzOperators(f)
	for shape := range rgdFuzzShapes {
		for _, seed := range rgdFuzzSeeds(byte(shape)) {
			f.Add(seed)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkRGDIncremental(t, data, ops) })
}

// checkRGDIncremental decodes data, runs its steps and fails when the
// result differs from the one from scratch.
func checkRGDIncremental(t *testing.T, data []byte, ops map[string]*opv1a1.Operator) {
	t.Helper()
	fc := decodeRGDFuzz(t, data, ops)
	inc := &rgdFuzzRun{t: t, fc: fc}
	inc.runSteps(fc.steps)
	got := inc.result()
	checkRGDStatusConforms(t, fc, got)

	scratch := &rgdFuzzRun{t: t, fc: fc}
	scratch.start()
	var objs []*unstructured.Unstructured
	for _, id := range fc.finalIDs {
		objs = append(objs, fc.final[id].DeepCopy())
	}
	// The resources as the incremental run left them are inputs too: a
	// resource that waits on a dependency keeps its existing object (as
	// dctl eval shows it observed), so the result depends on what exists.
	// The run from scratch must leave them as they are (a fixpoint), and
	// its resync deletes what it no longer wants.
	for _, gvk := range inc.off.TargetKinds() {
		if gvk.Group == "kro.run" {
			continue
		}
		for _, u := range inc.store.List(gvk) {
			objs = append(objs, u.DeepCopy())
		}
	}
	ctx := context.Background()
	_ = scratch.off.ApplyAll(ctx, objs)
	_ = scratch.off.Resync(ctx)
	// The dependencies' statuses the incremental run ended with, set
	// on the same objects; setting one can make others appear (a
	// Service once its Deployment is ready), so until nothing is left
	// to set.
	if fc.shape.world != nil {
		for range 4 {
			changed := false
			for _, u := range inc.store.List(deploymentGVK) {
				st, ok := u.Object["status"]
				if !ok {
					continue
				}
				key := object.Key{Namespace: u.GetNamespace(), Name: u.GetName()}
				s, err := scratch.store.Get(deploymentGVK, key)
				if err != nil || reflect.DeepEqual(s.Object["status"], st) {
					continue
				}
				s = s.DeepCopy()
				s.Object["status"] = st
				if _, err := scratch.store.Update(s); err != nil {
					t.Fatal(err)
				}
				changed = true
			}
			if !changed {
				break
			}
			_ = scratch.off.Resync(ctx)
		}
	}
	want := scratch.result()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("incremental result differs from the result from scratch\n%s", describeRGDFuzz(fc, got, want))
	}
}

// rgdFuzzSeeds are seeds of one shape: instances made, changed and
// deleted with world changes between them, a resync, and a restart that
// makes three changes while stopped.
func rgdFuzzSeeds(shape byte) [][]byte {
	return [][]byte{
		{shape, 0, 0, 0, 1, 1, 3, 1, 1, 0, 2, 0, 1, 2, 3, 2, 1, 3, 1, 3, 3, 0, 1, 0},
		{shape, 0, 1, 1, 0, 1, 3, 2, 0, 1, rgdFuzzResync, 3, 1, 0, 1, 2, rgdFuzzRestart + 3, 2, 1, 1, 3, 0, 1, 1, 1, 0, 0, 1, 1, 0, 3, 3, 2, 2, 0, 0, 1, 2, 3},
		{shape, 1, 1, 2, 2, 1, 3, 1, 0, 3, 3, 2, 1, rgdFuzzRestart + 2, 2, 1, 2, 3, 0, 0, 1, 1, 1, 0, 2, 0, 1},
		rgdFuzzLong(shape, 1), rgdFuzzLong(shape, 2),
	}
}

// rgdFuzzLong returns a seed of the shape with 150 small bytes from a
// generator seeded with seed, a resync at byte 50 and a restart that makes
// three changes while stopped at byte 100.
func rgdFuzzLong(shape byte, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 27))
	b := make([]byte, 151)
	for i := range b {
		b[i] = byte(r.IntN(24))
	}
	b[0], b[50], b[100] = shape, rgdFuzzResync, rgdFuzzRestart+3
	return b
}

// describeRGDFuzz renders a failing case: its RGD, steps and both
// results.
func describeRGDFuzz(fc *rgdFuzzCase, got, want []map[string]any) string {
	var steps []string
	one := func(prefix string, st rgdFuzzStep) {
		switch {
		case st.instance != nil:
			b, _ := json.Marshal(st.instance.Object)
			steps = append(steps, prefix+string(b))
		case st.world != nil && st.world.obj != nil:
			b, _ := json.Marshal(st.world.obj.Object)
			steps = append(steps, prefix+"world "+string(b))
		case st.world != nil:
			b, _ := json.Marshal(st.world.status)
			steps = append(steps, fmt.Sprintf("%sstatus of %s #%d: %s", prefix, st.world.statusOf.Kind, st.world.i, b))
		}
	}
	for _, st := range fc.steps {
		switch {
		case st.resync:
			steps = append(steps, "resync")
		case st.restart:
			steps = append(steps, "stop")
			for _, d := range st.down {
				one("  (while stopped) ", d)
			}
			steps = append(steps, "start")
		default:
			one("", st)
		}
	}
	diff := diffResults(got, want)
	return fmt.Sprintf("RGD: %s\nsteps:\n%s\ndifferences (incremental / from scratch):\n%s", fc.shape.file, strings.Join(steps, "\n"), diff)
}

// diffResults lists the objects that differ between a and b, by
// kind/namespace/name, with both versions.
func diffResults(a, b []map[string]any) string {
	index := func(objs []map[string]any) map[string]map[string]any {
		out := map[string]map[string]any{}
		for _, m := range objs {
			md, _ := m["metadata"].(map[string]any)
			out[fmt.Sprintf("%v %v/%v", m["kind"], md["namespace"], md["name"])] = m
		}
		return out
	}
	ia, ib := index(a), index(b)
	var keys []string
	for k := range ia {
		keys = append(keys, k)
	}
	for k := range ib {
		if _, ok := ia[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		if reflect.DeepEqual(ia[k], ib[k]) {
			continue
		}
		x, _ := json.Marshal(ia[k])
		y, _ := json.Marshal(ib[k])
		out = append(out, fmt.Sprintf("%s\n  incremental:  %s\n  from scratch: %s", k, x, y))
	}
	return strings.Join(out, "\n")
}
