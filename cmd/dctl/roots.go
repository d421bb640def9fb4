package main

// dctl embeds Go's fallback CA roots (the Mozilla bundle that
// golang.org/x/crypto/x509roots/fallback ships): crypto/x509 uses them only
// when the system has no CA certificates, as in the FROM scratch image that
// `make image` builds, so that TLS to webhooks and registries outside the
// cluster verifies there too.
import _ "golang.org/x/crypto/x509roots/fallback"
