package operator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"
	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/controller"
	"github.com/dcontroller/dcontroller/pkg/expression"
	"github.com/dcontroller/dcontroller/pkg/informers"
	"github.com/dcontroller/dcontroller/pkg/watchcodec"
)

// ManagerOptions configure NewManager.
type ManagerOptions struct {
	// MetricsAddr is the Prometheus endpoint address ("0" disables it).
	MetricsAddr string
	// HealthAddr is the /healthz and /readyz address ("0" disables it).
	HealthAddr string
	// LeaderElect enables leader election through a lock named
	// LeaderElectionID (default DefaultLeaderElectionID) in
	// LeaderElectionNamespace, of the kind LeaderElectionResourceLock
	// (default "leases", the only kind client-go still has).
	LeaderElect                bool
	LeaderElectionNamespace    string
	LeaderElectionID           string
	LeaderElectionResourceLock string
	// LeaderElectionConfig is the configuration of the leader-election
	// client; nil uses the manager's (and its rate limiter).
	LeaderElectionConfig *rest.Config
	// SyncPeriod is how often the informer cache relists every watched
	// object from the API server and redelivers it (0: controller-runtime's
	// default, 10 hours with jitter).
	SyncPeriod time.Duration
	// PprofAddr serves net/http/pprof under /debug/pprof/ ("" or "0"
	// serves none).
	PprofAddr string
	// Logger receives structured logs.
	Logger logr.Logger
	// MaxDeltaEntries, MaxObjectBytes, EvalLimits and KindLimits are as
	// in RuntimeOptions.
	MaxDeltaEntries int
	MaxObjectBytes  int
	EvalLimits      expression.Limits
	KindLimits      controller.KindLimits
	// WatchContentType is the media type the cache's watches ask for the
	// kinds built into the API server in: runtime.ContentTypeProtobuf
	// ("" too), which the API server encodes once for all the watchers
	// of a kind that ask for it (its other clients do), or
	// runtime.ContentTypeJSON. Protobuf is used only when the API server
	// is no newer than this program's Kubernetes types
	// (watchcodec.ProtobufLossless); the cache's objects are the same
	// either way.
	WatchContentType string
}

// DefaultLeaderElectionID names the leader-election lock when
// ManagerOptions.LeaderElectionID is empty.
const DefaultLeaderElectionID = "dcontroller-manager"

// NewScheme returns a scheme with the Kubernetes built-in types,
// CustomResourceDefinitions, the Operator API, the Metacontroller-compatible
// API and kro's ResourceGraphDefinition.
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := opv1a1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := mcv1a1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := krov1a1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return scheme, nil
}

