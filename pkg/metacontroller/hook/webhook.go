package hook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/metacontroller/hookapi"
)

// connSettings are the TLS and authentication settings of a webhook, from
// the hook itself or from the matching endpointConfigs entry.
type connSettings struct {
	caBundle      *mcv1a1.CABundleConfig
	authorization *mcv1a1.AuthorizationConfig
	basicAuth     *mcv1a1.BasicAuthConfig
	clientTLS     *mcv1a1.ClientTLSConfig
	path          string // spec path of the settings, for errors
}

func (c connSettings) empty() bool {
	return c.caBundle == nil && c.authorization == nil && c.basicAuth == nil && c.clientTLS == nil
}

// webhook is an HTTP(S) hook.
type webhook struct {
	url     string
	timeout time.Duration
	strict  bool
	conn    connSettings
	opts    Options

	etag        bool
	etagTTL     time.Duration
	etagCleanup time.Duration

	mu          sync.Mutex
	client      *http.Client // nil until the credentials have been loaded
	authHeader  string
	cache       map[string]etagEntry
	lastCleanup time.Time
}

type etagEntry struct {
	etag    string
	body    []byte
	expires time.Time
}

func newWebhook(w *mcv1a1.Webhook, version mcv1a1.HookVersion, opts Options) (*webhook, error) {
	path := opts.Path + ".webhook"
	wh := &webhook{timeout: DefaultTimeout, strict: hookapi.StrictByDefault(version), opts: opts, cache: map[string]etagEntry{}}
	switch {
	case w.URL != nil && *w.URL != "":
		wh.url = *w.URL
	case w.Service != nil:
		s := w.Service
		if s.Name == "" || s.Namespace == "" {
			return nil, fmt.Errorf("%s.service: name and namespace are required", path)
		}
		port, proto := int32(80), "http"
		if s.Port != nil {
			port = *s.Port
		}
		if s.Protocol != nil && *s.Protocol != "" {
			proto = *s.Protocol
		}
		p := ""
		if w.Path != nil {
			p = *w.Path
		}
		if p != "" && !strings.HasPrefix(p, "/") {
			p = "/" + p
		}
		wh.url = fmt.Sprintf("%s://%s.%s:%d%s", proto, s.Name, s.Namespace, port, p)
	default:
		return nil, fmt.Errorf("%s: set url or service", path)
	}
	u, err := url.Parse(wh.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s.url: %q is not an http(s) URL", path, wh.url)
	}
	if w.Timeout != nil && w.Timeout.Duration > 0 {
		wh.timeout = w.Timeout.Duration
	}
	if w.ResponseUnMarshallMode != nil {
		switch *w.ResponseUnMarshallMode {
		case mcv1a1.ResponseUnmarshallModeStrict:
			wh.strict = true
		case mcv1a1.ResponseUnmarshallModeLoose:
			wh.strict = false
		default:
			return nil, fmt.Errorf("%s.responseUnMarshallMode: %q is neither loose nor strict", path, *w.ResponseUnMarshallMode)
		}
	}
	if w.Etag != nil && w.Etag.Enabled != nil && *w.Etag.Enabled {
		wh.etag = true
		wh.etagTTL, wh.etagCleanup = 10*time.Minute, time.Minute
		if w.Etag.CacheTimeoutSeconds != nil && *w.Etag.CacheTimeoutSeconds > 0 {
			wh.etagTTL = time.Duration(*w.Etag.CacheTimeoutSeconds) * time.Second
		}
		if w.Etag.CacheCleanupSeconds != nil && *w.Etag.CacheCleanupSeconds > 0 {
			wh.etagCleanup = time.Duration(*w.Etag.CacheCleanupSeconds) * time.Second
		}
	}
	wh.conn = connSettings{caBundle: w.CABundle, authorization: w.Authorization, basicAuth: w.BasicAuth, clientTLS: w.ClientTLS, path: path}
	if wh.conn.empty() {
		for i, ec := range opts.EndpointConfigs {
			if hostMatches(ec.Host, u) {
				wh.conn = connSettings{caBundle: ec.CABundle, authorization: ec.Authorization, basicAuth: ec.BasicAuth,
					clientTLS: ec.ClientTLS, path: fmt.Sprintf("spec.endpointConfigs[%d]", i)}
				break
			}
		}
	}
	if err := wh.conn.validate(); err != nil {
		return nil, err
	}
	return wh, nil
}

