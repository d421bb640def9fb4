package sharding

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// probe creates the ConfigMap the fence tests write to.
func probe(t *testing.T, c *cluster) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: "probe"}, Data: map[string]string{"n": "0"}}
	cm, err := c.cs.CoreV1().ConfigMaps(c.ns).Create(context.Background(), cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func rvOf(t *testing.T, c *cluster, name string) string {
	t.Helper()
	cm, err := c.cs.CoreV1().ConfigMaps(c.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm.ResourceVersion
}

// TestRingFenceRefusesWrites: a sync that holds a bucket's guard keeps
// it across a lost member Lease (the ring waits for the guard until the
// Lease could expire), but its writes through FenceWrites are refused
// once the last renewal is older than the renew deadline, and nothing
// reaches the API server.
func TestRingFenceRefusesWrites(t *testing.T) {
	c := newCluster(t)
	a := c.start("a")
	c.converged(10 * time.Second)
	probe(t, c)
	kc, err := client.New(restConfig, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := FenceWrites(kc, a.ring)
	patch := func(n int) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: "probe"}}
		return w.Patch(context.Background(), cm, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"data":{"n":"%d"}}`, n)))
	}
	release, ok := a.ring.Acquire("uid-1")
	if !ok {
		t.Fatal("a alone does not own uid-1")
	}
	defer release()
	if err := a.ring.Fence(); err != nil {
		t.Fatalf("Fence of a live member: %v", err)
	}
	if err := patch(1); err != nil {
		t.Fatalf("a write while the fence is held: %v", err)
	}

	a.down.Store(true)
	time.Sleep(testRenew + testRetry)
	before := rvOf(t, c, "probe")
	writes := map[string]error{
		"patch":  patch(2),
		"create": w.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: "new"}}),
		"delete": w.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: "probe"}}),
		"status": w.Status().Update(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: "probe"}}),
	}
	for verb, err := range writes {
		if !errors.Is(err, ErrNotFenced) || !strings.Contains(err.Error(), "past the renew deadline 2s; write refused") {
			t.Errorf("%s after the renew deadline: %v, want the not-fenced error", verb, err)
		}
	}
	if after := rvOf(t, c, "probe"); after != before {
		t.Errorf("the probe changed (resourceVersion %s, then %s) after the renew deadline", before, after)
	}
	if _, err := c.cs.CoreV1().ConfigMaps(c.ns).Get(context.Background(), "new", metav1.GetOptions{}); err == nil {
		t.Error("a ConfigMap was created after the renew deadline")
	}
	if r2, ok := a.ring.Acquire("uid-1"); ok {
		r2()
		t.Error("Acquire succeeded after the renew deadline")
	}
	release()
	if err := c.wait("a"); !errors.Is(err, errLost) {
		t.Errorf("a: Start returned %v, want the lost member lease error", err)
	}
}

// stoppableMemberEnv, when set, makes the test binary run
// runStoppableMember instead of the tests: a ring member in a process of
// its own that the test can stop and resume (SIGSTOP, SIGCONT).
const stoppableMemberEnv = "SHARDING_TEST_STOPPABLE_MEMBER"

// memberConfig is what the stoppable member needs to reach the API server.
type memberConfig struct {
	Host, Namespace           string
	CAData, CertData, KeyData []byte
	QPS                       float32
	Burst                     int
}

// runStoppableMember joins ring "test" as member "stopped", waits for
// every bucket, then, as one long sync holding a guard, patches the
// ConfigMap "probe" every millisecond through FenceWrites until its
// handler is told to release, and three times more. It prints "syncing"
// once it writes, "refused" at the first refused write, and what Start
// returned.
func runStoppableMember() int {
	var mc memberConfig
	if err := json.Unmarshal([]byte(os.Getenv(stoppableMemberEnv)), &mc); err != nil {
		fmt.Println(err)
		return 2
	}
	cfg := &rest.Config{Host: mc.Host, TLSClientConfig: rest.TLSClientConfig{CAData: mc.CAData, CertData: mc.CertData, KeyData: mc.KeyData},
		QPS: mc.QPS, Burst: mc.Burst}
	r, err := New(Options{Client: kubernetes.NewForConfigOrDie(cfg), Namespace: mc.Namespace, Ring: "test", Identity: "stopped",
		LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: testRetry})
	if err != nil {
		fmt.Println(err)
		return 2
	}
	kc, err := client.New(cfg, client.Options{})
	if err != nil {
		fmt.Println(err)
		return 2
	}
	w := FenceWrites(kc, r)
	released := make(chan struct{})
	var once sync.Once
	r.OnChange(func(_, rel BucketSet) {
		if rel != 0 {
			once.Do(func() { close(released) })
		}
	})
	done := make(chan error, 1)
	go func() { done <- r.Start(context.Background()) }()
	for r.Held() != AllBuckets {
		select {
		case err := <-done:
			fmt.Println("stopped before it held every bucket:", err)
			return 2
		case <-time.After(10 * time.Millisecond):
		}
	}
	release, ok := r.Acquire("probe")
	if !ok {
		fmt.Println("no guard")
		return 2
	}
	refused, syncing := false, false
	// Writes go on until the handler is told to release, and then a few
	// more: a sync does not look at the ring between its writes, it
	// finishes and gives its guard back.
	left := -1
	for i := 0; left != 0; i++ {
		select {
		case <-released:
			if left < 0 {
				left = 3
			}
		default:
		}
		if left > 0 {
			left--
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: mc.Namespace, Name: "probe"}}
		err := w.Patch(context.Background(), cm, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"data":{"n":"%d"}}`, i)))
		switch {
		case err == nil && !syncing:
			syncing = true
			fmt.Println("syncing")
		case errors.Is(err, ErrNotFenced) && !refused:
			refused = true
			fmt.Println("refused")
		case err != nil && !syncing:
			fmt.Println("write failed:", err)
		}
		time.Sleep(time.Millisecond)
	}
	release()
	fmt.Println("stopped:", <-done)
	return 0
}

