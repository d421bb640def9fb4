package auth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func TestGenerateKeys(t *testing.T) {
	for _, kt := range []KeyType{RSA, ECDSA} {
		certPEM, keyPEM, err := GenerateKeys(KeyOptions{Hostnames: []string{"localhost", "10.0.0.7", "::1", "dc.example.com"}, Type: kt, Validity: 48 * time.Hour, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(certPEM)
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(cert.DNSNames) != "[localhost dc.example.com]" || fmt.Sprint(cert.IPAddresses) != "[10.0.0.7 ::1]" {
			t.Errorf("%s SANs: %v %v", kt, cert.DNSNames, cert.IPAddresses)
		}
		if !cert.NotAfter.Equal(now.Add(48*time.Hour).Truncate(time.Second)) || cert.VerifyHostname("localhost") != nil {
			t.Errorf("%s validity %v or hostname check", kt, cert.NotAfter)
		}
		key, err := ParsePrivateKeyPEM(keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		// The key signs tokens that its certificate's public key verifies.
		tok := mustIssue(t, key, claims(func(c *Claims) {
			c.IssuedAt, c.NotBefore, c.ExpiresAt = jwt.NewNumericDate(time.Now()), jwt.NewNumericDate(time.Now()), jwt.NewNumericDate(time.Now().Add(time.Hour))
		}))
		if _, err := ParseToken(tok, cert.PublicKey, ValidationOptions{}); err != nil {
			t.Errorf("%s: token not verified by the certificate: %v", kt, err)
		}
	}
	if _, _, err := GenerateKeys(KeyOptions{}); err == nil {
		t.Error("keys without a hostname")
	}
	if _, _, err := GenerateKeys(KeyOptions{Hostnames: []string{"x"}, Type: "dsa"}); err == nil {
		t.Error("unknown key type accepted")
	}
}

func TestParsePrivateKeyPEM(t *testing.T) {
	pkcs1 := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)})
	sec1DER, _ := x509.MarshalECPrivateKey(ecKey)
	sec1 := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1DER})
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	edDER, _ := x509.MarshalPKCS8PrivateKey(edKey)
	ed := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: edDER})
	certFirst := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("x")}), pkcs1...)

	if k, err := ParsePrivateKeyPEM(pkcs1); err != nil || k.(*rsa.PrivateKey).N.Cmp(rsaKey.N) != 0 {
		t.Errorf("PKCS#1: %v", err)
	}
	if k, err := ParsePrivateKeyPEM(sec1); err != nil || !k.(*ecdsa.PrivateKey).Equal(ecKey) {
		t.Errorf("SEC 1: %v", err)
	}
	if _, err := ParsePrivateKeyPEM(certFirst); err != nil {
		t.Errorf("key after a certificate: %v", err)
	}
	if _, err := ParsePrivateKeyPEM(ed); err == nil || !strings.Contains(err.Error(), "unsupported private key type") {
		t.Errorf("ed25519: %v", err)
	}
	if _, err := ParsePrivateKeyPEM([]byte("nothing")); err == nil {
		t.Error("no PEM accepted")
	}
	dir := t.TempDir()
	if _, err := LoadPrivateKeyFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing key file accepted")
	}
	certPEM, _, _ := GenerateKeys(KeyOptions{Hostnames: []string{"h"}})
	p := filepath.Join(dir, "c.crt")
	_ = os.WriteFile(p, certPEM, 0o600)
	if cert, data, err := LoadCertificateFile(p); err != nil || cert.Subject.CommonName != "h" || string(data) != string(certPEM) {
		t.Errorf("LoadCertificateFile: %v", err)
	}
}
