package auth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/dcontroller/dcontroller/pkg/auth"
)

// A token minted for alice is validated with the server's public key and
// authorizes her requests with its rules.
func Example() {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	token, _ := auth.IssueToken(key, auth.Claims{
		RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))},
		Username:         "alice",
		Namespaces:       []string{"team-a"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{"*.view.dcontroller.io"},
			Resources: []string{"*"}, ResourceNames: []string{"web-app"}}},
	})
	claims, err := auth.ParseToken(token, key.Public(), auth.ValidationOptions{})
	fmt.Println(claims.Username, claims.Namespaces, err)

	z := auth.NewAuthorizer()
	for _, name := range []string{"web-app", "db"} {
		d, reason, _ := z.Authorize(context.Background(), authorizer.AttributesRecord{
			User: auth.UserOf(claims), Verb: "get", APIGroup: "shop.view.dcontroller.io", Resource: "carts",
			Namespace: "team-a", Name: name, ResourceRequest: true,
		})
		fmt.Printf("%s: %v %q\n", name, d == authorizer.DecisionAllow, reason)
	}
	// Output:
	// alice [team-a] <nil>
	// web-app: true ""
	// db: false "no rule of the token allows it"
}