// hostMatches compares an endpointConfigs host with a URL's host,
// case-insensitively, treating the scheme's default port as absent.
func hostMatches(host string, u *url.URL) bool {
	norm := func(h, scheme string) string {
		h = strings.ToLower(h)
		if hh, port, err := net.SplitHostPort(h); err == nil {
			if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
				return hh
			}
		}
		return h
	}
	return host != "" && norm(host, u.Scheme) == norm(u.Host, u.Scheme)
}

func (c connSettings) validate() error {
	if c.authorization != nil && c.basicAuth != nil {
		return fmt.Errorf("%s: authorization and basicAuth are mutually exclusive", c.path)
	}
	if a := c.authorization; a != nil {
		if strings.EqualFold(a.Type, "Basic") {
			return fmt.Errorf("%s.authorization.type: use basicAuth for Basic authentication", c.path)
		}
		if a.SecretRef.Name == "" || a.SecretRef.Namespace == "" || a.SecretRef.Key == "" {
			return fmt.Errorf("%s.authorization.secretRef: name, namespace and key are required", c.path)
		}
	}
	if b := c.caBundle; b != nil {
		n := 0
		if b.Inline != nil {
			n++
		}
		if b.SecretRef != nil {
			n++
		}
		if b.ConfigMapRef != nil {
			n++
		}
		if n != 1 {
			return fmt.Errorf("%s.caBundle: set exactly one of inline, secretRef and configMapRef", c.path)
		}
		if b.Inline != nil {
			if !x509.NewCertPool().AppendCertsFromPEM([]byte(*b.Inline)) {
				return fmt.Errorf("%s.caBundle.inline: no PEM certificate found", c.path)
			}
		}
	}
	return nil
}

