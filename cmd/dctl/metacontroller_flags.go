package main

import (
	goflag "flag"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/dcontroller/dcontroller/internal/events"
	"github.com/dcontroller/dcontroller/pkg/metacontroller"
	"github.com/dcontroller/dcontroller/pkg/metacontroller/hook"
	"github.com/dcontroller/dcontroller/pkg/operator"
)

// metacontrollerFlags are the command-line flags of Metacontroller's
// server (metacontroller/metacontroller main.go and docs/src/guide/
// configuration.md), accepted by dctl start with the same meaning so that
// Metacontroller's Deployment args run unchanged. Where dctl start already
// had a flag for the same setting, Metacontroller's spelling is an alias
// of it (same variable, dctl's default); the others are new flags with
// Metacontroller's defaults unless their help says otherwise.
type metacontrollerFlags struct {
	targetSelector string
	applyStrategy  string
	fieldManager   string
	workers        int
	discovery      time.Duration
	eventsQPS      float64
	eventsBurst    int
	zap            zap.Options
	zapNames       []string
	aliases        []flagAlias
	hookLimits     hookLimitFlags
}

// hookLimitFlags bound what one hook answer may hold (hook.Limits); they
// are dctl's own, Metacontroller has none.
type hookLimitFlags struct {
	responseBytes resource.QuantityValue
	objects       int
	objectBytes   resource.QuantityValue
	values        int
	depth         int
}

func (h *hookLimitFlags) register(fs *pflag.FlagSet) {
	h.responseBytes.Quantity = *resource.NewQuantity(hook.DefaultResponseBytes, resource.BinarySI)
	h.objectBytes.Quantity = *resource.NewQuantity(hook.DefaultObjectBytes, resource.BinarySI)
	fs.Var(&h.responseBytes, "hook-max-response-bytes",
		"largest body of a webhook's answer (a quantity such as 64Mi); the rest of a longer body is not read and the call fails (InvalidResponse)")
	fs.IntVar(&h.objects, "hook-max-objects", hook.DefaultObjects,
		"most children, attachments or relatedResources rules in one hook answer; an answer with more fails (InvalidResponse) before it is decoded")
	fs.Var(&h.objectBytes, "hook-max-object-bytes",
		"largest JSON of one child, attachment, relatedResources rule or status in a hook answer (a quantity such as 3Mi, the API server's default bound on a write)")
	fs.IntVar(&h.values, "hook-max-values", hook.DefaultValues,
		"most JSON values and object keys in one hook answer (decoding costs about 100 bytes of memory per value)")
	fs.IntVar(&h.depth, "hook-max-depth", hook.DefaultDepth,
		"deepest nesting of objects and arrays in a hook answer (the answer object is depth 1; at most 10000)")
}

// validate refuses a bound that is not positive, or a depth over the
// decoder's own bound.
func (h *hookLimitFlags) validate() error {
	switch {
	case h.responseBytes.Value() <= 0:
		return fmt.Errorf("--hook-max-response-bytes: want a positive quantity, got %s", h.responseBytes.String())
	case h.objects <= 0:
		return fmt.Errorf("--hook-max-objects: want a positive number, got %d", h.objects)
	case h.objectBytes.Value() <= 0:
		return fmt.Errorf("--hook-max-object-bytes: want a positive quantity, got %s", h.objectBytes.String())
	case h.values <= 0:
		return fmt.Errorf("--hook-max-values: want a positive number, got %d", h.values)
	case h.depth <= 0 || h.depth > 10000:
		return fmt.Errorf("--hook-max-depth: want a number from 1 to 10000, got %d", h.depth)
	}
	return nil
}

func (h *hookLimitFlags) limits() hook.Limits {
	return hook.Limits{ResponseBytes: h.responseBytes.Value(), Objects: h.objects, ObjectBytes: h.objectBytes.Value(),
		Values: h.values, Depth: h.depth}
}

// flagAlias is a second spelling of a flag; both write one variable.
type flagAlias struct {
	name, alias string
	byName      *spelling
	byAlias     *spelling
}

// spelling is one spelling of a flag: it sets the shared value and keeps
// what it set it to (got, compared) and what was typed (typed, shown), so
// that two spellings given different values can be told apart from one
// given twice.
type spelling struct {
	pflag.Value
	got, typed string
}

func (s *spelling) Set(v string) error {
	if err := s.Value.Set(v); err != nil {
		return err
	}
	s.got, s.typed = s.Value.String(), v
	return nil
}

