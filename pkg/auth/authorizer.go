package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// Authorizer decides API server requests with the grants of the requesting
// user's token (see Authorize).
type Authorizer struct{}

var _ authorizer.Authorizer = Authorizer{}

// NewAuthorizer returns the token-rules authorizer.
func NewAuthorizer() Authorizer { return Authorizer{} }

// Authorize implements authorizer.Authorizer. It allows:
//
//   - non-resource requests that only read (get, head: discovery, OpenAPI,
//     /version, /healthz) for any authenticated user;
//   - a resource request whose namespace is in the token's namespaces ("*"
//     allows every namespace); a request with no namespace (a list or watch
//     across all namespaces, or a cluster-scoped resource) needs "*";
//   - and that matches one of the token's rules. A rule matches, as a
//     Kubernetes RBAC PolicyRule does, when its verbs, apiGroups and
//     resources each contain the request's (or "*"). Entries may be globs
//     with "*" standing for any run of characters, so "*.view.dcontroller.io"
//     matches every operator's view group. A rule with resourceNames
//     restricts the requests that name an object (get, update, patch,
//     delete, and a list or watch selecting one name with
//     fieldSelector=metadata.name=...) to those names; a list or watch of a
//     whole collection stays allowed (the Δ-controller convention), while
//     create and deletecollection, which Kubernetes RBAC cannot restrict by
//     name, are not allowed by such a rule.
//
// Everything else is denied with the reason in the 403 Status message. A
// token without rules is allowed no resource request, and impersonation
// (Impersonate-* headers) is never allowed, whatever the rules say.
func (Authorizer) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	u := a.GetUser()
	if u == nil {
		return authorizer.DecisionDeny, "no user", nil
	}
	if strings.HasPrefix(a.GetVerb(), "impersonate") {
		// Tokens carry their grants; a user taking another's name would
		// get no grants or, with impersonated extras, chosen ones.
		return authorizer.DecisionDeny, "impersonation is not supported", nil
	}
	if !a.IsResourceRequest() {
		if a.GetVerb() == "get" || a.GetVerb() == "head" {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionDeny, "only reading non-resource paths is allowed", nil
	}
	namespaces := u.GetExtra()[ExtraNamespaces]
	if reason, ok := namespaceAllowed(namespaces, a.GetNamespace()); !ok {
		return authorizer.DecisionDeny, reason, nil
	}
	var rules []rbacv1.PolicyRule
	if raw := u.GetExtra()[ExtraRules]; len(raw) == 1 {
		if err := json.Unmarshal([]byte(raw[0]), &rules); err != nil {
			return authorizer.DecisionDeny, "the token's rules are malformed", nil
		}
	}
	for _, r := range rules {
		if RuleAllows(r, a) {
			return authorizer.DecisionAllow, "", nil
		}
	}
	if len(rules) == 0 {
		return authorizer.DecisionDeny, "the token grants no rules", nil
	}
	return authorizer.DecisionDeny, "no rule of the token allows it", nil
}

// ConditionsAwareAuthorize implements authorizer.Authorizer: decisions are
// unconditional.
func (z Authorizer) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(z.Authorize(ctx, a))
}

// EvaluateConditions implements authorizer.Authorizer; there are no
// conditions to evaluate.
func (Authorizer) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

func namespaceAllowed(allowed []string, ns string) (string, bool) {
	for _, a := range allowed {
		if a == AllNamespaces {
			return "", true
		}
	}
	if ns == "" {
		return fmt.Sprintf("requests across all namespaces need namespaces \"*\"; the token allows %s", quoteList(allowed)), false
	}
	for _, a := range allowed {
		if a == ns {
			return "", true
		}
	}
	return fmt.Sprintf("namespace %q is not among the token's namespaces %s", ns, quoteList(allowed)), false
}

func quoteList(l []string) string {
	if len(l) == 0 {
		return "(none)"
	}
	q := make([]string, len(l))
	for i, s := range l {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// RuleAllows reports whether one rule allows a resource request (see
// Authorizer.Authorize for the semantics).
func RuleAllows(r rbacv1.PolicyRule, a authorizer.Attributes) bool {
	if !anyMatch(r.Verbs, a.GetVerb()) || !anyMatch(r.APIGroups, a.GetAPIGroup()) {
		return false
	}
	resource := a.GetResource()
	if a.GetSubresource() != "" {
		resource += "/" + a.GetSubresource()
	}
	if !anyMatch(r.Resources, resource) {
		return false
	}
	if len(r.ResourceNames) == 0 {
		return true
	}
	switch a.GetVerb() {
	case "create", "deletecollection":
		return false
	case "list", "watch":
		return a.GetName() == "" || anyMatch(r.ResourceNames, a.GetName())
	}
	return a.GetName() != "" && anyMatch(r.ResourceNames, a.GetName())
}

func anyMatch(patterns []string, s string) bool {
	for _, p := range patterns {
		if Glob(p, s) {
			return true
		}
	}
	return false
}

// Glob reports whether s matches pattern, where each "*" stands for any run
// of characters (including none and dots) and everything else is literal.
func Glob(pattern, s string) bool {
	if !strings.Contains(pattern, "*") {
		return pattern == s
	}
	parts := strings.Split(pattern, "*")
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return len(s) >= len(last) && strings.HasSuffix(s, last)
}