// NewManager builds a controller-runtime manager whose client reads
// unstructured objects from the shared informer cache, and an operator
// Runtime on top of that cache. Nothing runs until mgr.Start.
func NewManager(cfg *rest.Config, opts ManagerOptions) (ctrl.Manager, *Runtime, error) {
	scheme, err := NewScheme()
	if err != nil {
		return nil, nil, err
	}
	if opts.MetricsAddr == "" {
		opts.MetricsAddr = "0"
	}
	if opts.HealthAddr == "" {
		opts.HealthAddr = "0"
	}
	received := &watchCounter{}
	watches := &unstructuredWatches{}
	if opts.LeaderElectionID == "" {
		opts.LeaderElectionID = DefaultLeaderElectionID
	}
	var syncPeriod *time.Duration
	if opts.SyncPeriod > 0 {
		syncPeriod = &opts.SyncPeriod
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                     scheme,
		Logger:                     opts.Logger,
		Metrics:                    metricsserver.Options{BindAddress: opts.MetricsAddr},
		HealthProbeBindAddress:     opts.HealthAddr,
		LeaderElection:             opts.LeaderElect,
		LeaderElectionID:           opts.LeaderElectionID,
		LeaderElectionNamespace:    opts.LeaderElectionNamespace,
		LeaderElectionResourceLock: opts.LeaderElectionResourceLock,
		LeaderElectionConfig:       opts.LeaderElectionConfig,
		PprofBindAddress:           opts.PprofAddr,
		Client:                     client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		// Writes of unstructured objects decode their responses in one
		// parse (controller-runtime's client parses each three times).
		NewClient:      watchcodec.NewClient,
		MapperProvider: newMemoMapper,
		// managedFields is the bulk of many objects and no pipeline reads it.
		Cache: cache.Options{DefaultTransform: received.transform, SyncPeriod: syncPeriod,
			NewInformer: watches.newInformer},
		// Informers of unstructured objects are counted and stopped when
		// no running controller holds them (package informers).
		NewCache: func(cfg *rest.Config, o cache.Options) (cache.Cache, error) {
			c, err := cache.New(cfg, o)
			if err != nil {
				return nil, err
			}
			return informers.Wrap(c, nil), nil
		},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("creating the manager: %w", err)
	}
	if opts.HealthAddr != "0" {
		if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
			return nil, nil, err
		}
		if err := mgr.AddReadyzCheck("readyz", cacheSynced(mgr.GetCache())); err != nil {
			return nil, nil, err
		}
	}
	dyn, err := watchcodec.NewDynamic(cfg, mgr.GetHTTPClient())
	if err != nil {
		return nil, nil, fmt.Errorf("creating the dynamic client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, mgr.GetHTTPClient())
	if err != nil {
		return nil, nil, fmt.Errorf("creating the discovery client: %w", err)
	}
	// The cache's watches decode without managedFields, which the cache's
	// transform would drop anyway (see stripManagedFields): most of what
	// decoding an object allocated.
	watchDyn, err := watchcodec.NewDynamicWithOptions(cfg, mgr.GetHTTPClient(), watchcodec.Options{DropManagedFields: true})
	if err != nil {
		return nil, nil, fmt.Errorf("creating the dynamic client: %w", err)
	}
	watches.dyn, watches.mapper = watchDyn, mgr.GetRESTMapper()
	if watches.protobuf, err = protobufWatches(cfg, mgr.GetHTTPClient(), disc, opts); err != nil {
		return nil, nil, err
	}
	rt := NewRuntime(RuntimeOptions{
		Dynamic:         dyn,
		Discovery:       disc,
		Cache:           mgr.GetCache(),
		Client:          mgr.GetClient(),
		APIReader:       mgr.GetAPIReader(),
		RESTMapper:      mgr.GetRESTMapper(),
		Logger:          opts.Logger.WithName("runtime"),
		MaxDeltaEntries: opts.MaxDeltaEntries,
		MaxObjectBytes:  opts.MaxObjectBytes,
		EvalLimits:      opts.EvalLimits,
		KindLimits:      opts.KindLimits,
	})
	rt.received = received
	return mgr, rt, nil
}

// protobufWatches checks opts.WatchContentType and returns the function
// that gives the dynamic client watching the kinds built into the API
// server in protobuf (watchcodec.Options.Protobuf), or nil when the API
// server is newer than this program's Kubernetes types or opts ask for
// JSON; the choice is logged once, when the first such kind is watched.
// The API server's version is asked then, and again after an error (that
// watch is in JSON).
func protobufWatches(cfg *rest.Config, httpClient *http.Client, disc discovery.DiscoveryInterface, opts ManagerOptions) (func() dynamic.Interface, error) {
	switch opts.WatchContentType {
	case runtime.ContentTypeJSON:
		var logged sync.Once
		return func() dynamic.Interface {
			logged.Do(func() {
				opts.Logger.Info("watching every kind in JSON, as asked", "contentType", runtime.ContentTypeJSON)
			})
			return nil
		}, nil
	case "", runtime.ContentTypeProtobuf:
	default:
		return nil, fmt.Errorf("watch content type %q: want %s or %s", opts.WatchContentType, runtime.ContentTypeProtobuf, runtime.ContentTypeJSON)
	}
	dyn, err := watchcodec.NewDynamicWithOptions(cfg, httpClient, watchcodec.Options{DropManagedFields: true, Protobuf: true})
	if err != nil {
		return nil, fmt.Errorf("creating the dynamic client: %w", err)
	}
	var mu sync.Mutex
	var decided, lossless bool
	return func() dynamic.Interface {
		mu.Lock()
		defer mu.Unlock()
		if !decided {
			server, err := disc.ServerVersion()
			if err != nil {
				opts.Logger.Info("watching in JSON: the API server's version is unknown", "error", err.Error())
				return nil
			}
			var why string
			decided = true
			if lossless, why = watchcodec.ProtobufLossless(server); !lossless {
				opts.Logger.Info("watching every kind in JSON: "+why, "server", server.GitVersion)
			} else {
				opts.Logger.Info("watching the kinds built into the API server in protobuf", "server", server.GitVersion)
			}
		}
		if !lossless {
			return nil
		}
		return dyn
	}, nil
}

// unstructuredWatches is the cache's informer constructor: an informer of
// unstructured objects watches through a dynamic client whose decoder
// parses each event once (pkg/watchcodec) instead of controller-runtime's
// client-go dynamic client, which parses it five times; decoding watch
// events was the manager's largest cost. Lists (the fallback when the API
// server cannot stream the initial state as watch events) stay
// controller-runtime's. The watch asks what controller-runtime's would for
// the manager's cache options: the whole cluster (no DefaultNamespaces),
// no selector, bookmarks on; in protobuf for the kinds built into the API
// server (protobufWatches). Every informer of a kind with a GVK records
// its list/watch results (informers.RecordErrors) for
// informers.SyncError and informers.NotServed.
type unstructuredWatches struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
	// protobuf gives the client for the kinds of watchcodec.Protobuf,
	// nil for JSON (protobufWatches).
	protobuf func() dynamic.Interface
}

