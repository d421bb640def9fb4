package metacontroller

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/metacontroller/apply"
	"github.com/dcontroller/dcontroller/pkg/metacontroller/hook"
	"github.com/dcontroller/dcontroller/pkg/metacontroller/hookapi"
	"github.com/dcontroller/dcontroller/pkg/object"
)

// DefaultRenderSyncs is RenderOptions.MaxSyncs when it is 0.
const DefaultRenderSyncs = 10

// RenderOptions configure Render.
type RenderOptions struct {
	// HookURLs send hooks to other URLs than their specs say (a hook
	// author's local server). A key is a controller's name, which
	// redirects each of its hooks to the URL's scheme, host and port
	// (keeping the path and query of a webhook hook's own URL; an inline
	// pipeline hook is sent to the URL as given), or "<controller>/<hook>"
	// (hook: sync, finalize or customize), which sends that hook to
	// exactly the URL. The more specific key wins. A redirected hook is a
	// webhook with the spec's timeout, etag and responseUnMarshallMode;
	// the requests still carry the controller as written.
	HookURLs map[string]string
	// OnCall, when set, is called after each hook call, in call order.
	OnCall func(Call)
	// MaxSyncs bounds the syncs of each parent (default
	// DefaultRenderSyncs): a hook whose answers keep changing what it
	// observes is an error after that many.
	MaxSyncs int
	// HookLimits bound what one hook answer may hold (zero fields: the
	// hook package's defaults), as the manager's --hook-max-* flags.
	HookLimits hook.Limits
	// Now is the deletionTimestamp given to a deleted child that has
	// finalizers (default: the time Render is called).
	Now time.Time
	// Logger receives the controllers' logs (default: discarded).
	Logger logr.Logger
}

// Call is one hook call made by Render.
type Call struct {
	// Controller is "<kind>/<name>", e.g. "compositecontroller/podservice".
	Controller string
	// Hook is sync, finalize or customize.
	Hook string
	// Parent names the parent (or decorated object): "<Kind> <ns>/<name>".
	Parent string
	// Request is the JSON body sent (the hook API's request).
	Request json.RawMessage
	// Response is the decoded answer as JSON; nil when the call failed.
	Response json.RawMessage
	// Err is the call's error.
	Err error
}

// RenderResult is what Render found the controllers would do.
type RenderResult struct {
	// Objects are the parents and decorated objects the controllers
	// synced, and their children and attachments, as the manager would
	// leave them (status, finalizers, labels, annotations, owner
	// references, the last-applied annotation), sorted by apiVersion,
	// kind, namespace and name. Objects deleted meanwhile are in Deleted.
	Objects []*unstructured.Unstructured
	// Deleted are the objects the controllers deleted (children not
	// desired any more, parents whose last finalizer went, and what the
	// garbage collector deletes with them), as they were last seen; a
	// child deleted to be created again (Recreate) is in Objects only.
	Deleted []*unstructured.Unstructured
	// Calls are the hook calls made, in order.
	Calls []Call
}

