package rgdruntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"
	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	ctrlpkg "github.com/dcontroller/dcontroller/pkg/controller"
	"github.com/dcontroller/dcontroller/pkg/operator"
	"github.com/dcontroller/dcontroller/pkg/rgd"
	"github.com/dcontroller/dcontroller/pkg/sharding"
)

const (
	// Finalizer is kept on every RGD the manager runs, so that its CRD
	// cleanup runs when it is deleted. It is kro's finalizer name, so that
	// RGDs move between kro and this manager as they are.
	Finalizer = "kro.run/finalizer"
	// FieldManager is the server-side apply field manager of the instance
	// CRDs.
	FieldManager = "dcontroller-rgd"

	// The labels an instance CRD gets, kro's keys (kro's pkg/metadata):
	// LabelOwned "true" marks it as managed for an RGD, LabelRGDName and
	// LabelRGDID name the RGD that owns it. LabelManagedBy says which
	// manager wrote it (kro writes "kro" there).
	LabelOwned     = "kro.run/owned"
	LabelRGDName   = "kro.run/resource-graph-definition-name"
	LabelRGDID     = "kro.run/resource-graph-definition-id"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedBy is this manager's LabelManagedBy value.
	ManagedBy = "dcontroller"
)

// Timings of the Reconciler.
const (
	// StatusInterval is how often the status of a running RGD is
	// refreshed from its controllers (written only when it changed).
	StatusInterval = operator.StatusInterval
	// WaitInterval is how often an RGD is looked at again while its CRD is
	// not established, its controllers start, or (deleted) its instances
	// remain.
	WaitInterval = 2 * time.Second
	// StartWait is how long a reconcile waits for the start of an RGD's
	// controllers (operator.Runtime.Upsert) before it writes the status so
	// far (ControllerReady=False, Starting) and looks again later.
	StartWait = time.Second
)

// Reconciler runs the ResourceGraphDefinitions of a cluster (see the
// package doc). Client reads RGDs (the manager's cache) and writes RGDs and
// CRDs; APIReader reads CRDs, instances and Operator objects live.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	// Runtime runs the compiled Operators, as it runs Operator objects.
	Runtime *operator.Runtime
	// Compile compiles an RGD; nil: the package's Compile.
	Compile CompileFunc
	Logger  logr.Logger
	// Ring, when set (dctl start --sharding), runs an RGD on the member
	// whose buckets hold its compiled Operator's name (rgd.OperatorName);
	// only that member writes its CRD and status. nil: every RGD runs here.
	Ring *sharding.Ring
	// Config is the REST config of the instance informers that keep
	// InstanceFinalizer; nil: the manager's.
	Config *rest.Config

	meta  metadata.Interface
	ctx   context.Context
	kicks chan event.GenericEvent
	mu    sync.Mutex
	// running maps an RGD's name to the name its Operator runs under in
	// Runtime.
	running map[string]string
	// compiled holds each RGD's last compile, by name, so that the
	// periodic status refresh does not compile again.
	compiled map[string]compileResult
	// guards keep InstanceFinalizer on each running RGD's instances, by
	// RGD name.
	guards map[string]*instanceGuard
	// schemas holds the instance CRD's versions (their schemas, JSON) the
	// running Operator of each RGD started with, by RGD name.
	schemas map[string]string
}

// compileResult is the Compile of one generation of one RGD.
type compileResult struct {
	uid        types.UID
	generation int64
	c          *Compiled
	err        error
}

// compile returns Compile(g), reusing the last result for the same uid
// and generation.
func (r *Reconciler) compile(g *krov1a1.ResourceGraphDefinition) (*Compiled, error) {
	r.mu.Lock()
	if cr, ok := r.compiled[g.Name]; ok && cr.uid == g.UID && cr.generation == g.Generation {
		r.mu.Unlock()
		return cr.c, cr.err
	}
	r.mu.Unlock()
	c, err := r.Compile(g)
	if err == nil {
		err = r.checkTargets(c)
	}
	r.mu.Lock()
	if r.compiled == nil {
		r.compiled = map[string]compileResult{}
	}
	r.compiled[g.Name] = compileResult{uid: g.UID, generation: g.Generation, c: c, err: err}
	r.mu.Unlock()
	return c, err
}

