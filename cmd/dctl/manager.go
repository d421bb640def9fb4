package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/dcontroller/dcontroller/pkg/controller"
	"github.com/dcontroller/dcontroller/pkg/expression"
	"github.com/dcontroller/dcontroller/pkg/operator"
)

// managerFlags are the flags dctl start and dctl run share.
type managerFlags struct {
	kubeconfig       string
	metricsAddr      string
	healthAddr       string
	leaderElect      bool
	leaderElectionNS string
	verbosity        int
	logJSON          bool
	qps              float32
	burst            int
	compression      bool
	contentType      string
	limits           limitFlags
	// Set by Metacontroller's flags (dctl start only; metacontrollerFlags).
	syncPeriod         time.Duration
	pprofAddr          string
	leaderElectionID   string
	leaderElectionLock string
	// userAgent, when set, replaces client-go's default User-Agent.
	userAgent string
	// releaseStartupAfter is the wait after the caches' sync before the
	// last release of the pages only start-up used (0: no release at all).
	releaseStartupAfter time.Duration
}

// limitFlags are the bounds of what one change may cost (dctl start, run
// and eval).
type limitFlags struct {
	maxDeltaEntries int
	maxObjectBytes  int
	// The evaluation budget of one expression on one document.
	maxEvalSteps, maxEvalValues, maxEvalBytes int
	// The kinds one operator may make the manager serve.
	maxTargets, maxViewKinds int
}

// kindLimits returns the bounds of the kinds of one operator the flags set.
func (l limitFlags) kindLimits() controller.KindLimits {
	return controller.KindLimits{MaxTargets: l.maxTargets, MaxViewKinds: l.maxViewKinds}
}

// evalLimits returns the evaluation budget the flags set.
func (l limitFlags) evalLimits() expression.Limits {
	return expression.Limits{Steps: int64(l.maxEvalSteps), Values: int64(l.maxEvalValues), Bytes: int64(l.maxEvalBytes)}
}

func (l *limitFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	l.maxDeltaEntries, l.maxObjectBytes = controller.DefaultMaxDeltaEntries, controller.DefaultMaxObjectBytes
	fs.Var((*boundValue)(&l.maxDeltaEntries), "max-delta-entries",
		"the most entries one pipeline stage may emit for one source change, for operators without spec.limits.maxDeltaEntries; "+
			"a change over it is refused and reported in the operator's status (negative: no bound)")
	fs.Var((*boundValue)(&l.maxObjectBytes), "max-object-bytes",
		"the largest target object, in bytes of JSON, that a controller sends to the API server (1.5 MiB is etcd's default request limit); "+
			"a larger one is not sent and its write fails (negative: no bound)")
	l.maxEvalSteps, l.maxEvalValues, l.maxEvalBytes = expression.DefaultMaxSteps, expression.DefaultMaxValues, expression.DefaultMaxBytes
	const evalHelp = "; an evaluation over it fails with an error naming the expression, reported in the operator's status, " +
		"and the other objects and operators run on (negative: no bound)"
	fs.Var((*boundValue)(&l.maxEvalSteps), "max-eval-steps",
		"the most steps (operator calls, list elements visited, @cel cost units) one pipeline expression may take on one object"+evalHelp)
	fs.Var((*boundValue)(&l.maxEvalValues), "max-eval-values",
		"the most values (list elements, map entries, strings) one pipeline expression may build on one object"+evalHelp)
	fs.Var((*boundValue)(&l.maxEvalBytes), "max-eval-bytes",
		"the most bytes (string bytes, 16 per list element or map entry) one pipeline expression may build on one object"+evalHelp)
}

// registerKinds adds the flags bounding the kinds of one operator (dctl
// start and run, which serve views).
func (l *limitFlags) registerKinds(cmd *cobra.Command) {
	fs := cmd.Flags()
	l.maxTargets, l.maxViewKinds = controller.DefaultMaxTargets, controller.DefaultMaxViewKinds
	const kindHelp = "; a controller over it does not run and is reported InvalidSpec in its operator's status, " +
		"and the other controllers and operators run on (negative: no bound)"
	fs.Var((*boundValue)(&l.maxTargets), "max-targets", "the most targets of one controller"+kindHelp)
	fs.Var((*boundValue)(&l.maxViewKinds), "max-view-kinds",
		"the most distinct view kinds the controllers of one operator name, each served by the view API server"+kindHelp)
}