// register adds Metacontroller's flags to cmd, whose manager flags f
// (managerFlags.register) are already registered.
func (m *metacontrollerFlags) register(cmd *cobra.Command, f *managerFlags) {
	fs := cmd.Flags()
	m.alias(fs, "metrics-addr", "metrics-address")
	m.alias(fs, "health-addr", "health-probe-bind-address")
	m.alias(fs, "leader-elect", "leader-election")
	m.alias(fs, "kube-api-qps", "client-go-qps")
	m.alias(fs, "kube-api-burst", "client-go-burst")
	// Metacontroller accepts a burst with a negative QPS (client-go ignores
	// it): its spelling is not refused then, only logged (burstIgnored).
	fs.Lookup("client-go-burst").Usage += "; with a negative QPS it has no effect and is logged, not refused, as Metacontroller accepts it"
	// --leader-election-namespace is spelt the same by both.

	fs.StringVar(&m.targetSelector, "target-label-selector", "",
		"run only the CompositeControllers and DecoratorControllers whose labels match this label selector (e.g. 'controller-group=cicd' or 'tier in (a,b)'); "+
			"the others are ignored entirely: not started, no status, no Events, their parents and children untouched. "+
			"Lets several managers split the controllers of one cluster (empty: all controllers)")
	fs.StringVar(&m.applyStrategy, "apply-strategy", string(metacontroller.DynamicApply),
		`how children are written: "dynamic-apply" (merge into the observed child in the style of kubectl apply, with the `+
			`metacontroller.k8s.io/last-applied-configuration annotation, then update) or "server-side-apply" (a server-side apply `+
			`patch of the desired child under --apply-strategy-ssa-field-manager, forcing ownership of its fields)`)
	fs.StringVar(&m.fieldManager, "apply-strategy-ssa-field-manager", metacontroller.DefaultFieldManager,
		"field manager of the server-side apply writes of children (with --apply-strategy=server-side-apply)")
	fs.IntVar(&m.workers, "workers", metacontroller.DefaultWorkers,
		"parents each CompositeController or DecoratorController syncs in parallel")
	fs.DurationVar(&m.discovery, "discovery-interval", 30*time.Second,
		"the longest wait before a CompositeController or DecoratorController whose resources are not served yet looks them up "+
			"in discovery again (newly installed CRDs are picked up within it); resources a running controller already uses are resolved once")
	fs.DurationVar(&f.syncPeriod, "cache-flush-interval", 0,
		"how often the informer cache relists every watched object from the API server and redelivers it to the controllers "+
			"(controller-runtime's SyncPeriod; 0: its default, 10h with jitter; Metacontroller's default is 30m)")
	fs.Float64Var(&m.eventsQPS, "events-qps", events.DefaultQPS,
		"Events per second recorded about each object, after --events-burst (default one per 5 minutes); further Events are dropped (0: no bound)")
	fs.IntVar(&m.eventsBurst, "events-burst", events.DefaultBurst,
		"Events recorded about each object in a burst before --events-qps applies (0: no bound)")
	fs.StringVar(&f.pprofAddr, "pprof-address", "0",
		`serve Go's net/http/pprof profiles under /debug/pprof/ on this address ("0" or empty: off). `+
			`Profiles show the process's internals and cost CPU while taken: bind to loopback (e.g. 127.0.0.1:6060) and reach it with kubectl port-forward`)
	fs.StringVar(&f.leaderElectionID, "leader-election-id", operator.DefaultLeaderElectionID,
		"name of the leader-election lock (with --leader-elect); replicas with the same id elect one leader")
	fs.StringVar(&f.leaderElectionLock, "leader-election-resource-lock", "leases",
		`kind of the leader-election lock; client-go has only "leases" now (Metacontroller's older kinds are refused)`)

	m.hookLimits.register(fs)

	// Metacontroller's logging flags are controller-runtime's zap flags.
	gfs := goflag.NewFlagSet("zap", goflag.ContinueOnError)
	m.zap.BindFlags(gfs)
	gfs.VisitAll(func(gf *goflag.Flag) {
		m.zapNames = append(m.zapNames, gf.Name)
		gf.Usage += " (when any --zap-* flag is given, they replace --verbosity and --log-json)"
	})
	fs.AddGoFlagSet(gfs)
}

