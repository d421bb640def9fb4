package apiserver

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	apiserverconfig "k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authentication/request/union"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/endpoints/discovery"
	discoveryendpoint "k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
	"k8s.io/apiserver/pkg/endpoints/handlers"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/rest"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/handler3"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/auth"
	"github.com/dcontroller/dcontroller/pkg/view"
)

// Mode selects how the server is secured.
type Mode string

const (
	// Development serves plain HTTP without authentication: every request
	// is allowed. Meant for a loopback address.
	Development Mode = "development"
	// Production serves HTTPS with the given certificate and key and
	// requires a bearer JWT signed by that key on every request (see
	// package auth for the claims and the authorization rules).
	Production Mode = "production"
)

// Defaults.
const (
	DefaultAddr             = "127.0.0.1:8443"
	DefaultBookmarkInterval = 30 * time.Second
	DefaultSyncInterval     = time.Second
	// DefaultMaxWatchesPerUser bounds the watches one user may have open
	// at once (Options.MaxWatchesPerUser).
	DefaultMaxWatchesPerUser = 100
	// developerName is the user every development-mode request runs as.
	developerName = "developer"
	// maxRequestBody bounds request bodies (bytes), as the Kubernetes
	// API server's default does.
	maxRequestBody = 3 * 1024 * 1024
	// minRequestTimeout is the shortest a watch without timeoutSeconds runs
	// (it ends at a random time between one and two times this), as in
	// Kubernetes.
	minRequestTimeout = 30 * time.Minute
)

// Options configure a Server.
type Options struct {
	// Addr is the HOST:PORT to listen on (DefaultAddr when empty and no
	// Listener is given). Port 0 picks a free port; see Server.Addr.
	Addr string
	// Listener, when set, is used instead of listening on Addr.
	Listener net.Listener
	// Mode is Development (default) or Production.
	Mode Mode
	// CertFile and KeyFile are the PEM TLS certificate and private key of
	// production mode; the key's public half verifies bearer tokens.
	CertFile, KeyFile string
	// Store holds the served objects.
	Store *view.Store
	// Kinds, when set, lists kinds to serve even when the store holds no
	// object of them, such as the views of the running operators. It is
	// called on every discovery refresh and must be cheap.
	Kinds func() []schema.GroupVersionKind
	// ExpectedKinds, when set, lists the kinds that must be served before
	// the server reports ready: the readiness check "views-served" of
	// /readyz fails until every listed kind (that the server serves at all)
	// is in discovery. An error means the list is not known yet (e.g. the
	// operators are not loaded) and also fails the check. Kinds that cannot
	// be served (a resource name conflict) are skipped.
	ExpectedKinds func(context.Context) ([]schema.GroupVersionKind, error)
	// AcceptHosts are host-name patterns accepted in the Host header and
	// in the Origin header of browser requests besides DefaultAcceptHosts
	// (see hostFilter for the syntax). Hosts are checked in Development
	// mode, and in Production mode when the server listens on a loopback
	// address or AcceptHosts is set; other requests get 403 Forbidden.
	AcceptHosts []string
	// ServeNativeKinds serves every kind in Store, not only views
	// (<operator>.view.dcontroller.io): the standalone mode, where native
	// kinds also live in the store.
	ServeNativeKinds bool
	// TokenOptions tune token validation in production mode (issuer,
	// audience, clock skew).
	TokenOptions auth.ValidationOptions
	// Authenticator and Authorizer override the mode's defaults.
	Authenticator authenticator.Request
	Authorizer    authorizer.Authorizer
	// BookmarkInterval is how often a quiet watch that asked for bookmarks
	// gets one (DefaultBookmarkInterval when 0).
	BookmarkInterval time.Duration
	// SyncInterval is how often Kinds is polled for changes
	// (DefaultSyncInterval when 0); store changes are seen at once.
	SyncInterval time.Duration
	// Route, when set, says where each operator's views live in a ring of
	// managers (dctl start --sharding): a request for the views of an
	// operator that runs on another member is forwarded to that member's
	// view API server (Route.Address) after this server authenticated and
	// authorized it; the member checks the token again. namespace is the
	// request's ("" for a cluster-wide list or watch). nil: every view is
	// local.
	Route func(operator, namespace string) Route
	// Member names this server's member in forwarded requests
	// (ForwardedHeader).
	Member string
	// MaxWatchesPerUser bounds the watches one authenticated user (by
	// name) may have open at once, over all kinds, forwarded ones
	// included; past it a new watch gets 429 Too Many Requests with a
	// Retry-After, as kube-apiserver's API priority and fairness answers a
	// client over its share. DefaultMaxWatchesPerUser when 0; no bound when
	// negative. In development mode every request is the same user.
	MaxWatchesPerUser int
	// Logger receives structured logs.
	Logger logr.Logger
}

