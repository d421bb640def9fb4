package operator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/controller"
	"github.com/dcontroller/dcontroller/pkg/dbsp"
	"github.com/dcontroller/dcontroller/pkg/expression"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/view"
)

// DefaultMaxEvents bounds the events processed for one input before Offline
// gives up on reaching a fixed point.
const DefaultMaxEvents = 100000

// OfflineOptions configure an Offline run.
type OfflineOptions struct {
	// Trace, when set, receives each pipeline stage's output delta.
	Trace func(operator, controller, stage string, delta *dbsp.ZSet)
	// Versions maps "group/Kind" to the version used for sources and targets
	// that omit it (the offline stand-in for API discovery); see KnownVersions.
	Versions map[string]string
	// MaxEvents bounds the events processed per input (DefaultMaxEvents if 0).
	MaxEvents int
	// Logger receives structured logs.
	Logger logr.Logger
	// MaxDeltaEntries, MaxObjectBytes and EvalLimits are as in
	// RuntimeOptions.
	MaxDeltaEntries int
	MaxObjectBytes  int
	EvalLimits      expression.Limits
	// Store, when set, is the store the run reads and writes instead of a
	// new, empty one: the objects already in it are what a restarted
	// manager finds in its cluster (see Start). A store must not be used
	// by two runs that are not stopped (Stop).
	Store *view.Store
	// StatusSubresource, when set, reports the target kinds that have the
	// status subresource: the run's client models it (see
	// controller.StoreClient.StatusSubresource) and the controllers write
	// the status of such a kind with a second call, as a manager does when
	// discovery says a kind has the subresource. Nil: no kind has it, and
	// a status is written with its object. dctl eval passes
	// InputStatusSubresource of its inputs.
	StatusSubresource func(gvk schema.GroupVersionKind) bool
	// WrapClient, when set, returns the client the controllers read and
	// write targets through, given the run's store client (which the
	// StatusSubresource above configures): it must read from and write
	// to that store, so the run sees its own writes. Nil: the offline
	// client (the store with the API server's namespace rule). dctl diff
	// passes one that turns each write into the API server's dry-run
	// request and stores its answer.
	WrapClient func(store controller.StoreClient) controller.Client
	// ResyncLast, when set, makes Start resync the controllers only once
	// the first run reached its fixed point, so that a controller reading
	// a view another controller writes finds the view's objects when it
	// looks for stale targets, as a manager whose views outlive an
	// operator update does; otherwise such a controller may delete its
	// targets and create them again within the run. dctl diff sets it:
	// each write there is a request to the API server.
	ResyncLast bool
	// ClusterScoped, when set, reports the custom kinds that are
	// cluster-scoped (CRDKinds.ClusterScoped, from the CRDs a caller
	// read), besides the well-known kinds object.ClusterScoped names: the
	// offline client writes them without a namespace. Nil: none.
	ClusterScoped func(gk schema.GroupKind) bool
	// OwnerLive is the controllers' controller.Options.OwnerLive: whether
	// the controller an owner annotation names runs (nil: every other
	// owner does, and its objects are left alone).
	OwnerLive func(owner string) bool
}

// KnownVersions are the preferred versions of common Kubernetes kinds' groups,
// used offline when a source or target omits its version.
var KnownVersions = map[string]string{
	"":                          "v1",
	"apps":                      "v1",
	"batch":                     "v1",
	"networking.k8s.io":         "v1",
	"discovery.k8s.io":          "v1",
	"rbac.authorization.k8s.io": "v1",
	"coordination.k8s.io":       "v1",
	"policy":                    "v1",
	"autoscaling":               "v2",
	"storage.k8s.io":            "v1",
	"gateway.networking.k8s.io": "v1",
	"apiextensions.k8s.io":      "v1",
	"dcontroller.io":            "v1alpha1",
}

// Offline runs operators against an in-memory store.
type Offline struct {
	Store       *view.Store
	opts        OfflineOptions
	controllers []*namedController
	queue       []view.Event
	unsubscribe func()
	ownStore    bool // Store was made by NewOffline
}

