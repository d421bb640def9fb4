package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/dbsp"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/pipeline"
)

// MaxErrors is how many recent errors a controller keeps.
const MaxErrors = 10

// Options configure a Controller.
type Options struct {
	// Operator is the name of the operator that holds the controller; it
	// names the API group of the operator's views.
	Operator string
	// Index is the controller's position in spec.controllers (for error paths).
	Index int
	// Client reads and writes the target.
	Client Client
	// ResolveVersion returns the preferred version of a group/kind, for
	// sources and targets that omit it. Required when one does.
	ResolveVersion func(group, kind string) (string, error)
	// Trace, when set, receives each pipeline stage's output delta.
	Trace func(controller, stage string, delta *dbsp.ZSet)
	// Logger receives structured logs.
	Logger logr.Logger
}

// Source is a resolved source of a controller.
type Source struct {
	GVK       schema.GroupVersionKind
	Type      opv1a1.SourceType
	Namespace string
	// Selector restricts the source to matching labels; nil matches all.
	Selector labels.Selector
	// Path is the spec path of the source, e.g. spec.controllers[0].sources[1].
	Path string
}

// Matches reports whether obj belongs to the source.
func (s *Source) Matches(obj *unstructured.Unstructured) bool {
	if obj == nil || obj.GroupVersionKind() != s.GVK {
		return false
	}
	if s.Namespace != "" && obj.GetNamespace() != s.Namespace {
		return false
	}
	if s.Selector != nil && !s.Selector.Matches(labels.Set(obj.GetLabels())) {
		return false
	}
	return true
}

// Target is a resolved target of a controller.
type Target struct {
	GVK  schema.GroupVersionKind
	Type opv1a1.TargetType
}

// Controller is one running declarative controller. Its methods are safe for
// concurrent use; events are processed one at a time.
type Controller struct {
	mu      sync.Mutex
	name    string
	path    string
	opts    Options
	sources []Source
	target  Target
	pipe    *pipeline.Pipeline

	inputs  []map[object.Key]map[string]any // per source: the documents fed so far
	outputs map[object.Key]map[string]outputEntry
	patches map[object.Key]map[string]any // Patcher: the last patch applied per target
	errs    []string
}

type outputEntry struct {
	doc    map[string]any
	weight int
}

// New resolves and compiles a controller spec. Errors carry the spec path,
// e.g. `spec.controllers[1].pipeline[2]: unknown pipeline stage "@frobnicate"`.
func New(spec opv1a1.Controller, opts Options) (*Controller, error) {
	path := fmt.Sprintf("spec.controllers[%d]", opts.Index)
	if spec.Name == "" {
		return nil, fmt.Errorf("%s.name: must not be empty", path)
	}
	c := &Controller{
		name:    spec.Name,
		path:    path,
		opts:    opts,
		outputs: map[object.Key]map[string]outputEntry{},
		patches: map[object.Key]map[string]any{},
	}
	if len(spec.Sources) == 0 {
		return nil, fmt.Errorf("%s.sources: at least one source is required", path)
	}
	kinds := make([]string, 0, len(spec.Sources))
	for i, s := range spec.Sources {
		spath := fmt.Sprintf("%s.sources[%d]", path, i)
		gvk, err := c.resolve(s.Resource, spath)
		if err != nil {
			return nil, err
		}
		src := Source{GVK: gvk, Type: s.Type, Path: spath}
		if src.Type == "" {
			src.Type = opv1a1.Watcher
		}
		switch src.Type {
		case opv1a1.Watcher, opv1a1.OneShot, opv1a1.Periodic:
		default:
			return nil, fmt.Errorf("%s.type: unknown source type %q (want Watcher, OneShot or Periodic)", spath, s.Type)
		}
		if s.Namespace != nil {
			src.Namespace = *s.Namespace
		}
		if s.LabelSelector != nil {
			sel, err := metav1.LabelSelectorAsSelector(s.LabelSelector)
			if err != nil {
				return nil, fmt.Errorf("%s.labelSelector: %w", spath, err)
			}
			src.Selector = sel
		}
		c.sources = append(c.sources, src)
		kinds = append(kinds, gvk.Kind)
		c.inputs = append(c.inputs, map[object.Key]map[string]any{})
	}
	tgvk, err := c.resolve(spec.Target.Resource, path+".target")
	if err != nil {
		return nil, err
	}
	c.target = Target{GVK: tgvk, Type: spec.Target.Type}
	if c.target.Type == "" {
		c.target.Type = opv1a1.Updater
	}
	switch c.target.Type {
	case opv1a1.Updater, opv1a1.Patcher:
	case opv1a1.Applier:
		// Server-side apply needs an API server; offline it behaves as a
		// Patcher would on the fields it sets.
	default:
		return nil, fmt.Errorf("%s.target.type: unknown target type %q (want Updater, Patcher or Applier)", path, spec.Target.Type)
	}
	var raw any
	if len(spec.Pipeline.Raw) == 0 {
		return nil, fmt.Errorf("%s.pipeline: a pipeline is required", path)
	}
	if err := json.Unmarshal(spec.Pipeline.Raw, &raw); err != nil {
		return nil, fmt.Errorf("%s.pipeline: %w", path, err)
	}
	popts := pipeline.Options{Path: path + ".pipeline"}
	if opts.Trace != nil {
		name := spec.Name
		popts.Trace = func(stage string, delta *dbsp.ZSet) { opts.Trace(name, stage, delta) }
	}
	p, err := pipeline.Compile(raw, kinds, popts)
	if err != nil {
		return nil, err
	}
	c.pipe = p
	return c, nil
}