// Server is the embedded API server: it serves the objects of a view.Store
// to Kubernetes clients through k8s.io/apiserver's handlers, with live
// discovery and OpenAPI documents.
type Server struct {
	opts       Options
	log        logr.Logger
	generic    *genericapiserver.GenericAPIServer
	listener   net.Listener
	serializer objectSerializer
	authz      authorizer.Authorizer
	equivalent *equivalentRegistry
	// fwd forwards the requests for other members' views (Options.Route).
	fwd *forwarder

	resources atomic.Pointer[resourceSet]
	// published is the resource set last put into discovery, and
	// unservable the kinds the last sync could not serve.
	published  atomic.Pointer[resourceSet]
	unservable atomic.Pointer[map[schema.GroupVersionKind]bool]
	serving    sync.Map // schema.GroupVersionKind -> *served

	syncMu    sync.Mutex
	syncCh    chan struct{}
	openapiV2 *handler.OpenAPIService
	openapiV3 *handler3.OpenAPIService
	v3Keys    map[string]bool
	// legacyRoot serves /api (the group-less core API's versions).
	legacyRoot http.Handler

	watchesMu sync.Mutex
	watches   map[string]int // open watches per user name
}

// served is the handler state of one resource.
type served struct {
	res     *resource
	storage *storage
	scope   *handlers.RequestScope
}

