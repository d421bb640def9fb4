package main

import (
	"context"
	"fmt"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"
	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/internal/events"
	"github.com/dcontroller/dcontroller/pkg/apiserver"
	"github.com/dcontroller/dcontroller/pkg/metacontroller"
	"github.com/dcontroller/dcontroller/pkg/operator"
	"github.com/dcontroller/dcontroller/pkg/rgdruntime"
	"github.com/dcontroller/dcontroller/pkg/sharding"
)

func newStartCommand() *cobra.Command {
	f := &managerFlags{}
	mf := &metacontrollerFlags{}
	af := &apiServerFlags{}
	sf := &shardingFlags{}
	rgds := true
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Run the manager: watch Operator objects in the cluster and run them",
		Long: `start runs the dcontroller manager against the cluster in the kubeconfig. It
watches Operator objects (dcontroller.io/v1alpha1; install the CRDs first with
kubectl apply -k config/crd) and runs each operator's controllers: a new or changed
Operator is (re)started, a deleted one stopped, and each Operator's status
reports its controllers' readiness, recent errors and counters. It also runs
the Metacontroller-compatible CompositeController and DecoratorController
objects (metacontroller.k8s.io/v1alpha1) with their hooks; see
docs/metacontroller.md. With --rgd (the default) it also runs kro's
ResourceGraphDefinitions (kro.run/v1alpha1): each one's instance CRD is
applied and its controllers run like an Operator's, with the RGD's status
saying how it went; see docs/kro.md. All controllers share one informer per
watched kind.

Memory: unless GOMEMLIMIT is set, the Go memory limit is 90% of the memory
limit of the process's cgroup (a container's resources.limits.memory), when it
has one; see also --release-startup-pages-after.

Metacontroller's flags are accepted with Metacontroller's meaning, so that the
args of a Metacontroller Deployment run unchanged: ` + metacontrollerSpellings() + `.
Where dctl already had a flag for the same setting, both spellings set it
(dctl's default applies; giving both with different values is an error).`,
		Example: `  kubectl apply -k config/crd
  dctl start --kubeconfig ~/.kube/config

  # Metacontroller's args: only the controllers labelled controller-group=cicd,
  # children written with server-side apply
  dctl start --zap-log-level=4 --discovery-interval=20s --target-label-selector=controller-group=cicd \
    --apply-strategy=server-side-apply --apply-strategy-ssa-field-manager=metacontroller`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := mf.validate(cmd.Flags()); err != nil {
				return err
			}
			if err := f.validate(cmd.Flags()); err != nil {
				return err
			}
			if err := sf.validate(f, cmd.Flags()); err != nil {
				return err
			}
			log := mf.logger(cmd.Flags(), f, cmd.ErrOrStderr())
			ctrl.SetLogger(log)
			if flag, msg := f.burstIgnored(cmd.Flags()); flag != "" {
				log.Info("WARNING: " + msg) // Metacontroller's --client-go-burst: accepted, as Metacontroller does
			}
			ctx, stop := signal.NotifyContext(contextOf(cmd), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runStart(ctx, f, mf, af, sf, rgds)
		},
	}
	cmd.Flags().BoolVar(&rgds, "rgd", true, "run kro's ResourceGraphDefinitions (kro.run/v1alpha1) when their CRD is installed: "+
		"apply each one's instance CRD and run its controllers (--rgd=false: leave them to another manager)")
	f.register(cmd, ":8080", ":8081")
	mf.register(cmd, f)
	af.register(cmd, apiserver.DefaultAddr)
	sf.register(cmd)
	return cmd
}