// prepare loads credentials and builds the HTTP client once; a failure is
// retried at the next call.
func (w *webhook) prepare(ctx context.Context) (*http.Client, string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.client != nil {
		return w.client, w.authHeader, nil
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	c := w.conn
	if b := c.caBundle; b != nil {
		var pem []byte
		switch {
		case b.Inline != nil:
			pem = []byte(*b.Inline)
		case b.SecretRef != nil:
			v, err := w.secretKey(ctx, b.SecretRef.Namespace, b.SecretRef.Name, orDefault(b.SecretRef.Key, "ca.crt"), c.path+".caBundle.secretRef")
			if err != nil {
				return nil, "", err
			}
			pem = v
		case b.ConfigMapRef != nil:
			v, err := w.configMapKey(ctx, b.ConfigMapRef.Namespace, b.ConfigMapRef.Name, orDefault(b.ConfigMapRef.Key, "ca.crt"), c.path+".caBundle.configMapRef")
			if err != nil {
				return nil, "", err
			}
			pem = v
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, "", fmt.Errorf("%s.caBundle: no PEM certificate found", c.path)
		}
		tlsConfig.RootCAs = pool
	}
	if ct := c.clientTLS; ct != nil {
		p := c.path + ".clientTLS.secretRef"
		crt, err := w.secretKey(ctx, ct.SecretRef.Namespace, ct.SecretRef.Name, orDefault(ct.CertKey, "tls.crt"), p)
		if err != nil {
			return nil, "", err
		}
		key, err := w.secretKey(ctx, ct.SecretRef.Namespace, ct.SecretRef.Name, orDefault(ct.PrivateKeyKey, "tls.key"), p)
		if err != nil {
			return nil, "", err
		}
		pair, err := tls.X509KeyPair(crt, key)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", p, err)
		}
		tlsConfig.Certificates = []tls.Certificate{pair}
	}
	auth := ""
	if a := c.authorization; a != nil {
		v, err := w.secretKey(ctx, a.SecretRef.Namespace, a.SecretRef.Name, a.SecretRef.Key, c.path+".authorization.secretRef")
		if err != nil {
			return nil, "", err
		}
		auth = orDefault(a.Type, "Bearer") + " " + strings.TrimSpace(string(v))
	}
	if b := c.basicAuth; b != nil {
		p := c.path + ".basicAuth.secretRef"
		user, err := w.secretKey(ctx, b.SecretRef.Namespace, b.SecretRef.Name, orDefault(b.UsernameKey, "username"), p)
		if err != nil {
			return nil, "", err
		}
		pass, err := w.secretKey(ctx, b.SecretRef.Namespace, b.SecretRef.Name, orDefault(b.PasswordKey, "password"), p)
		if err != nil {
			return nil, "", err
		}
		r, _ := http.NewRequest(http.MethodPost, "http://x", nil)
		r.SetBasicAuth(string(user), string(pass))
		auth = r.Header.Get("Authorization")
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	transport.MaxIdleConnsPerHost = 32
	// A redirect is not followed: it would send the request body and the
	// hook's credentials to an address the hook spec does not name.
	w.client = &http.Client{Transport: transport, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	w.authHeader = auth
	return w.client, auth, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (w *webhook) secretKey(ctx context.Context, ns, name, key, path string) ([]byte, error) {
	if w.opts.Reader == nil {
		return nil, fmt.Errorf("%s: no client to read Secret %s/%s", path, ns, name)
	}
	s := &corev1.Secret{}
	if err := w.opts.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
		return nil, fmt.Errorf("%s: reading Secret %s/%s: %w", path, ns, name, err)
	}
	v, ok := s.Data[key]
	if !ok {
		if sv, ok := s.StringData[key]; ok {
			return []byte(sv), nil
		}
		return nil, fmt.Errorf("%s: Secret %s/%s has no key %q", path, ns, name, key)
	}
	return v, nil
}

func (w *webhook) configMapKey(ctx context.Context, ns, name, key, path string) ([]byte, error) {
	if w.opts.Reader == nil {
		return nil, fmt.Errorf("%s: no client to read ConfigMap %s/%s", path, ns, name)
	}
	cm := &corev1.ConfigMap{}
	if err := w.opts.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cm); err != nil {
		return nil, fmt.Errorf("%s: reading ConfigMap %s/%s: %w", path, ns, name, err)
	}
	if v, ok := cm.Data[key]; ok {
		return []byte(v), nil
	}
	if v, ok := cm.BinaryData[key]; ok {
		return v, nil
	}
	return nil, fmt.Errorf("%s: ConfigMap %s/%s has no key %q", path, ns, name, key)
}

// Call posts the JSON of request and decodes the answer into response.
func (w *webhook) Call(ctx context.Context, cacheKey string, request, response any) (err error) {
	start := time.Now()
	callsTotal.WithLabelValues(w.opts.Controller, w.opts.Hook).Inc()
	defer func() {
		duration.WithLabelValues(w.opts.Controller, w.opts.Hook, "webhook").Observe(time.Since(start).Seconds())
		if err != nil {
			errorsTotal.WithLabelValues(w.opts.Controller, w.opts.Hook, ReasonOf(err)).Inc()
		}
	}()
	fail := func(reason string, err error) error {
		return &Error{Hook: w.opts.Path, Reason: reason, Err: err}
	}
	hc, auth, err := w.prepare(ctx)
	if err != nil {
		return fail(ReasonConfig, err)
	}
	body, err := encodeRequest(request)
	if err != nil {
		return fail(ReasonConfig, fmt.Errorf("encoding the request: %w", err))
	}
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return fail(ReasonConfig, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	var cached etagEntry
	haveCached := false
	if w.etag && cacheKey != "" {
		cached, haveCached = w.cached(cacheKey)
		if haveCached {
			req.Header.Set("If-None-Match", cached.etag)
		}
	}
	resp, err := hc.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
			return fail(ReasonTimeout, fmt.Errorf("POST %s: no response within %s", w.url, w.timeout))
		}
		return fail(ReasonUnavailable, fmt.Errorf("POST %s: %w", w.url, err))
	}
	defer resp.Body.Close()
	if isRedirect(resp.StatusCode) {
		return fail(ReasonInvalidResponse, fmt.Errorf("POST %s: status %d: redirect to %q refused: a hook must answer at the address its spec names",
			w.url, resp.StatusCode, excerpt([]byte(resp.Header.Get("Location")))))
	}
	limits := w.opts.Limits.withDefaults()
	data, over, err := readBody(resp.Body, resp.ContentLength, limits.ResponseBytes)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
			return fail(ReasonTimeout, fmt.Errorf("POST %s: no complete response within %s", w.url, w.timeout))
		}
		return fail(ReasonUnavailable, fmt.Errorf("POST %s: reading the response: %w", w.url, err))
	}
	if over {
		return fail(ReasonInvalidResponse, fmt.Errorf("POST %s: status %d: the response body is larger than %s (--hook-max-response-bytes)",
			w.url, resp.StatusCode, byteSize(limits.ResponseBytes)))
	}
	fresh := false
	switch {
	case resp.StatusCode == http.StatusOK:
		fresh = true
	case haveCached && (resp.StatusCode == http.StatusNotModified || resp.StatusCode == http.StatusPreconditionFailed):
		data = cached.body
	default:
		return fail(ReasonHTTPStatus, fmt.Errorf("POST %s: status %d: %s", w.url, resp.StatusCode, excerpt(data)))
	}
	if err := limits.Check(data); err != nil {
		return fail(ReasonInvalidResponse, fmt.Errorf("POST %s: the answer is over the manager's hook limits: %w", w.url, err))
	}
	if err := hookapi.Decode(data, w.strict, response); err != nil {
		return fail(ReasonInvalidResponse, fmt.Errorf("POST %s: %w", w.url, err))
	}
	// Only an answer that decoded is kept for its ETag.
	if fresh && w.etag && cacheKey != "" {
		if tag := resp.Header.Get("ETag"); tag != "" {
			w.store(cacheKey, etagEntry{etag: tag, body: data, expires: time.Now().Add(w.etagTTL)})
		}
	}
	return nil
}

