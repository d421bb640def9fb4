package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"

	"github.com/dcontroller/dcontroller/pkg/metacontroller"
	"github.com/dcontroller/dcontroller/pkg/metacontroller/hook"
)

// parseStartFlags registers dctl start's manager and Metacontroller flags
// on a command and parses args; the error is the parse's or validate's.
func parseStartFlags(t *testing.T, args ...string) (*managerFlags, *metacontrollerFlags, error) {
	t.Helper()
	f, mf := &managerFlags{}, &metacontrollerFlags{}
	cmd := &cobra.Command{Use: "start"}
	f.register(cmd, ":8080", ":8081")
	mf.register(cmd, f)
	if err := cmd.Flags().Parse(args); err != nil {
		return f, mf, err
	}
	return f, mf, mf.validate(cmd.Flags())
}

// TestMetacontrollerFlagSpellings: each of Metacontroller's spellings sets
// the same variable as dctl's own flag, and without either dctl's default
// stays.
func TestMetacontrollerFlagSpellings(t *testing.T) {
	f, _, err := parseStartFlags(t)
	if err != nil {
		t.Fatal(err)
	}
	if f.metricsAddr != ":8080" || f.healthAddr != ":8081" || f.leaderElect || f.qps != defaultKubeAPIQPS || f.burst != defaultKubeAPIBurst {
		t.Errorf("defaults: %+v", f)
	}
	f, _, err = parseStartFlags(t, "--metrics-address=:9999", "--health-probe-bind-address", ":9090",
		"--leader-election", "--client-go-qps=5", "--client-go-burst=10")
	if err != nil {
		t.Fatal(err)
	}
	if f.metricsAddr != ":9999" || f.healthAddr != ":9090" || !f.leaderElect || f.qps != 5 || f.burst != 10 {
		t.Errorf("Metacontroller's spellings: metrics %q health %q leader %v qps %v burst %d", f.metricsAddr, f.healthAddr, f.leaderElect, f.qps, f.burst)
	}
	f, _, err = parseStartFlags(t, "--metrics-addr=:7000", "--leader-elect=true", "--kube-api-qps=7")
	if err != nil {
		t.Fatal(err)
	}
	if f.metricsAddr != ":7000" || !f.leaderElect || f.qps != 7 {
		t.Errorf("dctl's spellings: %+v", f)
	}
	// Both spellings with the same value (also written differently) agree.
	if _, _, err := parseStartFlags(t, "--kube-api-qps=5", "--client-go-qps=5.0", "--leader-elect", "--leader-election=true"); err != nil {
		t.Errorf("same values: %v", err)
	}
}

// TestMetacontrollerFlagConflicts: two spellings of one setting with
// different values, and invalid values, are usage errors.
func TestMetacontrollerFlagConflicts(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--metrics-addr=:8080", "--metrics-address=:9999"}, "--metrics-addr=:8080 and --metrics-address=:9999 are the same setting with different values"},
		{[]string{"--health-probe-bind-address=:1", "--health-addr=:2"}, "--health-addr=:2 and --health-probe-bind-address=:1"},
		{[]string{"--leader-elect", "--leader-election=false"}, "--leader-elect=true and --leader-election=false"},
		{[]string{"--client-go-burst=10", "--kube-api-burst=20"}, "--kube-api-burst=20 and --client-go-burst=10"},
		{[]string{"--kube-api-qps=1.50", "--client-go-qps=2e0"}, "--kube-api-qps=1.50 and --client-go-qps=2e0"}, // as typed
		{[]string{"--events-qps=NaN"}, "--events-qps: want a positive number, or 0 for no bound, got NaN"},
		{[]string{"--apply-strategy=patch"}, `--apply-strategy: unknown apply strategy "patch"`},
		{[]string{"--target-label-selector=a in (b"}, "--target-label-selector:"},
		{[]string{"--workers=0"}, "--workers: want a positive number"},
		{[]string{"--cache-flush-interval=-1s"}, "--cache-flush-interval: want a positive duration, or 0"},
		{[]string{"--events-qps=-1"}, "--events-qps: want a positive number, or 0 for no bound, got -1"},
		{[]string{"--events-burst=-3"}, "--events-burst: want a positive number, or 0 for no bound, got -3"},
	} {
		_, _, err := parseStartFlags(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want it to contain %q", tc.args, err, tc.want)
		}
	}
}