// Render computes offline what the given CompositeControllers and
// DecoratorControllers (controllers: *mcv1a1.CompositeController or
// *mcv1a1.DecoratorController) would do to the objects inputs, without a
// cluster. Inputs are applied in order (a later object with the same
// kind, namespace and name replaces an earlier one); objects of a
// namespaced kind without a namespace go to "default", and every object
// that a controller syncs as parent (or decorates) and has no metadata.uid
// gets a made-up one (a hash of its kind, namespace and name), and a
// CompositeController's parent without metadata.generation gets 1, as an
// API server would set them. Kinds and their resources and scopes
// come from the built-in Kubernetes kinds, the CustomResourceDefinitions
// among inputs, and the kinds of inputs (taken as namespaced and
// pluralised as controller-gen does).
//
// Every parent is synced as the manager syncs it (the same code decides
// finalizers, claims, adoption, requests, validation of the answers,
// children, statuses and labels), its hooks called in-process (inline
// pipelines) or over HTTP (webhooks, or opts.HookURLs), and the writes are
// applied to an in-memory store; then every parent is synced again while
// what it observes changes (the manager's follow-up syncs), until nothing
// changes or a parent was synced opts.MaxSyncs times. A parent with
// metadata.deletionTimestamp is finalized when its controller has a
// finalize hook (it is taken to carry the controller's finalizer, which
// the manager adds to live parents). Rolling update strategies render the
// end state (no ControllerRevisions); resyncs are not rendered.
//
// Errors: an invalid controller (its spec path and name), an unknown
// resource, a HookURLs key that names no controller, or a sync that failed (a hook that cannot be reached or
// answers wrongly, an invalid parent): each names the controller, the hook
// and the parent; the result then holds what the other syncs did.
func Render(ctx context.Context, controllers []client.Object, inputs []*unstructured.Unstructured, opts RenderOptions) (*RenderResult, error) {
	if opts.MaxSyncs <= 0 {
		opts.MaxSyncs = DefaultRenderSyncs
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	r := &renderer{opts: opts, store: map[objRef]*unstructured.Unstructured{}, res: &RenderResult{},
		kinds: map[schema.GroupVersionKind]map[objRef]*unstructured.Unstructured{}, orphanKinds: map[schema.GroupVersionKind]map[objRef]*unstructured.Unstructured{},
		ownedBy: map[types.UID]map[schema.GroupVersionKind]map[objRef]*unstructured.Unstructured{},
		touched: map[objRef]bool{}, last: map[string][sha256.Size]byte{}, syncs: map[string]int{}, customized: map[string][]relatedRule{}}
	mapper := OfflineRESTMapper(inputs)
	r.mapper = mapper
	d := deps{mapper: mapper, log: opts.Logger, hookLimits: opts.HookLimits}
	for _, in := range inputs {
		u := in.DeepCopy()
		if u.GetNamespace() == "" && r.namespaced(u.GroupVersionKind()) {
			u.SetNamespace("default")
		}
		r.set(u)
	}
	names := map[string]bool{}
	for i, o := range controllers {
		if o == nil || reflect.ValueOf(o).IsNil() {
			return nil, fmt.Errorf("controllers[%d]: nil", i)
		}
		names[o.GetName()] = true
	}
	for key := range opts.HookURLs {
		name, _, _ := strings.Cut(key, "/")
		if !names[name] {
			return nil, fmt.Errorf("hook URL %q: no controller is named %q", key, name)
		}
	}
	for i, o := range controllers {
		ctl, err := r.add(d, o)
		if err != nil {
			return nil, fmt.Errorf("controllers[%d] (%s %s): %w", i, o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
		defer ctl.eng().queue.ShutDown()
	}
	var errs []error
	for round := 0; ; round++ {
		wrote := false
		for _, ctl := range r.ctls {
			w, err := ctl.syncAll(ctx, r)
			wrote = wrote || w
			errs = append(errs, err...)
		}
		if !wrote {
			break
		}
		if round > opts.MaxSyncs {
			// Each round syncs every parent once: a parent synced
			// MaxSyncs times already failed in syncAll.
			break
		}
	}
	r.collect()
	return r.res, errors.Join(errs...)
}

// renderer holds the in-memory store of a Render.
type renderer struct {
	opts   RenderOptions
	mapper meta.RESTMapper
	store  map[objRef]*unstructured.Unstructured
	// kinds, ownedBy and orphanKinds index store by kind, by controller
	// UID and kind, and (objects without a controller reference) by kind.
	kinds       map[schema.GroupVersionKind]map[objRef]*unstructured.Unstructured
	ownedBy     map[types.UID]map[schema.GroupVersionKind]map[objRef]*unstructured.Unstructured
	orphanKinds map[schema.GroupVersionKind]map[objRef]*unstructured.Unstructured
	// touched are the objects the controllers synced or wrote.
	touched map[objRef]bool
	ctls    []renderController
	res     *RenderResult
	// last is the hash of the last request sent for
	// "<controller>|<hook>|<parent>".
	last map[string][sha256.Size]byte
	// syncs counts the hook calls per "<controller>|<parent>".
	syncs map[string]int
	// failed: "<controller>|<parent>" whose sync failed (not retried).
	failed map[string]bool
	// assumed: "<controller>|<object>" given the controller's finalizer
	// because it was deleted.
	assumed map[string]bool
	// customized caches the related rules per "<controller>|<uid>/<generation>".
	customized map[string][]relatedRule
}

type renderController interface {
	eng() *engine
	syncAll(ctx context.Context, r *renderer) (bool, []error)
}

func (c *composite) eng() *engine { return c.engine }
func (c *decorator) eng() *engine { return c.engine }

func (r *renderer) namespaced(gvk schema.GroupVersionKind) bool {
	m, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	return err != nil || m.Scope.Name() == meta.RESTScopeNameNamespace
}

// add builds the controller o with the manager's own constructors, its
// hooks redirected (opts.HookURLs) and recorded.
func (r *renderer) add(d deps, o client.Object) (renderController, error) {
	switch v := o.(type) {
	case *mcv1a1.CompositeController:
		c, err := newComposite(d, v)
		if err != nil {
			return nil, explainKind(err)
		}
		var h mcv1a1.CompositeControllerHooks
		if v.Spec.Hooks != nil {
			h = *v.Spec.Hooks
		}
		if err := r.hooks(c.engine, c.related, v.Name, h.Sync, h.Finalize, h.Customize, v.Spec.EndpointConfigs); err != nil {
			return nil, err
		}
		r.ctls = append(r.ctls, c)
		return c, nil
	case *mcv1a1.DecoratorController:
		c, err := newDecorator(d, v)
		if err != nil {
			return nil, explainKind(err)
		}
		var h mcv1a1.DecoratorControllerHooks
		if v.Spec.Hooks != nil {
			h = *v.Spec.Hooks
		}
		if err := r.hooks(c.engine, c.related, v.Name, h.Sync, h.Finalize, h.Customize, v.Spec.EndpointConfigs); err != nil {
			return nil, err
		}
		r.ctls = append(r.ctls, c)
		return c, nil
	}
	return nil, fmt.Errorf("not a CompositeController or DecoratorController (%T)", o)
}

// explainKind adds to an unknown-resource error where Render learns kinds.
func explainKind(err error) error {
	if reasonOf(err) == ReasonKindNotFound {
		return fmt.Errorf("%w (offline, kinds are the built-in ones, those of the inputs' CustomResourceDefinitions and those of the inputs)", err)
	}
	return err
}

// hooks rebuilds the hooks of a controller named name whose URL is
// overridden (opts.HookURLs) and wraps every hook in a recorder.
func (r *renderer) hooks(e *engine, rel *related, name string, sync, fin, cust *mcv1a1.Hook, eps []mcv1a1.EndpointConfig) error {
	build := func(h *mcv1a1.Hook, hookName string, cur hook.Caller) (hook.Caller, error) {
		if h == nil {
			return nil, nil
		}
		if u, ok := r.hookURL(name, hookName, h); ok {
			nh := &mcv1a1.Hook{Version: h.Version, Webhook: &mcv1a1.Webhook{URL: &u}}
			if w := h.Webhook; w != nil {
				nh.Webhook.Timeout, nh.Webhook.Etag, nh.Webhook.ResponseUnMarshallMode = w.Timeout, w.Etag, w.ResponseUnMarshallMode
			}
			c, err := hook.New(nh, hook.Options{Controller: e.name, Hook: hookName, Path: "spec.hooks." + hookName, EndpointConfigs: eps, Limits: e.hookLimits})
			if err != nil {
				return nil, fmt.Errorf("hook URL of %s/%s: %w", name, hookName, err)
			}
			cur = c
		}
		return &callRecorder{Caller: cur, r: r, controller: e.name, name: name, hook: hookName}, nil
	}
	var err error
	if e.syncHook, err = build(sync, "sync", e.syncHook); err != nil {
		return err
	}
	if e.finHook, err = build(fin, "finalize", e.finHook); err != nil {
		return err
	}
	if rel.hook, err = build(cust, "customize", rel.hook); err != nil {
		return err
	}
	e.custHook = rel.hook
	return nil
}

// hookURL is the URL opts.HookURLs gives hook hookName of controller name.
func (r *renderer) hookURL(name, hookName string, h *mcv1a1.Hook) (string, bool) {
	if u, ok := r.opts.HookURLs[name+"/"+hookName]; ok {
		return u, true
	}
	base, ok := r.opts.HookURLs[name]
	if !ok {
		return "", false
	}
	own := ""
	if w := h.Webhook; w != nil {
		switch {
		case w.URL != nil && *w.URL != "":
			if pu, err := url.Parse(*w.URL); err == nil {
				own = pu.RequestURI()
				if own == "/" && !strings.HasSuffix(*w.URL, "/") {
					own = ""
				}
			}
		case w.Path != nil:
			own = *w.Path
			if own != "" && !strings.HasPrefix(own, "/") {
				own = "/" + own
			}
		}
	}
	if own == "" {
		return base, true
	}
	b, err := url.Parse(base)
	if err != nil {
		return base, true
	}
	return b.Scheme + "://" + b.Host + own, true
}

// callRecorder records each call of a hook (RenderResult.Calls, OnCall) and
// names the controller and hook in its errors.
type callRecorder struct {
	hook.Caller
	r                      *renderer
	controller, name, hook string
}

func (c *callRecorder) Call(ctx context.Context, key string, req, resp any) error {
	call := Call{Controller: c.controller, Hook: c.hook}
	var parent *unstructured.Unstructured
	switch q := req.(type) {
	case *hookapi.CompositeRequest:
		parent = q.Parent
	case *hookapi.DecoratorRequest:
		parent = q.Object
	case *hookapi.CustomizeRequest:
		parent = q.Parent
	}
	if parent != nil {
		call.Parent = parent.GetKind() + " " + describe(parent)
	}
	call.Request, _ = json.Marshal(req)
	err := c.Caller.Call(ctx, key, req, resp)
	if err != nil {
		err = fmt.Errorf("controller %s: %s hook (%s): %w", c.name, c.hook, call.Parent, err)
		call.Err = err
	} else {
		call.Response, _ = json.Marshal(resp)
	}
	c.r.res.Calls = append(c.r.res.Calls, call)
	if c.r.opts.OnCall != nil {
		c.r.opts.OnCall(call)
	}
	return err
}

// list returns the stored objects of gvk, sorted by namespace and name.
func (r *renderer) list(gvk schema.GroupVersionKind) []*unstructured.Unstructured {
	return sortedByKey(r.kinds[gvk])
}

// owned returns the stored objects of gvk whose controller reference
// points to uid, sorted by namespace and name.
func (r *renderer) owned(gvk schema.GroupVersionKind, uid types.UID) []*unstructured.Unstructured {
	return sortedByKey(r.ownedBy[uid][gvk])
}

// orphans returns the stored objects of gvk without a controller
// reference, sorted by namespace and name.
func (r *renderer) orphans(gvk schema.GroupVersionKind) []*unstructured.Unstructured {
	return sortedByKey(r.orphanKinds[gvk])
}

func sortedByKey(m map[objRef]*unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(m))
	for _, o := range m {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return describe(out[i]) < describe(out[j]) })
	return out
}

// set stores o (replacing the object of the same kind, namespace and
// name) and keeps the indexes by kind, by controller UID and of the
// objects without a controller reference by kind.
func (r *renderer) set(o *unstructured.Unstructured) {
	ref := r.unset(refOf(o))
	r.store[ref] = o
	if r.kinds[ref.gvk] == nil {
		r.kinds[ref.gvk] = map[objRef]*unstructured.Unstructured{}
	}
	r.kinds[ref.gvk][ref] = o
	idx := r.index(o)
	if idx[ref.gvk] == nil {
		idx[ref.gvk] = map[objRef]*unstructured.Unstructured{}
	}
	idx[ref.gvk][ref] = o
}

// index is the index of o: orphanKinds, or ownedBy by its controller UID
// (both keyed by kind).
func (r *renderer) index(o *unstructured.Unstructured) map[schema.GroupVersionKind]map[objRef]*unstructured.Unstructured {
	uid := controllerUID(o)
	if uid == "" {
		return r.orphanKinds
	}
	if r.ownedBy[uid] == nil {
		r.ownedBy[uid] = map[schema.GroupVersionKind]map[objRef]*unstructured.Unstructured{}
	}
	return r.ownedBy[uid]
}

// unset removes the object ref names from the store and the indexes.
func (r *renderer) unset(ref objRef) objRef {
	if old := r.store[ref]; old != nil {
		delete(r.kinds[ref.gvk], ref)
		delete(r.index(old)[ref.gvk], ref)
		delete(r.store, ref)
	}
	return ref
}

// put stores a write of o.
func (r *renderer) put(o *unstructured.Unstructured) {
	r.set(o)
	r.touched[refOf(o)] = true
}

// remove deletes o as the API server would: an object with finalizers
// gets a deletionTimestamp, others go, and with them (the garbage
// collector) the objects whose controller reference points to them.
func (r *renderer) remove(o *unstructured.Unstructured) {
	ref := refOf(o)
	cur := r.store[ref]
	if cur == nil {
		return
	}
	if len(cur.GetFinalizers()) > 0 {
		if cur.GetDeletionTimestamp() == nil {
			cur = cur.DeepCopy()
			ts := metav1.NewTime(r.opts.Now.UTC().Truncate(time.Second))
			cur.SetDeletionTimestamp(&ts)
			r.put(cur)
		}
		return
	}
	r.unset(ref)
	r.touched[ref] = true
	r.res.Deleted = append(r.res.Deleted, cur)
	if uid := cur.GetUID(); uid != "" {
		var deps []*unstructured.Unstructured
		for _, m := range r.ownedBy[uid] {
			deps = append(deps, sortedByKey(m)...)
		}
		sortObjects(deps)
		for _, d := range deps {
			r.remove(d)
		}
	}
}

// asParent gives o, about to be synced as a parent, the uid and (with
// generation, for a CompositeController's parent, whose status records
// observedGeneration) the generation an API server would have set.
func (r *renderer) asParent(o *unstructured.Unstructured, generation bool) *unstructured.Unstructured {
	if o.GetUID() != "" && (o.GetGeneration() != 0 || !generation) {
		return o
	}
	o = o.DeepCopy()
	if o.GetUID() == "" {
		gvk := o.GroupVersionKind()
		sum := sha256.Sum256([]byte(gvk.Group + "/" + gvk.Kind + "/" + o.GetNamespace() + "/" + o.GetName()))
		h := fmt.Sprintf("%x", sum[:16])
		o.SetUID(types.UID(h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]))
	}
	if generation && o.GetGeneration() == 0 {
		o.SetGeneration(1)
	}
	r.set(o)
	return o
}