// boundValue is an int flag for a bound: positive, or negative for no
// bound; 0 is refused (it would bound nothing to nothing).
type boundValue int

func (b *boundValue) String() string { return strconv.Itoa(int(*b)) }
func (b *boundValue) Type() string   { return "int" }
func (b *boundValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("want an integer, got %q", s)
	}
	if n == 0 {
		return errors.New("want a positive number, or a negative one for no bound, got 0")
	}
	*b = boundValue(n)
	return nil
}

// Client-side rate limits of the manager's requests to the API server. By
// default there is none (QPS -1), as controller-runtime's GetConfig
// leaves a client whose QPS is unset: API Priority and Fairness protects
// the server, and a client-side token bucket would only hold the manager
// below the rate the server itself admits. --kube-api-qps 0 or more sets
// one token bucket (client-go's rule: QPS 0 means client-go's default of 5,
// a Burst of 0 client-go's default of 10) shared by every client the
// manager builds (restConfig), so the flags bound the manager's total.
const (
	defaultKubeAPIQPS   = -1
	defaultKubeAPIBurst = 0
)

func (f *managerFlags) register(cmd *cobra.Command, metricsDefault, healthDefault string) {
	fs := cmd.Flags()
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
	fs.StringVar(&f.metricsAddr, "metrics-addr", metricsDefault, `address of the Prometheus metrics endpoint ("0" disables it)`)
	fs.StringVar(&f.healthAddr, "health-addr", healthDefault, `address of the /healthz and /readyz endpoints ("0" disables them)`)
	fs.BoolVar(&f.leaderElect, "leader-elect", false, "elect a leader so that only one of several replicas runs operators")
	fs.StringVar(&f.leaderElectionNS, "leader-election-namespace", "dcontroller-system", "namespace of the leader-election Lease")
	fs.IntVarP(&f.verbosity, "verbosity", "v", 0, "log verbosity (0: info, higher: more debug output)")
	fs.BoolVar(&f.logJSON, "log-json", false, "log JSON lines instead of console text")
	f.qps = defaultKubeAPIQPS
	fs.Var(qpsValue{&f.qps}, "kube-api-qps", "requests per second the manager may send to the Kubernetes API server, sustained, "+
		"all its clients together (informers, writes, discovery, events; leader election and sharding Leases have a bucket of their own); "+
		"negative: no client-side limit (API Priority and Fairness protects the server, as with controller-runtime's defaults), 0: client-go's default of 5")
	f.burst = defaultKubeAPIBurst
	fs.Var(burstValue{&f.burst}, "kube-api-burst", "requests the manager may send to the Kubernetes API server in a burst, all its clients together, "+
		"when --kube-api-qps is 0 or more (0: client-go's default of 10); refused with a negative --kube-api-qps, which sets no limit")
	fs.BoolVar(&f.compression, "kube-api-compression", false, "ask the Kubernetes API server for gzip-compressed responses (it compresses responses over 128 KiB and the informers' watches, which start with their list): "+
		"less traffic for more CPU on both sides, worth it below about 1 Gbit/s to the API server; a kubeconfig's disable-compression still turns it off")
	fs.StringVar(&f.contentType, "kube-api-content-type", runtime.ContentTypeProtobuf, "media type the manager's informers ask the Kubernetes API server for the kinds built into it in: "+
		runtime.ContentTypeProtobuf+" (the API server encodes each change once for all its protobuf watchers, as kube-controller-manager's and kubelets' are; "+
		"used when the API server is no newer than dctl's Kubernetes types, else JSON) or "+runtime.ContentTypeJSON+"; custom resources are always JSON")
	fs.DurationVar(&f.releaseStartupAfter, "release-startup-pages-after", defaultReleaseStartupAfter,
		"after each step of the start (initialised, manager built, informers synced) and once more when this long has passed since the sync, "+
			"return the heap's free pages to the system (while the live heap is at most 64 MiB) and unmap the executable's read-only pages the step touched "+
			"and drop its pages from the page cache (a page used again is read from the file on its first use; Linux): an idle dctl start then holds about 20 MB instead of 65 MB (0: never)")
	f.limits.register(cmd)
	f.limits.registerKinds(cmd)
}

// qpsValue is the value of --kube-api-qps: a finite float32. NaN compares
// false with every bound and would pass for "no limit"; an infinite rate is
// what a negative one already says; a positive rate that float32 rounds
// to 0 would silently mean client-go's default. Every negative rate is
// kept as -1 and -0 as 0, so that two spellings of one meaning do not
// conflict. Refused when parsed, so that the error names the spelling
// given.
type qpsValue struct{ p *float32 }

