package apiserver

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dcontroller/dcontroller/pkg/auth"
	"github.com/dcontroller/dcontroller/pkg/view"
)

// unreadWatch opens a watch over HTTP/1.1 and does not read it: the client
// that takes the server's memory with watches it does not consume. Its
// receive buffer is shrunk before connecting, so the kernel takes little of
// what the server writes and the server's handler blocks.
func unreadWatch(t testing.TB, addr, path string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: application/json\r\n\r\n", path, addr); err != nil {
		t.Fatal(err)
	}
	return conn
}

// liveHeap returns the live heap after full collections, in bytes.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// steadyHeap waits until the live heap stops changing by more than
// slack between two looks a quarter second apart (at most 10 s) and
// returns it.
func steadyHeap(slack uint64) uint64 {
	last := liveHeap()
	for i := 0; i < 40; i++ {
		time.Sleep(250 * time.Millisecond)
		now := liveHeap()
		if i >= 3 && now < last+slack && last < now+slack {
			return now
		}
		last = now
	}
	return last
}

const teamAWatch = "/apis/op.view.dcontroller.io/v1alpha1/namespaces/team-a/summaries?watch=1"

func summaryKinds() []schema.GroupVersionKind { return []schema.GroupVersionKind{summaryGVK} }

// unreadFanOut opens n unread watches of namespace team-a, writes `writes`
// objects of objBytes each into it, and returns the growth of the live heap
// once the watches have taken what they can. The watches are not bounded
// per user (all of them are the development user's).
func unreadFanOut(t testing.TB, n, writes, objBytes int) uint64 {
	t.Helper()
	store := view.NewStore()
	s, _ := testServer(t, store, Options{Kinds: summaryKinds, MaxWatchesPerUser: -1})
	for i := 0; i < n; i++ {
		unreadWatch(t, s.Addr(), teamAWatch)
	}
	waitFor(t, "watches registered", func() bool { return store.Watchers(summaryGVK) == n })
	before := liveHeap()
	big := strings.Repeat("x", objBytes)
	for i := 0; i < writes; i++ {
		if _, err := store.Create(summary("team-a", fmt.Sprintf("big-%d", i), map[string]any{"data": big})); err != nil {
			t.Fatal(err)
		}
	}
	after := steadyHeap(uint64(objBytes) / 4)
	if after < before {
		return 0
	}
	return after - before
}

// TestUnreadWatchesShareEvents: many watches that do not read take a change
// encoded once, not a copy and an encoding each: the heap grows by a small
// multiple of what was written, whatever the number of watches.
func TestUnreadWatchesShareEvents(t *testing.T) {
	const n, writes, size = 64, 4, 1 << 20
	growth := unreadFanOut(t, n, writes, size)
	t.Logf("%d unread watches, %d writes of %d KiB: heap +%.1f MiB", n, writes, size>>10, float64(growth)/(1<<20))
	if limit := uint64(3 * writes * size); growth > limit {
		t.Errorf("heap grew by %.1f MiB, want at most %.1f MiB (3x what was written): the watches hold copies each",
			float64(growth)/(1<<20), float64(limit)/(1<<20))
	}
}

// readWatch opens a watch and reads its events until the test ends,
// sending the name of each object.
func readWatch(t testing.TB, url string) <-chan string {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("watch: %d", resp.StatusCode)
	}
	t.Cleanup(func() { resp.Body.Close() })
	names := make(chan string, 1024)
	go func() {
		defer close(names)
		dec := json.NewDecoder(resp.Body)
		for {
			var ev struct {
				Object struct {
					Metadata struct{ Name string } `json:"metadata"`
				} `json:"object"`
			}
			if err := dec.Decode(&ev); err != nil {
				return
			}
			names <- ev.Object.Metadata.Name
		}
	}()
	return names
}

