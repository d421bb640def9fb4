package build

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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

// needKubeBinaries fails the test when a binary of make kube-binaries is
// missing from bin/k8s.
func needKubeBinaries(t *testing.T) {
	t.Helper()
	for _, b := range []string{"etcd", "kube-apiserver", "kubectl", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join("..", "..", "bin", "k8s", b)); err != nil {
			t.Fatalf("bin/k8s/%s is needed to run this test (make kube-binaries): %v", b, err)
		}
	}
}

// startLocalCluster starts the local control plane in a temporary
// directory, stops it when the test ends and returns the directory.
func startLocalCluster(t *testing.T, env []string, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	out, code := localCluster(t, env, append([]string{"start", dir}, args...)...)
	t.Cleanup(func() {
		if out, code := localCluster(t, nil, "stop", dir); code != 0 {
			t.Errorf("stop: exit %d\n%s", code, out)
		}
	})
	if code != 0 {
		t.Fatalf("start: exit %d\n%s", code, out)
	}
	return dir
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
	needKubeBinaries(t)
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
			dir := startLocalCluster(t, tc.env, tc.args...)
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

// kubectlIn runs bin/k8s/kubectl with kubeconfig; the output and error.
func kubectlIn(kubeconfig, stdin string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join("..", "..", "bin", "k8s", "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// processAlive reports whether process pid exists and is not a zombie (a
// process whose parent, the script, has exited is reaped by whatever
// adopts it, which may take a moment or, in a container, never happen).
func processAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// waitFor polls cond every 200ms until it returns "" or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", timeout, msg)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestLocalClusterControllerManager: the local control plane runs
// kube-controller-manager. status names it and its controllers; the
// garbage collector deletes a ConfigMap whose owner (another ConfigMap) is
// deleted; the namespace controller removes a deleted namespace and the
// ServiceAccount controller gives a new one its default ServiceAccount;
// stop ends the process.
func TestLocalClusterControllerManager(t *testing.T) {
	needKubeBinaries(t)
	dir := startLocalCluster(t, nil)
	status, code := localCluster(t, nil, "status", dir)
	const controllers = "garbage-collector-controller,namespace-controller,deployment-controller,replicaset-controller,job-controller,serviceaccount-controller,serviceaccount-token-controller"
	if code != 0 || !strings.Contains(status, "\nkube-controller-manager: running on https://127.0.0.1:") ||
		!strings.Contains(status, "(controllers: "+controllers+")") {
		t.Fatalf("status: exit %d: %s", code, status)
	}
	pidText, err := os.ReadFile(filepath.Join(dir, "controller-manager.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidText)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "kube-controller-manager.log")); err != nil {
		t.Errorf("no log of its own: %v", err)
	}

	kc := filepath.Join(dir, "kubeconfig")
	const ns = "gc-probe"
	if out, err := kubectlIn(kc, "", "create", "namespace", ns); err != nil {
		t.Fatal(out, err)
	}
	waitFor(t, 60*time.Second, func() string {
		if _, err := kubectlIn(kc, "", "-n", ns, "get", "serviceaccount", "default"); err != nil {
			return "no default ServiceAccount: " + err.Error()
		}
		return ""
	})
	if out, err := kubectlIn(kc, "", "-n", ns, "create", "configmap", "owner"); err != nil {
		t.Fatal(out, err)
	}
	uid, err := kubectlIn(kc, "", "-n", ns, "get", "configmap", "owner", "-o", "jsonpath={.metadata.uid}")
	if err != nil {
		t.Fatal(uid, err)
	}
	child := fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: child
  namespace: %s
  ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: owner, uid: %s}]
`, ns, uid)
	if out, err := kubectlIn(kc, child, "create", "-f", "-"); err != nil {
		t.Fatal(out, err)
	}
	if out, err := kubectlIn(kc, "", "-n", ns, "delete", "configmap", "owner"); err != nil {
		t.Fatal(out, err)
	}
	waitFor(t, 60*time.Second, func() string {
		if out, err := kubectlIn(kc, "", "-n", ns, "get", "configmap", "child"); err == nil || !strings.Contains(err.Error(), "NotFound") {
			return fmt.Sprintf("the child of a deleted owner is still there: %s %v", out, err)
		}
		return ""
	})
	if out, err := kubectlIn(kc, "", "delete", "namespace", ns, "--wait=false"); err != nil {
		t.Fatal(out, err)
	}
	waitFor(t, 60*time.Second, func() string {
		if out, err := kubectlIn(kc, "", "get", "namespace", ns); err == nil || !strings.Contains(err.Error(), "NotFound") {
			return fmt.Sprintf("the deleted namespace is still there: %s %v", out, err)
		}
		return ""
	})

	if out, code := localCluster(t, nil, "stop", dir); code != 0 {
		t.Fatalf("stop: exit %d\n%s", code, out)
	}
	if processAlive(pid) {
		t.Errorf("kube-controller-manager (pid %d) runs after stop", pid)
	}
	if status, code := localCluster(t, nil, "status", dir); code != 1 || status != "stopped\n" {
		t.Errorf("status after stop: exit %d: %q", code, status)
	}
}
