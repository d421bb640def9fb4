package main

import (
	"context"
	"fmt"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/apiserver"
	"github.com/dcontroller/dcontroller/pkg/operator"
)

func newRunCommand() *cobra.Command {
	f := &managerFlags{}
	af := &apiServerFlags{}
	var files []string
	var standalone bool
	cmd := &cobra.Command{
		Use:   "run -f OPERATOR.yaml [-f ...]",
		Short: "Run operators from files in the foreground against a cluster",
		Long: `run runs the operators in the given files against the cluster in the
kubeconfig, in the foreground, without the Operator CRD. Controller status
(readiness, errors, counters) is logged whenever it changes. Stop it with
Ctrl-C.

The view API server (see docs/apiserver.md) serves the operators' views on
--api-server-addr. With --standalone no cluster is needed: every kind lives
in an in-memory development store that the API server also serves for the
native kinds the operators use, so kubectl can create their inputs. It is
not a Kubernetes cluster: nothing schedules Pods and native schemas are
not validated.`,
		Example: `  dctl run -f examples/pod-container-num-annotator/operator.yaml --kubeconfig ~/.kube/config
  dctl run --standalone -f examples/pod-container-num-annotator/operator.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if standalone {
				if err := standaloneFlagsUnused(cmd); err != nil {
					return err
				}
			}
			if err := f.validate(cmd.Flags()); err != nil {
				return err
			}
			var ops []*opv1a1.Operator
			for _, file := range files {
				loaded, err := readOperators(file)
				if err != nil {
					return err
				}
				ops = append(ops, loaded...)
			}
			log := f.logger(cmd.ErrOrStderr())
			ctrl.SetLogger(log)
			ctx, stop := signal.NotifyContext(contextOf(cmd), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			if standalone {
				return withMetrics(ctx, f.metricsAddr, func(ctx context.Context) error { return runStandalone(ctx, af, ops, f.limits) })
			}
			return runRun(ctx, f, af, ops)
		},
	}
	cmd.Flags().BoolVar(&standalone, "standalone", false,
		"run without a cluster: every kind, native ones included, lives in an in-memory development store served by the API server "+
			"(not with --kubeconfig, --kube-api-*, --leader-elect, --leader-election-namespace, --health-addr or --release-startup-pages-after, which it has no use for)")
	af.register(cmd, apiserver.DefaultAddr)
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "operator file (YAML stream of Operator objects); repeatable")
	_ = cmd.MarkFlagRequired("filename")
	f.register(cmd, "0", "0")
	return cmd
}

// notStandaloneFlags are the flags of dctl run that --standalone has no
// use for: those that only say how to reach or share a Kubernetes API
// server, and those of the manager it does not build (its health
// endpoints and its start-up page releases).
var notStandaloneFlags = []string{"kubeconfig", "kube-api-qps", "kube-api-burst", "kube-api-compression", "kube-api-content-type",
	"leader-elect", "leader-election-namespace", "health-addr", "release-startup-pages-after"}

// standaloneFlagsUnused refuses a flag of notStandaloneFlags given with
// --standalone (with any value, its default included), which would
// otherwise be ignored without a word.
func standaloneFlagsUnused(cmd *cobra.Command) error {
	var given []string
	for _, name := range notStandaloneFlags {
		if cmd.Flags().Changed(name) {
			given = append(given, "--"+name)
		}
	}
	if len(given) == 0 {
		return nil
	}
	them := "them"
	if len(given) == 1 {
		them = "it"
	}
	return fmt.Errorf("%s: no effect with --standalone, which runs without a Kubernetes API server; drop %s",
		strings.Join(given, ", "), them)
}

func runRun(ctx context.Context, f *managerFlags, af *apiServerFlags, ops []*opv1a1.Operator) error {
	log := ctrl.Log.WithName("dctl")
	releaseStartupPages(f.releaseStartupAfter, "after initialisation", log)
	mgr, rt, err := f.newManager(log)
	if err != nil {
		return err
	}
	names := map[string]bool{}
	for _, op := range ops {
		if names[op.Name] {
			return fmt.Errorf("operator %q is defined twice", op.Name)
		}
		names[op.Name] = true
	}
	srv, err := af.newServer(rt.Views(), apiserver.KindsOf(apiserver.RunningOperators(rt, ops), false, f.limits.kindLimits()),
		apiserver.ExpectedKindsOf(apiserver.StaticOperators(ops), false, f.limits.kindLimits()), false, log)
	if err != nil {
		return err
	}
	if err := mgr.Add(manager.RunnableFunc(runServer(srv))); err != nil {
		return err
	}
	err = mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		return runOperators(ctx, rt, ops, log)
	}))
	if err != nil {
		return err
	}
	manageMemory(ctx, mgr, f.releaseStartupAfter, log)
	return mgr.Start(ctx)
}

// runOperators starts the operators on rt, logs each controller's status
// when it changes, and stops them when ctx ends.
// runOperators runs ops until ctx ends, logging status changes. It fails at
// once when no controller of any operator can ever run (every one has an
// invalid spec).
func runOperators(ctx context.Context, rt *operator.Runtime, ops []*opv1a1.Operator, log logr.Logger) error {
	// Concurrently: a start may wait for a source's informer to sync (up
	// to operator.InformerSyncTimeout), and that of one operator must not
	// hold back the others, nor the status lines below.
	var wg sync.WaitGroup
	for _, op := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rt.Upsert(ctx, op)
		}()
	}
	started := make(chan struct{})
	go func() { wg.Wait(); close(started) }()
	// allInvalid returns an error when every controller of every operator
	// has an invalid spec: nothing can ever run.
	allInvalid := func() error {
		var invalid []string
		total := 0
		for _, op := range ops {
			st, _ := rt.Status(op.Name, op.Generation)
			for _, cs := range st.Controllers {
				total++
				if c := cs.Conditions[0]; c.Reason == operator.ReasonInvalidSpec {
					invalid = append(invalid, fmt.Sprintf("operator %q: %s", op.Name, c.Message))
				}
			}
		}
		if total > 0 && len(invalid) == total {
			return fmt.Errorf("no controller can run:\n  %s", strings.Join(invalid, "\n  "))
		}
		return nil
	}
	// Invalid specs are found at once: wait briefly for the starts, so
	// that a run of nothing but invalid operators ends before logging.
	select {
	case <-started:
		if err := allInvalid(); err != nil {
			rt.Stop()
			return err
		}
		started = nil
	case <-time.After(time.Second):
	}
	last := map[string]string{}
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		for _, op := range ops {
			st, ok := rt.Status(op.Name, op.Generation)
			if !ok {
				continue
			}
			for _, cs := range st.Controllers {
				c := cs.Conditions[0]
				line := fmt.Sprintf("%s %s %s", c.Status, c.Reason, c.Message)
				if last[op.Name+"/"+cs.Name] != line {
					last[op.Name+"/"+cs.Name] = line
					log.Info("controller status", "operator", op.Name, "controller", cs.Name,
						"ready", c.Status, "reason", c.Reason, "message", c.Message)
				}
			}
		}
		select {
		case <-ctx.Done():
			rt.Stop()
			return nil
		case <-t.C:
		case <-started:
			// The last start ended: check again that something runs.
			started = nil
			if err := allInvalid(); err != nil {
				rt.Stop()
				return err
			}
		}
	}
}
