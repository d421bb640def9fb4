package e2e

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// kcmControllers are the controllers the suite's kube-controller-manager
// runs (its --controllers): those of hack/local-cluster.sh, the ones that
// make sense without nodes. The garbage collector deletes objects whose
// owners are gone and carries out foreground deletion; the namespace
// controller empties a deleted namespace and removes it.
const kcmControllers = "garbage-collector-controller,namespace-controller,deployment-controller,replicaset-controller,job-controller," +
	"serviceaccount-controller,serviceaccount-token-controller"

// controllerManager is a kube-controller-manager process (bin/k8s) run
// against an envtest control plane.
type controllerManager struct {
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed when the process has exited
	err     error         // the process's exit error, set before exited closes
}

// startControllerManager starts bin/k8s/kube-controller-manager with the
// controllers kcmControllers against env's kube-apiserver, with files
// (kubeconfig, root CA, serving certificate, log) in dir. It authenticates
// as the user system:kube-controller-manager in the group system:masters (a
// client certificate from envtest; --use-service-account-credentials=false),
// signs ServiceAccount tokens with envtest's signing key (sa-signer.key in
// the kube-apiserver's certificate directory) and serves /healthz on a free
// loopback port. It returns once /healthz answers 200 (within a minute),
// or an error that includes the end of the process's log.
func startControllerManager(env *envtest.Environment, dir string) (*controllerManager, error) {
	api := env.ControlPlane.GetAPIServer()
	user, err := env.AddUser(envtest.User{Name: "system:kube-controller-manager", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("adding the controller manager's user: %w", err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("the controller manager's kubeconfig: %w", err)
	}
	kubeconfig := filepath.Join(dir, "controller-manager.kubeconfig")
	rootCA := filepath.Join(dir, "controller-manager-root-ca.crt")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(rootCA, api.SecureServing.CA, 0o600); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()

	m := &controllerManager{logPath: filepath.Join(dir, "kube-controller-manager.log"), exited: make(chan struct{})}
	logFile, err := os.Create(m.logPath)
	if err != nil {
		return nil, err
	}
	m.cmd = exec.Command(filepath.Join(repoRoot, "bin", "k8s", "kube-controller-manager"),
		"--kubeconfig", kubeconfig,
		"--authentication-kubeconfig", kubeconfig,
		"--authorization-kubeconfig", kubeconfig,
		"--authentication-skip-lookup",
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port),
		"--cert-dir", filepath.Join(dir, "controller-manager-certs"),
		"--controllers", kcmControllers,
		"--use-service-account-credentials=false",
		"--service-account-private-key-file", filepath.Join(api.CertDir, "sa-signer.key"),
		"--root-ca-file", rootCA,
		"--leader-elect=false",
		"--kube-api-qps", "100", "--kube-api-burst", "200",
	)
	m.cmd.Stdout, m.cmd.Stderr = logFile, logFile
	if err := m.cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	go func() {
		m.err = m.cmd.Wait()
		_ = logFile.Close()
		close(m.exited)
	}()

	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		// Its serving certificate is self-signed; only the answer matters.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec
	}}
	url := fmt.Sprintf("https://127.0.0.1:%d/healthz", port)
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := hc.Get(url)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return m, nil
			}
		}
		select {
		case <-m.exited:
			return nil, fmt.Errorf("kube-controller-manager exited (%v):\n%s", m.err, m.logTail())
		default:
		}
		if time.Now().After(deadline) {
			_ = m.stop()
			return nil, fmt.Errorf("kube-controller-manager's %s did not answer 200 within a minute (last: %v):\n%s", url, err, m.logTail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// logTail returns the last 4 KiB of the process's log.
func (m *controllerManager) logTail() string {
	b, _ := os.ReadFile(m.logPath)
	if len(b) > 4096 {
		b = b[len(b)-4096:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// stop ends the process (SIGTERM, SIGKILL after 10 seconds) and waits for
// it; an error when it had exited on its own before.
func (m *controllerManager) stop() error {
	select {
	case <-m.exited:
		return fmt.Errorf("kube-controller-manager had exited (%v)", m.err)
	default:
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(10 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.exited
	}
	return nil
}

// running reports an error when the process has exited.
func (m *controllerManager) running() error {
	select {
	case <-m.exited:
		return errors.New("the suite's kube-controller-manager exited (" + fmt.Sprint(m.err) + "):\n" + m.logTail())
	default:
		return nil
	}
}