// setFinalizer adds or removes a finalizer of o in the store; it returns
// the object (gone: nil when the removal deleted it).
func (r *renderer) setFinalizer(o *unstructured.Unstructured, name string, add bool) (*unstructured.Unstructured, bool) {
	if slices.Contains(o.GetFinalizers(), name) == add {
		return o, false
	}
	u := o.DeepCopy()
	if add {
		u.SetFinalizers(append(u.GetFinalizers(), name))
	} else {
		u.SetFinalizers(slices.DeleteFunc(u.GetFinalizers(), func(f string) bool { return f == name }))
	}
	r.put(u)
	if !add && u.GetDeletionTimestamp() != nil && len(u.GetFinalizers()) == 0 {
		r.remove(u)
		return nil, true
	}
	return u, true
}

// manage converges the children of rules offline, as engine.manage and
// applyChild do live (dynamic apply): desired children are created with
// the last-applied annotation and the controller reference, changed ones
// merged in place or deleted (per update method), observed ones that are
// not desired deleted.
func (r *renderer) manage(e *engine, parent *unstructured.Unstructured, rules []*childRule, observed, desired childSet) (bool, error) {
	wrote := false
	for _, rule := range rules {
		for _, o := range sortedSet(observed[rule.gvk]) {
			if desired.get(rule.gvk, keyOf(o)) == nil && o.GetDeletionTimestamp() == nil {
				r.remove(o)
				wrote = true
			}
		}
		for _, d := range sortedSet(desired[rule.gvk]) {
			obs := observed.get(rule.gvk, keyOf(d))
			if obs == nil {
				u, err := e.desiredChild(parent, d)
				if err != nil {
					return wrote, err
				}
				r.put(u)
				wrote = true
				continue
			}
			if obs.GetDeletionTimestamp() != nil {
				continue
			}
			merged, changed, err := apply.Apply(obs.Object, d.Object)
			if err != nil {
				return wrote, err
			}
			if !changed {
				continue
			}
			switch rule.method {
			case mcv1a1.ChildUpdateRecreate, mcv1a1.ChildUpdateRollingRecreate:
				r.remove(obs)
				wrote = true
			case mcv1a1.ChildUpdateInPlace, mcv1a1.ChildUpdateRollingInPlace:
				u := &unstructured.Unstructured{Object: merged}
				setControllerRef(u, parent)
				r.put(u)
				wrote = true
			}
		}
	}
	return wrote, nil
}

