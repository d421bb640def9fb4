package apiserver

import (
	"flag"
	"io"
	"net/http"
	"strings"
	"testing"

	"k8s.io/klog/v2"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dcontroller/dcontroller/pkg/object"
)

var viewGV = schema.GroupVersion{Group: "op.view.dcontroller.io", Version: "v1alpha1"}

func TestParseRequestPath(t *testing.T) {
	cases := []struct {
		method, url string
		want        Target
		err         bool
	}{
		{"GET", "/apis/op.view.dcontroller.io", Target{Type: TargetGroup, GroupVersion: schema.GroupVersion{Group: "op.view.dcontroller.io"}}, false},
		{"GET", "/apis/op.view.dcontroller.io/v1alpha1", Target{Type: TargetGroupVersion, GroupVersion: viewGV}, false},
		{"GET", "/api/v1", Target{Type: TargetGroupVersion, GroupVersion: schema.GroupVersion{Version: "v1"}}, false},
		{"GET", "/apis", Target{Type: TargetOther}, false},
		{"GET", "/openapi/v3", Target{Type: TargetOther}, false},
		{"GET", "/apis//v1", Target{Type: TargetOther}, false},
		{"GET", "/apis/op.view.dcontroller.io/v1alpha1/namespaces/ns/summaries",
			Target{Type: TargetResource, GroupVersion: viewGV, Resource: "summaries", Namespace: "ns", Verb: "list"}, false},
		{"GET", "/apis/op.view.dcontroller.io/v1alpha1/summaries?watch=true",
			Target{Type: TargetResource, GroupVersion: viewGV, Resource: "summaries", Verb: "watch"}, false},
		{"GET", "/apis/op.view.dcontroller.io/v1alpha1/namespaces/ns/summaries?fieldSelector=metadata.name%3Da",
			Target{Type: TargetResource, GroupVersion: viewGV, Resource: "summaries", Namespace: "ns", Name: "a", Verb: "list"}, false},
		{"GET", "/apis/op.view.dcontroller.io/v1alpha1/namespaces/ns/summaries/a",
			Target{Type: TargetResource, GroupVersion: viewGV, Resource: "summaries", Namespace: "ns", Name: "a", Verb: "get"}, false},
		{"PUT", "/apis/op.view.dcontroller.io/v1alpha1/namespaces/ns/summaries/a",
			Target{Type: TargetResource, GroupVersion: viewGV, Resource: "summaries", Namespace: "ns", Name: "a", Verb: "update"}, false},
		{"DELETE", "/apis/op.view.dcontroller.io/v1alpha1/namespaces/ns/summaries",
			Target{Type: TargetResource, GroupVersion: viewGV, Resource: "summaries", Namespace: "ns", Verb: "deletecollection"}, false},
		{"POST", "/api/v1/namespaces/default/pods",
			Target{Type: TargetResource, GroupVersion: schema.GroupVersion{Version: "v1"}, Resource: "pods", Namespace: "default", Verb: "create"}, false},
		{"PATCH", "/apis/op.view.dcontroller.io/v1alpha1/namespaces/ns/summaries/a/status", Target{}, true},
		{"GET", "/apis/op.view.dcontroller.io/v1alpha1/watch", Target{}, true},
	}
	for _, c := range cases {
		got, err := ParseRequestPath(c.method, c.url)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("%s %s: %+v, %v; want %+v (error %v)", c.method, c.url, got, err, c.want, c.err)
		}
	}
}

// TestViewNamesRoundTripURLs: every name the view rule accepts
// (object.ValidateViewName) addresses its object: a get's URL path and a
// list's or watch's field selector resolve to the same name.
func TestViewNamesRoundTripURLs(t *testing.T) {
	for _, name := range []string{"web-TCP-80", "Manual:Obj_1", "a b?c#d;e&f", `A,b=c!d\e`, "Ünï", "a\nb", "a.", "..a", strings.Repeat("Z", 253)} {
		if msgs := object.ValidateViewName(name, false); len(msgs) > 0 {
			t.Fatalf("%q: not a valid view name: %v", name, msgs)
		}
		for _, verb := range []string{"get", "delete", "list", "watch"} {
			tg := Target{Type: TargetResource, GroupVersion: viewGV, Resource: "summaries", Namespace: "ns", Name: name, Verb: verb}
			got, err := ParseRequestPath(tg.Method(), tg.URL())
			if err != nil || got != tg {
				t.Errorf("%s %q: URL %q resolves to %+v, %v", verb, name, tg.URL(), got, err)
			}
		}
	}
}

// FuzzParseRequestPath: the request path parser never panics, and every
// target it resolves round-trips through its canonical URL.
func FuzzParseRequestPath(f *testing.F) {
	quietKlog()
	for _, seed := range [][2]string{
		{"GET", "/apis/op.view.dcontroller.io/v1alpha1/namespaces/ns/summaries/a"},
		{"GET", "/apis/op.view.dcontroller.io/v1alpha1/summaries?watch=1&resourceVersion=10"},
		{"GET", "/apis/op.view.dcontroller.io/v1alpha1/namespaces/ns/summaries?fieldSelector=metadata.name%3Dx,metadata.namespace%3Dns&labelSelector=a%3Db"},
		{"DELETE", "/api/v1/namespaces/default/pods"},
		{"PATCH", "/api/v1/namespaces/ns"},
		{"POST", "/apis/g/v/namespaces/ns/r/n/sub/extra"},
		{"GET", "/apis/g/v/watch/namespaces/ns/r/n"},
		{"GET", "/apis/g/v/proxy/namespaces/ns/r/n"},
		{"GET", "/apis/g/v/namespaces//r"},
		{"PUT", "/apis/g%2Fx/v/namespaces/n%20s/r/a%3Fb"},
		{"GET", "//apis///"},
		{"HEAD", "/apis/g"},
		{"OPTIONS", "/api"},
		{"GET", "/apis/g/v/r?watch=maybe&fieldSelector=metadata.name%3D..%2F"},
		{"GET", "http://host:1/apis/g/v/r#frag"},
		{"GET", "%zz"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, method, rawURL string) {
		target, err := ParseRequestPath(method, rawURL)
		if err != nil {
			return
		}
		switch target.Type {
		case TargetOther:
			return
		case TargetGroup, TargetGroupVersion:
			if target.GroupVersion.Group == "" && target.Type == TargetGroup {
				t.Fatalf("%s %q: group target without a group", method, rawURL)
			}
		case TargetResource:
			if target.Resource == "" || target.GroupVersion.Version == "" {
				t.Fatalf("%s %q: resource target without resource or version: %+v", method, rawURL, target)
			}
			if target.Method() == "" {
				return // a verb the server refuses (proxy, connect, ...)
			}
		}
		m := target.Method()
		if m == "" {
			m = http.MethodGet
		}
		again, err := ParseRequestPath(m, target.URL())
		if err != nil || again != target {
			t.Fatalf("%s %q -> %+v; its URL %s %q -> %+v, %v", method, rawURL, target, m, target.URL(), again, err)
		}
	})
}

// quietKlog drops the request-info parser's logs of malformed queries.
func quietKlog() {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	klog.SetOutput(io.Discard)
}
