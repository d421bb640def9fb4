package apply_test

import (
	"encoding/json"
	"fmt"

	"github.com/dcontroller/dcontroller/pkg/metacontroller/apply"
)

// A hook first asked for two labels; the API server added a clusterIP and
// another writer a label. The hook now drops label b: Apply removes b,
// keeps what others set, and reports that a write is needed.
func ExampleApply() {
	desired := map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "web", "labels": map[string]any{"a": "1", "b": "2"}},
		"spec":     map[string]any{"ports": []any{map[string]any{"port": int64(80)}}},
	}
	created, _ := apply.WithLastApplied(desired)
	observed := created
	observed["metadata"].(map[string]any)["labels"].(map[string]any)["team"] = "x"
	observed["spec"].(map[string]any)["clusterIP"] = "10.0.0.7"

	desired["metadata"].(map[string]any)["labels"] = map[string]any{"a": "1"}
	merged, changed, _ := apply.Apply(observed, desired)
	labels, _ := json.Marshal(merged["metadata"].(map[string]any)["labels"])
	fmt.Println(changed, string(labels), merged["spec"].(map[string]any)["clusterIP"])

	_, changed, _ = apply.Apply(merged, desired)
	fmt.Println(changed)
	// Output:
	// true {"a":"1","team":"x"} 10.0.0.7
	// false
}