// writeStatus stores the status a sync writes (statusToWrite).
func (r *renderer) writeStatus(parent *unstructured.Unstructured, status map[string]any, observedGeneration bool) (*unstructured.Unstructured, bool) {
	next, write := statusToWrite(parent, status, observedGeneration)
	if !write {
		return parent, false
	}
	u := parent.DeepCopy()
	u.Object["status"] = next
	r.put(u)
	return u, true
}

// relatedObjects asks the customize hook (once per parent UID and
// generation, as the manager does) and selects the related objects from
// the store.
func (r *renderer) relatedObjects(ctx context.Context, rel *related, name string, parent *unstructured.Unstructured, version mcv1a1.HookVersion) (hookapi.ObjectMap, error) {
	if rel.hook == nil {
		return hookapi.ObjectMap{}, nil
	}
	key := fmt.Sprintf("%s|%s/%d", name, parent.GetUID(), parent.GetGeneration())
	rules, ok := r.customized[key]
	if !ok {
		var resp hookapi.CustomizeResponse
		if err := rel.hook.Call(ctx, string(parent.GetUID()), rel.request(parent), &resp); err != nil {
			return nil, err
		}
		var err error
		if rules, err = rel.parse(&resp, parent.GetNamespace()); err != nil {
			return nil, fmt.Errorf("controller %s: customize hook (%s %s): %w", name, parent.GetKind(), describe(parent), err)
		}
		r.customized[key] = rules
	}
	m := hookapi.ObjectMap{}
	ns := func(n string) *unstructured.Unstructured {
		return r.store[objRef{gvk: namespaceGVK, NamespacedName: types.NamespacedName{Name: n}}]
	}
	for i := range rules {
		rule := &rules[i]
		m.Init(rule.res.gvk)
		for _, o := range r.list(rule.res.gvk) {
			if rule.matches(o, ns) {
				m.Insert(version, parent.GetNamespace(), o)
			}
		}
	}
	return m, nil
}

