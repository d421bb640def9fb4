package main

import (
	"crypto/x509"
	"os/exec"
	"strings"
	"testing"
)

func TestSystemMayHaveRoots(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	present := func(paths ...string) func(string) bool {
		return func(p string) bool {
			for _, q := range paths {
				if p == q {
					return true
				}
			}
			return false
		}
	}
	for _, tc := range []struct {
		name   string
		goos   string
		getenv func(string) string
		exists func(string) bool
		want   bool
	}{
		{"scratch image: nothing", "linux", env(), present(), false},
		{"Debian bundle", "linux", env(), present("/etc/ssl/certs/ca-certificates.crt"), true},
		{"Alpine bundle", "linux", env(), present("/etc/ssl/cert.pem"), true},
		{"a certificate directory", "linux", env(), present("/etc/pki/tls/certs"), true},
		{"SSL_CERT_FILE", "linux", env("SSL_CERT_FILE", "/certs/ca.pem"), present(), true},
		{"SSL_CERT_DIR", "linux", env("SSL_CERT_DIR", "/certs"), present(), true},
		{"another system: the fallback is set as before", "darwin", env(), present("/etc/ssl/cert.pem"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := systemMayHaveRoots(tc.goos, tc.getenv, tc.exists); got != tc.want {
				t.Fatalf("systemMayHaveRoots = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFallbackPoolHoldsTheBundle(t *testing.T) {
	if fallbackPool().Equal(x509.NewCertPool()) {
		t.Fatal("the fallback pool is empty")
	}
}

// TestPackagesInitialisedOnlyWhenUsed: these packages do costly work in
// their initialisers, which every dctl process would pay for at start
// (GODEBUG=inittrace=1 dctl --help shows each package's); dctl does the
// same work itself when it is needed.
func TestPackagesInitialisedOnlyWhenUsed(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		deps[p] = true
	}
	for p, why := range map[string]string{
		// Parses ~150 CA certificates (0.7 MB of heap) at init; dctl
		// builds the pool itself only when the system has no roots.
		"golang.org/x/crypto/x509roots/fallback": "setFallbackRoots (roots.go)",
	} {
		if deps[p] {
			t.Errorf("dctl imports %s, whose initialiser does at every start what %s does only when needed", p, why)
		}
	}
}
