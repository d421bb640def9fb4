package diff_test

import (
	"os"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dcontroller/dcontroller/pkg/diff"
	"github.com/dcontroller/dcontroller/pkg/object"
)

// A Result prints as kubectl diff prints: one "diff -u -N" section per
// object, the fields the API server manages left out (diff.Compared).
func ExampleResult_WriteUnified() {
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	live := map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a-copy", "namespace": "demo", "resourceVersion": "41", "uid": "1234"},
		"data":     map[string]any{"tier": "gold", "version": "1"}}
	merged := map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a-copy", "namespace": "demo", "resourceVersion": "41", "uid": "1234"},
		"data":     map[string]any{"tier": "gold", "version": "2"}}
	created := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "demo", "generation": int64(1)},
		"status":   map[string]any{}}
	r := &diff.Result{Changes: []diff.Change{
		{Action: diff.Update, GVK: cm, Key: object.Key{Namespace: "demo", Name: "a-copy"},
			Live: diff.Compared(live), Merged: diff.Compared(merged)},
		{Action: diff.Create, GVK: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
			Key: object.Key{Namespace: "demo", Name: "web"}, Merged: diff.Compared(created)},
	}}
	_ = r.WriteUnified(os.Stdout)
	// Output:
	// diff -u -N live/v1.ConfigMap.demo.a-copy merged/v1.ConfigMap.demo.a-copy
	// --- live/v1.ConfigMap.demo.a-copy
	// +++ merged/v1.ConfigMap.demo.a-copy
	// @@ -1,7 +1,7 @@
	//  apiVersion: v1
	//  data:
	//    tier: gold
	// -  version: "1"
	// +  version: "2"
	//  kind: ConfigMap
	//  metadata:
	//    name: a-copy
	// diff -u -N live/apps.v1.Deployment.demo.web merged/apps.v1.Deployment.demo.web
	// --- live/apps.v1.Deployment.demo.web
	// +++ merged/apps.v1.Deployment.demo.web
	// @@ -0,0 +1,5 @@
	// +apiVersion: apps/v1
	// +kind: Deployment
	// +metadata:
	// +  name: web
	// +  namespace: demo
}