func (w *unstructuredWatches) newInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	if u, ok := obj.(*unstructured.Unstructured); ok && w.dyn != nil {
		if crlw, ok := lw.(*toolscache.ListWatch); ok {
			gvk := u.GroupVersionKind()
			if m, err := w.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
				dyn := w.dyn
				if w.protobuf != nil && watchcodec.Protobuf(m.GroupVersionKind) {
					if p := w.protobuf(); p != nil {
						dyn = p
					}
				}
				res := dyn.Resource(m.Resource)
				lw = &toolscache.ListWatch{
					ListWithContextFunc: crlw.ListWithContextFunc,
					WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
						opts.Watch = true
						opts.AllowWatchBookmarks = true
						return res.Watch(ctx, opts)
					},
				}
			}
		}
	}
	build := func(lw toolscache.ListerWatcher) toolscache.SharedIndexInformer {
		return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
	}
	if o, ok := obj.(interface{ GetObjectKind() schema.ObjectKind }); ok {
		if gvk := o.GetObjectKind().GroupVersionKind(); !gvk.Empty() {
			return informers.RecordErrors(gvk, lw, build)
		}
	}
	return build(lw)
}

// memoMapper remembers the answers of RESTMapping for one version. The
// client resolves a kind to its resource on every write, and
// controller-runtime's mapper answers through meta.PriorityRESTMapper,
// which lists every mapping of the group each time (about 50µs and a few
// KB of garbage per patch). An answer stays right while the resource
// exists (a CustomResourceDefinition's resource name is its own name, and
// its scope cannot change); controller-runtime's mapper itself refreshes a
// group only when a kind is missing, so it kept the same answers. Errors
// are not remembered: a kind added later is found as before.
type memoMapper struct {
	meta.RESTMapper
	m sync.Map // memoKey -> *meta.RESTMapping
}

type memoKey struct {
	gk      schema.GroupKind
	version string
}

func newMemoMapper(cfg *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
	m, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return &memoMapper{RESTMapper: m}, nil
}

func (m *memoMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if len(versions) != 1 {
		return m.RESTMapper.RESTMapping(gk, versions...)
	}
	k := memoKey{gk, versions[0]}
	if v, ok := m.m.Load(k); ok {
		return v.(*meta.RESTMapping), nil
	}
	r, err := m.RESTMapper.RESTMapping(gk, versions...)
	if err != nil {
		return nil, err
	}
	m.m.Store(k, r)
	return r, nil
}

// cacheSynced is the manager's readiness check: ready once every informer
// of the cache (those created before it started: the kinds of the
// manager's own controllers, such as CompositeController) has delivered
// its initial list, so that an object created after /readyz answers 200
// is seen by a running controller. It stays ready afterwards: an informer
// added later (an Operator's watch of a kind it may not list) does not take
// the manager out of service. Each check waits at most 100ms.
func cacheSynced(c cache.Cache) healthz.Checker {
	var synced atomic.Bool
	return func(req *http.Request) error {
		if synced.Load() {
			return nil
		}
		ctx, cancel := context.WithTimeout(req.Context(), 100*time.Millisecond)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return errors.New("the informer cache has not synced yet")
		}
		synced.Store(true)
		return nil
	}
}

// watchCounter counts the objects the manager's informers receive from the
// API server (list items and watch events), for
// dcontroller_watch_events_total and Runtime.WatchEvents.
type watchCounter struct{ n atomic.Int64 }

// transform is the cache's transform: it counts the object by kind and
// strips its managedFields.
func (w *watchCounter) transform(in any) (any, error) {
	w.n.Add(1)
	kind := "unknown"
	if o, ok := in.(interface{ GetObjectKind() schema.ObjectKind }); ok {
		if k := o.GetObjectKind().GroupVersionKind().Kind; k != "" {
			kind = k
		}
	}
	if kind == "unknown" {
		kind = typedKind(in)
	}
	watchEventsTotal.WithLabelValues(kind).Inc()
	return stripManagedFields(in)
}

// stripManagedFields is the cache's transform: it drops
// metadata.managedFields, the bulk of many objects, which no pipeline or
// hook reads. Unlike cache.TransformStripManagedFields it deletes the field
// of an unstructured object without decoding it into typed entries first
// (that decoding cost CPU and garbage on every watch event).
func stripManagedFields(in any) (any, error) {
	switch o := in.(type) {
	case *unstructured.Unstructured:
		if md, ok := o.Object["metadata"].(map[string]any); ok {
			delete(md, "managedFields")
		}
	case metav1.Object:
		if o.GetManagedFields() != nil {
			o.SetManagedFields(nil)
		}
	}
	return in, nil
}

// typedKind names the Go type of a typed object whose TypeMeta the decoder
// left empty (e.g. *v1alpha1.Operator gives "Operator").
func typedKind(in any) string {
	t := reflect.TypeOf(in)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "unknown"
	}
	return t.Name()
}
