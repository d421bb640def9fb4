package expression

import "testing"

// BenchmarkEval evaluates a @project-like map expression over a pod.
func BenchmarkEval(b *testing.B) {
	e := mustParse(b, `{
	  "apiVersion": "v1",
	  "kind": "$.kind",
	  "metadata": {
	    "name": "$.metadata.name",
	    "namespace": "$.metadata.namespace",
	    "labels": {"app": "$.metadata.labels.app"},
	    "annotations": {
	      "dcontroller.io/container-num": {"@string": {"@len": ["$.spec.containers"]}},
	      "dcontroller.io/ready": {"@string": {"@and": ["$.status.ready", {"@eq": ["$.status.phase", "Running"]}]}}
	    }
	  },
	  "spec": {
	    "images": {"@map": ["$$.image", "$.spec.containers"]},
	    "replicas": {"@add": ["$.spec.replicas", 1]}
	  }
	}`)
	ctx := &Context{Subject: pod(b)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Eval(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