func (c *Controller) resolve(r opv1a1.Resource, path string) (schema.GroupVersionKind, error) {
	if r.Kind == "" {
		return schema.GroupVersionKind{}, fmt.Errorf("%s.kind: must not be empty", path)
	}
	if r.APIGroup == nil {
		if c.opts.Operator == "" {
			return schema.GroupVersionKind{}, fmt.Errorf("%s: a view needs an operator name", path)
		}
		gv := opv1a1.ViewGroupVersion(c.opts.Operator)
		if r.Version != nil && *r.Version != gv.Version {
			return schema.GroupVersionKind{}, fmt.Errorf("%s.version: views are served at %s only, got %q", path, gv.Version, *r.Version)
		}
		return gv.WithKind(r.Kind), nil
	}
	gvk := schema.GroupVersionKind{Group: *r.APIGroup, Kind: r.Kind}
	if r.Version != nil && *r.Version != "" {
		gvk.Version = *r.Version
		return gvk, nil
	}
	if c.opts.ResolveVersion == nil {
		return gvk, fmt.Errorf("%s.version: no version given and no way to discover it", path)
	}
	v, err := c.opts.ResolveVersion(gvk.Group, gvk.Kind)
	if err != nil {
		return gvk, fmt.Errorf("%s: %w", path, err)
	}
	gvk.Version = v
	return gvk, nil
}

// Name returns the controller's name.
func (c *Controller) Name() string { return c.name }

// Sources returns the resolved sources.
func (c *Controller) Sources() []Source { return c.sources }

// Target returns the resolved target.
func (c *Controller) Target() Target { return c.target }

// Errors returns the most recent errors, oldest first.
func (c *Controller) Errors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.errs...)
}

func (c *Controller) recordError(err error) {
	if err == nil {
		return
	}
	c.opts.Logger.Error(err, "controller error", "controller", c.name)
	c.errs = append(c.errs, err.Error())
	if len(c.errs) > MaxErrors {
		c.errs = c.errs[len(c.errs)-MaxErrors:]
	}
}

// Start emits the single empty object of each OneShot source.
func (c *Controller) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	deltas := map[string]*dbsp.ZSet{}
	for _, s := range c.sources {
		if s.Type != opv1a1.OneShot {
			continue
		}
		z := dbsp.NewZSet()
		z.Insert(map[string]any{"apiVersion": s.GVK.GroupVersion().String(), "kind": s.GVK.Kind, "metadata": map[string]any{}}, 1)
		deltas[s.GVK.Kind] = z
	}
	if len(deltas) == 0 {
		return nil
	}
	return c.process(ctx, deltas)
}

// Handle processes one change of an object: old is nil for a creation, new
// is nil for a deletion. Objects that belong to none of the sources are
// ignored. The error, if any, is also recorded in Errors.
func (c *Controller) Handle(ctx context.Context, old, new *unstructured.Unstructured) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	deltas := map[string]*dbsp.ZSet{}
	for i := range c.sources {
		s := &c.sources[i]
		if s.Type == opv1a1.OneShot {
			continue
		}
		var ref *unstructured.Unstructured
		if new != nil {
			ref = new
		} else {
			ref = old
		}
		if ref == nil || ref.GroupVersionKind() != s.GVK {
			continue
		}
		key := object.Key{Namespace: ref.GetNamespace(), Name: ref.GetName()}
		z := dbsp.NewZSet()
		if prev, ok := c.inputs[i][key]; ok {
			z.Insert(prev, -1)
			delete(c.inputs[i], key)
		}
		if new != nil && s.Matches(new) {
			doc := object.DeepCopyMap(new.Object)
			z.Insert(doc, 1)
			c.inputs[i][key] = doc
		}
		if !z.IsEmpty() {
			if d, ok := deltas[s.GVK.Kind]; ok {
				z = d.Add(z)
			}
			deltas[s.GVK.Kind] = z
		}
	}
	if len(deltas) == 0 {
		return nil
	}
	return c.process(ctx, deltas)
}