// checkTargets refuses a compiled RGD whose controller has more targets
// (one per template resource, and the instance status) than the runtime's
// --max-targets allows: the runtime would not start it, so the RGD says
// why at once, as an *rgd.Error at spec.resources.
func (r *Reconciler) checkTargets(c *Compiled) error {
	if c == nil || c.Operator == nil || r.Runtime == nil {
		return nil
	}
	lim := r.Runtime.KindLimits()
	limit := lim.MaxTargets
	if limit == 0 {
		limit = ctrlpkg.DefaultMaxTargets
	}
	for _, spec := range c.Operator.Spec.Controllers {
		if n := len(spec.AllTargets()); limit > 0 && n > limit {
			return &rgd.Error{Path: "spec.resources", Err: fmt.Errorf(
				"%d template resources and the instance status make %d targets of one controller, more than the manager's limit of %d (dctl start --max-targets): at most %d template resources",
				n-1, n, limit, limit-1)}
		}
	}
	return nil
}

// SetupWithManager registers the reconciler with a manager: it watches
// RGDs (spec changes, deletion) and the metadata of the CRDs labelled with
// an RGD's name (their Established condition, their deletion).
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	r.ctx = ctx
	r.kicks = make(chan event.GenericEvent, 1024)
	if r.Compile == nil {
		r.Compile = Compile
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Config == nil {
		r.Config = mgr.GetConfig()
	}
	meta, err := newMetadataClient(r.Config)
	if err != nil {
		return fmt.Errorf("the metadata client of the instance finalizers: %w", err)
	}
	r.meta = meta
	r.Ring.OnChange(r.onReshard)
	byLabel := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if n := o.GetLabels()[LabelRGDName]; n != "" {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: n}}}
		}
		return nil
	})
	owned := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[LabelRGDName] != "" })
	return ctrl.NewControllerManagedBy(mgr).
		Named("resourcegraphdefinition").
		For(&krov1a1.ResourceGraphDefinition{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, finalizersChanged{}))).
		WatchesMetadata(&apiextensionsv1.CustomResourceDefinition{}, byLabel, builder.WithPredicates(owned)).
		WatchesRawSource(source.Channel(r.kicks, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true), MaxConcurrentReconciles: operator.DefaultWorkers}).
		Complete(r)
}

// finalizersChanged passes updates that change an object's finalizers (a
// Finalizer removed by hand is put back).
type finalizersChanged struct{ predicate.Funcs }