// call sends req unless it equals the last request of the same hook for
// the same parent (the manager skips a parent whose observed state did not
// change), counting the syncs of the parent. skip: nothing to do.
func (r *renderer) call(ctx context.Context, caller hook.Caller, ctl, hookName string, parent *unstructured.Unstructured, req, resp any) (skip bool, err error) {
	b, _ := json.Marshal(req)
	sum := sha256.Sum256(b)
	key := ctl + "|" + hookName + "|" + refOf(parent).String()
	if r.last[key] == sum {
		return true, nil
	}
	r.last[key] = sum
	pkey := ctl + "|" + refOf(parent).String()
	r.syncs[pkey]++
	if r.syncs[pkey] > r.opts.MaxSyncs {
		return false, fmt.Errorf("%s %s: the hook's answers did not settle within %d syncs (each changed what the next one observes)", parent.GetKind(), describe(parent), r.opts.MaxSyncs)
	}
	return false, caller.Call(ctx, string(parent.GetUID()), req, resp)
}

// assume reports whether controller ctl syncs o for the first time: only
// then is its finalizer assumed on a deleted object (once removed, it
// stays removed).
func (r *renderer) assume(ctl string, o *unstructured.Unstructured) bool {
	key := ctl + "|" + refOf(o).String()
	if r.assumed[key] {
		return false
	}
	if r.assumed == nil {
		r.assumed = map[string]bool{}
	}
	r.assumed[key] = true
	return true
}

