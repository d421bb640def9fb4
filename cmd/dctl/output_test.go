package main

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestWriteObjectsEncoding checks that the streaming encoders print the
// bytes of json.MarshalIndent (-o json) and of sigs.k8s.io/yaml's Marshal
// (-o yaml) that eval printed before.
func TestWriteObjectsEncoding(t *testing.T) {
	objs := []*unstructured.Unstructured{
		{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "a", "namespace": "ns", "labels": map[string]any{}},
			"data":     map[string]any{"html": "<a href=\"x\">&</a>", "unicode": "żółw \u2028 \t\n", "empty": "", "yes": "yes", "num": "1.0"}}},
		{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Thing",
			"metadata": map[string]any{"name": "b"},
			"spec": map[string]any{
				"ints": []any{int64(0), int64(-1), int64(1 << 62)}, "floats": []any{0.5, 1e21, 1.0, -2.25e-7},
				"bools": []any{true, false}, "null": nil, "emptyList": []any{}, "emptyMap": map[string]any{},
				"nested": []any{map[string]any{"b": []any{[]any{}, []any{map[string]any{"z": "1", "a": "2", "A": "3", "a10": 1, "a2": 2}}}}},
			}}},
	}
	items := []any{objs[0].Object, objs[1].Object}
	want, err := json.MarshalIndent(map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{}, "items": items}, "", "    ")
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := writeObjects(&got, "json", objs); err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want)+"\n" {
		t.Errorf("-o json differs from json.MarshalIndent\n--- got\n%s\n--- want\n%s", got.String(), want)
	}
	var wantYAML bytes.Buffer
	for i, o := range objs {
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			wantYAML.WriteString("---\n")
		}
		wantYAML.Write(b)
	}
	got.Reset()
	if err := writeObjects(&got, "yaml", objs); err != nil {
		t.Fatal(err)
	}
	if got.String() != wantYAML.String() {
		t.Errorf("-o yaml differs from sigs.k8s.io/yaml\n--- got\n%s\n--- want\n%s", got.String(), wantYAML.String())
	}
	got.Reset()
	if err := writeObjects(&got, "json", nil); err != nil || got.String() != "{\n    \"apiVersion\": \"v1\",\n    \"items\": [],\n    \"kind\": \"List\",\n    \"metadata\": {}\n}\n" {
		t.Errorf("an empty list: %q %v", got.String(), err)
	}
}

// countingWriter counts what is written and keeps its first and last bytes.
type countingWriter struct {
	n          int64
	head, tail []byte
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	if len(c.head) < 64 {
		c.head = append(c.head, p[:min(len(p), 64-len(c.head))]...)
	}
	if len(p) >= 64 {
		c.tail = append(c.tail[:0], p[len(p)-64:]...)
	} else {
		c.tail = append(c.tail, p...)
		if len(c.tail) > 64 {
			c.tail = append(c.tail[:0], c.tail[len(c.tail)-64:]...)
		}
	}
	return len(p), nil
}

// nested returns depth levels of lists around "x" as JSON.
func nested(depth int) string {
	return strings.Repeat("[", depth) + `"x"` + strings.Repeat("]", depth)
}

// nestedMaps returns depth levels of {"a": ...} around "x" as JSON.
func nestedMaps(depth int) string {
	return strings.Repeat(`{"a":`, depth) + `"x"` + strings.Repeat("}", depth)
}

const deepOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: deep}
spec:
  controllers:
    - name: copy
      sources: [{apiGroup: example.com, version: v1, kind: Deep}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
          spec: {wrapped: {once: "$.spec"}}
      target: {kind: DeepCopy}
`

// TestEvalDeepObject runs eval on an object nested 9,990 levels deep (20
// KB of input) and checks that both output formats print it with memory
// proportional to the input, not to the printed text (json.MarshalIndent
// built all 380 MB of it in memory, several times over); that an output
// deeper than 10000 levels is reported (exit 2) instead of printed; and
// that an input deeper than the decoders' limit is refused.
func TestEvalDeepObject(t *testing.T) {
	op := writeFile(t, "op.yaml", deepOperator)
	// The input objects are nested 9,990 levels deep: themselves, their
	// spec and 9,988 lists (20 KB) or maps (50 KB); the copies are 2
	// levels deeper (wrapped, once). Indented, the lists print 380 MB of
	// JSON (and 20 KB of YAML: "- - - ..."), the maps 380 MB of JSON and
	// 95 MB of YAML.
	const depth = 9990
	for shape, spec := range map[string]string{"lists": nested(depth - 2), "maps": nestedMaps(depth - 2)} {
		input := writeFile(t, "in.json", `{"apiVersion":"example.com/v1","kind":"Deep","metadata":{"name":"d","namespace":"ns"},"spec":`+spec+`}`)
		for _, format := range []string{"json", "yaml"} {
			t.Run(shape+"/"+format, func(t *testing.T) {
				var out countingWriter
				var stderr bytes.Buffer
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				code := Execute([]string{"eval", "-f", op, "-i", input, "-o", format}, nil, &out, &stderr)
				runtime.ReadMemStats(&after)
				if code != 0 {
					t.Fatalf("exit %d: %s", code, stderr.String())
				}
				alloc := after.TotalAlloc - before.TotalAlloc
				t.Logf("%d MB printed, %d MB allocated", out.n>>20, alloc>>20)
				if out.n < int64(len(spec)) {
					t.Errorf("printed %d bytes", out.n)
				}
				if alloc > 128<<20 {
					t.Errorf("allocated %d MB to print %d MB: the encoding holds the text in memory", alloc>>20, out.n>>20)
				}
				// JSON ends with the List, YAML with the deepest value.
				if end := strings.TrimSpace(string(out.tail)); format == "json" && !strings.HasSuffix(end, "}") || format == "yaml" && !strings.HasSuffix(end, "x") {
					t.Errorf("output ends %q", out.tail)
				}
			})
		}
	}

	// Deeper than 10000 levels once copied: not written (the view store
	// refuses it, as encoding/json would not decode it), reported (exit 2).
	tooDeepInput := writeFile(t, "in.json", `{"apiVersion":"example.com/v1","kind":"Deep","metadata":{"name":"d","namespace":"ns"},"spec":`+nested(10000-2)+`}`)
	var stdout, stderr bytes.Buffer
	code := Execute([]string{"eval", "-f", op, "-i", tooDeepInput, "-o", "json"}, nil, &stdout, &stderr)
	if code != 2 {
		t.Errorf("exit %d, want 2; stderr: %.300s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "nested more than 10000 levels deep") {
		t.Errorf("stderr: %.300s", stderr.String())
	}
	if strings.Contains(stdout.String(), `"DeepCopy"`) {
		t.Errorf("the object too deep was printed")
	}

	// Inputs deeper than the JSON and YAML decoders' limit (10000).
	for name, content := range map[string]string{
		"in.json": `{"apiVersion":"example.com/v1","kind":"Deep","metadata":{"name":"d","namespace":"ns"},"spec":` + nested(10000) + `}`,
		"in.yaml": "apiVersion: example.com/v1\nkind: Deep\nmetadata: {name: d, namespace: ns}\nspec: " + nested(10000) + "\n",
	} {
		var stdout, stderr bytes.Buffer
		code := Execute([]string{"eval", "-f", op, "-i", writeFile(t, name, content)}, nil, &stdout, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), "exceeded max depth") {
			t.Errorf("%s: exit %d, stderr %s", name, code, stderr.String())
		}
	}
}