func (finalizersChanged) Update(e event.UpdateEvent) bool {
	if e.ObjectOld == nil || e.ObjectNew == nil {
		return false
	}
	return !equality.Semantic.DeepEqual(e.ObjectOld.GetFinalizers(), e.ObjectNew.GetFinalizers())
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// The bucket of the compiled Operator's name, as the Operator
	// reconciler's handover reckons the operators it runs.
	release, ours := r.Ring.AcquireBucket(sharding.NameBucket(rgd.OperatorName(req.Name)))
	defer release()
	log := r.Logger.WithValues("rgd", req.Name)
	g := &krov1a1.ResourceGraphDefinition{}
	if err := r.Client.Get(ctx, req.NamespacedName, g); err != nil {
		if apierrors.IsNotFound(err) {
			if guarded := r.stop(req.Name, true); !guarded {
				// Gone while no guard of it ran here (removed without its
				// cleanup while the manager was down): its CRD's label
				// brought it here at the start.
				return ctrl.Result{}, r.releaseOrphaned(ctx, req.Name)
			}
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !ours {
		r.stop(req.Name, false)
		return ctrl.Result{}, nil
	}
	if !g.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, g, log)
	}
	if !controllerutil.ContainsFinalizer(g, Finalizer) {
		base := g.DeepCopy()
		controllerutil.AddFinalizer(g, Finalizer)
		if err := r.Client.Patch(ctx, g, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				return ctrl.Result{Requeue: true}, nil
			}
			return ctrl.Result{}, fmt.Errorf("adding the finalizer %s: %w", Finalizer, err)
		}
	}
	now := metav1.Now()
	st := g.Status.DeepCopy()
	gen := g.Generation
	requeue := StatusInterval
	compiled, err := r.compile(g)
	switch {
	case err != nil:
		log.V(1).Info("RGD does not compile", "error", err.Error())
		setCondition(&st.Conditions, krov1a1.ConditionGraphAccepted, metav1.ConditionFalse, ReasonInvalidResourceGraph, err.Error(), gen, now)
		if opName := r.runningName(g.Name); opName != "" {
			// The last accepted generation runs on, as in kro: its kind
			// stays served.
			r.controllerStatus(st, opName, gen, now)
		} else {
			waiting := "the resource graph is not accepted"
			setCondition(&st.Conditions, krov1a1.ConditionKindReady, metav1.ConditionFalse, ReasonWaiting, waiting, gen, now)
			setCondition(&st.Conditions, krov1a1.ConditionControllerReady, metav1.ConditionFalse, ReasonWaiting, waiting, gen, now)
		}
		requeue = 0
	default:
		setCondition(&st.Conditions, krov1a1.ConditionGraphAccepted, metav1.ConditionTrue, ReasonValid, "resource graph and schema are valid", gen, now)
		st.TopologicalOrder, st.Resources = graphStatus(compiled.Graph)
		if !r.ensureCRD(ctx, g, compiled.CRD, st, now) {
			setCondition(&st.Conditions, krov1a1.ConditionControllerReady, metav1.ConditionFalse, ReasonWaiting, "waiting for the instance kind to be served", gen, now)
			requeue = WaitInterval
			break
		}
		if !r.run(ctx, g, compiled, st, now) {
			requeue = WaitInterval
		}
	}
	summarize(st, gen, now, "")
	if err := r.writeStatus(ctx, g, st); err != nil {
		return r.retry(err)
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// retry turns a write's error into a result: a conflict or a vanished
// object is retried at once, anything else returned.
func (r *Reconciler) retry(err error) (ctrl.Result, error) {
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return ctrl.Result{Requeue: true}, nil
	}
	return ctrl.Result{}, err
}

// crdLabels returns the labels that mark an instance CRD as g's.
func crdLabels(g *krov1a1.ResourceGraphDefinition) map[string]string {
	return map[string]string{LabelOwned: "true", LabelRGDName: g.Name, LabelRGDID: string(g.UID), LabelManagedBy: ManagedBy}
}

// ownerOf returns the RGD name an existing CRD is labelled with, and
// whether it is labelled as managed for an RGD at all (kro's rule: the
// owned label, or else the managed-by label).
func ownerOf(crd *apiextensionsv1.CustomResourceDefinition) (name string, owned bool) {
	l := crd.Labels
	if v, ok := l[LabelOwned]; ok {
		owned = v == "true"
	} else {
		owned = l[LabelManagedBy] == "kro" || l[LabelManagedBy] == ManagedBy
	}
	return l[LabelRGDName], owned
}

