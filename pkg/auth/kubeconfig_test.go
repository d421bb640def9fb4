package auth

import (
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
)

func TestNewKubeconfig(t *testing.T) {
	certPEM := []byte("-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n")
	cfg, tok, err := NewKubeconfig(KubeconfigOptions{
		User: "alice", Namespaces: []string{"team-a", "team-b"},
		Rules:         []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{"*"}, Resources: []string{"*"}}, {Verbs: []string{"list"}, APIGroups: []string{"*"}, Resources: []string{"x"}}},
		ResourceNames: []string{"web-app"},
		Expiry:        2 * time.Hour, ServerAddress: "10.0.0.1:8443", CACertPEM: certPEM, Key: rsaKey, Now: now,
	})
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Clusters["dcontroller"]
	if c.Server != "https://10.0.0.1:8443" || string(c.CertificateAuthorityData) != string(certPEM) || c.InsecureSkipTLSVerify {
		t.Errorf("cluster: %+v", c)
	}
	if cfg.CurrentContext != "dcontroller" || cfg.Contexts["dcontroller"].Namespace != "team-a" || cfg.AuthInfos["alice"].Token != tok {
		t.Errorf("context/user: %+v", cfg)
	}
	claims, err := ParseToken(tok, &rsaKey.PublicKey, ValidationOptions{Now: func() time.Time { return now.Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(claims.Rules) != 2 || fmt.Sprint(claims.Rules[0].ResourceNames, claims.Rules[1].ResourceNames) != "[web-app] [web-app]" {
		t.Errorf("rules: %+v", claims.Rules)
	}
	if _, err := ParseToken(tok, &rsaKey.PublicKey, ValidationOptions{Now: func() time.Time { return now.Add(3 * time.Hour) }}); err == nil {
		t.Error("token valid after its expiry")
	}

	admin, atok, err := NewKubeconfig(KubeconfigOptions{User: "admin", Namespaces: []string{"*"}, ServerAddress: "h:1", Insecure: true, Key: ecKey})
	if err != nil {
		t.Fatal(err)
	}
	ac, _ := ParseToken(atok, &ecKey.PublicKey, ValidationOptions{})
	if admin.Contexts["dcontroller"].Namespace != "" || !admin.Clusters["dcontroller"].InsecureSkipTLSVerify || len(ac.Rules) != 1 || ac.Rules[0].Verbs[0] != "*" {
		t.Errorf("admin config: %+v %+v", admin.Contexts["dcontroller"], ac)
	}
	if ac.ExpiresAt.Sub(ac.IssuedAt.Time) != DefaultExpiry {
		t.Errorf("default expiry %s", ac.ExpiresAt.Sub(ac.IssuedAt.Time))
	}

	dev, dtok, err := NewKubeconfig(KubeconfigOptions{User: "dev", Namespaces: []string{"*"}, ServerAddress: "localhost:8443", HTTP: true})
	if err != nil || dtok != "" || dev.Clusters["dcontroller"].Server != "http://localhost:8443" || dev.AuthInfos["dev"].Token != "" {
		t.Errorf("http config: %v %+v", err, dev)
	}

	for name, o := range map[string]KubeconfigOptions{
		"no server":       {User: "u", Namespaces: []string{"a"}, HTTP: true},
		"bad server":      {User: "u", Namespaces: []string{"a"}, HTTP: true, ServerAddress: "nohost"},
		"no key":          {User: "u", Namespaces: []string{"a"}, ServerAddress: "h:1", Insecure: true},
		"unverifiable":    {User: "u", Namespaces: []string{"a"}, ServerAddress: "h:1", Key: rsaKey},
		"negative expiry": {User: "u", Namespaces: []string{"a"}, ServerAddress: "h:1", Insecure: true, Key: rsaKey, Expiry: -time.Hour},
		"no user":         {Namespaces: []string{"a"}, ServerAddress: "h:1", HTTP: true},
		"no namespaces":   {User: "u", ServerAddress: "h:1", Insecure: true, Key: rsaKey},
	} {
		if _, _, err := NewKubeconfig(o); err == nil {
			t.Errorf("%s: no error", name)
		} else if strings.TrimSpace(err.Error()) == "" {
			t.Errorf("%s: empty error", name)
		}
	}
}
