package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const bigViewOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: mem
spec:
  controllers:
    - name: summarize
      sources: [{kind: Big}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
          spec: {revision: "$.spec.revision"}
      target: {kind: BigSummary}
`

// rssKiB returns the resident set size of a process (VmRSS), in KiB.
func rssKiB(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("reading the resident set size from /proc (the memory check needs Linux): %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// TestViewPatchMemory: 250 one-field patches of a 2.8 MB view object,
// through the API server of `dctl run --standalone`, leave the process's
// resident memory within the watch history's byte bound (64 MiB) of what
// the live objects need, instead of keeping every version (1.6 GB before
// the bound); a watch from the object's first version, whose changes were
// dropped, is answered with 410 Gone.
func TestViewPatchMemory(t *testing.T) {
	const objBytes, patches = 2_800_000, 250
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "op.yaml"), bigViewOperator)
	srv := startDctlEnv(t, dir, []string{"KUBECONFIG=" + filepath.Join(dir, "no-such-kubeconfig")}, "run", "--standalone", "-f", "op.yaml")
	base := "http://" + srv.addr + "/apis/mem.view.dcontroller.io/v1alpha1/namespaces/default/bigs"
	c := &http.Client{Timeout: 60 * time.Second}
	eventually(t, 30*time.Second, func() string {
		if code, body, _ := request(t, c, "GET", base, "", "", ""); code != http.StatusOK {
			return fmt.Sprintf("list: %d %s", code, body)
		}
		return ""
	})
	idle := rssKiB(t, srv.cmd.Process.Pid)

	items := make([]any, 0, objBytes/2800)
	for i := range objBytes / 2800 {
		items = append(items, map[string]any{"name": fmt.Sprintf("item-%04d", i), "data": strings.Repeat(string(rune('a'+i%26)), 2760)})
	}
	obj, err := json.Marshal(map[string]any{
		"apiVersion": "mem.view.dcontroller.io/v1alpha1", "kind": "Big",
		"metadata": map[string]any{"name": "big", "namespace": "default"},
		"spec":     map[string]any{"revision": 0, "items": items},
	})
	if err != nil {
		t.Fatal(err)
	}
	code, body, st := request(t, c, "POST", base, "", "application/json", string(obj))
	if code != http.StatusCreated {
		t.Fatalf("create: %d %+v", code, st)
	}
	var created struct {
		Metadata struct{ ResourceVersion string } `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(body), &created); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= patches; i++ {
		if code, _, st := request(t, c, "PATCH", base+"/big", "", "application/merge-patch+json", fmt.Sprintf(`{"spec":{"revision":%d}}`, i)); code != http.StatusOK {
			t.Fatalf("patch %d: %d %+v", i, code, st)
		}
	}
	after := rssKiB(t, srv.cmd.Process.Pid)
	t.Logf("RSS of dctl: %d MiB idle, %d MiB after %d patches of a %d-byte view object", idle>>10, after>>10, patches, len(obj))
	// The history's 64 MiB, the live objects (the view, the controller's
	// copy, the requests in flight) and the garbage collector's headroom
	// (GOGC=100 lets the heap reach twice the live data): measured at
	// about 200 MiB of growth; 5 times the history bound leaves room for
	// allocator slack while catching the 1.6 GB of keeping every version.
	if growth := after - idle; growth > 5*64<<10 {
		t.Errorf("RSS grew by %d MiB after %d patches, want at most %d MiB", growth>>10, patches, 5*64)
	}

	code, _, st = request(t, c, "GET", base+"?watch=true&resourceVersion="+created.Metadata.ResourceVersion, "", "", "")
	if code != http.StatusGone || st.Reason != "Expired" {
		t.Errorf("watch from the first version: %d %+v, want 410 Expired", code, st)
	}
}