func (c *Controller) process(ctx context.Context, deltas map[string]*dbsp.ZSet) error {
	out, perr := c.pipe.Process(deltas)
	if perr != nil {
		c.recordError(perr)
	}
	if out == nil {
		return perr
	}
	touched := map[object.Key]bool{}
	var errs []error
	if perr != nil {
		errs = append(errs, perr)
	}
	for _, e := range out.Entries() {
		key, err := object.KeyOf(e.Doc)
		if err != nil {
			err = fmt.Errorf("%s.pipeline: output %s", c.path, err)
			c.recordError(err)
			errs = append(errs, err)
			continue
		}
		b, _ := json.Marshal(e.Doc)
		entries := c.outputs[key]
		if entries == nil {
			entries = map[string]outputEntry{}
			c.outputs[key] = entries
		}
		cur := entries[string(b)]
		cur.doc = e.Doc
		cur.weight += e.Weight
		if cur.weight == 0 {
			delete(entries, string(b))
		} else {
			entries[string(b)] = cur
		}
		if len(entries) == 0 {
			delete(c.outputs, key)
		}
		touched[key] = true
	}
	keys := make([]object.Key, 0, len(touched))
	for k := range touched {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	for _, key := range keys {
		desired, err := c.desired(key)
		if err != nil {
			c.recordError(err)
			errs = append(errs, err)
		}
		if err := c.write(ctx, key, desired); err != nil {
			err = fmt.Errorf("%s.target: %s %s: %w", c.path, c.target.GVK.Kind, key, err)
			c.recordError(err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// desired returns the one positive-weight output document for key, or nil
// when the output has none.
func (c *Controller) desired(key object.Key) (map[string]any, error) {
	var ids []string
	for id, e := range c.outputs[key] {
		if e.weight > 0 {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	sort.Strings(ids)
	doc := c.outputs[key][ids[len(ids)-1]].doc
	if len(ids) > 1 {
		return doc, fmt.Errorf("%s.pipeline: %d different outputs for %s %s; writing one of them", c.path, len(ids), c.target.GVK.Kind, key)
	}
	return doc, nil
}

func (c *Controller) write(ctx context.Context, key object.Key, desired map[string]any) error {
	switch c.target.Type {
	case opv1a1.Patcher, opv1a1.Applier:
		return c.patch(ctx, key, desired)
	default:
		return c.update(ctx, key, desired)
	}
}

func (c *Controller) update(ctx context.Context, key object.Key, desired map[string]any) error {
	existing, err := c.opts.Client.Get(ctx, c.target.GVK, key)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if desired == nil {
		if existing == nil {
			return nil
		}
		if err := c.opts.Client.Delete(ctx, c.target.GVK, key); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	}
	obj := &unstructured.Unstructured{Object: object.StripServerFields(desired)}
	obj.SetGroupVersionKind(c.target.GVK)
	if existing == nil {
		return c.opts.Client.Create(ctx, obj)
	}
	// Labels and annotations are merged with what is there; the output wins.
	obj.SetLabels(mergeStrings(existing.GetLabels(), obj.GetLabels()))
	obj.SetAnnotations(mergeStrings(existing.GetAnnotations(), obj.GetAnnotations()))
	if object.Equal(object.StripServerFields(existing.Object), object.StripServerFields(obj.Object)) {
		return nil
	}
	obj.SetResourceVersion(existing.GetResourceVersion())
	return c.opts.Client.Update(ctx, obj)
}

func (c *Controller) patch(ctx context.Context, key object.Key, desired map[string]any) error {
	prev := c.patches[key]
	if desired == nil && prev == nil {
		return nil
	}
	var patch map[string]any
	if desired != nil {
		patch = object.StripServerFields(desired)
		delete(patch, "apiVersion")
		delete(patch, "kind")
	}
	full := object.RemovalPatch(prev, patch)
	existing, err := c.opts.Client.Get(ctx, c.target.GVK, key)
	if err != nil {
		if apierrors.IsNotFound(err) {
			delete(c.patches, key)
			if desired == nil {
				return nil
			}
			return fmt.Errorf("not found: a Patcher target does not create objects")
		}
		return err
	}
	merged, err := object.MergePatch(existing.Object, full)
	if err != nil {
		return err
	}
	if desired == nil {
		delete(c.patches, key)
	} else {
		c.patches[key] = patch
	}
	if object.Equal(merged, existing.Object) {
		return nil
	}
	obj := &unstructured.Unstructured{Object: merged}
	obj.SetResourceVersion(existing.GetResourceVersion())
	return c.opts.Client.Update(ctx, obj)
}

func mergeStrings(base, over map[string]string) map[string]string {
	if len(base) == 0 && len(over) == 0 {
		return nil
	}
	out := make(map[string]string, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}
