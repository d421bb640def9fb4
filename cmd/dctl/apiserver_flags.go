package main

import (
	"context"
	"fmt"
	"net"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/apiserver"
	"github.com/dcontroller/dcontroller/pkg/operator"
	"github.com/dcontroller/dcontroller/pkg/view"
)

// apiServerFlags are the flags of the embedded view API server, shared by
// dctl start and dctl run.
type apiServerFlags struct {
	addr     string
	mode     string
	certFile string
	keyFile  string
	disable  bool
	// acceptHosts extend apiserver.DefaultAcceptHosts.
	acceptHosts []string
	history     watchHistoryFlags
	// maxWatches is --max-watches-per-user (0: no bound).
	maxWatches int
	// route and member are set by dctl start --sharding (apiserver.Options).
	route  func(operator, namespace string) apiserver.Route
	member string
}

func (f *apiServerFlags) register(cmd *cobra.Command, defaultAddr string) {
	fs := cmd.Flags()
	fs.StringVar(&f.addr, "api-server-addr", defaultAddr, "HOST:PORT the view API server listens on")
	fs.StringVar(&f.mode, "api-server-mode", string(apiserver.Development),
		`"development": plain HTTP, no authentication (keep it on loopback); "production": HTTPS with --tls-cert-file/--tls-key-file and bearer-token (JWT) authentication`)
	fs.StringVar(&f.certFile, "tls-cert-file", "", "PEM certificate the API server serves in production mode (see dctl generate-keys)")
	fs.StringVar(&f.keyFile, "tls-key-file", "", "PEM private key of --tls-cert-file; it also verifies the bearer tokens")
	fs.BoolVar(&f.disable, "disable-api-server", false, "do not run the view API server")
	fs.StringSliceVar(&f.acceptHosts, "api-server-accept-hosts", nil,
		`host names the API server accepts in the Host header and in browsers' Origin header besides localhost, 127.0.0.1 and ::1; `+
			`comma-separated RE2 regular expressions, each matching a whole host name without the port (e.g. 'dcontroller\.example\.com,.*\.internal'; '.*' accepts any). `+
			`Checked in development mode, and in production mode when --api-server-addr is a loopback address or this flag is set; other requests get 403 (DNS rebinding protection)`)
	fs.IntVar(&f.maxWatches, "max-watches-per-user", apiserver.DefaultMaxWatchesPerUser,
		"watches one user (by name) may have open on the API server at once, over all kinds; past it a new watch gets 429 Too Many Requests with a Retry-After. 0: no bound")
	f.history.register(fs)
}

// newServer builds the API server for a store, or returns nil when it is
// disabled. Invalid flag combinations are usage errors.
// kinds are the kinds to serve, expected those that must be in discovery
// before the server is ready.
func (f *apiServerFlags) newServer(store *view.Store, kinds func() []schema.GroupVersionKind,
	expected func(context.Context) ([]schema.GroupVersionKind, error), native bool, log logr.Logger) (*apiserver.Server, error) {
	if err := f.history.apply(store); err != nil {
		return nil, err
	}
	if f.disable {
		return nil, nil
	}
	// k8s.io/apiserver and client-go log through klog: route it to the
	// structured logger so the API server's few lines look like ours.
	klog.SetLogger(log.WithName("k8s"))
	mode := apiserver.Mode(f.mode)
	switch mode {
	case apiserver.Development:
		if f.certFile != "" || f.keyFile != "" {
			log.Info("--tls-cert-file and --tls-key-file are ignored in development mode")
		}
		if host, _, err := net.SplitHostPort(f.addr); err == nil {
			if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
				log.Info("WARNING: the development-mode API server accepts unauthenticated requests on a non-loopback address; "+
					"clients must also use a host name that --api-server-accept-hosts accepts", "address", f.addr)
			}
		}
	case apiserver.Production:
		if f.certFile == "" || f.keyFile == "" {
			return nil, &exitError{code: 1, err: fmt.Errorf("--api-server-mode=production needs --tls-cert-file and --tls-key-file (make them with dctl generate-keys)")}
		}
	default:
		return nil, &exitError{code: 1, err: fmt.Errorf("--api-server-mode: unknown mode %q (want development or production)", f.mode)}
	}
	maxWatches := f.maxWatches
	switch {
	case maxWatches < 0:
		return nil, &exitError{code: 1, err: fmt.Errorf("--max-watches-per-user: want 0 (no bound) or a positive number, got %d", maxWatches)}
	case maxWatches == 0:
		maxWatches = -1
	}
	if _, _, err := net.SplitHostPort(f.addr); err != nil {
		return nil, &exitError{code: 1, err: fmt.Errorf("--api-server-addr %q: want HOST:PORT: %w", f.addr, err)}
	}
	return apiserver.New(apiserver.Options{
		Addr:              f.addr,
		Mode:              mode,
		CertFile:          f.certFile,
		KeyFile:           f.keyFile,
		Store:             store,
		Kinds:             kinds,
		ExpectedKinds:     expected,
		AcceptHosts:       f.acceptHosts,
		ServeNativeKinds:  native,
		Route:             f.route,
		Member:            f.member,
		MaxWatchesPerUser: maxWatches,
		Logger:            log.WithName("apiserver"),
	})
}

// runServer runs srv (when not nil) until ctx ends; for manager.RunnableFunc.
func runServer(srv *apiserver.Server) func(context.Context) error {
	return func(ctx context.Context) error {
		if srv == nil {
			<-ctx.Done()
			return nil
		}
		return srv.Run(ctx)
	}
}

// runStandalone runs operators without a cluster: every kind, native ones
// included, lives in the runtime's in-memory store, and the API server
// serves the views and the native kinds the operators use, so kubectl can
// create their inputs and watch their outputs.
func runStandalone(ctx context.Context, af *apiServerFlags, ops []*opv1a1.Operator, limits limitFlags) error {
	log := ctrl.Log.WithName("dctl")
	names := map[string]bool{}
	for _, op := range ops {
		if names[op.Name] {
			return fmt.Errorf("operator %q is defined twice", op.Name)
		}
		names[op.Name] = true
	}
	rt := operator.NewRuntime(operator.RuntimeOptions{Logger: log.WithName("runtime"),
		MaxDeltaEntries: limits.maxDeltaEntries, MaxObjectBytes: limits.maxObjectBytes, EvalLimits: limits.evalLimits(),
		KindLimits: limits.kindLimits()})
	srv, err := af.newServer(rt.Views(), apiserver.KindsOf(apiserver.RunningOperators(rt, ops), true, limits.kindLimits()),
		apiserver.ExpectedKindsOf(apiserver.StaticOperators(ops), true, limits.kindLimits()), true, log)
	if err != nil {
		return err
	}
	if srv == nil {
		log.Info("standalone mode without the API server: nothing can reach the operators' objects")
	} else {
		log.Info("standalone mode: the API server is an in-memory development store, not a Kubernetes cluster "+
			"(no scheduling, no controllers but the operators', no validation of native schemas)", "address", srv.Addr())
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errCh := make(chan error, 1)
	go func() {
		err := runServer(srv)(ctx)
		cancel()
		errCh <- err
	}()
	if err := runOperators(ctx, rt, ops, log); err != nil {
		cancel()
		<-errCh
		return err
	}
	return <-errCh
}