type namedController struct {
	operator string
	*controller.Controller
}

// NewOffline compiles every controller of every operator. The error names the
// operator and the spec path of the first problem found in each operator.
func NewOffline(ops []*opv1a1.Operator, opts OfflineOptions) (*Offline, error) {
	if opts.MaxEvents == 0 {
		opts.MaxEvents = DefaultMaxEvents
	}
	o := &Offline{Store: opts.Store, opts: opts}
	if o.Store == nil {
		o.Store, o.ownStore = view.NewStore(), true
	}
	var errs []error
	names := map[string]bool{}
	for _, op := range ops {
		if names[op.Name] {
			errs = append(errs, fmt.Errorf("operator %q: defined twice", op.Name))
			continue
		}
		names[op.Name] = true
		ctrlNames := map[string]bool{}
		// As in a manager (not standalone): view kinds must be servable.
		clashes := controller.ViewKindClashes(op.Name, op.Spec.Controllers, false)
		for i, spec := range op.Spec.Controllers {
			if ctrlNames[spec.Name] {
				errs = append(errs, fmt.Errorf("operator %q: spec.controllers[%d].name: duplicate controller name %q", op.Name, i, spec.Name))
				continue
			}
			ctrlNames[spec.Name] = true
			if err := clashes[i]; err != nil {
				errs = append(errs, fmt.Errorf("operator %q: %w", op.Name, err))
				continue
			}
			opName := op.Name
			var cl controller.Client = offlineClient{StoreClient: controller.StoreClient{Store: o.Store, StatusSubresource: opts.StatusSubresource}, applier: appliers(spec), cluster: opts.ClusterScoped}
			if opts.WrapClient != nil {
				cl = opts.WrapClient(controller.StoreClient{Store: o.Store, StatusSubresource: opts.StatusSubresource})
			}
			copts := controller.Options{
				Operator:        op.Name,
				Index:           i,
				Client:          cl,
				ResolveVersion:  o.resolveVersion,
				Logger:          opts.Logger,
				MaxDeltaEntries: maxDeltaEntries(op, opts.MaxDeltaEntries),
				MaxObjectBytes:  opts.MaxObjectBytes,
				EvalLimits:      opts.EvalLimits,
				OwnerLive:       opts.OwnerLive,
			}
			if has := opts.StatusSubresource; has != nil {
				copts.HasStatus = func(gvk schema.GroupVersionKind) (bool, error) { return has(gvk), nil }
			}
			if opts.Trace != nil {
				copts.Trace = func(ctrl, stage string, d *dbsp.ZSet) { opts.Trace(opName, ctrl, stage, d) }
			}
			c, err := controller.New(spec, copts)
			if err != nil {
				errs = append(errs, fmt.Errorf("operator %q: %w", op.Name, err))
				continue
			}
			if op.Spec.Sharding == opv1a1.ShardByNamespace {
				// As the manager checks it (checkNamespaceLocal), with the
				// well-known cluster-scoped kinds standing in for the
				// cluster's discovery.
				if err := offlineNamespaceLocal(c, i); err != nil {
					errs = append(errs, fmt.Errorf("operator %q: %w", op.Name, err))
					continue
				}
			}
			o.controllers = append(o.controllers, &namedController{operator: op.Name, Controller: c})
		}
		if len(op.Spec.Controllers) == 0 {
			errs = append(errs, fmt.Errorf("operator %q: spec.controllers: at least one controller is required", op.Name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	o.unsubscribe = o.Store.Subscribe(func(ev view.Event) { o.queue = append(o.queue, ev) })
	return o, nil
}

// Stop detaches the run from its store, as a manager that stops: changes
// made to the store afterwards reach no controller. A new run over the same
// store (OfflineOptions.Store) then starts as a restarted manager does.
func (o *Offline) Stop() {
	o.unsubscribe()
	o.queue = nil
}

// Close stops the run (Stop) and, when NewOffline made the store, closes
// it (view.Store.Close), so that nothing keeps the run's objects once the
// caller drops it: a process that evaluates many runs (dctl test, one run
// per step) holds one run's objects at a time.
func (o *Offline) Close() {
	if o.unsubscribe != nil {
		o.Stop()
	}
	if o.ownStore {
		o.Store.Close()
	}
}

func (o *Offline) resolveVersion(group, kind string) (string, error) {
	if v, ok := o.opts.Versions[group+"/"+kind]; ok {
		return v, nil
	}
	if v, ok := KnownVersions[group]; ok {
		return v, nil
	}
	return "", fmt.Errorf("version: cannot discover the version of kind %q in group %q offline; set version", kind, group)
}

// Start starts the controllers as a manager starts them and runs to a
// fixed point: the objects already in the store (none in a new one) reach
// every controller as one batch, as a manager's first list does, OneShot
// sources fire, and every controller resyncs (Controller.Resync: what it
// wrote before and no longer outputs is deleted or unpatched; with
// OfflineOptions.ResyncLast after the fixed point is reached).
func (o *Offline) Start(ctx context.Context) error {
	var initial []controller.Change
	for _, gvk := range o.Store.Kinds() {
		for _, u := range o.Store.List(gvk) {
			initial = append(initial, controller.Change{New: u})
		}
	}
	var errs []error
	for _, c := range o.controllers {
		if len(initial) > 0 {
			if err := c.HandleBatch(ctx, initial); err != nil {
				errs = append(errs, fmt.Errorf("operator %q: controller %q: %w", c.operator, c.Name(), err))
			}
		}
		if err := c.Start(ctx); err != nil {
			errs = append(errs, fmt.Errorf("operator %q: controller %q: %w", c.operator, c.Name(), err))
		}
		if o.opts.ResyncLast {
			continue
		}
		if err := c.Resync(ctx); err != nil {
			errs = append(errs, fmt.Errorf("operator %q: controller %q: %w", c.operator, c.Name(), err))
		}
	}
	errs = append(errs, o.run(ctx))
	if o.opts.ResyncLast {
		errs = append(errs, o.Resync(ctx))
	}
	return errors.Join(errs...)
}

// Resync resyncs every controller (as a Periodic source's tick does) and
// runs to a fixed point.
func (o *Offline) Resync(ctx context.Context) error {
	var errs []error
	for _, c := range o.controllers {
		if err := c.Resync(ctx); err != nil {
			errs = append(errs, fmt.Errorf("operator %q: controller %q: %w", c.operator, c.Name(), err))
		}
	}
	errs = append(errs, o.run(ctx))
	return errors.Join(errs...)
}

// Apply creates obj in the store, or updates it when it exists, then runs
// every controller until nothing changes. Controller errors are returned
// (joined) but do not stop the run.
//
// An object with metadata.deletionTimestamp set is deleted instead (it is an
// error when it does not exist), so an input file can express a deletion;
// one that also has metadata.finalizers is stored as it is, as the API
// server keeps an object being deleted until its finalizers are removed.
func (o *Offline) Apply(ctx context.Context, obj *unstructured.Unstructured) error {
	if err := o.store(obj); err != nil {
		return err
	}
	return o.run(ctx)
}

// ApplyAll stores every object of objs in order, as Apply does, and then runs
// every controller until nothing changes, handing each controller the stored
// changes as one batch (as a manager's first list reaches it). The final
// state is the one Apply would reach object by object; the cost of loading N
// objects into one group of a @groupBy or @gather is one group output
// instead of N. Errors of single objects are returned joined with the
// controllers' errors; the other objects are still applied.
func (o *Offline) ApplyAll(ctx context.Context, objs []*unstructured.Unstructured) error {
	var errs []error
	for _, obj := range objs {
		if err := o.store(obj); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, o.run(ctx))
	return errors.Join(errs...)
}

// store writes obj into the store (a deletion when it has a
// deletionTimestamp and no finalizers) without running the controllers.
func (o *Offline) store(obj *unstructured.Unstructured) error {
	key := object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if err := object.ValidateMetadata(obj, obj.GetNamespace() != ""); err != nil {
		return err
	}
	if obj.GetDeletionTimestamp() != nil && len(obj.GetFinalizers()) == 0 {
		return o.Store.Delete(obj.GroupVersionKind(), key)
	}
	in := obj.DeepCopy()
	in.SetResourceVersion("")
	object.FoldSecretStringData(in.Object) // as the API server stores a Secret
	if _, err := o.Store.Get(in.GroupVersionKind(), key); err == nil {
		if _, err := o.Store.Update(in); err != nil {
			return err
		}
	} else if apierrors.IsNotFound(err) {
		if _, err := o.Store.Create(in); err != nil {
			return err
		}
	} else {
		return err
	}
	return nil
}

// Delete removes an object from the store and runs to a fixed point.
func (o *Offline) Delete(ctx context.Context, gvk schema.GroupVersionKind, key object.Key) error {
	if err := o.Store.Delete(gvk, key); err != nil {
		return err
	}
	return o.run(ctx)
}

// run hands the queued store events to every controller, all events queued
// so far as one batch, until no controller writes anything any more.
func (o *Offline) run(ctx context.Context) error {
	var errs []error
	writesBefore := make([]int64, len(o.controllers))
	for i, c := range o.controllers {
		writesBefore[i] = c.Counters().Writes
	}
	for n := 0; len(o.queue) > 0; {
		if n >= o.opts.MaxEvents {
			o.queue = nil
			errs = append(errs, fmt.Errorf("no fixed point after %d events: the controllers keep changing each other's output; busiest writers: %s",
				o.opts.MaxEvents, o.busiest(writesBefore)))
			break
		}
		batch := o.queue
		o.queue = nil
		n += len(batch)
		changes := make([]controller.Change, 0, len(batch))
		for _, ev := range batch {
			switch ev.Type {
			case view.Added:
				changes = append(changes, controller.Change{New: ev.Object})
			case view.Modified:
				changes = append(changes, controller.Change{Old: ev.Old, New: ev.Object})
			case view.Deleted:
				changes = append(changes, controller.Change{Old: ev.Old})
			}
		}
		for _, c := range o.controllers {
			if err := c.HandleBatch(ctx, changes); err != nil {
				errs = append(errs, fmt.Errorf("operator %q: controller %q: %w", c.operator, c.Name(), err))
			}
		}
		errs = append(errs, o.restore(ctx, batch)...)
	}
	return errors.Join(errs...)
}

// restore does offline what a manager's target watches do: each target
// object of the batch that a controller's target tracks (written by it,
// changed or deleted since) is checked and written back when it differs
// from the desired state (controller.Target.RestoreTarget). So an input
// that replaces or deletes a target object ends where the cluster would,
// and applying the inputs one by one (Apply, dctl eval --trace) reaches the
// state ApplyAll does. The controllers' own writes come back here too and
// cost a read. A restore its backoff holds back is not made.
func (o *Offline) restore(ctx context.Context, batch []view.Event) []error {
	var errs []error
	for _, ev := range batch {
		obj := ev.Object
		if ev.Type == view.Deleted && ev.Old != nil {
			obj = ev.Old
		}
		if obj == nil {
			continue
		}
		key := object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}
		for _, c := range o.controllers {
			for _, t := range c.Targets() {
				if !t.Tracks(obj) {
					continue
				}
				if _, err := t.RestoreTarget(ctx, key); err != nil {
					errs = append(errs, fmt.Errorf("operator %q: controller %q: %w", c.operator, c.Name(), err))
				}
			}
		}
	}
	return errs
}

// busiest names the controllers with the most writes since before, most first.
func (o *Offline) busiest(before []int64) string {
	type w struct {
		name string
		n    int64
	}
	var ws []w
	for i, c := range o.controllers {
		if n := c.Counters().Writes - before[i]; n > 0 {
			ws = append(ws, w{fmt.Sprintf("operator %q controller %q (%d writes)", c.operator, c.Name(), n), n})
		}
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].n > ws[j].n })
	if len(ws) > 3 {
		ws = ws[:3]
	}
	names := make([]string, len(ws))
	for i, x := range ws {
		names[i] = x.name
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// OfflineConflict is an object a target of the run leaves alone because
// another controller owns it (controller.Target.Conflicts).
type OfflineConflict struct {
	Operator, Controller string
	// Path is the target's spec path, GVK its kind.
	Path string
	GVK  schema.GroupVersionKind
	controller.OwnerConflict
}

// Conflicts returns the owner conflicts of every target of the run, in
// the order of operators, controllers, targets, then keys.
func (o *Offline) Conflicts() []OfflineConflict {
	var out []OfflineConflict
	for _, c := range o.controllers {
		for _, t := range c.Targets() {
			for _, oc := range t.Conflicts() {
				out = append(out, OfflineConflict{Operator: c.operator, Controller: c.Name(), Path: t.Path, GVK: t.GVK, OwnerConflict: oc})
			}
		}
	}
	return out
}

// SourceKinds returns the distinct source kinds of all controllers, sorted
// by apiVersion then kind (views included: IsViewGroup tells them apart).
func (o *Offline) SourceKinds() []schema.GroupVersionKind {
	seen := map[schema.GroupVersionKind]bool{}
	var out []schema.GroupVersionKind
	for _, c := range o.controllers {
		for _, s := range c.Sources() {
			if g := s.GVK; !seen[g] {
				seen[g] = true
				out = append(out, g)
			}
		}
	}
	sortKinds(out)
	return out
}

// sortKinds sorts gvks by apiVersion, then kind.
func sortKinds(gvks []schema.GroupVersionKind) {
	sort.Slice(gvks, func(i, j int) bool {
		ai, aj := gvks[i].GroupVersion().String(), gvks[j].GroupVersion().String()
		if ai != aj {
			return ai < aj
		}
		return gvks[i].Kind < gvks[j].Kind
	})
}

// TargetKinds returns the distinct target kinds of all controllers, sorted
// by apiVersion then kind.
func (o *Offline) TargetKinds() []schema.GroupVersionKind {
	seen := map[schema.GroupVersionKind]bool{}
	var out []schema.GroupVersionKind
	for _, c := range o.controllers {
		for _, t := range c.Targets() {
			if g := t.GVK; !seen[g] {
				seen[g] = true
				out = append(out, g)
			}
		}
	}
	sortKinds(out)
	return out
}

// Result returns every object of every target kind, sorted by apiVersion,
// kind, namespace and name, without server-owned metadata.
func (o *Offline) Result() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, gvk := range o.TargetKinds() {
		for _, obj := range o.Store.List(gvk) {
			out = append(out, &unstructured.Unstructured{Object: object.StripServerFields(obj.Object)})
		}
	}
	return out
}

// offlineNamespaceLocal is Runtime.checkNamespaceLocal without a cluster:
// kinds are cluster-scoped when object.ClusterScoped says so.
func offlineNamespaceLocal(c *controller.Controller, i int) error {
	for j, s := range c.Sources() {
		if object.ClusterScoped(s.GVK.GroupKind()) {
			return fmt.Errorf("spec.controllers[%d].sources[%d]: %w", i, j, clusterScopedError(s.GVK))
		}
	}
	for _, t := range c.Targets() {
		if object.ClusterScoped(t.GVK.GroupKind()) {
			return fmt.Errorf("%s: %w", t.Path, clusterScopedError(t.GVK))
		}
	}
	if err := c.NamespaceLocal(); err != nil {
		return fmt.Errorf("spec.sharding is Namespace, but %w", err)
	}
	return nil
}

// offlineClient is what the controllers of an Offline run write through:
// the store (controller.StoreClient), with the API server's rule that an
// object of a namespaced native kind has a metadata.namespace. Without one
// a write fails with the API server's answer, as the manager reports it
// (the URL of such a request is the kind's cluster-wide collection, which
// only lists): a create with "an empty namespace may not be set during
// creation" (BadRequest), an update, patch, apply or delete with "the
// server could not find the requested resource" (NotFound); an Applier's,
// which offline creates and patches (controller.StoreClient.Apply), with
// the apply's answer. A native kind
// is namespaced unless object.ClusterScoped names it (the offline stand-in
// for discovery). Views are not checked: the manager keeps a view object
// without a namespace.
type offlineClient struct {
	controller.StoreClient
	// applier: the group/kinds of the controller's Applier targets.
	applier map[schema.GroupKind]bool
	// cluster: OfflineOptions.ClusterScoped.
	cluster func(gk schema.GroupKind) bool
}

// errEmptyNamespaceCreate and errClusterPathNotFound are the API server's
// answers to writes of a namespaced kind without a namespace.
var (
	errEmptyNamespaceCreate = apierrors.NewBadRequest("an empty namespace may not be set during creation")
	errClusterPathNotFound  = &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure,
		Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound, Message: "the server could not find the requested resource"}}
)