// alias registers alias as a second spelling of the flag name.
func (m *metacontrollerFlags) alias(fs *pflag.FlagSet, name, alias string) {
	fl := fs.Lookup(name)
	shared := fl.Value
	byName := &spelling{Value: shared}
	byAlias := &spelling{Value: shared}
	fl.Value = byName
	fl.Usage += fmt.Sprintf(" (Metacontroller's spelling: --%s)", alias)
	al := fs.VarPF(byAlias, alias, "", fmt.Sprintf("the same setting as --%s, in Metacontroller's spelling", name))
	al.DefValue = fl.DefValue
	al.NoOptDefVal = fl.NoOptDefVal
	m.aliases = append(m.aliases, flagAlias{name: name, alias: alias, byName: byName, byAlias: byAlias})
}

// validate checks the parsed flags: two spellings of one setting given
// different values, an unknown apply strategy, a malformed selector, a
// worker count or interval out of range, a negative Event rate, a hook
// limit that is not positive.
func (m *metacontrollerFlags) validate(fs *pflag.FlagSet) error {
	for _, a := range m.aliases {
		if fs.Changed(a.name) && fs.Changed(a.alias) && a.byName.got != a.byAlias.got {
			return fmt.Errorf("--%s=%s and --%s=%s are the same setting with different values: give one of them",
				a.name, a.byName.typed, a.alias, a.byAlias.typed)
		}
	}
	if _, err := metacontroller.ParseApplyStrategy(m.applyStrategy); err != nil {
		return fmt.Errorf("--apply-strategy: %w", err)
	}
	if _, err := m.selector(); err != nil {
		return err
	}
	if m.workers <= 0 {
		return fmt.Errorf("--workers: want a positive number, got %d", m.workers)
	}
	if m.discovery <= 0 {
		return fmt.Errorf("--discovery-interval: want a positive duration, got %s", m.discovery)
	}
	// 0 has a meaning for these three (the default period, no bound); a
	// negative value has none and is refused rather than read as 0.
	if d, err := fs.GetDuration("cache-flush-interval"); err == nil && d < 0 {
		return fmt.Errorf("--cache-flush-interval: want a positive duration, or 0 for controller-runtime's default, got %s", d)
	}
	if m.eventsQPS < 0 || math.IsNaN(m.eventsQPS) || math.IsInf(m.eventsQPS, 0) {
		return fmt.Errorf("--events-qps: want a positive number, or 0 for no bound, got %g", m.eventsQPS)
	}
	if m.eventsBurst < 0 {
		return fmt.Errorf("--events-burst: want a positive number, or 0 for no bound, got %d", m.eventsBurst)
	}
	return m.hookLimits.validate()
}

// selector parses --target-label-selector (nil when empty).
func (m *metacontrollerFlags) selector() (labels.Selector, error) {
	if strings.TrimSpace(m.targetSelector) == "" {
		return nil, nil
	}
	sel, err := labels.Parse(m.targetSelector)
	if err != nil {
		return nil, fmt.Errorf("--target-label-selector: %w", err)
	}
	return sel, nil
}

// options are the metacontroller.Options of the flags (validated).
func (m *metacontrollerFlags) options(log logr.Logger) metacontroller.Options {
	sel, _ := m.selector()
	strategy, _ := metacontroller.ParseApplyStrategy(m.applyStrategy)
	return metacontroller.Options{
		Logger:            log,
		Workers:           m.workers,
		TargetSelector:    sel,
		ApplyStrategy:     strategy,
		FieldManager:      m.fieldManager,
		DiscoveryInterval: m.discovery,
		EventsQPS:         m.eventsQPS,
		EventsBurst:       m.eventsBurst,
		HookLimits:        m.hookLimits.limits(),
	}
}

// logger is f's logger, or the zap flags' when any was given.
func (m *metacontrollerFlags) logger(fs *pflag.FlagSet, f *managerFlags, w io.Writer) logr.Logger {
	for _, n := range m.zapNames {
		if fs.Changed(n) {
			return zap.New(zap.UseFlagOptions(&m.zap), zap.WriteTo(w))
		}
	}
	return f.logger(w)
}

// metacontrollerSpellings lists the flags dctl start takes from
// Metacontroller, sorted (for the help text).
func metacontrollerSpellings() string {
	names := []string{"target-label-selector", "apply-strategy", "apply-strategy-ssa-field-manager", "client-go-qps",
		"client-go-burst", "workers", "discovery-interval", "cache-flush-interval", "metrics-address",
		"health-probe-bind-address", "leader-election", "leader-election-resource-lock", "leader-election-namespace",
		"leader-election-id", "events-qps", "events-burst", "pprof-address", "zap-*"}
	sort.Strings(names)
	return "--" + strings.Join(names, ", --")
}
