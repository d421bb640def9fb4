package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"

	"github.com/dcontroller/dcontroller/pkg/apiserver"
	"github.com/dcontroller/dcontroller/pkg/metacontroller"
	"github.com/dcontroller/dcontroller/pkg/operator"
	"github.com/dcontroller/dcontroller/pkg/sharding"
)

// shardingFlags are dctl start's scale-out flags: with --sharding, the
// replicas of a ring are all active and split the work (docs/scale-out.md).
type shardingFlags struct {
	enabled   bool
	namespace string
	ring      string
	identity  string
	address   string
	lease     time.Duration
	renew     time.Duration
	retry     time.Duration
	maxPeer   time.Duration
}

func (s *shardingFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.BoolVar(&s.enabled, "sharding", false,
		"run as one active member of a ring of replicas that split the operators and the Metacontroller parents between them "+
			"(Leases in --sharding-namespace; not with --leader-elect); see docs/scale-out.md")
	fs.StringVar(&s.namespace, "sharding-namespace", "", "namespace of the ring's Leases (default: --leader-election-namespace)")
	fs.StringVar(&s.ring, "sharding-ring", sharding.DefaultRing, "name of the ring; replicas with the same ring and namespace share the work")
	fs.StringVar(&s.identity, "sharding-identity", "", "this member's name in the ring, a DNS label (default: $POD_NAME, else the host name and a random suffix)")
	fs.StringVar(&s.address, "sharding-address", "", "host:port where the other members reach this member's view API server (published on its Lease)")
	fs.DurationVar(&s.lease, "sharding-lease-duration", sharding.DefaultLeaseDuration, "how long a member that stopped renewing its Lease still counts as live; its work moves after that")
	fs.DurationVar(&s.renew, "sharding-renew-deadline", sharding.DefaultRenewDeadline, "a member that could not renew its Lease for this long stops all work and exits (shorter than the lease duration)")
	fs.DurationVar(&s.retry, "sharding-retry-period", sharding.DefaultRetryPeriod, "how often a member renews its Lease and rebalances")
	fs.DurationVar(&s.maxPeer, "sharding-max-peer-lease-duration", 0,
		"cap on the lease duration another member publishes on its Lease (spec.leaseDurationSeconds): how long its buckets stay its own at most "+
			"after it stops renewing (0: 4 times --sharding-lease-duration; at least --sharding-lease-duration)")
}

// validate checks the flags against each other and the manager flags.
func (s *shardingFlags) validate(f *managerFlags, fs *pflag.FlagSet) error {
	if !s.enabled {
		var set []string
		fs.Visit(func(fl *pflag.Flag) {
			if strings.HasPrefix(fl.Name, "sharding-") {
				set = append(set, "--"+fl.Name)
			}
		})
		if len(set) > 0 {
			return fmt.Errorf("%s: the --sharding-* flags apply only with --sharding", strings.Join(set, ", "))
		}
		return nil
	}
	if s.address != "" {
		host, port, err := net.SplitHostPort(s.address)
		if err != nil {
			return fmt.Errorf("--sharding-address %q: want HOST:PORT: %w", s.address, err)
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return fmt.Errorf("--sharding-address %q: port %q is not a number in 1-65535", s.address, port)
		}
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			return fmt.Errorf("--sharding-address %q: give the host or IP the other members reach this member at, not an unspecified address", s.address)
		}
	}
	if f.leaderElect {
		return errors.New("--sharding and --leader-elect exclude each other: with --sharding every replica is active and the Leases of the ring fence the work")
	}
	if s.lease <= 0 || s.renew <= 0 || s.retry <= 0 {
		return errors.New("--sharding-lease-duration, --sharding-renew-deadline and --sharding-retry-period must be positive")
	}
	if s.identity == "" {
		s.identity = os.Getenv("POD_NAME")
	}
	if s.identity == "" {
		s.identity = sharding.DefaultIdentity()
	}
	// Every request of a member names it, so that the API server's audit
	// log tells the members' writes apart.
	f.userAgent = fmt.Sprintf("dctl/%s (sharding member %s)", version, s.identity)
	if s.renew >= s.lease {
		return fmt.Errorf("--sharding-renew-deadline (%s) must be shorter than --sharding-lease-duration (%s)", s.renew, s.lease)
	}
	if s.retry >= s.renew {
		return fmt.Errorf("--sharding-retry-period (%s) must be shorter than --sharding-renew-deadline (%s)", s.retry, s.renew)
	}
	if s.maxPeer < 0 || (s.maxPeer > 0 && s.maxPeer < s.lease) {
		return fmt.Errorf("--sharding-max-peer-lease-duration (%s) must not be shorter than --sharding-lease-duration (%s) (0: 4 times it)", s.maxPeer, s.lease)
	}
	return nil
}

// newRing builds the member's Ring (nil when sharding is off).
func (s *shardingFlags) newRing(cfg *rest.Config, f *managerFlags, rec events.EventRecorder, stats func() map[string]int64, log logr.Logger) (*sharding.Ring, error) {
	if !s.enabled {
		return nil, nil
	}
	// The member Leases get a rate-limit bucket of their own (ownBucket).
	cs, err := kubernetes.NewForConfig(ownBucket(cfg))
	if err != nil {
		return nil, err
	}
	ns := s.namespace
	if ns == "" {
		ns = f.leaderElectionNS
	}
	// The ring's Leases live there: a namespace that does not exist would
	// only show as a lost member Lease later.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("the ring's namespace %q (--sharding-namespace, default --leader-election-namespace) does not exist: create it first", ns)
	}
	return sharding.New(sharding.Options{
		Client: cs, Namespace: ns, Ring: s.ring, Identity: s.identity, Address: s.address,
		LeaseDuration: s.lease, RenewDeadline: s.renew, RetryPeriod: s.retry, MaxPeerLeaseDuration: s.maxPeer,
		Stats: stats, Recorder: rec, Logger: log.WithName("sharding"),
	})
}

// shardStats is what a member publishes on its Lease for `dctl status`:
// the Operators it runs, the hook-controller parents it works and the
// syncs it ran, and the objects its informers received (list items and
// watch events).
func shardStats(rt *operator.Runtime, mc *metacontroller.Counters) func() map[string]int64 {
	return func() map[string]int64 {
		return map[string]int64{
			"operators":   int64(len(rt.Names())),
			"parents":     mc.Parents(),
			"syncs":       mc.Syncs.Load(),
			"watchEvents": rt.WatchEvents(),
		}
	}
}

// viewRoute is the view API server's apiserver.Options.Route of a member:
// an operator's views are local when its name's bucket is held here, and
// otherwise at the member holding it; those of a namespace-sharded
// operator are at the member holding the namespace's bucket.
func viewRoute(ring *sharding.Ring, r client.Reader) func(op, namespace string) apiserver.Route {
	return func(op, namespace string) apiserver.Route {
		b := sharding.NameBucket(op)
		o := &opv1a1.Operator{}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := r.Get(ctx, types.NamespacedName{Name: op}, o); err == nil && o.Spec.Sharding == opv1a1.ShardByNamespace {
			if namespace == "" {
				return apiserver.Route{Split: true}
			}
			b = sharding.Bucket(namespace)
		}
		if ring.OwnsBucket(b) {
			return apiserver.Route{Local: true}
		}
		for _, m := range ring.Members() {
			if m.Live && m.Held.Has(b) {
				return apiserver.Route{Member: m.Identity, Address: m.Address}
			}
		}
		return apiserver.Route{}
	}
}
