package build

import (
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// localCluster runs hack/local-cluster.sh with extra environment variables;
// it returns the combined output and the exit code.
func localCluster(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{filepath.Join("..", "..", "hack", "local-cluster.sh")}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// shardList is the part of a list response that sharded list and watch
// (KEP-5866) concerns: the selector the server echoes and the items' names.
type shardList struct {
	Metadata struct {
		ShardInfo *struct {
			Selector string `json:"selector"`
		} `json:"shardInfo"`
	} `json:"metadata"`
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	} `json:"items"`
}

// listNamespaces lists the namespaces with kubectl get --raw, with
// shardSelector set to selector unless it is empty.
func listNamespaces(t *testing.T, kubeconfig, selector string) shardList {
	t.Helper()
	path := "/api/v1/namespaces"
	if selector != "" {
		path += "?shardSelector=" + url.QueryEscape(selector)
	}
	kubectl := filepath.Join("..", "..", "bin", "k8s", "kubectl")
	out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "get", "--raw", path).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get --raw %s: %v\n%s", path, err, out)
	}
	var l shardList
	if err := json.Unmarshal(out, &l); err != nil {
		t.Fatalf("decoding %s: %v\n%s", path, err, out)
	}
	return l
}

func (l shardList) names() []string {
	out := make([]string, 0, len(l.Items))
	for _, it := range l.Items {
		out = append(out, it.Metadata.Name)
	}
	sort.Strings(out)
	return out
}

// TestLocalClusterShardedWatch starts the local control plane with and
// without the ShardedListAndWatch feature gate and checks what a list with a
// shardSelector returns: with the gate, the two halves of the hash space
// partition the namespaces and each response echoes its selector in
// metadata.shardInfo; without it, the selector is ignored.
func TestLocalClusterShardedWatch(t *testing.T) {
	for _, b := range []string{"etcd", "kube-apiserver", "kubectl"} {
		if _, err := os.Stat(filepath.Join("..", "..", "bin", "k8s", b)); err != nil {
			t.Fatalf("bin/k8s/%s is needed to run this test (make kube-binaries): %v", b, err)
		}
	}
	const (
		lower = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
		upper = "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"
	)
	for _, tc := range []struct {
		name      string
		env, args []string
		gates     string // the feature gates status reports
		sharded   bool
	}{
		{name: "FEATURE_GATES", env: []string{"FEATURE_GATES=ShardedListAndWatch=true"}, gates: "ShardedListAndWatch=true", sharded: true},
		{name: "both", env: []string{"FEATURE_GATES=APIResponseCompression=true"}, args: []string{"--sharded-watch"},
			gates: "ShardedListAndWatch=true,APIResponseCompression=true", sharded: true},
		{name: "no gate", env: []string{"FEATURE_GATES="}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out, code := localCluster(t, tc.env, append([]string{"start", dir}, tc.args...)...)
			t.Cleanup(func() {
				if out, code := localCluster(t, nil, "stop", dir); code != 0 {
					t.Errorf("stop: exit %d\n%s", code, out)
				}
			})
			if code != 0 {
				t.Fatalf("start: exit %d\n%s", code, out)
			}
			status, code := localCluster(t, nil, "status", dir)
			if code != 0 || !strings.HasPrefix(status, "running: https://127.0.0.1:") {
				t.Fatalf("status: exit %d: %s", code, status)
			}
			if tc.gates != "" && !strings.Contains(status, "feature gates: "+tc.gates+"\n") {
				t.Errorf("status does not report feature gates %s: %s", tc.gates, status)
			}
			if tc.gates == "" && strings.Contains(status, "feature gates") {
				t.Errorf("status reports feature gates: %s", status)
			}

			kubeconfig := filepath.Join(dir, "kubeconfig")
			all := listNamespaces(t, kubeconfig, "")
			if all.Metadata.ShardInfo != nil || len(all.Items) == 0 {
				t.Fatalf("unsharded list: shardInfo %v, %d namespaces", all.Metadata.ShardInfo, len(all.Items))
			}
			lo, hi := listNamespaces(t, kubeconfig, lower), listNamespaces(t, kubeconfig, upper)
			if !tc.sharded {
				if lo.Metadata.ShardInfo != nil || strings.Join(lo.names(), ",") != strings.Join(all.names(), ",") {
					t.Errorf("without the gate, a sharded list has shardInfo %v and namespaces %v, want none and %v",
						lo.Metadata.ShardInfo, lo.names(), all.names())
				}
				return
			}
			for _, c := range []struct {
				l        shardList
				selector string
			}{{lo, lower}, {hi, upper}} {
				if c.l.Metadata.ShardInfo == nil || c.l.Metadata.ShardInfo.Selector != c.selector {
					t.Errorf("list with %s: shardInfo %+v", c.selector, c.l.Metadata.ShardInfo)
				}
			}
			both := append(lo.names(), hi.names()...)
			sort.Strings(both)
			if strings.Join(both, ",") != strings.Join(all.names(), ",") {
				t.Errorf("the halves %v and %v do not partition the namespaces %v", lo.names(), hi.names(), all.names())
			}
		})
	}
}

// TestLocalClusterUsage checks that the script refuses what its usage text
// does not allow.
func TestLocalClusterUsage(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		wantCode int
	}{
		{args: []string{"--help"}, wantCode: 0},
		{args: []string{"stop", t.TempDir(), "--sharded-watch"}, wantCode: 1},
		{args: []string{"start", t.TempDir(), "--sharded"}, wantCode: 1},
		{args: []string{"start"}, wantCode: 1},
	} {
		out, code := localCluster(t, nil, tc.args...)
		if code != tc.wantCode || !strings.Contains(out, "hack/local-cluster.sh start DIR [--sharded-watch]") {
			t.Errorf("%q: exit %d, want %d; output:\n%s", tc.args, code, tc.wantCode, out)
		}
	}
}