// New builds a server; it listens at once (so Addr is known) and serves
// once Run is called. It switches the store to API-server metadata
// (view.Options.ServerMetadata: uids and creation timestamps), which the
// patch handlers and kubectl's AGE column need.
func New(opts Options) (*Server, error) {
	if opts.Store == nil {
		return nil, errors.New("apiserver: a store is required")
	}
	if opts.Mode == "" {
		opts.Mode = Development
	}
	if opts.BookmarkInterval <= 0 {
		opts.BookmarkInterval = DefaultBookmarkInterval
	}
	if opts.SyncInterval <= 0 {
		opts.SyncInterval = DefaultSyncInterval
	}
	if opts.Addr == "" {
		opts.Addr = DefaultAddr
	}
	if opts.MaxWatchesPerUser == 0 {
		opts.MaxWatchesPerUser = DefaultMaxWatchesPerUser
	}
	s := &Server{watches: map[string]int{}, opts: opts, log: opts.Logger, serializer: newObjectSerializer(), syncCh: make(chan struct{}, 1),
		equivalent: newEquivalentRegistry(), v3Keys: map[string]bool{}}

	authn, authz, err := s.security()
	if err != nil {
		return nil, err
	}
	s.authz = authz
	if opts.Route != nil {
		if s.fwd, err = newForwarder(opts); err != nil {
			return nil, fmt.Errorf("apiserver: %w", err)
		}
	}

	cfg := genericapiserver.NewConfig(metaCodecs.CodecFactory)
	cfg.Serializer = metaCodecs
	cfg.EffectiveVersion = basecompatibility.NewEffectiveVersionFromString("1.37", "", "")
	cfg.LoopbackClientConfig = &rest.Config{}
	cfg.Authentication.Authenticator = authn
	cfg.Authorization.Authorizer = authz
	cfg.EnableProfiling = false
	cfg.EnableMetrics = false
	cfg.EquivalentResourceRegistry = s.equivalent
	cfg.MinRequestTimeout = int(minRequestTimeout / time.Second)

	ln := opts.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", opts.Addr); err != nil {
			return nil, fmt.Errorf("apiserver: listening on %s: %w", opts.Addr, err)
		}
	}
	s.listener = ln
	var hosts *hostFilter
	if opts.Mode == Development || isLoopback(ln.Addr()) || len(opts.AcceptHosts) > 0 {
		if hosts, err = newHostFilter(append(append([]string{}, DefaultAcceptHosts...), opts.AcceptHosts...)); err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("apiserver: %w", err)
		}
	}
	cfg.BuildHandlerChainFunc = func(h http.Handler, c *genericapiserver.Config) http.Handler {
		chain := genericapiserver.DefaultBuildHandlerChain(h, c)
		if s.fwd != nil {
			// Outside the authentication filter, which drops the
			// credentials once they are checked.
			chain = keepCredentials(chain)
		}
		if hosts != nil {
			chain = hosts.wrap(chain)
		}
		return chain
	}
	cfg.ExternalAddress = ln.Addr().String()
	if opts.Mode == Production {
		certPEM, err := os.ReadFile(opts.CertFile)
		if err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("apiserver: reading --tls-cert-file: %w", err)
		}
		keyPEM, err := os.ReadFile(opts.KeyFile)
		if err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("apiserver: reading --tls-key-file: %w", err)
		}
		cert, err := dynamiccertificates.NewStaticCertKeyContent("apiserver", certPEM, keyPEM)
		if err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("apiserver: loading the TLS certificate and key: %w", err)
		}
		cfg.SecureServing = &genericapiserver.SecureServingInfo{Listener: ln, Cert: cert, MinTLSVersion: tls.VersionTLS12}
	}

	generic, err := cfg.Complete(nil).New("dcontroller-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("apiserver: %w", err)
	}
	s.generic = generic
	if err := generic.AddReadyzChecks(healthz.NamedCheck("views-served", s.viewsServed)); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("apiserver: %w", err)
	}
	mux := generic.Handler.NonGoRestfulMux
	mux.HandlePrefix("/apis/", s)
	legacy := discovery.NewLegacyRootAPIHandler(discovery.DefaultAddresses{DefaultAddress: cfg.ExternalAddress}, metaCodecs, "/api")
	legacyWrapped := discoveryendpoint.WrapAggregatedDiscoveryToHandler(legacy,
		generic.AggregatedLegacyDiscoveryGroupManager, generic.AggregatedLegacyDiscoveryGroupManager)
	s.legacyRoot = legacyWrapped
	mux.Handle("/api", legacyWrapped)
	mux.HandlePrefix("/api/", s)

	s.openapiV2 = handler.NewOpenAPIService(swaggerV2(nil))
	s.openapiV2.RegisterOpenAPIVersionedService("/openapi/v2", mux)
	s.openapiV3 = handler3.NewOpenAPIService()
	if err := s.openapiV3.RegisterOpenAPIV3VersionedService("/openapi/v3", mux); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("apiserver: %w", err)
	}
	storeOpts := opts.Store.Options()
	storeOpts.ServerMetadata = true
	opts.Store.SetOptions(storeOpts)
	s.sync()
	return s, nil
}

// security returns the authenticator and authorizer of the mode.
func (s *Server) security() (authenticator.Request, authorizer.Authorizer, error) {
	authn, authz := s.opts.Authenticator, s.opts.Authorizer
	switch s.opts.Mode {
	case Development:
		if authn == nil {
			authn = authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) {
				return &authenticator.Response{User: &user.DefaultInfo{Name: developerName,
					Groups: []string{user.AllAuthenticated}}}, true, nil
			})
		}
		if authz == nil {
			authz = authorizerfactory.NewAlwaysAllowAuthorizer()
		}
	case Production:
		if s.opts.CertFile == "" || s.opts.KeyFile == "" {
			return nil, nil, errors.New("apiserver: production mode needs --tls-cert-file and --tls-key-file")
		}
		if authn == nil {
			key, err := auth.LoadPrivateKeyFile(s.opts.KeyFile)
			if err != nil {
				return nil, nil, fmt.Errorf("apiserver: %w", err)
			}
			authn = auth.NewAuthenticator(auth.PublicKeyOf(key), s.opts.TokenOptions)
		}
		// Health, readiness and the version are public, as kube-apiserver
		// serves them to anyone (its system:public-info-viewer role): a
		// request without a token to exactly these paths runs as
		// system:anonymous; a bad token is still refused.
		var public []apiserverconfig.AnonymousAuthCondition
		for _, p := range PublicPaths {
			public = append(public, apiserverconfig.AnonymousAuthCondition{Path: p})
		}
		authn = union.NewFailOnError(authn, anonymous.NewAuthenticator(public))
		if authz == nil {
			authz = auth.NewAuthorizer()
		}
	default:
		return nil, nil, fmt.Errorf("apiserver: unknown mode %q (want %q or %q)", s.opts.Mode, Development, Production)
	}
	return authn, authz, nil
}

