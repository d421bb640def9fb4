package operator

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dcontroller/dcontroller/pkg/object"
)

// Offline, Secrets are stored as the API server stores them: an input's
// stringData and a target's stringData end up base64-encoded in data, and a
// pipeline reads a Secret source's data decoded.
func TestOfflineSecretStringData(t *testing.T) {
	ctx := context.Background()
	off := mustOffline(t, `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: secrets}
spec:
  controllers:
    - name: url
      sources: [{apiGroup: "", kind: Secret, labelSelector: {matchLabels: {role: db}}}]
      pipeline:
        "@project":
          metadata: {name: {"@concat": ["$.metadata.name", "-url"]}, namespace: "$.metadata.namespace"}
          stringData: {url: {"@concat": ["pg://", "$.data.username", "@", "$.data.host"]}}
      target: {apiGroup: "", kind: Secret}
`, OfflineOptions{})
	if err := off.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := off.ApplyAll(ctx, input(t, `apiVersion: v1
kind: Secret
metadata: {name: db, namespace: x, labels: {role: db}}
data: {username: YWRtaW4=}
stringData: {host: db.x}
`)); err != nil {
		t.Fatal(err)
	}
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	for name, want := range map[string]map[string]any{
		"db":     {"username": "YWRtaW4=", "host": "ZGIueA=="}, // host: db.x
		"db-url": {"url": "cGc6Ly9hZG1pbkBkYi54"},              // pg://admin@db.x
	} {
		got, err := off.Store.Get(gvk, object.Key{Namespace: "x", Name: name})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := got.Object["stringData"]; ok {
			t.Errorf("secret %s keeps stringData: %v", name, got.Object)
		}
		if !object.Equal(got.Object["data"], want) {
			t.Errorf("secret %s: data %v, want %v", name, got.Object["data"], want)
		}
	}
}