// ensureCRD applies the instance CRD of g and reports whether it is
// established; KindReady says how it went. A CRD of the same name that is
// not labelled as g's (another RGD's, or none's) is left alone: KindReady
// False, CRDConflict. A CRD labelled with g's name but another uid (g was
// deleted and created again while its CRD stayed) is adopted, as kro does.
func (r *Reconciler) ensureCRD(ctx context.Context, g *krov1a1.ResourceGraphDefinition, crd *apiextensionsv1.CustomResourceDefinition, st *krov1a1.ResourceGraphDefinitionStatus, now metav1.Time) bool {
	gen := g.Generation
	fail := func(reason, format string, args ...any) bool {
		setCondition(&st.Conditions, krov1a1.ConditionKindReady, metav1.ConditionFalse, reason, fmt.Sprintf(format, args...), gen, now)
		return false
	}
	live := &apiextensionsv1.CustomResourceDefinition{}
	switch err := r.APIReader.Get(ctx, client.ObjectKey{Name: crd.Name}, live); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fail(ReasonFailed, "reading the CustomResourceDefinition %s: %v", crd.Name, err)
	default:
		if name, owned := ownerOf(live); !owned {
			return fail(ReasonCRDConflict, "the CustomResourceDefinition %s exists and is not managed for a ResourceGraphDefinition (no %s=true label); it is left as it is", crd.Name, LabelOwned)
		} else if name != g.Name {
			return fail(ReasonCRDConflict, "the CustomResourceDefinition %s belongs to the ResourceGraphDefinition %q (label %s); it is left as it is", crd.Name, name, LabelRGDName)
		}
	}
	obj, err := applyObject(crd, crdLabels(g))
	if err != nil {
		return fail(ReasonFailed, "%v", err)
	}
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return fail(ReasonFailed, "the API server refused the CustomResourceDefinition %s: %v", crd.Name, apiMessage(err))
	}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: crd.Name}, live); err != nil {
		return fail(ReasonFailed, "reading the CustomResourceDefinition %s: %v", crd.Name, err)
	}
	for _, c := range live.Status.Conditions {
		if c.Type == apiextensionsv1.NamesAccepted && c.Status == apiextensionsv1.ConditionFalse {
			return fail(ReasonFailed, "the API server does not accept the names of the CustomResourceDefinition %s: %s", crd.Name, c.Message)
		}
	}
	for _, c := range live.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			setCondition(&st.Conditions, krov1a1.ConditionKindReady, metav1.ConditionTrue, ReasonReady,
				fmt.Sprintf("kind %s has been accepted and is served (CustomResourceDefinition %s)", crd.Spec.Names.Kind, crd.Name), gen, now)
			return true
		}
	}
	return fail(ReasonEstablishing, "the CustomResourceDefinition %s is applied; waiting for the API server to establish it", crd.Name)
}

// applyObject returns the CRD as a server-side apply request: with the
// extra labels, without status and an unset creationTimestamp (the API
// server owns them).
func applyObject(crd *apiextensionsv1.CustomResourceDefinition, labels map[string]string) (*unstructured.Unstructured, error) {
	c := crd.DeepCopy()
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	for k, v := range labels {
		c.Labels[k] = v
	}
	c.APIVersion, c.Kind = apiextensionsv1.SchemeGroupVersion.String(), "CustomResourceDefinition"
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
	if err != nil {
		return nil, fmt.Errorf("encoding the CustomResourceDefinition %s: %w", crd.Name, err)
	}
	delete(m, "status")
	unstructured.RemoveNestedField(m, "metadata", "creationTimestamp")
	return &unstructured.Unstructured{Object: m}, nil
}

// apiMessage returns the API server's message of an error (its Status
// message), or the error's text.
func apiMessage(err error) string {
	var se apierrors.APIStatus
	if errors.As(err, &se) && se.Status().Message != "" {
		return se.Status().Message
	}
	return err.Error()
}

