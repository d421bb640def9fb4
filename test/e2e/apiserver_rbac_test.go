package e2e

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/dcontroller/dcontroller/pkg/auth"
)

const rbacOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: rbac-probe
spec:
  controllers:
    - name: mirror
      sources:
        - apiGroup: ""
          kind: ConfigMap
          labelSelector:
            matchLabels: {rbac-probe: "true"}
      pipeline:
        "@project":
          metadata:
            name: "$.metadata.name"
            namespace: "$.metadata.namespace"
          spec:
            owner: "$.data.owner"
      target:
        kind: Probe
`

// TestAPIServerRBACStatus checks the exact HTTP status and Status body of
// every allowed and denied request of the seed README's users (a viewer,
// alice limited to one namespace and named objects, a team over two
// namespaces, an admin) and of bad tokens (none, malformed, forged,
// expired, not yet valid, another server's key, alg "none", HS256 keyed
// with the public key) against `dctl start --api-server-mode=production`.
func TestAPIServerRBACStatus(t *testing.T) {
	for _, ns := range []string{"rbac-a", "rbac-b", "rbac-c"} {
		mustKubectl(t, "", "create", "namespace", ns)
		for _, name := range []string{"web-app", "api-service", "db"} {
			mustKubectl(t, "", "-n", ns, "create", "configmap", name, "--from-literal=owner="+ns)
			mustKubectl(t, "", "-n", ns, "label", "configmap", name, "rbac-probe=true")
		}
	}
	mustKubectl(t, rbacOperator, "apply", "-f", "-")
	defer mustKubectl(t, "", "delete", "operators.dcontroller.io", "rbac-probe")

	dir := t.TempDir()
	mustDctlIn(t, dir, "generate-keys", "--hostname=localhost", "--hostname=127.0.0.1")
	otherDir := filepath.Join(dir, "other")
	mustDctlIn(t, dir, "generate-keys", "--hostname=localhost", "--output-dir="+otherDir, "--key-type=ecdsa")
	srv := startDctl(t, dir, "start", "--metrics-addr", "0", "--health-addr", "0",
		"--api-server-mode=production", "--tls-cert-file=apiserver.crt", "--tls-key-file=apiserver.key")
	c := httpsClient(t, filepath.Join(dir, "apiserver.crt"))
	key := filepath.Join(dir, "apiserver.key")
	now := time.Now()
	mint := func(user string, ns []string, rules []rbacv1.PolicyRule) string {
		return token(t, key, user, ns, rules, now, now.Add(time.Hour))
	}
	views := []string{"*.view.dcontroller.io"}
	users := map[string]string{
		"admin":  mint("admin", []string{"*"}, auth.FullAccess),
		"viewer": mint("viewer", []string{"*"}, []rbacv1.PolicyRule{{Verbs: []string{"get", "list", "watch"}, APIGroups: views, Resources: []string{"*"}}}),
		"alice": mint("alice", []string{"rbac-a"}, []rbacv1.PolicyRule{{Verbs: []string{"get", "list", "watch", "update", "patch", "delete", "create"},
			APIGroups: views, Resources: []string{"*"}, ResourceNames: []string{"web-app", "api-service"}}}),
		"team":    mint("team", []string{"rbac-a", "rbac-b"}, []rbacv1.PolicyRule{{Verbs: []string{"*"}, APIGroups: views, Resources: []string{"probes"}}}),
		"norules": mint("norules", []string{"*"}, nil),
	}
	base := "https://" + srv.addr + "/apis/rbac-probe.view.dcontroller.io/v1alpha1"
	nsURL := func(ns string) string { return base + "/namespaces/" + ns + "/probes" }
	eventually(t, 30*time.Second, func() string {
		code, body, _ := request(t, c, "GET", base+"/probes", users["admin"], "", "")
		if code != 200 || strings.Count(body, `"kind":"Probe"`) != 9 {
			return fmt.Sprintf("%d %.300s", code, body)
		}
		return ""
	})
	probe := func(ns, name string) string {
		return fmt.Sprintf(`{"apiVersion":"rbac-probe.view.dcontroller.io/v1alpha1","kind":"Probe","metadata":{"name":%q,"namespace":%q},"spec":{"owner":"test"}}`, name, ns)
	}
	const merge = "application/merge-patch+json"
	cases := []struct {
		user, method, url, contentType, body string
		want                                 int
	}{
		// The viewer reads everything, writes nothing.
		{"viewer", "GET", base + "/probes", "", "", 200},
		{"viewer", "GET", nsURL("rbac-c") + "/db", "", "", 200},
		{"viewer", "GET", nsURL("rbac-b") + "?watch=true&timeoutSeconds=1", "", "", 200},
		{"viewer", "PATCH", nsURL("rbac-a") + "/db", merge, `{"spec":{"x":1}}`, 403},
		{"viewer", "DELETE", nsURL("rbac-a") + "/db", "", "", 403},
		{"viewer", "POST", nsURL("rbac-a"), "application/json", probe("rbac-a", "new"), 403},
		// Alice: rbac-a only; named requests only on web-app and api-service.
		{"alice", "GET", nsURL("rbac-a") + "/web-app", "", "", 200},
		{"alice", "GET", nsURL("rbac-a"), "", "", 200},
		{"alice", "GET", nsURL("rbac-a") + "?fieldSelector=metadata.name%3Dapi-service", "", "", 200},
		{"alice", "GET", nsURL("rbac-a") + "?fieldSelector=metadata.name%3Ddb", "", "", 403},
		{"alice", "PATCH", nsURL("rbac-a") + "/web-app", merge, `{"metadata":{"labels":{"tier":"web"}}}`, 200},
		{"alice", "GET", nsURL("rbac-a") + "/db", "", "", 403},
		{"alice", "PATCH", nsURL("rbac-a") + "/db", merge, `{"spec":{"x":1}}`, 403},
		{"alice", "DELETE", nsURL("rbac-a") + "/db", "", "", 403},
		{"alice", "POST", nsURL("rbac-a"), "application/json", probe("rbac-a", "web-app-2"), 403},
		{"alice", "DELETE", nsURL("rbac-a"), "", "", 403},
		{"alice", "GET", nsURL("rbac-b") + "/web-app", "", "", 403},
		{"alice", "GET", base + "/probes", "", "", 403},
		// The team: rbac-a and rbac-b, every verb on probes.
		{"team", "GET", nsURL("rbac-b"), "", "", 200},
		{"team", "POST", nsURL("rbac-b"), "application/json", probe("rbac-b", "new"), 201},
		{"team", "DELETE", nsURL("rbac-b") + "/new", "", "", 200},
		{"team", "GET", nsURL("rbac-c"), "", "", 403},
		{"team", "GET", base + "/probes", "", "", 403},
		// The admin: everything.
		{"admin", "POST", nsURL("rbac-c"), "application/json", probe("rbac-c", "new"), 201},
		{"admin", "DELETE", nsURL("rbac-c") + "?labelSelector=nothing%3Dhere", "", "", 200},
		{"admin", "DELETE", nsURL("rbac-c") + "/new", "", "", 200},
		// A token without rules may only read discovery.
		{"norules", "GET", base + "/probes", "", "", 403},
		{"norules", "GET", "https://" + srv.addr + "/apis", "", "", 200},
		{"norules", "GET", "https://" + srv.addr + "/openapi/v2", "", "", 200},
	}
	for _, tc := range cases {
		code, body, st := request(t, c, tc.method, tc.url, users[tc.user], tc.contentType, tc.body)
		if code != tc.want {
			t.Errorf("%s %s %s: %d, want %d: %.300s", tc.user, tc.method, tc.url, code, tc.want, body)
			continue
		}
		if code == 403 && (st.Kind != "Status" || st.Reason != "Forbidden" || st.Code != 403 || !strings.Contains(st.Message, `User "`+tc.user+`"`)) {
			t.Errorf("%s %s %s: 403 body is not a Forbidden Status naming the user: %s", tc.user, tc.method, tc.url, body)
		}
	}

	// Bad tokens: all 401 with an Unauthorized Status.
	pubKeyPEM := mustRead(t, filepath.Join(dir, "apiserver.crt"))
	good := users["admin"]
	parts := strings.Split(good, ".")
	forgedClaims := base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"dctl","aud":["dcontroller-apiserver"],"exp":4102444800,"username":"root","namespaces":["*"],"rules":[{"verbs":["*"],"apiGroups":["*"],"resources":["*"]}]}`))
	noneTok, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"iss": "dctl", "aud": "dcontroller-apiserver",
		"exp": now.Add(time.Hour).Unix(), "username": "root", "namespaces": []string{"*"}}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	hsTok, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"iss": "dctl", "aud": "dcontroller-apiserver",
		"exp": now.Add(time.Hour).Unix(), "username": "root", "namespaces": []string{"*"}}).SignedString(pubKeyPEM)
	bad := map[string]string{
		"no token":                  "",
		"malformed":                 "not-a-jwt",
		"forged claims":             parts[0] + "." + forgedClaims + "." + parts[2],
		"expired":                   token(t, key, "admin", []string{"*"}, auth.FullAccess, now.Add(-2*time.Hour), now.Add(-time.Hour)),
		"not yet valid":             token(t, key, "admin", []string{"*"}, auth.FullAccess, now.Add(time.Hour), now.Add(2*time.Hour)),
		"another server's key":      token(t, filepath.Join(otherDir, "apiserver.key"), "admin", []string{"*"}, auth.FullAccess, now, now.Add(time.Hour)),
		"alg none":                  noneTok,
		"HS256 with the public key": hsTok,
	}
	for name, tok := range bad {
		for _, url := range []string{base + "/probes", "https://" + srv.addr + "/apis"} {
			code, body, st := request(t, c, "GET", url, tok, "", "")
			if code != 401 || st.Kind != "Status" || st.Reason != "Unauthorized" || st.Code != 401 {
				t.Errorf("%s: GET %s: %d %s, want a 401 Unauthorized Status", name, url, code, body)
			}
		}
	}

	// kubectl renders a denial with the reason from the Status.
	cfg := filepath.Join(dir, "alice.config")
	writeFile(t, cfg, mustDctlIn(t, dir, "generate-config", "--user=alice", "--namespaces=rbac-a",
		`--rules=[{"verbs":["get"],"apiGroups":["*.view.dcontroller.io"],"resources":["*"]}]`, "--resource-names=web-app",
		"--tls-key-file=apiserver.key", "--tls-cert-file=apiserver.crt", "--server-address="+srv.addr))
	_, err := viewKubectl(t, dir, cfg, "", "get", "probes.rbac-probe.view.dcontroller.io", "db")
	if err == nil || !strings.Contains(err.Error(), `Error from server (Forbidden): probes.rbac-probe.view.dcontroller.io "db" is forbidden: User "alice" cannot get resource "probes" in API group "rbac-probe.view.dcontroller.io" in the namespace "rbac-a"`) {
		t.Errorf("kubectl denial: %v", err)
	}
	// Impersonation is refused, even to the admin (kubectl's discovery
	// client renders the 403 of /api as "Forbidden: unknown").
	if _, err := viewKubectl(t, dir, cfg, "", "--as=admin", "get", "probes.rbac-probe.view.dcontroller.io", "web-app"); err == nil ||
		!strings.Contains(err.Error(), "Error from server (Forbidden)") {
		t.Errorf("kubectl --as: %v", err)
	}
	imp, _ := http.NewRequest("GET", nsURL("rbac-a")+"/web-app", nil)
	imp.Header.Set("Authorization", "Bearer "+users["admin"])
	imp.Header.Set("Impersonate-User", "alice")
	if resp, err := c.Do(imp); err != nil || resp.StatusCode != 403 {
		t.Errorf("impersonation: %v %v", resp, err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), "impersonation is not supported") {
			t.Errorf("impersonation denial: %s", b)
		}
	}
	if out := mustViewKubectl(t, dir, cfg, "", "get", "probes.rbac-probe.view.dcontroller.io", "web-app", "-o", "jsonpath={.spec.owner}"); out != "rbac-a" {
		t.Errorf("alice's get web-app: %q", out)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