func (r *renderer) markFailed(key string) bool {
	if r.failed == nil {
		r.failed = map[string]bool{}
	}
	if r.failed[key] {
		return false
	}
	r.failed[key] = true
	return true
}

// syncAll syncs every parent of the CompositeController once.
func (c *composite) syncAll(ctx context.Context, r *renderer) (bool, []error) {
	wrote := false
	var errs []error
	for _, p := range r.list(c.parent.gvk) {
		key := c.name + "|" + refOf(p).String()
		if r.failed[key] {
			continue
		}
		w, err := c.renderSync(ctx, r, p)
		wrote = wrote || w
		if err != nil && r.markFailed(key) {
			if !strings.HasPrefix(err.Error(), "controller ") {
				err = fmt.Errorf("controller %s: %w", c.cc.Name, err)
			}
			errs = append(errs, err)
		}
	}
	return wrote, errs
}

// renderSync is syncParent on the store.
func (c *composite) renderSync(ctx context.Context, r *renderer, parent *unstructured.Unstructured) (bool, error) {
	deleting := parent.GetDeletionTimestamp() != nil
	matches := c.parentSel.Matches(labels.Set(parent.GetLabels()))
	hasFin := slices.Contains(parent.GetFinalizers(), c.finalizer)
	if first := r.assume(c.name, parent); first && deleting && matches && !hasFin && c.finHook != nil {
		// The manager put the finalizer on the parent while it lived.
		parent = parent.DeepCopy()
		parent.SetFinalizers(append(parent.GetFinalizers(), c.finalizer))
		r.set(parent)
		hasFin = true
	}
	if !matches && !hasFin {
		return false, nil
	}
	parent = r.asParent(parent, true)
	r.touched[refOf(parent)] = true
	finalizing := (deleting || !matches) && hasFin && c.finHook != nil
	wrote := false
	switch {
	case finalizing:
	case deleting || !matches:
		if hasFin {
			_, w := r.setFinalizer(parent, c.finalizer, false)
			return w, nil
		}
		return false, nil
	case c.finHook != nil:
		parent, wrote = r.setFinalizer(parent, c.finalizer, true)
	case hasFin:
		parent, wrote = r.setFinalizer(parent, c.finalizer, false)
	}
	if !finalizing && c.syncHook == nil {
		return wrote, nil
	}
	sel, err := c.selector(parent)
	if err != nil {
		return wrote, fmt.Errorf("%s %s: the parent is invalid, the hook is not called: %w", parent.GetKind(), describe(parent), err)
	}
	observed := childSet{}
	for _, rule := range c.children {
		for _, o := range slices.Concat(r.owned(rule.gvk, parent.GetUID()), r.orphans(rule.gvk)) {
			if c.parent.namespaced && o.GetNamespace() != parent.GetNamespace() {
				continue
			}
			ref := metav1.GetControllerOf(o)
			switch {
			case ref != nil && ref.UID == parent.GetUID():
				if o.GetDeletionTimestamp() != nil || sel.Matches(labels.Set(o.GetLabels())) {
					observed.put(o)
					continue
				}
				// Released: it no longer matches the selector.
				u := o.DeepCopy()
				u.SetOwnerReferences(slices.DeleteFunc(u.GetOwnerReferences(), func(x metav1.OwnerReference) bool { return x.UID == parent.GetUID() }))
				r.put(u)
				wrote = true
			case ref == nil && !deleting && matches && o.GetDeletionTimestamp() == nil && sel.Matches(labels.Set(o.GetLabels())):
				// Adopted.
				u := o.DeepCopy()
				u.SetOwnerReferences(append(u.GetOwnerReferences(), ownerRef(parent)))
				r.put(u)
				observed.put(u)
				wrote = true
			}
		}
	}
	caller, version, hookName := c.forPhase(finalizing)
	relatedMap, err := r.relatedObjects(ctx, c.related, c.cc.Name, parent, version)
	if err != nil {
		return wrote, err
	}
	req := c.request(parent, observed, relatedMap, version, finalizing)
	resp := &hookapi.CompositeResponse{}
	skip, err := r.call(ctx, caller, c.name, lower(hookName), parent, req, resp)
	if skip || err != nil {
		return wrote, err
	}
	desired, err := c.desiredChildren(parent, sel, resp, hookName)
	if err != nil {
		return wrote, fmt.Errorf("controller %s: %s hook (%s %s): %w", c.cc.Name, lower(hookName), parent.GetKind(), describe(parent), err)
	}
	w, err := r.manage(c.engine, parent, c.children, observed, desired)
	wrote = wrote || w
	if err != nil {
		return wrote, err
	}
	cur, w := r.writeStatus(parent, resultStatus(parent, resp.Status, nil), true)
	wrote = wrote || w
	if finalizing && resp.Finalized {
		_, w = r.setFinalizer(cur, c.finalizer, false)
		wrote = wrote || w
	}
	return wrote, nil
}