// missingNamespace reports whether an object of gvk in namespace ns is a
// namespaced native object without a namespace.
func (c offlineClient) missingNamespace(gvk schema.GroupVersionKind, ns string) bool {
	return ns == "" && !opv1a1.IsViewGroup(gvk.Group) && !object.ClusterScoped(gvk.GroupKind()) &&
		(c.cluster == nil || !c.cluster(gvk.GroupKind()))
}

func (c offlineClient) Create(ctx context.Context, obj *unstructured.Unstructured) error {
	if c.missingNamespace(obj.GroupVersionKind(), obj.GetNamespace()) {
		if c.applier[obj.GroupVersionKind().GroupKind()] {
			return errClusterPathNotFound
		}
		return errEmptyNamespaceCreate
	}
	return c.StoreClient.Create(ctx, obj)
}

func (c offlineClient) Update(ctx context.Context, obj *unstructured.Unstructured) error {
	if c.missingNamespace(obj.GroupVersionKind(), obj.GetNamespace()) {
		return errClusterPathNotFound
	}
	return c.StoreClient.Update(ctx, obj)
}

func (c offlineClient) Patch(ctx context.Context, gvk schema.GroupVersionKind, key object.Key, mergePatch []byte) error {
	if c.missingNamespace(gvk, key.Namespace) {
		return errClusterPathNotFound
	}
	return c.StoreClient.Patch(ctx, gvk, key, mergePatch)
}

func (c offlineClient) Apply(ctx context.Context, obj *unstructured.Unstructured, fieldManager string) error {
	if c.missingNamespace(obj.GroupVersionKind(), obj.GetNamespace()) {
		return errClusterPathNotFound
	}
	return c.StoreClient.Apply(ctx, obj, fieldManager)
}

func (c offlineClient) Delete(ctx context.Context, gvk schema.GroupVersionKind, key object.Key) error {
	if c.missingNamespace(gvk, key.Namespace) {
		return errClusterPathNotFound
	}
	return c.StoreClient.Delete(ctx, gvk, key)
}

// appliers returns the group/kinds of the Applier targets of spec (a
// target without apiGroup is a view, which offlineClient does not check).
func appliers(spec opv1a1.Controller) map[schema.GroupKind]bool {
	var out map[schema.GroupKind]bool
	for _, t := range spec.AllTargets() {
		if t.Type == opv1a1.Applier && t.APIGroup != nil {
			if out == nil {
				out = map[schema.GroupKind]bool{}
			}
			out[schema.GroupKind{Group: *t.APIGroup, Kind: t.Kind}] = true
		}
	}
	return out
}