// PublicPaths are the paths served without authentication in production
// mode (only GET and HEAD), as kube-apiserver serves them anonymously.
var PublicPaths = []string{"/healthz", "/livez", "/readyz", "/version", "/version/"}

// viewsServed is the readiness check "views-served": every kind of
// Options.ExpectedKinds that the server serves is in discovery.
func (s *Server) viewsServed(req *http.Request) error {
	if s.opts.ExpectedKinds == nil {
		return nil
	}
	kinds, err := s.opts.ExpectedKinds(req.Context())
	if err != nil {
		return fmt.Errorf("the served kinds are not known yet: %w", err)
	}
	published := s.published.Load()
	var unservable map[schema.GroupVersionKind]bool
	if p := s.unservable.Load(); p != nil {
		unservable = *p
	}
	var missing []string
	for _, gvk := range kinds {
		if !s.wanted(gvk) || unservable[gvk] || (published != nil && published.byGVK[gvk] != nil) {
			continue
		}
		missing = append(missing, gvk.Kind+"."+gvk.Group)
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		s.requestSync()
		return fmt.Errorf("not yet in discovery: %s", strings.Join(missing, ", "))
	}
	return nil
}

// ViewsServed is the readiness check "views-served" of the server's own
// /readyz (see Options.ExpectedKinds), for a manager's /readyz: nil once
// every expected kind is in discovery, else an error naming those that are
// not (also before Run, when nothing is).
func (s *Server) ViewsServed(req *http.Request) error { return s.viewsServed(req) }

// Addr returns the address the server listens on.
func (s *Server) Addr() string { return s.listener.Addr().String() }

