package main

import (
	"context"
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/apiserver"
	"github.com/dcontroller/dcontroller/pkg/metacontroller"
	"github.com/dcontroller/dcontroller/pkg/operator"
)

func newStartCommand() *cobra.Command {
	f := &managerFlags{}
	af := &apiServerFlags{}
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
docs/metacontroller.md. All controllers share one informer per watched kind.`,
		Example: `  kubectl apply -k config/crd
  dctl start --kubeconfig ~/.kube/config`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := f.logger(cmd.ErrOrStderr())
			ctrl.SetLogger(log)
			ctx, stop := signal.NotifyContext(contextOf(cmd), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runStart(ctx, f, af)
		},
	}
	f.register(cmd, ":8080", ":8081")
	af.register(cmd, apiserver.DefaultAddr)
	return cmd
}

func runStart(ctx context.Context, f *managerFlags, af *apiServerFlags) error {
	log := ctrl.Log.WithName("dctl")
	mgr, rt, err := f.newManager(log)
	if err != nil {
		return err
	}
	mapper := mgr.GetRESTMapper()
	if _, err := mapper.RESTMapping(schema.GroupKind{Group: opv1a1.GroupName, Kind: "Operator"}); err != nil {
		return fmt.Errorf("the Operator CRD (operators.%s) is not installed in the cluster; install it with `kubectl apply -k config/crd` (%w)", opv1a1.GroupName, err)
	}
	rec := &operator.Reconciler{Client: mgr.GetClient(), Runtime: rt, Logger: log.WithName("operator"),
		Recorder: mgr.GetEventRecorder("dcontroller")}
	if err := rec.SetupWithManager(ctx, mgr); err != nil {
		return err
	}
	// The hook controllers run when their CRDs are installed.
	_, errC := mapper.RESTMapping(schema.GroupKind{Group: mcv1a1.GroupName, Kind: "CompositeController"})
	_, errD := mapper.RESTMapping(schema.GroupKind{Group: mcv1a1.GroupName, Kind: "DecoratorController"})
	if errC == nil && errD == nil {
		if err := metacontroller.Setup(ctx, mgr, metacontroller.Options{Logger: log}); err != nil {
			return err
		}
	} else {
		log.Info("CompositeController/DecoratorController support is off: their CRDs (metacontroller.k8s.io) are not installed; install them with `kubectl apply -k config/crd` and restart")
	}
	srv, err := af.newServer(rt.Views(), apiserver.KindsOf(apiserver.ClusterOperators(ctx, mgr.GetClient(), rt), false),
		apiserver.ExpectedKindsOf(apiserver.AllClusterOperators(mgr.GetClient(), 5*time.Second), false), false, log)
	if err != nil {
		return err
	}
	if err := mgr.Add(manager.RunnableFunc(runServer(srv))); err != nil {
		return err
	}
	defer rt.Stop()
	log.Info("starting manager")
	return mgr.Start(ctx)
}