// run runs the compiled Operator of g on the Runtime (a new generation
// replaces the running one) and sets ControllerReady; it reports whether
// every controller runs.
func (r *Reconciler) run(ctx context.Context, g *krov1a1.ResourceGraphDefinition, c *Compiled, st *krov1a1.ResourceGraphDefinitionStatus, now metav1.Time) bool {
	gen := g.Generation
	if c.Operator == nil {
		// No controller deletes the instances' resources: their
		// finalizer is released.
		r.stopGuard(g.Name, true)
		r.stop(g.Name, false)
		setCondition(&st.Conditions, krov1a1.ConditionControllerReady, metav1.ConditionFalse, ReasonNotCompiled,
			"the resources of a ResourceGraphDefinition are not compiled into controllers by this version of the manager; the instance kind is served, no instance is reconciled", gen, now)
		return true
	}
	op := c.Operator.DeepCopy()
	op.Generation = gen
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: op.Name}, &opv1a1.Operator{}); err == nil {
		// No controller deletes the instances' resources: their
		// finalizer is released.
		r.stopGuard(g.Name, true)
		r.stop(g.Name, false)
		setCondition(&st.Conditions, krov1a1.ConditionControllerReady, metav1.ConditionFalse, ReasonNameConflict,
			fmt.Sprintf("an Operator object is named %q, the name this ResourceGraphDefinition's controllers run under; rename or delete it", op.Name), gen, now)
		return true
	}
	r.mu.Lock()
	if r.running == nil {
		r.running = map[string]string{}
	}
	prev := r.running[g.Name]
	r.running[g.Name] = op.Name
	if r.schemas == nil {
		r.schemas = map[string]string{}
	}
	schema := crdSchemas(c)
	prevSchema, hadSchema := r.schemas[g.Name]
	r.schemas[g.Name] = schema
	r.mu.Unlock()
	if prev != "" && prev != op.Name {
		r.Runtime.Deleted(prev)
	} else if prev == op.Name && hadSchema && prevSchema != schema {
		// The instance schema changed (a field added with a default):
		// the instances the running informer holds were read under the
		// old one. Stopping the Operator releases its informers, so the
		// new generation lists the instances again, with the new
		// defaults, as the API server now returns them; replacing it in
		// place would keep the informers (and the old objects).
		r.Logger.Info("instance schema changed: restarting the controllers so that the instances are read again", "rgd", g.Name)
		r.Runtime.Delete(op.Name)
	}
	runCtx := r.ctx
	if runCtx == nil {
		runCtx = ctx
	}
	r.guard(runCtx, g.Name, c)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Runtime.Upsert(runCtx, op)
	}()
	select {
	case <-done:
	case <-time.After(StartWait):
	}
	return r.controllerStatus(st, op.Name, gen, now)
}

// crdSchemas is the instance CRD's versions (names and schemas) as JSON,
// "" without a CRD.
func crdSchemas(c *Compiled) string {
	if c == nil || c.CRD == nil {
		return ""
	}
	b, err := json.Marshal(c.CRD.Spec.Versions)
	if err != nil {
		return ""
	}
	return string(b)
}

// controllerStatus sets ControllerReady from the Runtime's status of the
// named operator and reports whether it is True.
func (r *Reconciler) controllerStatus(st *krov1a1.ResourceGraphDefinitionStatus, opName string, gen int64, now metav1.Time) bool {
	ost, ok := r.Runtime.Status(opName, gen)
	running, _ := r.Runtime.Running(opName)
	status, reason, msg := metav1.ConditionFalse, ReasonStarting, "controllers are starting"
	if ok {
		status, reason, msg = controllerCondition(ost, running)
	}
	setCondition(&st.Conditions, krov1a1.ConditionControllerReady, status, reason, msg, gen, now)
	return status == metav1.ConditionTrue
}

// runningName returns the name the RGD's Operator runs under, or "".
func (r *Reconciler) runningName(rgdName string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running[rgdName]
}

// stop stops the RGD's controllers if they run; deleted says the RGD is
// gone (targets with deletionPolicy Orphan then remove their marks), not
// handed to another member or replaced. guarded reports whether the RGD's
// instanceGuard ran.
func (r *Reconciler) stop(rgdName string, deleted bool) (guarded bool) {
	guarded = r.stopGuard(rgdName, deleted)
	r.mu.Lock()
	opName, ok := r.running[rgdName]
	delete(r.running, rgdName)
	delete(r.schemas, rgdName)
	if deleted {
		delete(r.compiled, rgdName)
	}
	r.mu.Unlock()
	if !ok {
		return guarded
	}
	if deleted {
		r.Runtime.Deleted(opName)
	} else {
		r.Runtime.Delete(opName)
	}
	return guarded
}

// guard runs the instanceGuard of a running RGD (keeping the one that
// runs when it guards the same kinds).
func (r *Reconciler) guard(ctx context.Context, rgdName string, c *Compiled) {
	if r.meta == nil || c.CRD == nil {
		return
	}
	g := newInstanceGuard(rgdName, c, r.Client, r.APIReader, r.meta, r.Logger.WithValues("rgd", rgdName))
	r.mu.Lock()
	old := r.guards[rgdName]
	if old != nil && old.sameAs(g) {
		r.mu.Unlock()
		return
	}
	if r.guards == nil {
		r.guards = map[string]*instanceGuard{}
	}
	r.guards[rgdName] = g
	r.mu.Unlock()
	if old != nil {
		old.stop()
	}
	g.start(ctx)
}

