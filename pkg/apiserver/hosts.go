package apiserver

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
)

// DefaultAcceptHosts are the host names a server checking Host headers
// accepts when Options.AcceptHosts adds none: the loopback names.
var DefaultAcceptHosts = []string{`localhost`, `127\.0\.0\.1`, `::1`}

// hostFilter refuses requests whose Host header, or whose Origin header's
// host, does not match one of the accepted patterns. It defends a server
// without authentication on a loopback address against DNS rebinding: a
// web page of attacker.example whose name the attacker re-points at
// 127.0.0.1 makes the browser send requests with Host: attacker.example
// (and, for scripted requests, Origin: http://attacker.example), which are
// refused with 403 Forbidden and a Kubernetes Status body.
type hostFilter struct {
	accept []*regexp.Regexp
}

// hostPortPattern matches a pattern written as name:port, which can never
// match a host name compared without its port.
var hostPortPattern = regexp.MustCompile(`^[^:]+:[0-9]+$`)

// newHostFilter compiles the patterns: each is an RE2 regular expression
// that must match the whole host name (it is anchored, and matches without
// regard to case), compared with the port and an IPv6 address's brackets
// removed.
func newHostFilter(patterns []string) (*hostFilter, error) {
	f := &hostFilter{}
	for _, p := range patterns {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if hostPortPattern.MatchString(p) {
			return nil, fmt.Errorf("accepted host %q: host names are compared without the port; drop the port", p)
		}
		// Host names are case-insensitive (RFC 4343).
		re, err := regexp.Compile(`(?i)^(?:` + p + `)$`)
		if err != nil {
			return nil, fmt.Errorf("accepted host %q: %w", p, err)
		}
		f.accept = append(f.accept, re)
	}
	return f, nil
}

// hostName is the host of a Host header or URL host: without the port,
// without an IPv6 literal's brackets, in lower case, without a trailing
// dot.
func hostName(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

func (f *hostFilter) accepts(host string) bool {
	for _, re := range f.accept {
		if re.MatchString(host) {
			return true
		}
	}
	return false
}

// check returns why a request is refused, or "" when it is accepted.
func (f *hostFilter) check(req *http.Request) string {
	if host := hostName(req.Host); !f.accepts(host) {
		return fmt.Sprintf("host %q is not accepted (see --api-server-accept-hosts)", req.Host)
	}
	for _, origin := range req.Header.Values("Origin") {
		u, err := url.Parse(origin)
		if err != nil || u.Host == "" || !f.accepts(hostName(u.Host)) {
			return fmt.Sprintf("origin %q is not accepted (see --api-server-accept-hosts)", origin)
		}
	}
	return ""
}

// wrap returns handler behind the filter.
func (f *hostFilter) wrap(handler http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if reason := f.check(req); reason != "" {
			err := &apierrors.StatusError{ErrStatus: metav1.Status{
				Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
				Message: "forbidden: " + reason,
			}}
			responsewriters.ErrorNegotiated(err, metaCodecs, schema.GroupVersion{}, w, req)
			return
		}
		handler.ServeHTTP(w, req)
	})
}

// isLoopback reports whether a listen address is on loopback only.
func isLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP != nil && tcp.IP.IsLoopback()
}