func (v qpsValue) String() string {
	if v.p == nil {
		return ""
	}
	return strconv.FormatFloat(float64(*v.p), 'g', -1, 32)
}

func (v qpsValue) Set(s string) error {
	q, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(q) || math.IsInf(q, 0) || math.Abs(q) > math.MaxFloat32 {
		return fmt.Errorf("want a finite number of requests per second, at most %.3g (negative: no client-side limit)", math.MaxFloat32)
	}
	switch {
	case q < 0:
		*v.p = -1 // every negative rate means the same: no limit
	case q == 0:
		*v.p = 0 // -0 too: client-go's default
	case float32(q) == 0:
		return fmt.Errorf("%s requests per second rounds to 0, which means client-go's default of 5: want at least %.3g", s, math.SmallestNonzeroFloat32)
	default:
		*v.p = float32(q)
	}
	return nil
}

func (qpsValue) Type() string { return "float32" }

// burstValue is the value of --kube-api-burst: a decimal int, 0 or more
// (client-go refuses a negative burst only when it builds the rate
// limiter).
type burstValue struct{ p *int }

func (v burstValue) String() string {
	if v.p == nil {
		return ""
	}
	return strconv.Itoa(*v.p)
}

func (v burstValue) Set(s string) error {
	b, err := strconv.ParseInt(s, 10, strconv.IntSize)
	if err != nil || b < 0 {
		return fmt.Errorf("want a whole number of requests, 0 (client-go's default of 10) to %d", math.MaxInt)
	}
	*v.p = int(b)
	return nil
}

func (burstValue) Type() string { return "int" }

// validate checks the manager flags that only mean something together
// (each flag's own value is checked when it is parsed), before anything
// connects to a cluster: --kube-api-burst given while --kube-api-qps is
// negative (no client-side rate limit, the default) would be ignored
// without a word, and is refused. Metacontroller's spelling
// --client-go-burst is not (see burstIgnored).
func (f *managerFlags) validate(fs *pflag.FlagSet) error {
	if flag, msg := f.burstIgnored(fs); flag == "--kube-api-burst" {
		return errors.New(msg)
	}
	return nil
}

// burstIgnored returns, when a burst was given (--kube-api-burst or, on
// dctl start, Metacontroller's --client-go-burst) while the QPS is negative
// (no client-side rate limit, so no bucket for the burst to size), the
// spelling given and a message saying what to do; "", "" otherwise.
// validate refuses --kube-api-burst; dctl start only logs the message for
// --client-go-burst, since Metacontroller itself accepts a burst with a
// negative --client-go-qps (client-go then ignores it) and its
// Deployment's args must run unchanged.
func (f *managerFlags) burstIgnored(fs *pflag.FlagSet) (flag, msg string) {
	if f.qps >= 0 {
		return "", ""
	}
	for _, p := range [][2]string{{"kube-api-burst", "kube-api-qps"}, {"client-go-burst", "client-go-qps"}} {
		if !fs.Changed(p[0]) {
			continue
		}
		qps := p[1] // the QPS spelling given, else the burst's own
		for _, q := range []string{"kube-api-qps", "client-go-qps"} {
			if fs.Changed(q) {
				qps = q
				break
			}
		}
		return "--" + p[0], fmt.Sprintf("--%s %d has no effect without a client-side rate limit: set --%s to 0 or more "+
			"(negative, the default, means no limit), or drop --%s", p[0], f.burst, qps, p[0])
	}
	return "", ""
}

// logTimeLayout is the time of a log line: RFC 3339 with milliseconds
// (controller-runtime's default has whole seconds, too coarse to order a
// controller's events; klog's lines carry microseconds).
const logTimeLayout = "2006-01-02T15:04:05.000Z07:00"

// logger returns the manager's logger writing to w: console text (JSON
// lines with --log-json) at --verbosity, times in logTimeLayout.
func (f *managerFlags) logger(w io.Writer) logr.Logger {
	return zap.New(zap.WriteTo(w), zap.UseDevMode(!f.logJSON), zap.Level(zapcore.Level(-f.verbosity)),
		zap.StacktraceLevel(zapcore.DPanicLevel), func(o *zap.Options) { o.TimeEncoder = zapcore.TimeEncoderOfLayout(logTimeLayout) })
}

