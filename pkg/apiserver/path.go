package apiserver

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// requestInfoFactory parses request paths as the generic server's filter
// chain does: /apis/<group>/<version>/... and the group-less /api/v1/....
var requestInfoFactory = &request.RequestInfoFactory{
	APIPrefixes:          sets.NewString("api", "apis"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

// TargetType classifies a request path.
type TargetType int

const (
	// TargetOther is neither discovery nor a served resource (404 here).
	TargetOther TargetType = iota
	// TargetGroup is the discovery document of one group: /apis/<group>.
	TargetGroup
	// TargetGroupVersion is the resource list of one group/version:
	// /apis/<group>/<version> or /api/v1.
	TargetGroupVersion
	// TargetResource is a request on a resource: a collection or one object.
	TargetResource
)

// Target is what a request path addresses.
type Target struct {
	Type TargetType
	// GroupVersion is set for every type but TargetOther.
	GroupVersion schema.GroupVersion
	// Resource, Namespace, Name and Verb are set for TargetResource (Name is
	// empty on collections; Namespace empty across all namespaces or for a
	// cluster-scoped resource).
	Resource  string
	Namespace string
	Name      string
	Verb      string
}

// ParseRequestPath resolves an HTTP method and URL (path and query) to what
// it addresses, exactly as the server does for a request. It fails on paths
// the Kubernetes request-info parser rejects and on subresources (views have
// none).
func ParseRequestPath(method, rawURL string) (Target, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return Target{}, err
	}
	req := &http.Request{Method: method, URL: u}
	info, err := requestInfoFactory.NewRequestInfo(req)
	if err != nil {
		return Target{}, err
	}
	return classify(info)
}

// classify turns the generic server's request info into a Target.
func classify(info *request.RequestInfo) (Target, error) {
	if !info.IsResourceRequest {
		parts := splitPath(info.Path)
		for _, p := range parts {
			if p == "" {
				return Target{Type: TargetOther}, nil
			}
		}
		switch {
		case len(parts) == 2 && parts[0] == "apis":
			return Target{Type: TargetGroup, GroupVersion: schema.GroupVersion{Group: parts[1]}}, nil
		case len(parts) == 3 && parts[0] == "apis":
			return Target{Type: TargetGroupVersion, GroupVersion: schema.GroupVersion{Group: parts[1], Version: parts[2]}}, nil
		case len(parts) == 2 && parts[0] == "api":
			return Target{Type: TargetGroupVersion, GroupVersion: schema.GroupVersion{Version: parts[1]}}, nil
		}
		return Target{Type: TargetOther}, nil
	}
	if info.Subresource != "" {
		return Target{}, fmt.Errorf("subresource %q is not served", info.Subresource)
	}
	if info.Resource == "" || info.APIVersion == "" || (info.APIPrefix == "apis" && info.APIGroup == "") {
		return Target{}, fmt.Errorf("path %q names no resource", info.Path)
	}
	return Target{
		Type:         TargetResource,
		GroupVersion: schema.GroupVersion{Group: info.APIGroup, Version: info.APIVersion},
		Resource:     info.Resource,
		Namespace:    info.Namespace,
		Name:         info.Name,
		Verb:         info.Verb,
	}, nil
}

// Method returns the HTTP method of a resource target's verb ("" for an
// unknown verb).
func (t Target) Method() string {
	switch t.Verb {
	case "get", "list", "watch":
		return http.MethodGet
	case "create":
		return http.MethodPost
	case "update":
		return http.MethodPut
	case "patch":
		return http.MethodPatch
	case "delete", "deletecollection":
		return http.MethodDelete
	}
	return ""
}

// URL returns the canonical URL (path and query) of a target: with
// Method, a request that ParseRequestPath resolves to the same target. A
// list or watch naming one object selects it with a field selector.
func (t Target) URL() string {
	esc := url.PathEscape
	prefix := "/apis/" + esc(t.GroupVersion.Group) + "/" + esc(t.GroupVersion.Version)
	if t.GroupVersion.Group == "" {
		prefix = "/api/" + esc(t.GroupVersion.Version)
	}
	switch t.Type {
	case TargetGroup:
		return "/apis/" + esc(t.GroupVersion.Group)
	case TargetGroupVersion:
		return prefix
	case TargetResource:
		p := prefix
		if t.Namespace != "" {
			p += "/namespaces/" + esc(t.Namespace)
		}
		p += "/" + esc(t.Resource)
		q := url.Values{}
		switch {
		case t.Name == "":
		case t.Verb == "list" || t.Verb == "watch":
			q.Set("fieldSelector", fields.OneTermEqualSelector("metadata.name", t.Name).String())
		default:
			p += "/" + esc(t.Name)
		}
		if t.Verb == "watch" {
			q.Set("watch", "true")
		}
		if len(q) > 0 {
			p += "?" + q.Encode()
		}
		return p
	}
	return ""
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}