// readBody reads body; over reports a body longer than limit (announced
// by its Content-Length, which is then not read, or found reading one byte
// past the limit). A Content-Length within the limit sizes the buffer at
// once, so reading a large body costs its size rather than the doublings
// of a growing buffer.
func readBody(body io.Reader, contentLength, limit int64) (data []byte, over bool, err error) {
	if contentLength > limit {
		return nil, true, nil
	}
	data, err = readLimited(io.LimitReader(body, limit+1), contentLength)
	return data, int64(len(data)) > limit, err
}

func readLimited(lr io.Reader, contentLength int64) ([]byte, error) {
	if contentLength <= 0 {
		return io.ReadAll(lr)
	}
	buf := make([]byte, 0, contentLength+1)
	for {
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case err == io.EOF:
			return buf, nil
		case err != nil:
			return buf, err
		case len(buf) == cap(buf):
			// Longer than announced: the rest the usual way.
			rest, err := io.ReadAll(lr)
			return append(buf, rest...), err
		}
	}
}

// byteSize writes n bytes in MiB when it is a whole number of them.
func byteSize(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// isRedirect reports whether status is an HTTP redirection (RFC 9110
// section 15.4) other than 304 Not Modified, which the ETag cache uses.
func isRedirect(status int) bool {
	return status >= 300 && status < 400 && status != http.StatusNotModified
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func excerpt(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

func (w *webhook) cached(key string) (etagEntry, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if now.Sub(w.lastCleanup) >= w.etagCleanup {
		for k, e := range w.cache {
			if now.After(e.expires) {
				delete(w.cache, k)
			}
		}
		w.lastCleanup = now
	}
	e, ok := w.cache[key]
	if !ok || now.After(e.expires) {
		return etagEntry{}, false
	}
	return e, true
}

func (w *webhook) store(key string, e etagEntry) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cache[key] = e
}

// encodeRequest returns request's JSON: json.Marshal's bytes, written
// without reflection for the request types of package hookapi
// (AppendJSON).
func encodeRequest(request any) ([]byte, error) {
	if a, ok := request.(interface{ AppendJSON([]byte) ([]byte, error) }); ok {
		return a.AppendJSON(make([]byte, 0, 4096))
	}
	return json.Marshal(request)
}