// TestMetacontrollerFlagOptions: Metacontroller's own flags reach the
// metacontroller and manager options with Metacontroller's defaults.
func TestMetacontrollerFlagOptions(t *testing.T) {
	f, mf, err := parseStartFlags(t)
	if err != nil {
		t.Fatal(err)
	}
	o := mf.options(f.logger(io.Discard))
	if o.TargetSelector != nil || o.ApplyStrategy != metacontroller.DynamicApply || o.FieldManager != "metacontroller" ||
		o.Workers != 5 || o.DiscoveryInterval != 30*time.Second || o.EventsQPS != 1.0/300 || o.EventsBurst != 25 ||
		f.pprofAddr != "0" || f.leaderElectionID != "dcontroller-manager" || f.leaderElectionLock != "leases" || f.syncPeriod != 0 {
		t.Errorf("defaults: %+v %+v", o, f)
	}
	f, mf, err = parseStartFlags(t, "--target-label-selector=controller-group=cicd", "--apply-strategy=server-side-apply",
		"--apply-strategy-ssa-field-manager=team-a", "--workers=100", "--discovery-interval=20s", "--cache-flush-interval=30m",
		"--events-qps=2", "--events-burst=3", "--pprof-address=127.0.0.1:6060", "--leader-election-id=metacontroller",
		"--leader-election-resource-lock=leases", "--leader-election-namespace=metacontroller", "--zap-log-level=4", "--zap-devel")
	if err != nil {
		t.Fatal(err)
	}
	o = mf.options(f.logger(io.Discard))
	if o.TargetSelector.String() != "controller-group=cicd" || o.ApplyStrategy != metacontroller.ServerSideApply || o.FieldManager != "team-a" ||
		o.Workers != 100 || o.DiscoveryInterval != 20*time.Second || o.EventsQPS != 2 || o.EventsBurst != 3 ||
		f.pprofAddr != "127.0.0.1:6060" || f.leaderElectionID != "metacontroller" || f.leaderElectionNS != "metacontroller" ||
		f.syncPeriod != 30*time.Minute || !mf.zap.Development {
		t.Errorf("set: %+v %+v", o, f)
	}
}

// TestHookLimitFlags: the --hook-max-* flags default to the hook package's
// limits, set them, and refuse a bound that is not positive.
func TestHookLimitFlags(t *testing.T) {
	_, mf, err := parseStartFlags(t)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := mf.options(logr.Discard()).HookLimits, (hook.Limits{ResponseBytes: hook.DefaultResponseBytes, Objects: hook.DefaultObjects,
		ObjectBytes: hook.DefaultObjectBytes, Values: hook.DefaultValues, Depth: hook.DefaultDepth}); got != want {
		t.Errorf("defaults %+v, want %+v", got, want)
	}
	_, mf, err = parseStartFlags(t, "--hook-max-response-bytes=8Mi", "--hook-max-objects=50", "--hook-max-object-bytes=100Ki",
		"--hook-max-values=1000", "--hook-max-depth=20")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := mf.options(logr.Discard()).HookLimits, (hook.Limits{ResponseBytes: 8 << 20, Objects: 50, ObjectBytes: 100 << 10,
		Values: 1000, Depth: 20}); got != want {
		t.Errorf("set %+v, want %+v", got, want)
	}
	for _, arg := range []string{"--hook-max-response-bytes=0", "--hook-max-objects=0", "--hook-max-object-bytes=-1",
		"--hook-max-values=-5", "--hook-max-depth=0", "--hook-max-depth=10001"} {
		name := strings.SplitN(strings.TrimPrefix(arg, "--"), "=", 2)[0]
		if _, _, err := parseStartFlags(t, arg); err == nil || !strings.HasPrefix(err.Error(), "--"+name+": ") {
			t.Errorf("%s: %v, want an error naming the flag", arg, err)
		}
	}
}
