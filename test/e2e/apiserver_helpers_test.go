package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/dcontroller/dcontroller/pkg/auth"
)

// syncBuffer is a bytes.Buffer safe for a process writing while a test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// viewServer is a `dctl start` (or `dctl run`) process serving views.
type viewServer struct {
	addr string
	// dir is the process's working directory; keys and kubeconfigs live there.
	dir  string
	cmd  *exec.Cmd
	logs *syncBuffer
	done chan error
}

// startDctl runs the dctl binary with args plus --api-server-addr (a free
// loopback port) in dir, against the test cluster, until the test ends
// (SIGTERM, then the exit is checked). It returns once the API server
// accepts connections.
func startDctl(t *testing.T, dir string, args ...string) *viewServer {
	t.Helper()
	return startDctlEnv(t, dir, []string{"KUBECONFIG=" + kubeconfig}, args...)
}

// startDctlEnv is startDctl with the process's extra environment.
func startDctlEnv(t *testing.T, dir string, env []string, args ...string) *viewServer {
	t.Helper()
	addr := freeAddr(t)
	args = append(args, "--api-server-addr", addr)
	cmd := exec.Command(dctlBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	v := &viewServer{addr: addr, dir: dir, cmd: cmd, logs: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = v.logs, v.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { v.done <- cmd.Wait() }()
	t.Cleanup(func() { v.stop(t) })
	eventually(t, 60*time.Second, func() string {
		select {
		case err := <-v.done:
			v.done <- err
			t.Fatalf("dctl %s exited: %v\n%s", strings.Join(args, " "), err, v.logs.String())
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return "API server not listening: " + err.Error()
		}
		c.Close()
		return ""
	})
	return v
}

func (v *viewServer) stop(t *testing.T) {
	if v.cmd.ProcessState != nil {
		return
	}
	_ = v.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-v.done:
		v.done <- err
		if err != nil {
			t.Errorf("dctl exited with %v; logs:\n%s", err, v.logs.String())
		}
	case <-time.After(30 * time.Second):
		_ = v.cmd.Process.Kill()
		t.Errorf("dctl did not stop on SIGTERM; logs:\n%s", v.logs.String())
	}
}

// viewKubectl runs the built kubectl with a kubeconfig of the view API
// server; HOME is dir so that kubectl's discovery cache is the test's own.
func viewKubectl(t *testing.T, dir, config, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(kubectlBin, append([]string{"--kubeconfig", config}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := runBounded(cmd); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

func mustViewKubectl(t *testing.T, dir, config, stdin string, args ...string) string {
	t.Helper()
	out, err := viewKubectl(t, dir, config, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// dctlIn runs the dctl binary in dir and returns stdout, stderr and the exit
// status.
func dctlIn(t *testing.T, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(dctlBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := runBounded(cmd)
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("dctl %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errb.String(), code
}

func mustDctlIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, errOut, code := dctlIn(t, dir, nil, args...)
	if code != 0 {
		t.Fatalf("dctl %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return out
}

// token signs claims for the server whose key is keyFile, with the given
// validity window.
func token(t *testing.T, keyFile string, user string, namespaces []string, rules []rbacv1.PolicyRule, notBefore, expires time.Time) string {
	t.Helper()
	key, err := auth.LoadPrivateKeyFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := auth.IssueToken(key, auth.Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			NotBefore: jwt.NewNumericDate(notBefore),
			ExpiresAt: jwt.NewNumericDate(expires),
			IssuedAt:  jwt.NewNumericDate(notBefore),
		},
		Username: user, Namespaces: namespaces, Rules: rules,
	})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// httpsClient trusts the certificate in certFile.
func httpsClient(t *testing.T, certFile string) *http.Client {
	t.Helper()
	pemData, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		t.Fatalf("%s: no certificate", certFile)
	}
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// apiStatus is the part of a metav1.Status the tests check.
type apiStatus struct {
	Kind    string `json:"kind"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// request sends one request and returns the HTTP status and the body; a
// non-2xx body is also decoded as a Status.
func request(t *testing.T, c *http.Client, method, url, bearer, contentType, body string) (int, string, apiStatus) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var st apiStatus
	if resp.StatusCode >= 300 {
		_ = json.Unmarshal(b, &st)
	}
	return resp.StatusCode, string(b), st
}

// docBlock is a shell block of docs/apiserver.md marked <!-- e2e: name -->.
type docBlock struct {
	name string
	line int
	text string
}

var e2eMarker = regexp.MustCompile(`^<!-- e2e: ([a-z-]+) -->$`)

func docBlocks(t *testing.T) map[string]docBlock {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "apiserver.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	out := map[string]docBlock{}
	for i := 0; i < len(lines); i++ {
		m := e2eMarker.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		if i+1 >= len(lines) || lines[i+1] != "```sh" {
			t.Fatalf("docs/apiserver.md:%d: e2e marker not followed by a ```sh block", i+1)
		}
		start := i + 2
		end := start
		for end < len(lines) && lines[end] != "```" {
			end++
		}
		out[m[1]] = docBlock{name: m[1], line: start + 1, text: strings.Join(lines[start:end], "\n")}
		i = end
	}
	return out
}

var expectComment = regexp.MustCompile(`\s+#\s*(allowed|denied|unauthorized)\s*$`)

// script turns a doc block into a bash script: commands run in order with
// set -e; a command commented "# denied" must fail with a 403 and one
// commented "# unauthorized" with a 401, as kubectl renders them
// ("Error from server (Forbidden)", "You must be logged in to the server").
func (d docBlock) script(replacer *strings.Replacer) string {
	lines := strings.Split(replacer.Replace(d.text), "\n")
	var sb strings.Builder
	sb.WriteString("set -eu\n")
	for i := 0; i < len(lines); i++ {
		first := i
		cmd := lines[i]
		for strings.HasSuffix(cmd, "\\") && i+1 < len(lines) {
			i++
			cmd += "\n" + lines[i]
		}
		if m := regexp.MustCompile(`<<'?(\w+)'?`).FindStringSubmatch(cmd); m != nil {
			for i+1 < len(lines) {
				i++
				cmd += "\n" + lines[i]
				if lines[i] == m[1] {
					break
				}
			}
		}
		m := expectComment.FindStringSubmatch(cmd)
		if m == nil || m[1] == "allowed" {
			sb.WriteString(cmd + "\n")
			continue
		}
		bare := expectComment.ReplaceAllString(cmd, "")
		label := map[string]string{"denied": "Forbidden", "unauthorized": "Unauthorized"}[m[1]]
		want := map[string]string{"denied": "Error from server (Forbidden)", "unauthorized": "You must be logged in to the server"}[m[1]]
		loc := fmt.Sprintf("docs/apiserver.md:%d", d.line+first)
		fmt.Fprintf(&sb, "if __out=$(%s 2>&1); then echo %q; exit 1; fi\n", bare, loc+": expected "+label+", but it succeeded: "+bare)
		fmt.Fprintf(&sb, "case \"$__out\" in *%q*) echo \"%s: %s as expected\" ;; *) echo \"%s: expected %s: $__out\"; exit 1 ;; esac\n",
			want, loc, label, loc, label)
	}
	return sb.String()
}

// runDocBlock runs a doc block in dir with dctl and kubectl on PATH.
func runDocBlock(t *testing.T, d docBlock, dir string, env []string, replacer *strings.Replacer) string {
	t.Helper()
	cmd := exec.Command("bash", "-c", d.script(replacer))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append([]string{
		"PATH=" + filepath.Dir(dctlBin) + ":" + filepath.Dir(kubectlBin) + ":" + os.Getenv("PATH"),
		"HOME=" + dir,
	}, env...)...)
	out, err := combinedOutputBounded(cmd)
	if err != nil {
		t.Fatalf("docs/apiserver.md block %q (line %d): %v\n%s", d.name, d.line, err, out)
	}
	return string(out)
}