// stopGuard stops the RGD's instanceGuard; release says that no
// controller of this RGD runs any more here nor elsewhere (the RGD is
// gone, or its controllers cannot run), so its instances'
// InstanceFinalizer is removed (nobody would remove it otherwise). ran
// reports whether a guard ran.
func (r *Reconciler) stopGuard(rgdName string, release bool) (ran bool) {
	r.mu.Lock()
	g := r.guards[rgdName]
	delete(r.guards, rgdName)
	r.mu.Unlock()
	if g == nil {
		return false
	}
	g.stop()
	if release {
		ctx := r.ctx
		if ctx == nil {
			ctx = context.Background()
		}
		g.release(ctx)
	}
	return true
}

// releaseOrphaned removes InstanceFinalizer from the instances of the
// CRDs labelled as the RGD rgdName's, which is gone: nobody would remove
// it otherwise, and it would hold each instance (and the deletion of the
// CRD) forever. The CRDs stay. The RGD's absence is read from the API
// server first, not from the cache (which may lag behind the CRDs' on
// another replica).
func (r *Reconciler) releaseOrphaned(ctx context.Context, rgdName string) error {
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: rgdName}, &krov1a1.ResourceGraphDefinition{}); !apierrors.IsNotFound(err) {
		if err != nil {
			return fmt.Errorf("reading the ResourceGraphDefinition %s: %w", rgdName, err)
		}
		return nil
	}
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := r.APIReader.List(ctx, crds, client.MatchingLabels{LabelRGDName: rgdName}); err != nil {
		return fmt.Errorf("listing the CustomResourceDefinitions of the deleted ResourceGraphDefinition %s: %w", rgdName, err)
	}
	for i := range crds.Items {
		crd := &crds.Items[i]
		if name, owned := ownerOf(crd); !owned || name != rgdName {
			continue
		}
		_, gvk := instanceKind(&crd.Spec)
		g := &instanceGuard{rgdName: rgdName, gvk: gvk, client: r.Client, reader: r.APIReader,
			log: r.Logger.WithValues("rgd", rgdName, "kind", crd.Spec.Names.Kind)}
		g.release(ctx)
	}
	return nil
}

// finalize runs for an RGD being deleted. While instances of its kind
// remain, the CRD and the controllers stay (deleting the CRD would delete
// the instances; stopping the controllers would leave the instances'
// resources and finalizers to nobody), and Ready says so; once none
// remains, the controllers stop, the CRD (if it is labelled as the RGD's)
// is deleted and Finalizer removed.
func (r *Reconciler) finalize(ctx context.Context, g *krov1a1.ResourceGraphDefinition, log logr.Logger) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(g, Finalizer) {
		r.stop(g.Name, true)
		return ctrl.Result{}, nil
	}
	crd, err := r.ownedCRD(ctx, g)
	if err != nil {
		return ctrl.Result{}, err
	}
	if crd != nil {
		n, first, err := r.instances(ctx, crd)
		if err != nil {
			return ctrl.Result{}, err
		}
		if n > 0 {
			// Deleting instances still need their controllers (after a
			// restart of the manager too).
			if c, err := r.compile(g); err == nil && c.Operator != nil {
				st := &krov1a1.ResourceGraphDefinitionStatus{}
				r.run(ctx, g, c, st, metav1.Now())
			}
			now := metav1.Now()
			st := g.Status.DeepCopy()
			format := "the ResourceGraphDefinition is being deleted: its CustomResourceDefinition %s is kept while %s of kind %s remain (%s); deleting the CRD would delete them, so it goes once they are deleted"
			if !crd.DeletionTimestamp.IsZero() {
				format = "the ResourceGraphDefinition is being deleted, and its CustomResourceDefinition %s too, with its %s of kind %s (%s): the controllers run until they are deleted, resources included"
			}
			msg := fmt.Sprintf(format, crd.Name, plural(n, "instance"), crd.Spec.Names.Kind, first)
			summarize(st, g.Generation, now, msg)
			if err := r.writeStatus(ctx, g, st); err != nil {
				return r.retry(err)
			}
			return ctrl.Result{RequeueAfter: WaitInterval}, nil
		}
	}
	r.stop(g.Name, true)
	if crd != nil && crd.DeletionTimestamp.IsZero() {
		err := r.Client.Delete(ctx, crd, client.Preconditions{UID: &crd.UID})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return ctrl.Result{}, fmt.Errorf("deleting the CustomResourceDefinition %s: %w", crd.Name, err)
		}
		log.Info("instance CRD deleted", "crd", crd.Name)
	}
	base := g.DeepCopy()
	controllerutil.RemoveFinalizer(g, Finalizer)
	if err := r.Client.Patch(ctx, g, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return r.retry(err)
	}
	return ctrl.Result{}, nil
}

