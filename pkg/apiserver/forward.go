package apiserver

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"os"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
)

// Route says where the views of one operator live when several managers
// share the operators (dctl start --sharding).
type Route struct {
	// Local: the operator runs here; its views are served from Store.
	Local bool
	// Member names the member the operator runs on ("" while it is being
	// handed over and no member runs it).
	Member string
	// Address is the member's view API server, HOST:PORT ("" when it
	// published none).
	Address string
	// Split: the operator runs split by namespace (spec.sharding
	// Namespace) and the request named no namespace, so no one member
	// holds the answer; it is refused with 400 Bad Request.
	Split bool
}

// ForwardedHeader marks a request one member forwarded to another; a
// forwarded request is never forwarded again (a handover in flight
// answers 503 instead of bouncing).
const ForwardedHeader = "X-Dcontroller-Forwarded-By"

// credentialsKey is the request context key of the client's Authorization
// header, kept by keepCredentials for forwarding.
type credentialsKey struct{}

// keepCredentials keeps the Authorization header of a request in its
// context. The authentication filter of k8s.io/apiserver deletes the
// header once it has checked it, but a request forwarded to another member
// must carry it: that member authenticates and authorizes the client
// again, as it would if the client had asked it directly.
func keepCredentials(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if v := req.Header.Get("Authorization"); v != "" {
			req = req.WithContext(context.WithValue(req.Context(), credentialsKey{}, v))
		}
		h.ServeHTTP(w, req)
	})
}

// viewOperator returns the operator whose views group names, or false for
// a group that is not a view group.
func viewOperator(group string) (string, bool) {
	op, ok := strings.CutSuffix(group, "."+opv1a1.ViewGroupSuffix)
	return op, ok && op != ""
}

// forwarder proxies requests for the views of operators that run on
// another member to that member's view API server, over HTTPS in
// production mode: the peer must present this server's own certificate
// (the members of a ring share one TLS Secret), so no CA is needed and no
// other server can take the request and its bearer token.
type forwarder struct {
	self      string
	scheme    string
	transport http.RoundTripper
}

func newForwarder(opts Options) (*forwarder, error) {
	f := &forwarder{self: opts.Member, scheme: "http"}
	if opts.Mode != Production {
		f.transport = &http.Transport{Proxy: nil, ResponseHeaderTimeout: time.Minute}
		return f, nil
	}
	certPEM, err := os.ReadFile(opts.CertFile)
	if err != nil {
		return nil, fmt.Errorf("reading --tls-cert-file: %w", err)
	}
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("--tls-cert-file holds no PEM certificate")
	}
	own := block.Bytes
	if _, err := x509.ParseCertificate(own); err != nil {
		return nil, fmt.Errorf("--tls-cert-file: %w", err)
	}
	f.scheme = "https"
	f.transport = &http.Transport{Proxy: nil, ResponseHeaderTimeout: time.Minute, TLSClientConfig: &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The chain is checked by VerifyConnection: the peer's leaf must
		// be this server's own certificate.
		InsecureSkipVerify: true, //nolint:gosec // pinned below
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || !bytes.Equal(cs.PeerCertificates[0].Raw, own) {
				return errors.New("the member's view API server does not present this ring's certificate")
			}
			return nil
		},
	}}
	return f, nil
}

// forward serves req from route's member, or answers 503 Service
// Unavailable (with Retry-After) when no member can take it now.
func (s *Server) forward(w http.ResponseWriter, req *http.Request, op string, route Route) {
	unavailable := func(msg string) {
		err := apierrors.NewServiceUnavailable(msg)
		w.Header().Set("Retry-After", "2")
		responsewriters.ErrorNegotiated(err, s.serializer, schema.GroupVersion{}, w, req)
	}
	switch {
	case route.Split:
		err := apierrors.NewBadRequest(fmt.Sprintf("the views of operator %s are split by namespace between the members of the ring (spec.sharding: Namespace): ask for one namespace (kubectl -n NAMESPACE)", op))
		responsewriters.ErrorNegotiated(err, s.serializer, schema.GroupVersion{}, w, req)
		return
	case req.Header.Get(ForwardedHeader) == s.fwd.self && s.fwd.self != "":
		// This member forwarded the request to itself: the address the
		// holder published leads here. Retrying cannot help.
		err := apierrors.NewInternalError(fmt.Errorf("operator %s runs on member %s, whose published view API server address leads back to member %s: check --sharding-address of %s", op, route.Member, s.fwd.self, route.Member))
		responsewriters.ErrorNegotiated(err, s.serializer, schema.GroupVersion{}, w, req)
		return
	case req.Header.Get(ForwardedHeader) != "":
		unavailable(fmt.Sprintf("the views of operator %s are being handed over between members (forwarded by %s); retry", op, req.Header.Get(ForwardedHeader)))
		return
	case route.Member == "":
		unavailable(fmt.Sprintf("the views of operator %s are being handed over between members; retry", op))
		return
	case route.Address == "":
		unavailable(fmt.Sprintf("operator %s runs on member %s, which publishes no view API server address (--sharding-address)", op, route.Member))
		return
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = s.fwd.scheme
			pr.Out.URL.Host = route.Address
			// The Host header stays the client's: the member checks it
			// against the same accepted hosts as this one did.
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Set(ForwardedHeader, s.fwd.self)
			if v, ok := pr.In.Context().Value(credentialsKey{}).(string); ok {
				pr.Out.Header.Set("Authorization", v)
			}
		},
		Transport: s.fwd.transport,
		// Watches stream: flush every event at once.
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, req *http.Request, err error) {
			s.log.V(1).Info("forwarding to a member failed", "member", route.Member, "address", route.Address, "error", err.Error())
			unavailable(fmt.Sprintf("operator %s runs on member %s, which did not answer at %s: %v", op, route.Member, route.Address, err))
		},
	}
	proxy.ServeHTTP(w, req)
}
