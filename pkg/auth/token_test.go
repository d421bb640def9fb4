package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	rbacv1 "k8s.io/api/rbac/v1"
)

var (
	rsaKey, otherRSAKey *rsa.PrivateKey
	ecKey               *ecdsa.PrivateKey
	now                 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
)

func init() {
	var err error
	if rsaKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		panic(err)
	}
	if otherRSAKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		panic(err)
	}
	if ecKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		panic(err)
	}
}

func at(t time.Time) *jwt.NumericDate { return jwt.NewNumericDate(t) }

func claims(mut func(*Claims)) Claims {
	c := Claims{
		RegisteredClaims: jwt.RegisteredClaims{IssuedAt: at(now), NotBefore: at(now), ExpiresAt: at(now.Add(time.Hour))},
		Username:         "alice",
		Namespaces:       []string{"team-a"},
		Rules:            []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{"*"}, Resources: []string{"*"}}},
	}
	if mut != nil {
		mut(&c)
	}
	return c
}

func mustIssue(t testing.TB, key crypto.Signer, c Claims) string {
	t.Helper()
	tok, err := IssueToken(key, c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

var opts = ValidationOptions{Now: func() time.Time { return now }}

func TestTokenValidation(t *testing.T) {
	signWith := func(method jwt.SigningMethod, key any, c jwt.Claims) string {
		s, err := jwt.NewWithClaims(method, c).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	pubDER, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	valid := mustIssue(t, rsaKey, claims(nil))
	parts := strings.Split(valid, ".")
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(
		`{"iss":"dctl","aud":["dcontroller-apiserver"],"exp":1893456000,"username":"alice","namespaces":["*"]}`)) + "." + parts[2]

	cases := []struct {
		name  string
		token string
		pub   crypto.PublicKey
		opts  ValidationOptions
		want  error // nil: valid
		text  string
	}{
		{name: "RS256", token: valid, pub: &rsaKey.PublicKey},
		{name: "ES256", token: mustIssue(t, ecKey, claims(nil)), pub: &ecKey.PublicKey},
		{name: "expired", token: mustIssue(t, rsaKey, claims(func(c *Claims) { c.ExpiresAt = at(now.Add(-time.Minute)) })), pub: &rsaKey.PublicKey, want: jwt.ErrTokenExpired},
		{name: "expired within the leeway", token: mustIssue(t, rsaKey, claims(func(c *Claims) { c.ExpiresAt = at(now.Add(-10 * time.Second)) })), pub: &rsaKey.PublicKey},
		{name: "not yet valid", token: mustIssue(t, rsaKey, claims(func(c *Claims) { c.NotBefore = at(now.Add(time.Minute)) })), pub: &rsaKey.PublicKey, want: jwt.ErrTokenNotValidYet},
		{name: "issued in the future", token: mustIssue(t, rsaKey, claims(func(c *Claims) { c.IssuedAt = at(now.Add(time.Hour)) })), pub: &rsaKey.PublicKey, want: jwt.ErrTokenUsedBeforeIssued},
		{name: "no expiry", token: mustIssue(t, rsaKey, claims(func(c *Claims) { c.ExpiresAt = nil })), pub: &rsaKey.PublicKey, want: jwt.ErrTokenRequiredClaimMissing},
		{name: "wrong issuer", token: mustIssue(t, rsaKey, claims(func(c *Claims) { c.Issuer = "someone" })), pub: &rsaKey.PublicKey, want: jwt.ErrTokenInvalidIssuer},
		{name: "wrong audience", token: mustIssue(t, rsaKey, claims(func(c *Claims) { c.Audience = jwt.ClaimStrings{"kubernetes"} })), pub: &rsaKey.PublicKey, want: jwt.ErrTokenInvalidAudience},
		{name: "custom issuer and audience", token: mustIssue(t, rsaKey, claims(func(c *Claims) { c.Issuer, c.Audience = "ci", jwt.ClaimStrings{"views"} })),
			pub: &rsaKey.PublicKey, opts: ValidationOptions{Issuer: "ci", Audience: "views", Now: opts.Now}},
		{name: "another key", token: mustIssue(t, otherRSAKey, claims(nil)), pub: &rsaKey.PublicKey, want: jwt.ErrTokenSignatureInvalid},
		{name: "tampered claims", token: tampered, pub: &rsaKey.PublicKey, want: jwt.ErrTokenSignatureInvalid},
		{name: "ES256 token, RSA server", token: mustIssue(t, ecKey, claims(nil)), pub: &rsaKey.PublicKey, want: jwt.ErrTokenSignatureInvalid},
		{name: "alg none", token: signWith(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims(nil)), pub: &rsaKey.PublicKey, want: jwt.ErrTokenSignatureInvalid},
		{name: "HS256 keyed with the public key", token: signWith(jwt.SigningMethodHS256, pubPEM, claims(nil)), pub: &rsaKey.PublicKey, want: jwt.ErrTokenSignatureInvalid},
		{name: "malformed", token: "abc.def", pub: &rsaKey.PublicKey, want: jwt.ErrTokenMalformed},
		{name: "empty", token: "", pub: &rsaKey.PublicKey, want: jwt.ErrTokenMalformed},
		{name: "no username", token: signWith(jwt.SigningMethodRS256, rsaKey, claims(func(c *Claims) {
			c.Username = ""
			c.Issuer = DefaultIssuer
			c.Audience = jwt.ClaimStrings{DefaultAudience}
		})),
			pub: &rsaKey.PublicKey, text: "username claim is empty"},
		{name: "no namespaces", token: signWith(jwt.SigningMethodRS256, rsaKey, claims(func(c *Claims) {
			c.Namespaces = nil
			c.Issuer = DefaultIssuer
			c.Audience = jwt.ClaimStrings{DefaultAudience}
		})),
			pub: &rsaKey.PublicKey, text: "namespaces claim is empty"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := c.opts
			if o.Now == nil {
				o = opts
			}
			got, err := ParseToken(c.token, c.pub, o)
			switch {
			case c.want == nil && c.text == "":
				if err != nil {
					t.Fatalf("valid token refused: %v", err)
				}
				if got.Username != "alice" || got.Namespaces[0] != "team-a" || len(got.Rules) != 1 || got.Subject != "alice" {
					t.Errorf("claims: %+v", got)
				}
			case c.want != nil:
				if !errors.Is(err, c.want) {
					t.Errorf("error %v, want %v", err, c.want)
				}
			default:
				if err == nil || !strings.Contains(err.Error(), c.text) {
					t.Errorf("error %v, want %q", err, c.text)
				}
			}
		})
	}
}

func TestIssueTokenRefuses(t *testing.T) {
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	for name, tc := range map[string]struct {
		key crypto.Signer
		c   Claims
	}{
		"ed25519 key":        {edKey, claims(nil)},
		"P-384 key":          {p384, claims(nil)},
		"empty username":     {rsaKey, claims(func(c *Claims) { c.Username = " " })},
		"no namespaces":      {rsaKey, claims(func(c *Claims) { c.Namespaces = nil })},
		"an empty namespace": {rsaKey, claims(func(c *Claims) { c.Namespaces = []string{"a", ""} })},
	} {
		if _, err := IssueToken(tc.key, tc.c); err == nil {
			t.Errorf("%s: token issued", name)
		}
	}
}

func TestParseUnverified(t *testing.T) {
	tok := mustIssue(t, ecKey, claims(nil))
	c, alg, err := ParseUnverified(tok)
	if err != nil || alg != "ES256" || c.Username != "alice" || c.Issuer != DefaultIssuer || c.Audience[0] != DefaultAudience {
		t.Fatalf("%v %s %+v", err, alg, c)
	}
	if _, _, err := ParseUnverified("x.y"); err == nil {
		t.Error("malformed token decoded")
	}
}

// FuzzParseToken: the token parser never panics, and a token it accepts
// carries a username and namespaces and was signed by the server's key: a
// mutation of a valid token can only be accepted if its signed part (header
// and claims) is unchanged.
func FuzzParseToken(f *testing.F) {
	valid := []string{
		mustIssue(f, rsaKey, claims(nil)),
		mustIssue(f, rsaKey, claims(func(c *Claims) { c.Namespaces = []string{"*"}; c.Rules = nil })),
	}
	signed := map[string]bool{}
	for _, v := range valid {
		f.Add(v)
		signed[v[:strings.LastIndex(v, ".")]] = true
	}
	f.Add(mustIssue(f, otherRSAKey, claims(nil)))
	f.Add(mustIssue(f, ecKey, claims(nil)))
	f.Add("eyJhbGciOiJub25lIn0.eyJ1c2VybmFtZSI6InJvb3QifQ.")
	f.Add("a.b.c")
	f.Add("....")
	f.Add("")
	f.Fuzz(func(t *testing.T, token string) {
		c, err := ParseToken(token, &rsaKey.PublicKey, opts)
		if err != nil {
			if c != nil {
				t.Fatal("claims returned with an error")
			}
			return
		}
		if c.Username == "" || len(c.Namespaces) == 0 {
			t.Fatalf("accepted a token without username or namespaces: %q", token)
		}
		if i := strings.LastIndex(token, "."); i < 0 || !signed[token[:i]] {
			t.Fatalf("accepted a token whose signed part no valid token has: %q", token)
		}
		_, _, _ = ParseUnverified(token)
	})
}