// TestRingStoppedMemberWritesNothing: a member process stopped (SIGSTOP)
// in the middle of a sync, past its lease duration, while another member
// takes its buckets over, sends no further write from that sync when it
// is resumed (SIGCONT), at most the one that was on its way, renews
// nothing, and gives all work up.
func TestRingStoppedMemberWritesNothing(t *testing.T) {
	c := newCluster(t)
	probe(t, c)
	env, err := json.Marshal(memberConfig{Host: restConfig.Host, Namespace: c.ns, CAData: restConfig.CAData,
		CertData: restConfig.CertData, KeyData: restConfig.KeyData, QPS: restConfig.QPS, Burst: restConfig.Burst})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), stoppableMemberEnv+"="+string(env))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	expect := func(want string, within time.Duration) {
		t.Helper()
		timeout := time.After(within)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the member exited before printing %q", want)
				}
				if strings.HasPrefix(l, want) {
					t.Logf("member: %s", l)
					return
				}
				t.Logf("member: %s", l)
			case <-timeout:
				t.Fatalf("the member did not print %q within %s", want, within)
			}
		}
	}
	expect("syncing", 20*time.Second)
	time.Sleep(100 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	// Every write of the probe from here on is the resumed member's.
	watch, err := c.cs.CoreV1().ConfigMaps(c.ns).Watch(context.Background(), metav1.ListOptions{
		FieldSelector: "metadata.name=probe", ResourceVersion: rvOf(t, c, "probe")})
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Stop()

	// b joins and takes every bucket once the stopped member's Lease
	// expired on its clock.
	b := c.start("b")
	deadline := time.Now().Add(3 * testLease)
	for b.ring.Held() != AllBuckets {
		if time.Now().After(deadline) {
			t.Fatalf("b holds %s, want every bucket", b.ring.Held())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	expect("stopped: sharding: ring \"test\" member \"stopped\": lost the member lease", 10*time.Second)
	if err := cmd.Wait(); err != nil {
		t.Errorf("the member exited with %v", err)
	}
	// A write whose fence check passed just before the stop and whose
	// request was already on its way to the API server is sent when the
	// process resumes: no check in the process can call it back. One such
	// write at most; the rest of the sync is refused.
	var late []string
	for drained := false; !drained; {
		select {
		case ev := <-watch.ResultChan():
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok {
				late = append(late, fmt.Sprintf("%s n=%s", ev.Type, cm.Data["n"]))
			}
		case <-time.After(time.Second):
			drained = true
		}
	}
	if len(late) > 1 {
		t.Errorf("the resumed member wrote the probe %d times: %v; want at most the one write that was on its way", len(late), late)
	} else if len(late) == 1 {
		t.Logf("one write was on its way when the member was stopped: %v", late)
	}
	le, err := c.cs.CoordinationV1().Leases(c.ns).Get(context.Background(), memberLeaseName("test", "stopped"), metav1.GetOptions{})
	if err == nil && le.Spec.RenewTime != nil && time.Since(le.Spec.RenewTime.Time) < testLease {
		t.Errorf("the resumed member renewed its Lease at %s", le.Spec.RenewTime.Time)
	}
}

// TestRingPeerLeaseDurationCapped: a peer whose Lease claims the largest
// leaseDurationSeconds and then stops renewing keeps its buckets for
// MaxPeerLeaseDuration at most, not 68 years.
func TestRingPeerLeaseDurationCapped(t *testing.T) {
	c := newCluster(t)
	c.maxPeerLease = 2 * testLease
	leases := c.cs.CoordinationV1().Leases(c.ns)
	now := metav1.NewMicroTime(time.Now())
	ctx := context.Background()
	if _, err := leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: memberLeaseName("test", "peer"), Labels: map[string]string{LabelRing: "test", LabelRole: roleMember}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("peer"), LeaseDurationSeconds: ptr.To(int32(math.MaxInt32)),
			AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for b := range Buckets {
		if _, err := leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: bucketLeaseName("test", b), Labels: map[string]string{LabelRing: "test", LabelRole: roleBucket}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("peer"), AcquireTime: &now, RenewTime: &now},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	a := c.start("a")
	deadline := start.Add(c.maxPeerLease + 3*time.Second)
	for a.ring.Held() != AllBuckets {
		if time.Now().After(deadline) {
			t.Fatalf("a holds %q %s after a start, want every bucket after the capped peer lease duration %s",
				a.ring.Held(), time.Since(start).Round(time.Millisecond), c.maxPeerLease)
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(start)
	t.Logf("a took every bucket of the stopped peer %s after it started", took.Round(time.Millisecond))
	if took < c.maxPeerLease-testRetry {
		t.Errorf("a took the peer's buckets after %s, before the peer's capped lease duration %s", took, c.maxPeerLease)
	}
}
