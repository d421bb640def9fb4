package e2e

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/dcontroller/dcontroller/pkg/auth"
)

// TestAPIServerCommands checks dctl generate-keys, generate-config and
// get-config: their output, their errors and exit codes, and the API-server
// flag checks of dctl run.
func TestAPIServerCommands(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) (string, string, int) { return dctlIn(t, dir, nil, args...) }
	expectErr := func(code int, want string, args ...string) {
		t.Helper()
		out, errOut, got := run(args...)
		if got != code || !strings.Contains(errOut, want) {
			t.Errorf("dctl %s: exit %d (want %d), stderr %q lacks %q; stdout %q", strings.Join(args, " "), got, code, errOut, want, out)
		}
	}

	// generate-keys
	for _, cmd := range []string{"generate-keys", "generate-config", "get-config"} {
		if out, _, code := run(cmd, "--help"); code != 0 || !strings.Contains(out, "Usage:") || !strings.Contains(out, "dctl "+cmd) {
			t.Errorf("dctl %s --help: exit %d\n%s", cmd, code, out)
		}
	}
	expectErr(1, "at least one --hostname is required", "generate-keys")
	expectErr(1, `unknown key type "dsa"`, "generate-keys", "--hostname=localhost", "--key-type=dsa")
	if out, errOut, code := run("generate-keys", "--hostname=localhost", "--hostname=127.0.0.1,dcontroller.example.com"); code != 0 || !strings.Contains(out, "apiserver.crt") {
		t.Fatalf("generate-keys: exit %d %s %s", code, out, errOut)
	}
	expectErr(1, "exists; use --force", "generate-keys", "--hostname=localhost")
	certPEM, err := os.ReadFile(filepath.Join(dir, "apiserver.crt"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(cert.DNSNames) != "[localhost dcontroller.example.com]" || len(cert.IPAddresses) != 1 || cert.IPAddresses[0].String() != "127.0.0.1" {
		t.Errorf("SANs: DNS %v IP %v", cert.DNSNames, cert.IPAddresses)
	}
	if st, err := os.Stat(filepath.Join(dir, "apiserver.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode: %v %v", st.Mode(), err)
	}
	if _, _, code := run("generate-keys", "--hostname=localhost", "--force", "--key-type=ecdsa", "--output-dir=ec"); code != 0 {
		t.Errorf("generate-keys --key-type=ecdsa: exit %d", code)
	}

	// generate-config
	base := []string{"generate-config", "--tls-key-file=apiserver.key", "--tls-cert-file=apiserver.crt", "--server-address=127.0.0.1:8443"}
	with := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }
	expectErr(1, "--user is required", with("--namespaces=a")...)
	expectErr(1, "--namespaces is required", with("--user=u")...)
	expectErr(1, `"Team_A" is not a namespace name`, with("--user=u", "--namespaces=Team_A")...)
	expectErr(1, "--rules: not a JSON list of PolicyRules", with("--user=u", "--namespaces=a", "--rules={")...)
	expectErr(1, `unknown field "verb"`, with("--user=u", "--namespaces=a", `--rules=[{"verb":["get"]}]`)...)
	expectErr(1, "[0].apiGroups: at least one group is required", with("--user=u", "--namespaces=a", `--rules=[{"verbs":["get"],"resources":["*"]}]`)...)
	expectErr(1, "give --rules or --rules-file, not both", with("--user=u", "--namespaces=a", "--rules=[]", "--rules-file=x.json")...)
	expectErr(1, "--tls-key-file is required", "generate-config", "--user=u", "--namespaces=a", "--server-address=127.0.0.1:8443")
	expectErr(1, "give --tls-cert-file", "generate-config", "--user=u", "--namespaces=a", "--server-address=127.0.0.1:8443", "--tls-key-file=apiserver.key")
	expectErr(1, "want HOST:PORT", "generate-config", "--user=u", "--namespaces=a", "--server-address=nohost", "--http")
	expectErr(1, "--tls-key-file: reading key", with("--user=u", "--namespaces=a", "--tls-key-file=missing.key")...)

	load := func(out string) *clientcmdapi.Config {
		t.Helper()
		cfg, err := clientcmd.Load([]byte(out))
		if err != nil {
			t.Fatalf("not a kubeconfig: %v\n%s", err, out)
		}
		return cfg
	}
	dev := load(mustDctlIn(t, dir, "generate-config", "--http", "--insecure", "--user=dev", "--namespaces=*", "--server-address=localhost:8443"))
	if c := dev.Clusters["dcontroller"]; c == nil || c.Server != "http://localhost:8443" || dev.AuthInfos["dev"] == nil || dev.AuthInfos["dev"].Token != "" {
		t.Errorf("--http config: %+v", dev)
	}
	insecure := load(mustDctlIn(t, dir, "generate-config", "--insecure", "--user=u", "--namespaces=a", "--tls-key-file=apiserver.key", "--server-address=10.0.0.1:8443"))
	if c := insecure.Clusters["dcontroller"]; !c.InsecureSkipTLSVerify || len(c.CertificateAuthorityData) != 0 || c.Server != "https://10.0.0.1:8443" {
		t.Errorf("--insecure config: %+v", c)
	}
	writeFile(t, filepath.Join(dir, "rules.json"), `[{"verbs":["get"],"apiGroups":["*.view.dcontroller.io"],"resources":["*"]}]`)
	alice := mustDctlIn(t, dir, with("--user=alice", "--namespaces=team-a,team-b", "--rules-file=rules.json", "--resource-names=web-app", "--expiry=2h")...)
	acfg := load(alice)
	if c := acfg.Clusters["dcontroller"]; string(c.CertificateAuthorityData) != string(certPEM) || c.InsecureSkipTLSVerify {
		t.Errorf("the certificate is not embedded: %+v", c)
	}
	if ns := acfg.Contexts["dcontroller"].Namespace; ns != "team-a" {
		t.Errorf("context namespace %q", ns)
	}
	claims, alg, err := auth.ParseUnverified(acfg.AuthInfos["alice"].Token)
	if err != nil || alg != "RS256" || claims.Username != "alice" || fmt.Sprint(claims.Namespaces) != "[team-a team-b]" ||
		len(claims.Rules) != 1 || fmt.Sprint(claims.Rules[0].ResourceNames) != "[web-app]" {
		t.Errorf("token claims: %v %s %+v", err, alg, claims)
	}
	if d := claims.ExpiresAt.Sub(claims.IssuedAt.Time); d != 2*time.Hour {
		t.Errorf("token lifetime %s", d)
	}
	aliceCfg := filepath.Join(dir, "alice.config")
	writeFile(t, aliceCfg, alice)

	// get-config
	env := []string{"KUBECONFIG=" + aliceCfg}
	out, errOut, code := dctlIn(t, dir, env, "get-config", "--tls-cert-file=apiserver.crt")
	if code != 0 || !strings.Contains(out, "User:        alice") || !strings.Contains(out, "Namespaces:  team-a, team-b") ||
		!strings.Contains(out, "resourceNames=[web-app]") || !strings.Contains(out, "Signature:   valid (RS256") || !regexp.MustCompile(`\(valid for (1h59m|2h0m0s)`).MatchString(out) {
		t.Errorf("get-config: exit %d\n%s%s", code, out, errOut)
	}
	if out, _, code := dctlIn(t, dir, env, "get-config"); code != 0 || !strings.Contains(out, "not verified") {
		t.Errorf("get-config without a certificate: exit %d\n%s", code, out)
	}
	if out, _, code := dctlIn(t, dir, env, "get-config", "--tls-key-file=ec/apiserver.key"); code != 2 || !strings.Contains(out, "Signature:   INVALID") {
		t.Errorf("get-config with another server's key: exit %d\n%s", code, out)
	}
	expired := acfg.DeepCopy()
	expired.AuthInfos["alice"].Token = token(t, filepath.Join(dir, "apiserver.key"), "alice", []string{"team-a"}, nil, time.Now().Add(-3*time.Hour), time.Now().Add(-2*time.Hour))
	b, _ := clientcmd.Write(*expired)
	writeFile(t, filepath.Join(dir, "expired.config"), string(b))
	if out, _, code := dctlIn(t, dir, []string{"KUBECONFIG=" + filepath.Join(dir, "expired.config")}, "get-config", "--tls-cert-file=apiserver.crt"); code != 2 ||
		!strings.Contains(out, "EXPIRED") || !strings.Contains(out, "token is expired") {
		t.Errorf("get-config of an expired token: exit %d\n%s", code, out)
	}
	devCfg := filepath.Join(dir, "dev.config")
	b, _ = clientcmd.Write(*dev)
	writeFile(t, devCfg, string(b))
	if _, errOut, code := dctlIn(t, dir, []string{"KUBECONFIG=" + devCfg}, "get-config"); code != 1 || !strings.Contains(errOut, "has no token") {
		t.Errorf("get-config of a tokenless config: exit %d %s", code, errOut)
	}

	// API server flags.
	op := filepath.Join(repoRoot, "examples", "pod-container-num-annotator", "operator.yaml")
	expectErr(1, "--api-server-mode=production needs --tls-cert-file and --tls-key-file", "run", "--standalone", "-f", op, "--api-server-mode=production")
	expectErr(1, `--api-server-mode: unknown mode "prod"`, "run", "--standalone", "-f", op, "--api-server-mode=prod")
	expectErr(1, "--api-server-addr \"8443\": want HOST:PORT", "run", "--standalone", "-f", op, "--api-server-addr=8443")
}