// countWatch opens a watch and reads it until the test ends through a
// small buffer (the client keeps nothing of the size of an event), sending
// one value per event: the JSON watch stream ends each event with a
// newline, and the test's objects have none.
func countWatch(t testing.TB, url string) <-chan struct{} {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("watch: %d", resp.StatusCode)
	}
	t.Cleanup(func() { resp.Body.Close() })
	events := make(chan struct{}, 1024)
	go func() {
		defer close(events)
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			for _, b := range buf[:n] {
				if b == '\n' {
					events <- struct{}{}
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return events
}

// TestReadWatchesKeepNoBuffers: watches that read every change keep none
// of its encoding once it is sent; a watch that encoded a large change for
// the others does not keep a buffer of that size for the rest of its life.
func TestReadWatchesKeepNoBuffers(t *testing.T) {
	const n, writes, size = 32, 16, 512 << 10
	store := view.NewStore()
	_, base := testServer(t, store, Options{Kinds: summaryKinds})
	var streams []<-chan struct{}
	for i := 0; i < n; i++ {
		streams = append(streams, countWatch(t, base+teamAWatch))
	}
	waitFor(t, "watches registered", func() bool { return store.Watchers(summaryGVK) == n })
	before := liveHeap()
	big := strings.Repeat("y", size)
	for i := 0; i < writes; i++ {
		if _, err := store.Create(summary("team-a", fmt.Sprintf("big-%d", i), map[string]any{"data": big})); err != nil {
			t.Fatal(err)
		}
	}
	for i, names := range streams {
		for j := 0; j < writes; j++ {
			select {
			case <-names:
			case <-time.After(20 * time.Second):
				t.Fatalf("watch %d: %d of %d events", i, j, writes)
			}
		}
	}
	after := steadyHeap(size / 4)
	growth := int64(after) - int64(before)
	t.Logf("%d watches read %d writes of %d KiB: heap %+.1f MiB", n, writes, size>>10, float64(growth)/(1<<20))
	if limit := int64(4 * size); growth > limit {
		t.Errorf("heap grew by %.1f MiB after every event was read, want at most %.1f MiB: watches keep encoding buffers",
			float64(growth)/(1<<20), float64(limit)/(1<<20))
	}
}

// watchEvent is a watch event as read off the wire.
type watchEvent struct {
	Type   string
	Object json.RawMessage
}

// TestSlowWatchExpires: a watch whose client does not read is closed once
// the changes it holds pass --watch-queue-bytes, with a last ERROR event
// 410 Gone (Expired); the client then lists and watches again.
func TestSlowWatchExpires(t *testing.T) {
	const size = 1 << 20
	store := view.NewStoreWithOptions(view.Options{WatchQueueBytes: 3 * size})
	s, base := testServer(t, store, Options{Kinds: summaryKinds})
	conn := unreadWatch(t, s.Addr(), teamAWatch)
	waitFor(t, "watch registered", func() bool { return store.Watchers(summaryGVK) == 1 })
	big := strings.Repeat("z", size)
	for i := 0; i < 6; i++ {
		if _, err := store.Create(summary("team-a", fmt.Sprintf("big-%d", i), map[string]any{"data": big})); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "slow watch closed", func() bool { return store.Watchers(summaryGVK) == 0 })

	// The client reads at last: the changes it was sent, then the 410.
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(resp.Body)
	var last watchEvent
	events := 0
	for {
		var ev watchEvent
		if err := dec.Decode(&ev); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("after %d events: %v", events, err)
		}
		events++
		last = ev
	}
	var st status
	_ = json.Unmarshal(last.Object, &st)
	var code struct{ Code int }
	_ = json.Unmarshal(last.Object, &code)
	if last.Type != "ERROR" || code.Code != 410 || st.Reason != "Expired" || !strings.Contains(st.Message, "--watch-queue-bytes") {
		t.Fatalf("the slow watch ended after %d events with %s %s, want ERROR 410 Expired naming --watch-queue-bytes", events, last.Type, last.Object)
	}
	if events-1 >= 6 {
		t.Errorf("the slow watch was sent all %d changes before its 410", events-1)
	}

	// It lists again and watches from the list.
	code2, body := get(t, base+"/apis/op.view.dcontroller.io/v1alpha1/namespaces/team-a/summaries", "application/json")
	var list struct {
		Metadata struct{ ResourceVersion string }
		Items    []json.RawMessage
	}
	if err := json.Unmarshal([]byte(body), &list); code2 != 200 || err != nil || len(list.Items) != 6 {
		t.Fatalf("list after the 410: %d, %d items (%v)", code2, len(list.Items), err)
	}
	names := readWatch(t, base+teamAWatch+"&resourceVersion="+list.Metadata.ResourceVersion)
	if _, err := store.Create(summary("team-a", "after", nil)); err != nil {
		t.Fatal(err)
	}
	select {
	case name := <-names:
		if name != "after" {
			t.Errorf("the new watch got %q first, want the change after the list", name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the new watch got nothing")
	}
}

// TestWatchesPerUser: a user may have Options.MaxWatchesPerUser watches
// open, over all kinds; the next gets 429 TooManyRequests with a
// Retry-After, another user still watches, and a closed watch frees its
// place.
func TestWatchesPerUser(t *testing.T) {
	const limit = 3
	certPEM, keyPEM, certFile, keyFile := productionKeys(t)
	key, err := auth.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	otherGVK := schema.GroupVersionKind{Group: "op.view.dcontroller.io", Version: "v1alpha1", Kind: "Other"}
	kinds := func() []schema.GroupVersionKind { return []schema.GroupVersionKind{summaryGVK, otherGVK} }
	s := runServer(t, Options{Addr: "127.0.0.1:0", Mode: Production, CertFile: certFile, KeyFile: keyFile,
		Store: view.NewStore(), Kinds: kinds, MaxWatchesPerUser: limit})
	token := func(user string) string {
		tok, err := auth.IssueToken(key, auth.Claims{Username: user, Namespaces: []string{"team-a"},
			Rules:            []rbacv1.PolicyRule{{APIGroups: []string{"op.view.dcontroller.io"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}}},
			RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	alice, bob := token("alice"), token("bob")
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	base := "https://" + s.Addr() + "/apis/op.view.dcontroller.io/v1alpha1/namespaces/team-a/"
	watchAs := func(tok, resource string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", base+resource+"?watch=1", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	waitFor(t, "served", func() bool {
		resp := watchAs(bob, "summaries")
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	var open []*http.Response
	for i := 0; i < limit; i++ {
		resource := []string{"summaries", "others"}[i%2]
		resp := watchAs(alice, resource)
		if resp.StatusCode != 200 {
			t.Fatalf("alice's watch %d of %s: %d", i+1, resource, resp.StatusCode)
		}
		open = append(open, resp)
	}
	for _, resource := range []string{"summaries", "others"} {
		resp := watchAs(alice, resource)
		if resp.StatusCode == 200 {
			t.Errorf("alice's watch %d (of %s) is served, want 429 TooManyRequests", limit+1, resource)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		var st status
		_ = json.Unmarshal(b, &st)
		if resp.StatusCode != 429 || st.Reason != "TooManyRequests" || resp.Header.Get("Retry-After") == "" || !strings.Contains(st.Message, "--max-watches-per-user") {
			t.Errorf("alice's watch %d (of %s): %d Retry-After %q %s, want 429 TooManyRequests with a Retry-After",
				limit+1, resource, resp.StatusCode, resp.Header.Get("Retry-After"), b)
		}
	}
	if resp := watchAs(bob, "summaries"); resp.StatusCode != 200 {
		t.Errorf("bob's watch while alice is at her bound: %d", resp.StatusCode)
	}
	// A list is not a watch.
	req, _ := http.NewRequest("GET", base+"summaries", nil)
	req.Header.Set("Authorization", "Bearer "+alice)
	if resp, err := c.Do(req); err != nil || resp.StatusCode != 200 {
		t.Errorf("alice's list at her watch bound: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	open[0].Body.Close()
	waitFor(t, "a closed watch frees its place", func() bool {
		resp := watchAs(alice, "summaries")
		if resp.StatusCode == 200 {
			return true
		}
		resp.Body.Close()
		return false
	})
}

// BenchmarkUnreadWatchFanOut is the scenario of a client that opens 200
// watches of its namespace and reads none while five 1 MiB objects are
// written there: the growth of the live heap, and the time of a list of
// the namespace afterwards.
func BenchmarkUnreadWatchFanOut(b *testing.B) {
	quietKlog()
	for b.Loop() {
		growth := unreadFanOut(b, 200, 5, 1<<20)
		b.ReportMetric(float64(growth)/(1<<20), "MiB-heap")
	}
}