func (f *managerFlags) restConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if f.kubeconfig != "" {
		rules.ExplicitPath = f.kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		in, ierr := rest.InClusterConfig()
		if f.kubeconfig != "" || ierr != nil {
			if f.kubeconfig != "" || !clientcmd.IsEmptyConfig(err) {
				return nil, fmt.Errorf("loading kubeconfig: %w", kubeconfigError(rules, err))
			}
			// No kubeconfig file gave a cluster, and the in-cluster
			// configuration did not either.
			if errors.Is(ierr, rest.ErrNotInCluster) {
				return nil, fmt.Errorf("loading kubeconfig: %w, or run dctl in a cluster (a Pod's service account)", kubeconfigError(rules, err))
			}
			return nil, fmt.Errorf("loading kubeconfig: %w; the in-cluster configuration: %w", kubeconfigError(rules, err), ierr)
		}
		cfg = in
	}
	cfg.QPS = f.qps
	// client-go asks for gzip unless told not to, and the API server then
	// compresses, at gzip level 1, every response over 128 KiB and every
	// watch that starts with its list, as the informers' do, for its whole
	// life (WatchListCompression). Measured on a local
	// control plane (BenchmarkAnnotatePods' profile of the API server),
	// that is about 27 µs of API server CPU per 3 KB Pod, and the
	// manager's decompression about 8 µs more, to save 2 KB of transfer:
	// a loss unless the link carries less than about 1 Gbit/s. kubectl's
	// --disable-compression and the kubeconfig's disable-compression exist
	// for the same reason (kubernetes/kubernetes#112296).
	cfg.DisableCompression = cfg.DisableCompression || !f.compression
	if f.userAgent != "" {
		cfg.UserAgent = f.userAgent
	}
	if f.burst > 0 {
		cfg.Burst = f.burst
	}
	if f.qps >= 0 {
		// One bucket for every client built from cfg or a copy of it
		// (rest.CopyConfig keeps RateLimiter): client-go gives each REST
		// client a bucket of its own otherwise, and controller-runtime
		// builds one REST client per resource, so the flags bounded each
		// kind's requests instead of the manager's.
		qps, burst := cfg.QPS, cfg.Burst
		if qps == 0 {
			qps = rest.DefaultQPS
		}
		if burst <= 0 {
			burst = rest.DefaultBurst
		}
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	}
	return cfg, nil
}

// ownBucket returns a copy of cfg whose clients get a token bucket of their
// own with the same QPS and burst instead of the manager's shared one: the
// leader-election and sharding Lease renewals must not wait behind the
// manager's other requests (kube-controller-manager likewise builds its
// leader-election client apart), or a busy leader would lose its Lease.
func ownBucket(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.RateLimiter = nil
	return c
}

// newManager builds the controller-runtime manager and the operator runtime.
func (f *managerFlags) newManager(log logr.Logger) (ctrl.Manager, *operator.Runtime, error) {
	if f.releaseStartupAfter < 0 {
		return nil, nil, fmt.Errorf("--release-startup-pages-after %s: want 0 (never) or a positive duration", f.releaseStartupAfter)
	}
	if f.contentType != runtime.ContentTypeProtobuf && f.contentType != runtime.ContentTypeJSON {
		return nil, nil, fmt.Errorf("--kube-api-content-type %q: want %s or %s", f.contentType, runtime.ContentTypeProtobuf, runtime.ContentTypeJSON)
	}
	cfg, err := f.restConfig()
	if err != nil {
		return nil, nil, err
	}
	return operator.NewManager(cfg, operator.ManagerOptions{
		MetricsAddr:                f.metricsAddr,
		HealthAddr:                 f.healthAddr,
		LeaderElect:                f.leaderElect,
		LeaderElectionNamespace:    f.leaderElectionNS,
		LeaderElectionID:           f.leaderElectionID,
		LeaderElectionResourceLock: f.leaderElectionLock,
		LeaderElectionConfig:       ownBucket(cfg),
		SyncPeriod:                 f.syncPeriod,
		PprofAddr:                  f.pprofAddr,
		Logger:                     log,
		MaxDeltaEntries:            f.limits.maxDeltaEntries,
		MaxObjectBytes:             f.limits.maxObjectBytes,
		WatchContentType:           f.contentType,
		EvalLimits:                 f.limits.evalLimits(),
		KindLimits:                 f.limits.kindLimits(),
	})
}

func contextOf(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}