// ownedCRD returns the CRD of g's instance kind when it exists and is
// labelled as g's, also while it is being deleted (its instances, being
// deleted with it, still need the RGD's controllers and instance
// finalizer, after a restart of the manager too); nil otherwise (no CRD,
// a schema that names no valid kind, another's CRD).
func (r *Reconciler) ownedCRD(ctx context.Context, g *krov1a1.ResourceGraphDefinition) (*apiextensionsv1.CustomResourceDefinition, error) {
	ik, err := rgd.Instance(g.Spec.Schema)
	if err != nil {
		return nil, nil
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: ik.Plural + "." + ik.Group}, crd); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading the CustomResourceDefinition %s.%s: %w", ik.Plural, ik.Group, err)
	}
	if name, owned := ownerOf(crd); !owned || name != g.Name {
		return nil, nil
	}
	return crd, nil
}

// instances returns how many instances of the CRD's kind exist (one list
// request of at most one item: the count is the API server's
// remainingItemCount plus one when it gives one) and names the first.
func (r *Reconciler) instances(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (int64, string, error) {
	_, gvk := instanceKind(&crd.Spec)
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(crd.Spec.Names.ListKind))
	if err := r.APIReader.List(ctx, list, client.Limit(1)); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return 0, "", nil
		}
		return 0, "", fmt.Errorf("listing the instances of %s: %w", crd.Name, err)
	}
	if len(list.Items) == 0 {
		return 0, "", nil
	}
	n := int64(1)
	if rc := list.RemainingItemCount; rc != nil {
		n += *rc
	} else if list.Continue != "" {
		n++ // at least
	}
	first := list.Items[0].Name
	if ns := list.Items[0].Namespace; ns != "" {
		first = ns + "/" + first
	}
	if n > 1 {
		first = "first: " + first
	}
	return n, first, nil
}

func plural(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// writeStatus writes st as g's status when it differs from g's.
func (r *Reconciler) writeStatus(ctx context.Context, g *krov1a1.ResourceGraphDefinition, st *krov1a1.ResourceGraphDefinitionStatus) error {
	if equality.Semantic.DeepEqual(g.Status, *st) {
		return nil
	}
	next := g.DeepCopy()
	next.Status = *st
	return r.Client.Status().Update(ctx, next)
}

// onReshard is the Reconciler's sharding.Handler: the RGDs of released
// buckets stop here; those of acquired buckets are reconciled, which
// starts them.
func (r *Reconciler) onReshard(acquired, released sharding.BucketSet) {
	r.mu.Lock()
	var stop []string
	for name := range r.running {
		if released.Has(sharding.NameBucket(rgd.OperatorName(name))) {
			stop = append(stop, name)
		}
	}
	r.mu.Unlock()
	for _, name := range stop {
		r.stop(name, false)
	}
	if acquired == 0 {
		return
	}
	var l krov1a1.ResourceGraphDefinitionList
	if err := r.Client.List(r.ctx, &l); err != nil {
		r.Logger.Error(err, "listing ResourceGraphDefinitions after acquiring buckets; they start at their next change")
		return
	}
	for i := range l.Items {
		if acquired.Has(sharding.NameBucket(rgd.OperatorName(l.Items[i].Name))) {
			g := &krov1a1.ResourceGraphDefinition{ObjectMeta: metav1.ObjectMeta{Name: l.Items[i].Name}}
			go func() { r.kicks <- event.GenericEvent{Object: g} }()
		}
	}
}
