package expression

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestSmoke(t *testing.T) {
	dec := json.NewDecoder(strings.NewReader(`{"metadata":{"name":"$.metadata.name","annotations":{"n":{"@string":{"@len":["$.spec.containers"]}}}}, "$.metadata.labels.x": {"@cel": "self.spec.containers.size() * 2"}}`))
	dec.UseNumber()
	var spec any
	dec.Decode(&spec)
	e, err := Parse(spec, "p")
	if err != nil {
		t.Fatal(err)
	}
	v, err := Eval(e, map[string]any{"metadata": map[string]any{"name": "a"}, "spec": map[string]any{"containers": []any{1, 2, 3}}})
	t.Logf("%#v %v", v, err)
}
