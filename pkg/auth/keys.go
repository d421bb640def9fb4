package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"strings"
	"time"
)

// KeyType is the type of key GenerateKeys makes.
type KeyType string

const (
	// RSA is a 2048-bit RSA key; tokens are signed RS256.
	RSA KeyType = "rsa"
	// ECDSA is a P-256 ECDSA key; tokens are signed ES256.
	ECDSA KeyType = "ecdsa"
)

// KeyOptions configure GenerateKeys.
type KeyOptions struct {
	// Hostnames are the DNS names and IP addresses the certificate is
	// valid for (subject alternative names); at least one.
	Hostnames []string
	// Type is RSA (default) or ECDSA.
	Type KeyType
	// Validity is how long the certificate is valid (one year when 0).
	Validity time.Duration
	// Now is the start of validity (time.Now when zero).
	Now time.Time
}

// GenerateKeys makes a private key and a self-signed X.509 serving
// certificate for it, both PEM-encoded: the certificate ("CERTIFICATE") with
// a SAN per hostname (an IP SAN for addresses, a DNS SAN otherwise), and the
// key as PKCS#8 ("PRIVATE KEY"). The key signs tokens as well.
func GenerateKeys(opts KeyOptions) (certPEM, keyPEM []byte, err error) {
	if len(opts.Hostnames) == 0 {
		return nil, nil, errors.New("at least one hostname is required")
	}
	if opts.Validity == 0 {
		opts.Validity = 365 * 24 * time.Hour
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	var key crypto.Signer
	switch opts.Type {
	case RSA, "":
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	case ECDSA:
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		return nil, nil, fmt.Errorf("unknown key type %q (want %q or %q)", opts.Type, RSA, ECDSA)
	}
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: opts.Hostnames[0], Organization: []string{"dcontroller"}},
		NotBefore:             opts.Now.Add(-time.Minute),
		NotAfter:              opts.Now.Add(opts.Validity),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	for _, h := range opts.Hostnames {
		h = strings.TrimSpace(h)
		if h == "" {
			return nil, nil, errors.New("empty hostname")
		}
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// ParsePrivateKeyPEM reads the first private key of a PEM document: PKCS#8
// ("PRIVATE KEY"), PKCS#1 ("RSA PRIVATE KEY") or SEC 1 ("EC PRIVATE KEY").
// Only RSA and ECDSA keys are accepted.
func ParsePrivateKeyPEM(data []byte) (crypto.Signer, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, errors.New("no PEM private key found")
		}
		var key any
		var err error
		switch block.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("parsing %s: %w", block.Type, err)
		}
		switch k := key.(type) {
		case *rsa.PrivateKey:
			return k, nil
		case *ecdsa.PrivateKey:
			return k, nil
		}
		return nil, fmt.Errorf("unsupported private key type %T: want RSA or ECDSA", key)
	}
}

// LoadPrivateKeyFile reads a PEM private key file (see ParsePrivateKeyPEM).
func LoadPrivateKeyFile(path string) (crypto.Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading key: %w", err)
	}
	key, err := ParsePrivateKeyPEM(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return key, nil
}

// PublicKeyOf returns the public half of a private key.
func PublicKeyOf(key crypto.Signer) crypto.PublicKey { return key.Public() }

// LoadCertificateFile reads the first certificate of a PEM file and returns
// it with the file's content.
func LoadCertificateFile(path string) (*x509.Certificate, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading certificate: %w", err)
	}
	rest := data
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, nil, fmt.Errorf("%s: no PEM certificate found", path)
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		return cert, data, nil
	}
}