// syncAll syncs every object the DecoratorController decorates once.
func (c *decorator) syncAll(ctx context.Context, r *renderer) (bool, []error) {
	wrote := false
	var errs []error
	for _, dr := range c.resources {
		for _, o := range r.list(dr.gvk) {
			key := c.name + "|" + refOf(o).String()
			if r.failed[key] {
				continue
			}
			w, err := c.renderSync(ctx, r, dr, o)
			wrote = wrote || w
			if err != nil && r.markFailed(key) {
				if !strings.HasPrefix(err.Error(), "controller ") {
					err = fmt.Errorf("controller %s: %w", c.dc.Name, err)
				}
				errs = append(errs, err)
			}
		}
	}
	return wrote, errs
}

// renderSync is syncObject on the store.
func (c *decorator) renderSync(ctx context.Context, r *renderer, dr *decorated, obj *unstructured.Unstructured) (bool, error) {
	matches := dr.matches(obj)
	hasFin := slices.Contains(obj.GetFinalizers(), c.finalizer)
	deleting := obj.GetDeletionTimestamp() != nil
	if first := r.assume(c.name, obj); first && deleting && matches && !hasFin && c.finHook != nil {
		// The manager put the finalizer on the object while it lived.
		obj = obj.DeepCopy()
		obj.SetFinalizers(append(obj.GetFinalizers(), c.finalizer))
		r.set(obj)
		hasFin = true
	}
	if !matches && !hasFin {
		return false, nil
	}
	finalizing := deleting || !matches
	wrote := false
	switch {
	case finalizing && !hasFin:
		return false, nil
	case finalizing && c.finHook == nil:
		_, w := r.setFinalizer(obj, c.finalizer, false)
		return w, nil
	case !finalizing && c.finHook != nil:
		obj, wrote = r.setFinalizer(obj, c.finalizer, true)
	case !finalizing && hasFin:
		obj, wrote = r.setFinalizer(obj, c.finalizer, false)
	}
	obj = r.asParent(obj, false)
	r.touched[refOf(obj)] = true
	if !finalizing && c.syncHook == nil {
		return wrote, nil
	}
	observed := childSet{}
	var observedList []*unstructured.Unstructured
	for _, rule := range c.attach {
		for _, o := range r.owned(rule.gvk, obj.GetUID()) {
			if controllerUID(o) != obj.GetUID() || o.GetAnnotations()[DecoratorAnnotation] != c.dc.Name || (dr.namespaced && o.GetNamespace() != obj.GetNamespace()) {
				continue
			}
			observed.put(o)
			observedList = append(observedList, o)
		}
	}
	caller, version, hookName := c.forPhase(finalizing)
	relatedMap, err := r.relatedObjects(ctx, c.related, c.dc.Name, obj, version)
	if err != nil {
		return wrote, err
	}
	req := c.request(obj, observedList, relatedMap, version, finalizing)
	resp := &hookapi.DecoratorResponse{}
	skip, err := r.call(ctx, caller, c.name, lower(hookName), obj, req, resp)
	if skip || err != nil {
		return wrote, err
	}
	desired, err := c.desiredAttachments(obj, dr, resp, hookName)
	if err != nil {
		return wrote, fmt.Errorf("controller %s: %s hook (%s %s): %w", c.dc.Name, lower(hookName), obj.GetKind(), describe(obj), err)
	}
	w, err := r.manage(c.engine, obj, c.attach, observed, desired)
	wrote = wrote || w
	if err != nil {
		return wrote, err
	}
	cur, w := r.writeStatus(obj, resultStatus(obj, resp.Status, nil), false)
	wrote = wrote || w
	if md := metadataPatch(cur, resp.Labels, resp.Annotations); md != nil {
		cur = cur.DeepCopy()
		for field, set := range map[string]func(map[string]string){"labels": cur.SetLabels, "annotations": cur.SetAnnotations} {
			patch, _ := md[field].(map[string]any)
			if patch == nil {
				continue
			}
			m := cur.GetLabels()
			if field == "annotations" {
				m = cur.GetAnnotations()
			}
			if m == nil {
				m = map[string]string{}
			}
			for k, v := range patch {
				if v == nil {
					delete(m, k)
				} else {
					m[k] = v.(string)
				}
			}
			set(m)
		}
		r.put(cur)
		wrote = true
	}
	if finalizing && resp.Finalized {
		_, w = r.setFinalizer(cur, c.finalizer, false)
		wrote = wrote || w
	}
	return wrote, nil
}

