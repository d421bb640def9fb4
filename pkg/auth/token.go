package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	rbacv1 "k8s.io/api/rbac/v1"
)

// Default token issuer and audience: a token is minted by dctl for the
// dcontroller API server.
const (
	DefaultIssuer   = "dctl"
	DefaultAudience = "dcontroller-apiserver"
)

// AllNamespaces in Claims.Namespaces grants every namespace, and requests
// across all namespaces.
const AllNamespaces = "*"

// Claims are the claims of an API server token. The registered claims
// follow RFC 7519 section 4.1; Subject repeats Username.
type Claims struct {
	jwt.RegisteredClaims
	// Username is the user the token authenticates (required).
	Username string `json:"username"`
	// Namespaces the user may access; "*" for all (required, non-empty).
	Namespaces []string `json:"namespaces"`
	// Rules are the Kubernetes RBAC rules the user is granted; a token
	// without rules is allowed nothing.
	Rules []rbacv1.PolicyRule `json:"rules,omitempty"`
}

// ValidationOptions tune token validation. The zero value checks the
// default issuer and audience with 30s of clock skew.
type ValidationOptions struct {
	Issuer   string        // DefaultIssuer when empty
	Audience string        // DefaultAudience when empty
	Leeway   time.Duration // allowed clock skew on exp, nbf and iat (30s when 0)
	// Now returns the current time (time.Now when nil).
	Now func() time.Time
}

func (o ValidationOptions) withDefaults() ValidationOptions {
	if o.Issuer == "" {
		o.Issuer = DefaultIssuer
	}
	if o.Audience == "" {
		o.Audience = DefaultAudience
	}
	if o.Leeway == 0 {
		o.Leeway = 30 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// signingMethod returns the JWS algorithm of a key: RS256 for RSA, ES256 for
// ECDSA on P-256 (RFC 7518 section 3.1). Other keys are refused.
func signingMethod(key any) (jwt.SigningMethod, error) {
	switch k := key.(type) {
	case *rsa.PrivateKey, *rsa.PublicKey:
		return jwt.SigningMethodRS256, nil
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("ECDSA key on curve %s: ES256 needs P-256", k.Curve.Params().Name)
		}
		return jwt.SigningMethodES256, nil
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("ECDSA key on curve %s: ES256 needs P-256", k.Curve.Params().Name)
		}
		return jwt.SigningMethodES256, nil
	}
	return nil, fmt.Errorf("unsupported key type %T: want an RSA or an ECDSA P-256 key", key)
}

// IssueToken signs claims with key (RS256 or ES256 by key type). Empty
// registered claims are filled in: iss and aud with the defaults, sub with
// the username, iat with the current time. Errors: unsupported key, missing
// username or namespaces.
func IssueToken(key crypto.Signer, c Claims) (string, error) {
	if err := c.check(); err != nil {
		return "", err
	}
	method, err := signingMethod(key)
	if err != nil {
		return "", err
	}
	if c.Issuer == "" {
		c.Issuer = DefaultIssuer
	}
	if len(c.Audience) == 0 {
		c.Audience = jwt.ClaimStrings{DefaultAudience}
	}
	if c.Subject == "" {
		c.Subject = c.Username
	}
	if c.IssuedAt == nil {
		c.IssuedAt = jwt.NewNumericDate(time.Now())
	}
	return jwt.NewWithClaims(method, c).SignedString(key)
}

func (c *Claims) check() error {
	if strings.TrimSpace(c.Username) == "" {
		return errors.New("token: the username claim is empty")
	}
	if len(c.Namespaces) == 0 {
		return errors.New(`token: the namespaces claim is empty (use "*" for all namespaces)`)
	}
	for _, ns := range c.Namespaces {
		if ns == "" {
			return errors.New("token: the namespaces claim holds an empty namespace")
		}
	}
	return nil
}

// ParseToken verifies a token's signature with the public key (only the
// algorithm of that key type is accepted, so "none" and algorithm
// confusion are refused), then validates, per RFC 7519 section 4.1: iss
// equals the expected issuer, aud contains the expected audience, exp is
// present and not passed, nbf and iat (when present) not in the future, all
// with the configured clock skew. It also requires the username and
// namespaces claims. Errors wrap the jwt errors (jwt.ErrTokenExpired,
// jwt.ErrTokenNotValidYet, jwt.ErrTokenSignatureInvalid, ...).
func ParseToken(token string, pub crypto.PublicKey, opts ValidationOptions) (*Claims, error) {
	opts = opts.withDefaults()
	method, err := signingMethod(pub)
	if err != nil {
		return nil, err
	}
	claims := &Claims{}
	_, err = jwt.ParseWithClaims(token, claims, func(*jwt.Token) (any, error) { return pub, nil },
		jwt.WithValidMethods([]string{method.Alg()}),
		jwt.WithIssuer(opts.Issuer),
		jwt.WithAudience(opts.Audience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(opts.Leeway),
		jwt.WithTimeFunc(opts.Now),
	)
	if err != nil {
		return nil, fmt.Errorf("invalid token: %w", err)
	}
	if err := claims.check(); err != nil {
		return nil, err
	}
	return claims, nil
}

// ParseUnverified decodes a token's claims without checking its signature
// or validity; for displaying a token, never for trusting it.
func ParseUnverified(token string) (*Claims, string, error) {
	claims := &Claims{}
	t, _, err := jwt.NewParser().ParseUnverified(token, claims)
	if err != nil {
		return nil, "", fmt.Errorf("malformed token: %w", err)
	}
	return claims, t.Method.Alg(), nil
}
