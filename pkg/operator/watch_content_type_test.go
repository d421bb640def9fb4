package operator

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/dcontroller/dcontroller/pkg/watchcodec"
)

// versionDiscovery answers ServerVersion from its answers, one per call
// (the last one again when they run out), and counts the calls.
type versionDiscovery struct {
	discovery.DiscoveryInterface
	answers []*version.Info // nil: an error
	calls   int
}

func (d *versionDiscovery) ServerVersion() (*version.Info, error) {
	a := d.answers[min(d.calls, len(d.answers)-1)]
	d.calls++
	if a == nil {
		return nil, errors.New("connection refused")
	}
	return a, nil
}

// TestProtobufWatchesLogsChoice: the manager logs the watch content type of
// the kinds built into the API server once, when the first such kind is
// watched: JSON when asked for it (the API server is not asked its
// version), protobuf when the API server is no newer than dctl's
// Kubernetes types, JSON with the reason when it is newer; an unknown
// version is logged each time and asked again.
func TestProtobufWatchesLogsChoice(t *testing.T) {
	current := &version.Info{Major: "1", Minor: fmt.Sprint(watchcodec.KubeTypesMinor), GitVersion: "v1.x"}
	newer := &version.Info{Major: "1", Minor: fmt.Sprint(watchcodec.KubeTypesMinor + 1), GitVersion: "v1.y"}
	for _, tc := range []struct {
		name        string
		contentType string
		answers     []*version.Info
		protobuf    []bool   // per call: a protobuf client given
		logs        []string // in order, one substring each
		asked       int      // ServerVersion calls
	}{
		{"JSON asked for", runtime.ContentTypeJSON, []*version.Info{current}, []bool{false, false, false},
			[]string{`"msg"="watching every kind in JSON, as asked" "contentType"="application/json"`}, 0},
		{"protobuf", runtime.ContentTypeProtobuf, []*version.Info{current}, []bool{true, true, true},
			[]string{`"msg"="watching the kinds built into the API server in protobuf" "server"="v1.x"`}, 1},
		{"protobuf by default", "", []*version.Info{current}, []bool{true, true},
			[]string{`"msg"="watching the kinds built into the API server in protobuf"`}, 1},
		{"server newer than the types", runtime.ContentTypeProtobuf, []*version.Info{newer}, []bool{false, false},
			[]string{`"msg"="watching every kind in JSON: the API server (1.` + fmt.Sprint(watchcodec.KubeTypesMinor+1)}, 1},
		{"version unknown, then known", runtime.ContentTypeProtobuf, []*version.Info{nil, current}, []bool{false, true, true},
			[]string{`"watching in JSON: the API server's version is unknown"`, `"watching the kinds built into the API server in protobuf"`}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs []string
			log := funcr.New(func(_, args string) { logs = append(logs, args) }, funcr.Options{})
			disc := &versionDiscovery{answers: tc.answers}
			client, err := protobufWatches(&rest.Config{Host: "https://127.0.0.1:1"}, http.DefaultClient, disc,
				ManagerOptions{WatchContentType: tc.contentType, Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range tc.protobuf {
				if got := client() != nil; got != want {
					t.Errorf("call %d: protobuf client %v, want %v", i, got, want)
				}
			}
			if len(logs) != len(tc.logs) {
				t.Fatalf("logged %q, want %d lines", logs, len(tc.logs))
			}
			for i, want := range tc.logs {
				if !strings.Contains(logs[i], want) {
					t.Errorf("log line %d: %s, want %s", i, logs[i], want)
				}
			}
			if disc.calls != tc.asked {
				t.Errorf("the API server's version was asked %d times, want %d", disc.calls, tc.asked)
			}
		})
	}
}