func runStart(ctx context.Context, f *managerFlags, mf *metacontrollerFlags, af *apiServerFlags, sf *shardingFlags, rgds bool) error {
	log := ctrl.Log.WithName("dctl")
	releaseStartupPages(f.releaseStartupAfter, "after initialisation", log)
	mgr, rt, err := f.newManager(log)
	if err != nil {
		return err
	}
	counters := &metacontroller.Counters{}
	ring, err := sf.newRing(mgr.GetConfig(), f, mgr.GetEventRecorder("dcontroller-sharding"), shardStats(rt, counters), log)
	if err != nil {
		return err
	}
	if ring != nil {
		rt.SetRing(ring)
		if err := mgr.Add(ring); err != nil {
			return err
		}
		log.Info("sharding on: this replica is one active member of the ring", "ring", sf.ring, "identity", ring.Identity())
		if sf.address == "" {
			log.Info("WARNING: no --sharding-address: the other members cannot forward requests for the views held here, so kubectl must ask this member directly for them")
		}
	}
	mapper := mgr.GetRESTMapper()
	// Operators run when their CRD is installed, hook controllers when
	// theirs are: a Metacontroller installation runs without the Operator
	// CRD, a dcontroller one without Metacontroller's.
	_, errO := mapper.RESTMapping(schema.GroupKind{Group: opv1a1.GroupName, Kind: "Operator"})
	_, errC := mapper.RESTMapping(schema.GroupKind{Group: mcv1a1.GroupName, Kind: "CompositeController"})
	_, errD := mapper.RESTMapping(schema.GroupKind{Group: mcv1a1.GroupName, Kind: "DecoratorController"})
	_, errR := mapper.RESTMapping(schema.GroupKind{Group: krov1a1.GroupName, Kind: "ResourceGraphDefinition"})
	for _, err := range []error{errO, errC, errD, errR} {
		// Not the kinds missing but the API server not answering (down,
		// unreachable, refusing the credentials): saying the CRDs are
		// not installed would send the user the wrong way.
		if err != nil && !meta.IsNoMatchError(err) {
			return fmt.Errorf("looking up the Operator and hook controller kinds at the Kubernetes API server %s: %w", mgr.GetConfig().Host, err)
		}
	}
	hooks := errC == nil && errD == nil
	if errO != nil && !hooks && (!rgds || errR != nil) {
		return fmt.Errorf("neither the Operator CRD (operators.%s), the CompositeController and DecoratorController CRDs (%s) nor (with --rgd) the ResourceGraphDefinition CRD (resourcegraphdefinitions.%s) are installed in the cluster; install them with `kubectl apply -k config/crd` (%w)", opv1a1.GroupName, mcv1a1.GroupName, krov1a1.GroupName, errO)
	}
	if errO == nil {
		rec := &operator.Reconciler{Client: sharding.FenceWrites(mgr.GetClient(), ring), Runtime: rt, Logger: log.WithName("operator"), Ring: ring,
			Recorder: events.Limit(mgr.GetEventRecorder("dcontroller"), mf.eventsQPS, mf.eventsBurst)}
		if err := rec.SetupWithManager(ctx, mgr); err != nil {
			return err
		}
		kinds := apiserver.KindsOf(apiserver.ClusterOperators(ctx, mgr.GetClient(), rt), false, f.limits.kindLimits())
		if ring != nil {
			// Any member answers for every operator's views: those of
			// operators running elsewhere are forwarded to their member.
			kinds = apiserver.KindsOf(apiserver.ClusterOperators(ctx, mgr.GetClient(), nil), false, f.limits.kindLimits())
			af.route, af.member = viewRoute(ring, mgr.GetClient()), ring.Identity()
		}
		srv, err := af.newServer(rt.Views(), kinds,
			apiserver.ExpectedKindsOf(apiserver.AllClusterOperators(mgr.GetClient(), 5*time.Second), false, f.limits.kindLimits()), false, log)
		if err != nil {
			return err
		}
		if err := mgr.Add(manager.RunnableFunc(runServer(srv))); err != nil {
			return err
		}
		if srv != nil && f.healthAddr != "0" {
			// The manager's /readyz also waits for the views to be served.
			// A standby of --leader-elect runs no API server (it starts
			// when elected) and is ready, so that a rolling update goes on.
			elected, standby := mgr.Elected(), f.leaderElect
			if err := mgr.AddReadyzCheck("views-served", func(req *http.Request) error {
				if standby {
					select {
					case <-elected:
					default:
						return nil
					}
				}
				return srv.ViewsServed(req)
			}); err != nil {
				return err
			}
		}
	} else {
		log.Info("Operator support and the view API server are off: the Operator CRD (operators." + opv1a1.GroupName + ") is not installed; install it with `kubectl apply -k config/crd` and restart")
	}
	if hooks {
		opts := mf.options(log)
		opts.Ring, opts.Counters = ring, counters
		if err := metacontroller.Setup(ctx, mgr, opts); err != nil {
			return err
		}
	} else {
		log.Info("CompositeController/DecoratorController support is off: their CRDs (metacontroller.k8s.io) are not installed; install them with `kubectl apply -k config/crd` and restart")
	}
	switch {
	case !rgds:
		log.Info("ResourceGraphDefinition support is off (--rgd=false)")
	case errR != nil:
		log.Info("ResourceGraphDefinition support is off: its CRD (resourcegraphdefinitions." + krov1a1.GroupName + ") is not installed; install it with `kubectl apply -k config/crd` and restart")
	default:
		rec := &rgdruntime.Reconciler{Client: sharding.FenceWrites(mgr.GetClient(), ring), APIReader: mgr.GetAPIReader(), Runtime: rt,
			Logger: log.WithName("rgd"), Ring: ring}
		if err := rec.SetupWithManager(ctx, mgr); err != nil {
			return err
		}
	}
	defer rt.Stop()
	log.Info("starting manager")
	manageMemory(ctx, mgr, f.releaseStartupAfter, log)
	return mgr.Start(ctx)
}
