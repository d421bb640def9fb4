// Package auth is the security of the embedded view API server: bearer
// tokens, their authorization rules, and the keys and kubeconfigs that carry
// them.
//
// A token is a JSON Web Token (RFC 7519) signed with the API server's TLS
// private key: RS256 (RSASSA-PKCS1-v1_5 with SHA-256, RFC 7518 section 3.3)
// for an RSA key, ES256 (ECDSA P-256 with SHA-256, RFC 7518 section 3.4) for
// an EC key. Besides the registered claims (iss, sub, aud, exp, nbf, iat),
// validated as RFC 7519 section 4.1 says, it carries Claims: the user name,
// the namespaces the user may touch ("*" for all) and RBAC PolicyRules
// (k8s.io/api/rbac/v1).
//
// NewAuthenticator turns a bearer token into a user (k8s.io/apiserver's
// authenticator.Request); NewAuthorizer decides requests with the token's
// rules (authorizer.Authorizer), following Kubernetes RBAC PolicyRule
// semantics with two extensions described on Authorize: glob patterns in
// apiGroups/resources/resourceNames (such as "*.view.dcontroller.io"), and
// list/watch staying allowed under resourceNames.
//
// GenerateKeys makes a self-signed serving certificate; NewKubeconfig a
// kubeconfig with a signed token.
package auth
