package auth

import (
	"context"
	"crypto"
	"encoding/json"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/user"
)

// Keys of user.Info's Extra that carry a token's grants to the authorizer.
const (
	// ExtraNamespaces lists the allowed namespaces ("*" for all).
	ExtraNamespaces = "dcontroller.io/namespaces"
	// ExtraRules holds one element: the JSON of the []rbacv1.PolicyRule.
	ExtraRules = "dcontroller.io/rules"
)

// tokenAuthenticator validates API server tokens (authenticator.Token).
type tokenAuthenticator struct {
	pub  crypto.PublicKey
	opts ValidationOptions
}

// NewAuthenticator returns a request authenticator that reads the bearer
// token of the Authorization header (RFC 6750) and validates it with
// ParseToken. A request without a token is not authenticated; a malformed,
// forged, expired or not-yet-valid token is an error. Either way the
// generic API server answers 401 Unauthorized.
func NewAuthenticator(pub crypto.PublicKey, opts ValidationOptions) authenticator.Request {
	return bearertoken.New(&tokenAuthenticator{pub: pub, opts: opts})
}

// AuthenticateToken implements authenticator.Token: the user is the token's
// username, in the group system:authenticated, with the namespaces and
// rules in Extra (ExtraNamespaces, ExtraRules).
func (a *tokenAuthenticator) AuthenticateToken(_ context.Context, token string) (*authenticator.Response, bool, error) {
	claims, err := ParseToken(token, a.pub, a.opts)
	if err != nil {
		return nil, false, err
	}
	return &authenticator.Response{User: UserOf(claims)}, true, nil
}

// UserOf returns the user a token's claims describe.
func UserOf(c *Claims) user.Info {
	rules, _ := json.Marshal(c.Rules)
	return &user.DefaultInfo{
		Name:   c.Username,
		Groups: []string{user.AllAuthenticated},
		Extra: map[string][]string{
			ExtraNamespaces: append([]string(nil), c.Namespaces...),
			ExtraRules:      {string(rules)},
		},
	}
}