// Run serves until ctx is done. It keeps discovery and OpenAPI in sync with
// the store and Options.Kinds.
func (s *Server) Run(ctx context.Context) error {
	cancel := s.opts.Store.Subscribe(func(ev view.Event) {
		gvk := ev.Object.GroupVersionKind()
		set := s.resources.Load()
		switch ev.Type {
		case view.Added:
			if set.byGVK[gvk] == nil && s.wanted(gvk) {
				s.requestSync()
			}
		case view.Deleted:
			if set.byGVK[gvk] != nil {
				s.requestSync()
			}
		}
	})
	defer cancel()
	go s.syncLoop(ctx)

	prepared := s.generic.PrepareRun()
	s.log.Info("API server listening", "address", s.Addr(), "mode", string(s.opts.Mode))
	if s.opts.Mode == Production {
		return prepared.RunWithContext(ctx)
	}
	// Development: plain HTTP. The generic server only serves TLS, so the
	// handler chain is served here; its post-start hooks still run.
	if _, _, err := prepared.NonBlockingRunWithContext(ctx, 0); err != nil {
		return err
	}
	srv := &http.Server{Handler: s.generic.Handler, ReadHeaderTimeout: 30 * time.Second}
	errCh := make(chan error, 1)
	go func() { errCh <- srv.Serve(s.listener) }()
	select {
	case <-ctx.Done():
		shutdown, stop := context.WithTimeout(context.Background(), 5*time.Second)
		defer stop()
		_ = srv.Shutdown(shutdown)
		_ = srv.Close()
		return nil
	case err := <-errCh:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

func (s *Server) requestSync() {
	select {
	case s.syncCh <- struct{}{}:
	default:
	}
}

func (s *Server) syncLoop(ctx context.Context) {
	t := time.NewTicker(s.opts.SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.syncCh:
		case <-t.C:
		}
		s.sync()
	}
}

// wanted reports whether a kind found in the store is served.
func (s *Server) wanted(gvk schema.GroupVersionKind) bool {
	return s.opts.ServeNativeKinds || opv1a1.IsViewGroup(gvk.Group)
}

// desiredKinds are the kinds to serve now.
func (s *Server) desiredKinds() []schema.GroupVersionKind {
	var kinds []schema.GroupVersionKind
	for _, gvk := range s.opts.Store.Kinds() {
		if s.wanted(gvk) {
			kinds = append(kinds, gvk)
		}
	}
	if s.opts.Kinds != nil {
		for _, gvk := range s.opts.Kinds() {
			if s.wanted(gvk) {
				kinds = append(kinds, gvk)
			}
		}
	}
	return kinds
}

// Sync brings discovery and OpenAPI up to date at once (the server also
// does so on its own within Options.SyncInterval).
func (s *Server) Sync() { s.sync() }

func (s *Server) sync() {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	kinds := s.desiredKinds()
	next, conflicts := newResourceSet(kinds)
	prev := s.resources.Load()
	if prev != nil && prev.sameKinds(next) {
		return
	}
	for _, c := range conflicts {
		s.log.Error(errors.New("resource name conflict"), "kind not served", "conflict", c)
	}
	unservable := map[schema.GroupVersionKind]bool{}
	for _, gvk := range kinds {
		if next.byGVK[gvk] == nil {
			unservable[gvk] = true
		}
	}
	var failed bool
	for gvk, r := range next.byGVK {
		if _, ok := s.serving.Load(gvk); ok {
			continue
		}
		sv, err := s.newServed(r)
		if err != nil {
			s.log.Error(err, "cannot serve kind", "kind", gvk.String())
			kinds = slices.DeleteFunc(kinds, func(k schema.GroupVersionKind) bool { return k == gvk })
			unservable[gvk] = true
			failed = true
			continue
		}
		s.serving.Store(gvk, sv)
		s.equivalent.RegisterKindFor(r.gvr, "", gvk)
	}
	if failed {
		next, _ = newResourceSet(kinds)
	}
	s.serving.Range(func(k, v any) bool {
		if next.byGVK[k.(schema.GroupVersionKind)] == nil {
			s.serving.Delete(k)
			s.equivalent.forget(v.(*served).res.gvr)
		}
		return true
	})
	// OpenAPI first: a client that discovers a kind finds its schema.
	s.publishOpenAPI(next)
	s.resources.Store(next)
	s.publishDiscovery(prev, next)
	s.published.Store(next)
	s.unservable.Store(&unservable)
	var names []string
	for gvr := range next.byGVR {
		names = append(names, gvr.GroupResource().String())
	}
	sort.Strings(names)
	s.log.V(1).Info("serving resources", "resources", names)
}

func (s *Server) newServed(r *resource) (*served, error) {
	st := &storage{res: r, store: s.opts.Store, bookmarkInterval: s.opts.BookmarkInterval}
	ser := s.serializer
	if r.typed {
		ser = ser.withProtobuf()
	}
	scope := &handlers.RequestScope{
		Namer:                    handlers.ContextBasedNaming{Namer: meta.NewAccessor(), ClusterScoped: !r.namespaced},
		Serializer:               ser,
		ParameterCodec:           parameterCodec{},
		StandardSerializers:      ser.SupportedMediaTypes(),
		Creater:                  objectCreater{},
		Convertor:                objectConvertor{},
		Defaulter:                objectDefaulter{},
		Typer:                    objectTyper{},
		UnsafeConvertor:          objectConvertor{},
		Authorizer:               s.authz,
		EquivalentResourceMapper: s.equivalent,
		TableConvertor:           st,
		Resource:                 r.gvr,
		Kind:                     r.gvk,
		HubGroupVersion:          r.gvk.GroupVersion(),
		MetaGroupVersion:         metav1.SchemeGroupVersion,
		MaxRequestBodyBytes:      maxRequestBody,
	}
	fm, err := managedfields.NewDefaultCRDFieldManager(managedfields.NewDeducedTypeConverter(), objectConvertor{}, objectDefaulter{},
		objectCreater{}, r.gvk, r.gvk.GroupVersion(), "", nil)
	if err != nil {
		return nil, err
	}
	scope.FieldManager = fm
	return &served{res: r, storage: st, scope: scope}, nil
}

func apiResource(r *resource) metav1.APIResource {
	ar := metav1.APIResource{Name: r.gvr.Resource, SingularName: r.singular, Namespaced: r.namespaced,
		Kind: r.gvk.Kind, Verbs: verbs, ShortNames: r.shortNames}
	if r.view {
		ar.Categories = []string{"views"}
	}
	return ar
}

// publishDiscovery updates /apis (both the legacy and the aggregated
// documents) and /api.
func (s *Server) publishDiscovery(prev, next *resourceSet) {
	if prev != nil {
		for group := range prev.groups {
			if _, ok := next.groups[group]; !ok {
				if group == "" {
					s.generic.AggregatedLegacyDiscoveryGroupManager.RemoveGroup("")
					continue
				}
				s.generic.DiscoveryGroupManager.RemoveGroup(group)
				s.generic.AggregatedDiscoveryGroupManager.RemoveGroup(group)
			}
		}
	}
	for group, versions := range next.groups {
		var gvs []metav1.GroupVersionForDiscovery
		var vds []apidiscoveryv2.APIVersionDiscovery
		for _, v := range versions {
			gv := schema.GroupVersion{Group: group, Version: v}
			gvs = append(gvs, metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: v})
			vd := apidiscoveryv2.APIVersionDiscovery{Version: v, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
			for _, r := range next.inGroupVersion(gv) {
				scope := apidiscoveryv2.ScopeNamespace
				if !r.namespaced {
					scope = apidiscoveryv2.ScopeCluster
				}
				ar := apiResource(r)
				vd.Resources = append(vd.Resources, apidiscoveryv2.APIResourceDiscovery{
					Resource: r.gvr.Resource, SingularResource: r.singular, Scope: scope, Verbs: verbs,
					ShortNames: ar.ShortNames, Categories: ar.Categories,
					ResponseKind: &metav1.GroupVersionKind{Group: group, Version: v, Kind: r.gvk.Kind},
				})
			}
			vds = append(vds, vd)
		}
		if group == "" {
			s.generic.AggregatedLegacyDiscoveryGroupManager.RemoveGroup("")
			for _, vd := range vds {
				s.generic.AggregatedLegacyDiscoveryGroupManager.AddGroupVersion("", vd)
			}
			continue
		}
		s.generic.DiscoveryGroupManager.AddGroup(metav1.APIGroup{Name: group, Versions: gvs, PreferredVersion: gvs[len(gvs)-1]})
		s.generic.AggregatedDiscoveryGroupManager.RemoveGroup(group)
		for _, vd := range vds {
			s.generic.AggregatedDiscoveryGroupManager.AddGroupVersion(group, vd)
			s.generic.AggregatedDiscoveryGroupManager.SetGroupVersionPriority(metav1.GroupVersion{Group: group, Version: vd.Version}, 1000, 100)
		}
	}
}

// publishOpenAPI rebuilds the OpenAPI documents.
func (s *Server) publishOpenAPI(next *resourceSet) {
	all := sortedResources(next.byGVR)
	if err := s.openapiV2.UpdateSpec(swaggerV2(all)); err != nil {
		s.log.Error(err, "updating the OpenAPI v2 document")
	}
	byGV := map[schema.GroupVersion][]*resource{}
	for _, r := range all {
		byGV[r.gvk.GroupVersion()] = append(byGV[r.gvk.GroupVersion()], r)
	}
	keys := map[string]bool{}
	for gv, rs := range byGV {
		key := openAPIV3Key(gv)
		keys[key] = true
		s.openapiV3.UpdateGroupVersion(key, openAPIV3(gv, rs))
	}
	for key := range s.v3Keys {
		if !keys[key] {
			s.openapiV3.DeleteGroupVersion(key)
		}
	}
	s.v3Keys = keys
}

// ServeHTTP serves /apis/<group>/... and /api/v1/...: group discovery and
// the served resources, through the generic handlers of k8s.io/apiserver.
func (s *Server) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	info, ok := request.RequestInfoFrom(req.Context())
	if !ok {
		responsewriters.InternalError(w, req, errors.New("no request info"))
		return
	}
	target, err := classify(info)
	if err != nil {
		s.notFound(w, req)
		return
	}
	set := s.resources.Load()
	switch target.Type {
	case TargetGroup:
		versions, ok := set.groups[target.GroupVersion.Group]
		if !ok || target.GroupVersion.Group == "" {
			s.notFound(w, req)
			return
		}
		group := metav1.APIGroup{Name: target.GroupVersion.Group}
		for _, v := range versions {
			gv := metav1.GroupVersionForDiscovery{GroupVersion: target.GroupVersion.Group + "/" + v, Version: v}
			group.Versions = append(group.Versions, gv)
		}
		group.PreferredVersion = group.Versions[len(group.Versions)-1]
		discovery.NewAPIGroupHandler(metaCodecs, group).ServeHTTP(w, req)
		return
	case TargetGroupVersion:
		gv := target.GroupVersion
		if !contains(set.groups[gv.Group], gv.Version) && !(gv.Group == "" && gv.Version == "v1") {
			s.notFound(w, req)
			return
		}
		discovery.NewAPIVersionHandler(metaCodecs, gv, discovery.APIResourceListerFunc(func() []metav1.APIResource {
			var out []metav1.APIResource
			for _, r := range set.inGroupVersion(gv) {
				out = append(out, apiResource(r))
			}
			return out
		})).ServeHTTP(w, req)
		return
	case TargetOther:
		if req.URL.Path == "/api/" {
			s.legacyRoot.ServeHTTP(w, req)
			return
		}
		s.notFound(w, req)
		return
	}
	gvr := target.GroupVersion.WithResource(target.Resource)
	r := set.byGVR[gvr]
	if r == nil && gvr == namespacesGVR && target.Verb == "get" && target.Name != "" {
		// Namespaces are implicit in the store: every one exists. kubectl
		// asks for the namespace when an object is not found, and would
		// report a missing namespace instead of the missing object.
		responsewriters.WriteRawJSON(http.StatusOK, map[string]any{"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{"name": target.Name}, "status": map[string]any{"phase": "Active"}}, w)
		return
	}
	if r == nil {
		s.notFound(w, req)
		return
	}
	if target.Verb == "watch" {
		done, ok := s.startWatch(w, req, gvr)
		if !ok {
			return
		}
		defer done()
	}
	if s.opts.Route != nil {
		if op, ok := viewOperator(gvr.Group); ok {
			if route := s.opts.Route(op, target.Namespace); !route.Local {
				s.forward(w, req, op, route)
				return
			}
		}
	}
	v, ok := s.serving.Load(r.gvk)
	if !ok {
		s.notFound(w, req)
		return
	}
	sv := v.(*served)
	// A Namespace's own path carries its name as the request's namespace.
	namespacedReq := target.Namespace != "" && !(gvr == namespacesGVR && target.Namespace == target.Name)
	switch {
	case !r.namespaced && namespacedReq:
		s.notFound(w, req)
		return
	case r.namespaced && !namespacedReq && target.Verb != "list" && target.Verb != "watch":
		s.notFound(w, req)
		return
	}
	var h http.HandlerFunc
	switch target.Verb {
	case "get":
		h = handlers.GetResource(sv.storage, sv.scope)
	case "list":
		h = handlers.ListResource(sv.storage, sv.storage, sv.scope, false, minRequestTimeout)
	case "watch":
		h = handlers.ListResource(sv.storage, sv.storage, sv.scope, true, minRequestTimeout)
	case "create":
		h = handlers.CreateResource(sv.storage, sv.scope, nil)
	case "update":
		h = handlers.UpdateResource(sv.storage, sv.scope, nil)
	case "patch":
		pts := append(append([]string{}, patchTypes...), string(types.StrategicMergePatchType))
		if !r.typed && !strategicAsMerge(w, req) {
			return
		}
		h = handlers.PatchResource(sv.storage, sv.scope, nil, pts)
	case "delete":
		h = handlers.DeleteResource(sv.storage, true, sv.scope, nil)
	case "deletecollection":
		h = handlers.DeleteCollection(sv.storage, true, sv.scope, nil)
	default:
		responsewriters.ErrorNegotiated(apierrors.NewMethodNotSupported(gvr.GroupResource(), target.Verb), s.serializer, gvr.GroupVersion(), w, req)
		return
	}
	h.ServeHTTP(w, req)
}

// watchRetryAfter is the Retry-After, in seconds, of a watch refused for
// the user's watch bound: kube-apiserver's API priority and fairness asks
// a throttled client to come back after one second as well.
const watchRetryAfter = 1

// startWatch counts a new watch against its user's bound
// (Options.MaxWatchesPerUser). Over the bound it answers 429 Too Many
// Requests with a Retry-After and returns false; otherwise done uncounts
// the watch when it ends.
func (s *Server) startWatch(w http.ResponseWriter, req *http.Request, gvr schema.GroupVersionResource) (done func(), ok bool) {
	limit := s.opts.MaxWatchesPerUser
	if limit < 0 {
		return func() {}, true
	}
	name := ""
	if u, ok := request.UserFrom(req.Context()); ok {
		name = u.GetName()
	}
	s.watchesMu.Lock()
	n := s.watches[name]
	if n >= limit {
		s.watchesMu.Unlock()
		s.log.V(1).Info("watch refused: too many watches", "user", name, "open", n, "limit", limit, "resource", gvr.String())
		responsewriters.ErrorNegotiated(apierrors.NewTooManyRequests(fmt.Sprintf(
			"user %q has %d watches open, the most one user may (--max-watches-per-user); close one or retry later", name, n), watchRetryAfter),
			s.serializer, gvr.GroupVersion(), w, req)
		return nil, false
	}
	s.watches[name] = n + 1
	s.watchesMu.Unlock()
	return func() {
		s.watchesMu.Lock()
		if s.watches[name]--; s.watches[name] <= 0 {
			delete(s.watches, name)
		}
		s.watchesMu.Unlock()
	}, true
}

// strategicAsMerge lets `kubectl patch` without --type work on schemaless
// kinds: with no schema there are no list merge keys, so a strategic merge
// patch without $-directives means exactly what the same JSON merge patch
// (RFC 7386) means, and is applied as one. A patch with directives is
// refused with 415 Unsupported Media Type. It reports whether to go on.
func strategicAsMerge(w http.ResponseWriter, req *http.Request) bool {
	ct, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
	if ct != string(types.StrategicMergePatchType) {
		return true
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, maxRequestBody+1))
	if err != nil || len(body) > maxRequestBody {
		responsewriters.ErrorNegotiated(apierrors.NewRequestEntityTooLargeError("the patch is too large"), metaCodecs, schema.GroupVersion{}, w, req)
		return false
	}
	var patch any
	if err := json.Unmarshal(body, &patch); err != nil {
		responsewriters.ErrorNegotiated(apierrors.NewBadRequest("the patch is not valid JSON: "+err.Error()), metaCodecs, schema.GroupVersion{}, w, req)
		return false
	}
	if hasDirective(patch) {
		responsewriters.ErrorNegotiated(apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", schema.GroupResource{}, "",
			"strategic merge patch directives ($patch, $retainKeys, ...) need a schema; schemaless objects take application/merge-patch+json or application/json-patch+json", 0, false),
			metaCodecs, schema.GroupVersion{}, w, req)
		return false
	}
	req.Header.Set("Content-Type", string(types.MergePatchType))
	req.Body = io.NopCloser(bytes.NewReader(body))
	return true
}

func hasDirective(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if strings.HasPrefix(k, "$") || hasDirective(e) {
				return true
			}
		}
	case []any:
		for _, e := range t {
			if hasDirective(e) {
				return true
			}
		}
	}
	return false
}

var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

func (s *Server) notFound(w http.ResponseWriter, req *http.Request) {
	responsewriters.ErrorNegotiated(apierrors.NewGenericServerResponse(http.StatusNotFound, req.Method, schema.GroupResource{}, "", "", 0, false),
		metaCodecs, schema.GroupVersion{}, w, req)
}
