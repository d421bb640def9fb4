package auth

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

func userWith(ns []string, rules []rbacv1.PolicyRule) user.Info {
	return UserOf(&Claims{Username: "u", Namespaces: ns, Rules: rules})
}

func req(u user.Info, verb, group, resource, ns, name string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{User: u, Verb: verb, APIGroup: group, APIVersion: "v1alpha1", Resource: resource,
		Namespace: ns, Name: name, ResourceRequest: true}
}

const g = "op.view.dcontroller.io"

func TestAuthorize(t *testing.T) {
	views := []string{"*.view.dcontroller.io"}
	viewer := userWith([]string{"*"}, []rbacv1.PolicyRule{{Verbs: []string{"get", "list", "watch"}, APIGroups: views, Resources: []string{"*"}}})
	alice := userWith([]string{"team-a"}, []rbacv1.PolicyRule{{Verbs: []string{"get", "list", "watch", "update", "patch", "delete", "create", "deletecollection"},
		APIGroups: views, Resources: []string{"*"}, ResourceNames: []string{"web-app", "api-service"}}})
	team := userWith([]string{"team-a", "team-b"}, []rbacv1.PolicyRule{{Verbs: []string{"*"}, APIGroups: []string{g}, Resources: []string{"summar*"}}})
	admin := userWith([]string{"*"}, FullAccess)
	none := userWith([]string{"*"}, nil)
	cases := []struct {
		name   string
		attrs  authorizer.Attributes
		allow  bool
		reason string
	}{
		{"viewer get", req(viewer, "get", g, "summaries", "x", "a"), true, ""},
		{"viewer list all namespaces", req(viewer, "list", g, "summaries", "", ""), true, ""},
		{"viewer watch", req(viewer, "watch", g, "summaries", "x", ""), true, ""},
		{"viewer update", req(viewer, "update", g, "summaries", "x", "a"), false, "no rule"},
		{"viewer on a native group", req(viewer, "get", "apps", "deployments", "x", "a"), false, "no rule"},
		{"alice get named", req(alice, "get", g, "summaries", "team-a", "web-app"), true, ""},
		{"alice update named", req(alice, "update", g, "summaries", "team-a", "api-service"), true, ""},
		{"alice get other name", req(alice, "get", g, "summaries", "team-a", "db"), false, "no rule"},
		{"alice delete other name", req(alice, "delete", g, "summaries", "team-a", "db"), false, "no rule"},
		{"alice list collection", req(alice, "list", g, "summaries", "team-a", ""), true, ""},
		{"alice watch one named", req(alice, "watch", g, "summaries", "team-a", "web-app"), true, ""},
		{"alice watch one other", req(alice, "watch", g, "summaries", "team-a", "db"), false, "no rule"},
		{"alice create", req(alice, "create", g, "summaries", "team-a", ""), false, "no rule"},
		{"alice deletecollection", req(alice, "deletecollection", g, "summaries", "team-a", ""), false, "no rule"},
		{"alice other namespace", req(alice, "get", g, "summaries", "team-b", "web-app"), false, `namespace "team-b" is not among the token's namespaces ["team-a"]`},
		{"alice all namespaces", req(alice, "list", g, "summaries", "", ""), false, `requests across all namespaces need namespaces "*"`},
		{"team in b", req(team, "create", g, "summaries", "team-b", ""), true, ""},
		{"team glob resource", req(team, "get", g, "summaryreports", "team-a", "x"), true, ""},
		{"team other resource", req(team, "get", g, "deployments", "team-a", "x"), false, "no rule"},
		{"team other group", req(team, "get", "other.view.dcontroller.io", "summaries", "team-a", "x"), false, "no rule"},
		{"team namespace c", req(team, "get", g, "summaries", "team-c", "x"), false, "namespace"},
		{"admin anything", req(admin, "deletecollection", "", "pods", "", ""), true, ""},
		{"admin impersonating", req(admin, "impersonate", "", "users", "", "alice"), false, "impersonation is not supported"},
		{"no rules", req(none, "get", g, "summaries", "x", "a"), false, "grants no rules"},
		{"subresource not covered", authorizer.AttributesRecord{User: userWith([]string{"*"}, []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{g}, Resources: []string{"summaries"}}}), Verb: "get", APIGroup: g, Resource: "summaries", Subresource: "status",
			Namespace: "x", Name: "a", ResourceRequest: true}, false, "no rule"},
		{"discovery", authorizer.AttributesRecord{User: none, Verb: "get", Path: "/apis"}, true, ""},
		{"non-resource write", authorizer.AttributesRecord{User: admin, Verb: "post", Path: "/apis"}, false, "only reading"},
		{"no user", authorizer.AttributesRecord{Verb: "get", Path: "/apis"}, false, "no user"},
		{"malformed rules", authorizer.AttributesRecord{User: &user.DefaultInfo{Name: "x", Extra: map[string][]string{
			ExtraNamespaces: {"*"}, ExtraRules: {"{"}}}, Verb: "get", APIGroup: g, Resource: "s", ResourceRequest: true}, false, "malformed"},
	}
	z := NewAuthorizer()
	for _, c := range cases {
		d, reason, err := z.Authorize(context.Background(), c.attrs)
		if err != nil || (d == authorizer.DecisionAllow) != c.allow || !strings.Contains(reason, c.reason) {
			t.Errorf("%s: decision %v reason %q err %v; want allow=%v reason containing %q", c.name, d, reason, err, c.allow, c.reason)
		}
		if cd := z.ConditionsAwareAuthorize(context.Background(), c.attrs); (cd.IsAllow()) != c.allow {
			t.Errorf("%s: conditions-aware decision differs", c.name)
		}
	}
}

func TestGlob(t *testing.T) {
	for _, c := range []struct {
		pattern, s string
		want       bool
	}{
		{"*", "", true}, {"*", "anything", true}, {"a", "a", true}, {"a", "b", false},
		{"*.view.dcontroller.io", "op.view.dcontroller.io", true},
		{"*.view.dcontroller.io", "view.dcontroller.io", false},
		{"*.view.dcontroller.io", "a.b.view.dcontroller.io", true},
		{"app-*", "app-summaries", true}, {"app-*", "ap", false},
		{"a*b*c", "abc", true}, {"a*b*c", "aXbYc", true}, {"a*b*c", "acb", false},
		{"a*a", "a", false}, {"a*a", "aa", true}, {"**", "x", true},
	} {
		if got := Glob(c.pattern, c.s); got != c.want {
			t.Errorf("Glob(%q, %q) = %v", c.pattern, c.s, got)
		}
	}
}
