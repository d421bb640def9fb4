package main

import (
	"crypto/x509"
	"os"
	"runtime"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// dctl carries Go's fallback CA roots (the Mozilla bundle of
// golang.org/x/crypto/x509roots/fallback/bundle) for systems without CA
// certificates, as the FROM scratch image that `make image` builds, so that
// TLS to webhooks and registries outside the cluster verifies there too.
// crypto/x509 uses them only when the system has no roots of its own.
//
// The pool is built (about 150 certificates parsed, 0.7 MB of heap) only
// when the system has no CA files: importing
// golang.org/x/crypto/x509roots/fallback would build it in every process at
// package initialisation, also where the system's roots are used.

// linuxCAPaths are where crypto/x509 looks for the system's roots on Linux
// (crypto/x509/root_linux.go: its certFiles and certDirectories), besides
// $SSL_CERT_FILE and $SSL_CERT_DIR.
var linuxCAPaths = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/pki/tls/cacert.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	"/etc/ssl/cert.pem",
	"/etc/ssl/certs",
	"/etc/pki/tls/certs",
}

// systemMayHaveRoots reports whether crypto/x509 may find system roots:
// on Linux, whether $SSL_CERT_FILE or $SSL_CERT_DIR is set or one of
// linuxCAPaths exists (stat is the test; a file or directory that exists
// but holds no certificate counts as roots); elsewhere false (the fallback
// pool is set as before, and crypto/x509 prefers the platform's verifier
// where it has one).
func systemMayHaveRoots(goos string, getenv func(string) string, exists func(string) bool) bool {
	if goos != "linux" {
		return false
	}
	if getenv("SSL_CERT_FILE") != "" || getenv("SSL_CERT_DIR") != "" {
		return true
	}
	for _, p := range linuxCAPaths {
		if exists(p) {
			return true
		}
	}
	return false
}

// setFallbackRoots gives crypto/x509 the fallback roots when the system may
// have none (see systemMayHaveRoots), before any TLS connection is made.
// It reports whether it did.
func setFallbackRoots() bool {
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	if systemMayHaveRoots(runtime.GOOS, os.Getenv, exists) {
		return false
	}
	x509.SetFallbackRoots(fallbackPool())
	return true
}

// fallbackPool parses the bundle's roots into a pool, with their
// constraints. A certificate of the bundle that does not parse is skipped.
func fallbackPool() *x509.CertPool {
	pool := x509.NewCertPool()
	for c := range bundle.Roots() {
		cert, err := x509.ParseCertificate(c.Certificate)
		if err != nil {
			continue
		}
		if c.Constraint == nil {
			pool.AddCert(cert)
		} else {
			pool.AddCertWithConstraint(cert, c.Constraint)
		}
	}
	return pool
}