// collect fills RenderResult.Objects with the objects the controllers
// synced or wrote that still exist.
func (r *renderer) collect() {
	// A child deleted and created again (Recreate) is not deleted.
	gone := r.res.Deleted[:0]
	for _, d := range r.res.Deleted {
		if r.store[refOf(d)] == nil {
			gone = append(gone, d)
		}
	}
	r.res.Deleted = gone
	for ref := range r.touched {
		if o := r.store[ref]; o != nil {
			r.res.Objects = append(r.res.Objects, o)
		}
	}
	sortObjects(r.res.Objects)
}

func sortedSet(m map[types.NamespacedName]*unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(m))
	for _, o := range m {
		out = append(out, o)
	}
	sortObjects(out)
	return out
}

// sortObjects sorts by apiVersion, kind, namespace and name.
func sortObjects(objs []*unstructured.Unstructured) {
	sort.Slice(objs, func(i, j int) bool {
		a, b := objs[i], objs[j]
		if a.GetAPIVersion() != b.GetAPIVersion() {
			return a.GetAPIVersion() < b.GetAPIVersion()
		}
		if a.GetKind() != b.GetKind() {
			return a.GetKind() < b.GetKind()
		}
		if a.GetNamespace() != b.GetNamespace() {
			return a.GetNamespace() < b.GetNamespace()
		}
		return a.GetName() < b.GetName()
	})
}

// OfflineRESTMapper maps kinds and resources without a cluster: the
// built-in kinds of client-go's scheme (cluster-scoped as
// object.ClusterScoped says), the kinds the CustomResourceDefinitions
// among objs define (their plural, singular and scope), and the kinds of
// objs themselves (namespaced unless object.ClusterScoped names them,
// resource: object.ResourceName of the kind). A CRD wins over a guess.
func OfflineRESTMapper(objs []*unstructured.Unstructured) meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	known := map[schema.GroupVersionKind]bool{}
	add := func(gvk schema.GroupVersionKind, plural, singular string, namespaced bool) {
		if known[gvk] {
			return
		}
		known[gvk] = true
		scope := meta.RESTScopeRoot
		if namespaced {
			scope = meta.RESTScopeNamespace
		}
		m.AddSpecific(gvk, gvk.GroupVersion().WithResource(plural), gvk.GroupVersion().WithResource(singular), scope)
	}
	guess := func(gvk schema.GroupVersionKind) {
		add(gvk, object.ResourceName(gvk.Kind), strings.ToLower(gvk.Kind), !object.ClusterScoped(gvk.GroupKind()))
	}
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" || o.GroupVersionKind().Group != "apiextensions.k8s.io" {
			continue
		}
		group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
		plural, _, _ := unstructured.NestedString(o.Object, "spec", "names", "plural")
		singular, _, _ := unstructured.NestedString(o.Object, "spec", "names", "singular")
		scope, _, _ := unstructured.NestedString(o.Object, "spec", "scope")
		if singular == "" {
			singular = strings.ToLower(kind)
		}
		versions, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
		for _, v := range versions {
			name, _ := v.(map[string]any)["name"].(string)
			if kind != "" && plural != "" && name != "" {
				add(schema.GroupVersionKind{Group: group, Version: name, Kind: kind}, plural, singular, scope != "Cluster")
			}
		}
	}
	for _, o := range objs {
		if gvk := o.GroupVersionKind(); gvk.Kind != "" && gvk.Version != "" {
			guess(gvk)
		}
	}
	for gvk := range clientgoscheme.Scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal || strings.HasSuffix(gvk.Kind, "List") || strings.HasSuffix(gvk.Kind, "Options") {
			continue
		}
		guess(gvk)
	}
	return m
}
