package auth

import (
	"crypto"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/golang-jwt/jwt/v5"
	rbacv1 "k8s.io/api/rbac/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// DefaultExpiry is how long a generated token is valid: one year.
const DefaultExpiry = 8760 * time.Hour

// FullAccess is the rule of a token minted without rules: every verb on
// every resource of every group (still limited to the token's namespaces).
var FullAccess = []rbacv1.PolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}}

// KubeconfigOptions describe a kubeconfig for the API server.
type KubeconfigOptions struct {
	// User and Namespaces go into the token (see Claims).
	User       string
	Namespaces []string
	// Rules are the token's RBAC rules; FullAccess when empty.
	// ResourceNames, when set, is set as the resourceNames of every rule.
	Rules         []rbacv1.PolicyRule
	ResourceNames []string
	// Expiry is the token's lifetime (DefaultExpiry when 0).
	Expiry time.Duration
	// ServerAddress is the API server's HOST:PORT.
	ServerAddress string
	// HTTP makes an http:// config for a development-mode server.
	HTTP bool
	// CACertPEM, when set, is embedded as certificate-authority-data so
	// clients verify the server; Insecure sets insecure-skip-tls-verify
	// instead. Neither applies to HTTP.
	CACertPEM []byte
	Insecure  bool
	// Key signs the token; nil only with HTTP (development mode needs no
	// token, so the config has none).
	Key crypto.Signer
	// Issuer and Audience override the token defaults.
	Issuer, Audience string
	// Now is the token's issue time (time.Now when zero).
	Now time.Time
}

// NewKubeconfig returns a kubeconfig with one cluster, user and context,
// all named after the server ("dcontroller"), and the token it holds (empty
// when there is none). The context's namespace is the first allowed
// namespace unless that is "*". Errors: invalid options, signing failures.
func NewKubeconfig(o KubeconfigOptions) (*clientcmdapi.Config, string, error) {
	if o.ServerAddress == "" {
		return nil, "", errors.New("the server address is required")
	}
	if _, _, err := net.SplitHostPort(o.ServerAddress); err != nil {
		return nil, "", fmt.Errorf("server address %q: want HOST:PORT: %w", o.ServerAddress, err)
	}
	if !o.HTTP && o.Key == nil {
		return nil, "", errors.New("a private key is required to sign the token (or make an --http config for development mode)")
	}
	if !o.HTTP && len(o.CACertPEM) == 0 && !o.Insecure {
		return nil, "", errors.New("the server cannot be verified: give the server certificate or allow an insecure connection")
	}
	if o.Expiry == 0 {
		o.Expiry = DefaultExpiry
	}
	if o.Expiry < 0 {
		return nil, "", fmt.Errorf("expiry %s is negative", o.Expiry)
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	rules := o.Rules
	if len(rules) == 0 {
		rules = FullAccess
	}
	rules = append([]rbacv1.PolicyRule(nil), rules...)
	if len(o.ResourceNames) > 0 {
		for i := range rules {
			rules[i].ResourceNames = append([]string(nil), o.ResourceNames...)
		}
	}
	const name = "dcontroller"
	cluster := &clientcmdapi.Cluster{Server: "https://" + o.ServerAddress}
	if o.HTTP {
		cluster.Server = "http://" + o.ServerAddress
	} else if len(o.CACertPEM) > 0 {
		cluster.CertificateAuthorityData = o.CACertPEM
	} else {
		cluster.InsecureSkipTLSVerify = true
	}
	authInfo := &clientcmdapi.AuthInfo{}
	var token string
	if o.Key != nil {
		claims := Claims{
			RegisteredClaims: jwt.RegisteredClaims{
				Issuer:    o.Issuer,
				IssuedAt:  jwt.NewNumericDate(o.Now),
				NotBefore: jwt.NewNumericDate(o.Now),
				ExpiresAt: jwt.NewNumericDate(o.Now.Add(o.Expiry)),
			},
			Username:   o.User,
			Namespaces: o.Namespaces,
			Rules:      rules,
		}
		if o.Audience != "" {
			claims.Audience = jwt.ClaimStrings{o.Audience}
		}
		var err error
		if token, err = IssueToken(o.Key, claims); err != nil {
			return nil, "", err
		}
		authInfo.Token = token
	} else if o.User == "" {
		return nil, "", errors.New("the user name is required")
	}
	ctx := &clientcmdapi.Context{Cluster: name, AuthInfo: o.User}
	if len(o.Namespaces) > 0 && o.Namespaces[0] != AllNamespaces {
		ctx.Namespace = o.Namespaces[0]
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = cluster
	cfg.AuthInfos[o.User] = authInfo
	cfg.Contexts[name] = ctx
	cfg.CurrentContext = name
	return cfg, token, nil
}
