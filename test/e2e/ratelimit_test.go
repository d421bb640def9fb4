package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// countingProxy forwards plain HTTP on a loopback port to the test
// cluster's API server with the suite's credentials, and records when each
// request arrived: every request a process pointed at it sends, whichever
// of its clients sent it.
type countingProxy struct {
	addr  string
	mu    sync.Mutex
	times []time.Time
	// watches counts the watch requests, which client-go sends without
	// asking its rate limiter (they are long-running: one per informer and
	// reconnection), so they are not in times.
	watches int
}

func startCountingProxy(t *testing.T) *countingProxy {
	t.Helper()
	target, err := url.Parse(restConfig.Host)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := rest.TransportFor(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport, rp.FlushInterval = tr, -1 // watches stream
	p := &countingProxy{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		if r.URL.Query().Get("watch") == "true" {
			p.watches++
		} else {
			p.times = append(p.times, time.Now())
		}
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return p
}

func (p *countingProxy) arrivals() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Time(nil), p.times...)
}

// kubeconfig writes a kubeconfig of the proxy (no credentials: it adds them).
func (p *countingProxy) kubeconfig(t *testing.T, dir string) string {
	path := filepath.Join(dir, "proxy.kubeconfig")
	writeFile(t, path, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: proxy, cluster: {server: "http://%s"}}]
users: [{name: proxy, user: {}}]
contexts: [{name: proxy, context: {cluster: proxy, user: proxy}}]
current-context: proxy
`, p.addr))
	return path
}

// maxExcess is the most any window of arrivals holds over a token bucket's
// bound qps*(window length)+burst, and the window.
func maxExcess(times []time.Time, qps float64, burst int) (excess float64, from, to int) {
	excess = -1e9
	for i := range times {
		for j := i; j < len(times); j++ {
			n := float64(j - i + 1)
			if e := n - (qps*times[j].Sub(times[i]).Seconds() + float64(burst)); e > excess {
				excess, from, to = e, i, j
			}
		}
	}
	return excess, from, to
}

// TestKubeAPIQPSBoundsTheManager: `dctl run --kube-api-qps=10
// --kube-api-burst=10` with an Operator that annotates 40 ConfigMaps and 40
// Secrets (two kinds: controller-runtime writes each through a REST client
// of its own, and lists and watches each through others) sends, all clients
// together, no more requests in any window of time than a token bucket of
// 10 per second and 10 in a burst lets through, as counted by a proxy in
// front of the API server. Watches are not counted: client-go sends them
// without asking the rate limiter.
func TestKubeAPIQPSBoundsTheManager(t *testing.T) {
	const n, qps, burst = 40, 10, 10
	ctx := context.Background()
	ns := "ratelimit"
	if err := k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("obj-%d", i)
		if err := k8sClient.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}); err != nil {
			t.Fatal(err)
		}
		if err := k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	controller := func(kind string) string {
		return fmt.Sprintf(`
    - name: %[1]s
      sources: [{apiGroup: "", kind: %[1]s, namespace: %[2]s}]
      pipeline:
        "@project":
          metadata:
            name: "$.metadata.name"
            namespace: "$.metadata.namespace"
            annotations: {"dcontroller.io/seen": "yes"}
      target: {apiGroup: "", kind: %[1]s, type: Patcher}`, kind, ns)
	}
	writeFile(t, filepath.Join(dir, "op.yaml"), `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: annotate-both
spec:
  controllers:`+controller("ConfigMap")+controller("Secret")+"\n")
	proxy := startCountingProxy(t)
	started := time.Now()
	startDctlEnv(t, dir, []string{"KUBECONFIG=" + proxy.kubeconfig(t, dir)}, "run", "-f", "op.yaml",
		fmt.Sprintf("--kube-api-qps=%d", qps), fmt.Sprintf("--kube-api-burst=%d", burst))
	annotated := func(list client.ObjectList) int {
		if err := k8sClient.List(ctx, list, client.InNamespace(ns)); err != nil {
			return -1
		}
		c := 0
		var objs []metav1.Object
		switch l := list.(type) {
		case *corev1.ConfigMapList:
			for i := range l.Items {
				objs = append(objs, &l.Items[i])
			}
		case *corev1.SecretList:
			for i := range l.Items {
				objs = append(objs, &l.Items[i])
			}
		}
		for _, o := range objs {
			if o.GetAnnotations()["dcontroller.io/seen"] == "yes" {
				c++
			}
		}
		return c
	}
	eventually(t, 90*time.Second, func() string {
		if cm, s := annotated(&corev1.ConfigMapList{}), annotated(&corev1.SecretList{}); cm < n || s < n {
			return fmt.Sprintf("%d ConfigMaps and %d Secrets annotated, want %d each", cm, s, n)
		}
		return ""
	})
	settled := time.Since(started)
	times := proxy.arrivals()
	excess, from, to := maxExcess(times, qps, burst)
	t.Logf("%d requests (and %d watches) in %s until settled (%.1f/s); most over the bound in any window: %.1f (requests %d..%d, %s)",
		len(times), proxy.watches, settled.Round(time.Millisecond), float64(len(times))/settled.Seconds(), excess, from, to, times[to].Sub(times[from]).Round(time.Millisecond))
	// 1 request of slack: arrival times differ from send times by the
	// proxy's and the network's jitter.
	if excess > 1 {
		t.Errorf("%d requests between %s and %s after the first: a bucket of %d/s and %d allows %.1f",
			to-from+1, times[from].Sub(times[0]).Round(time.Millisecond), times[to].Sub(times[0]).Round(time.Millisecond),
			qps, burst, qps*times[to].Sub(times[from]).Seconds()+burst)
	}
}
