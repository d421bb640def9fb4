package dtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/dcontroller/dcontroller/pkg/object"
)

// Bounds of one test file, so that a hostile file costs bounded memory and
// time: its size, its documents, the steps of one test and the entries of
// one list of a step.
const (
	MaxFileBytes    = 4 << 20
	MaxDocuments    = 1000
	MaxSteps        = 1000
	MaxStepEntries  = 10000
	MaxOperatorRefs = 100
)

// Parse reads the tests of a test file: a YAML (or JSON) stream of
// documents of apiVersion dcontroller.io/v1alpha1, kind Test. path only
// names the file in errors. Decoding is strict (an unknown or duplicate
// field is an error) and every field is checked before anything runs, so an
// error names the file, the document and the field at fault, as
// `x_test.yaml: document 2 (test "t"): spec.steps[0].delete[1].name: required`.
// A file over MaxFileBytes, or with more documents, steps or step entries
// than the bounds above, is refused.
func Parse(data []byte, path string) ([]*Test, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d a test file may have", path, len(data), MaxFileBytes)
	}
	docs, err := splitDocuments(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("%s: no Test found", path)
	}
	var out []*Test
	for i, raw := range docs {
		t, err := parseDocument(raw)
		if err != nil {
			what := fmt.Sprintf("document %d", i+1)
			if t != nil && t.Metadata.Name != "" {
				what += fmt.Sprintf(" (test %q)", t.Metadata.Name)
			}
			return nil, fmt.Errorf("%s: %s: %w", path, what, err)
		}
		t.File, t.Index = path, i+1
		out = append(out, t)
	}
	return out, nil
}

// splitDocuments splits a YAML or JSON stream into the JSON of its
// non-empty documents; a YAML mapping that sets a key twice is an error.
func splitDocuments(data []byte) ([][]byte, error) {
	var out [][]byte
	yr := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for n := 1; ; n++ {
		doc, err := yr.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		raw, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
			continue
		}
		if len(out) == MaxDocuments {
			return nil, fmt.Errorf("more than %d documents", MaxDocuments)
		}
		out = append(out, raw)
	}
}

// parseDocument decodes and checks one document. On an error, the returned
// test (when not nil) carries the name, for the message.
func parseDocument(raw []byte) (*Test, error) {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &tm); err != nil {
		return nil, fmt.Errorf("not an object: %w", err)
	}
	if tm.APIVersion != APIVersion || tm.Kind != Kind {
		return nil, fmt.Errorf("expected apiVersion %s and kind %s, got apiVersion %q kind %q", APIVersion, Kind, tm.APIVersion, tm.Kind)
	}
	t := &Test{}
	strict, err := sigsjson.UnmarshalStrict(raw, t, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return nil, err
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for j, e := range strict {
			msgs[j] = e.Error()
		}
		return t, errors.New(strings.Join(msgs, "; "))
	}
	return t, t.validate()
}

func (t *Test) validate() error {
	if t.Metadata.Name == "" {
		return errors.New("metadata.name: required")
	}
	s := &t.Spec
	if len(s.Operators) == 0 {
		return errors.New("spec.operators: required (the files of the operators under test)")
	}
	if len(s.Operators) > MaxOperatorRefs {
		return fmt.Errorf("spec.operators: %d files, more than %d", len(s.Operators), MaxOperatorRefs)
	}
	for i, f := range s.Operators {
		if f == "" {
			return fmt.Errorf("spec.operators[%d]: empty path", i)
		}
	}
	if len(s.Steps) == 0 {
		return errors.New("spec.steps: required (at least one step)")
	}
	if len(s.Steps) > MaxSteps {
		return fmt.Errorf("spec.steps: %d steps, more than %d", len(s.Steps), MaxSteps)
	}
	for i := range s.Steps {
		if err := s.Steps[i].validate(fmt.Sprintf("spec.steps[%d]", i)); err != nil {
			return err
		}
	}
	return nil
}

func (st *Step) validate(path string) error {
	for _, l := range []struct {
		name string
		n    int
	}{{"apply", len(st.Apply)}, {"delete", len(st.Delete)}, {"expect", len(st.Expect)},
		{"absent", len(st.Absent)}, {"exactly", len(st.Exactly)}, {"errors", len(st.Errors)}} {
		if l.n > MaxStepEntries {
			return fmt.Errorf("%s.%s: %d entries, more than %d", path, l.name, l.n, MaxStepEntries)
		}
	}
	for j := range st.Apply {
		if err := st.Apply[j].validate(fmt.Sprintf("%s.apply[%d]", path, j)); err != nil {
			return err
		}
	}
	for j, r := range st.Delete {
		if err := r.validate(fmt.Sprintf("%s.delete[%d]", path, j)); err != nil {
			return err
		}
	}
	for j := range st.Expect {
		if err := st.Expect[j].validate(fmt.Sprintf("%s.expect[%d]", path, j)); err != nil {
			return err
		}
	}
	for j, r := range st.Absent {
		if err := r.validate(fmt.Sprintf("%s.absent[%d]", path, j)); err != nil {
			return err
		}
	}
	for j, k := range st.Exactly {
		p := fmt.Sprintf("%s.exactly[%d]", path, j)
		if err := checkKind(p, k.APIVersion, k.Kind); err != nil {
			return err
		}
		if k.Names == nil {
			return fmt.Errorf("%s.names: required (an empty list says there is no object of the kind)", p)
		}
		seen := map[string]bool{}
		for n, name := range k.Names {
			if err := checkSetName(name, k.Namespace); err != nil {
				return fmt.Errorf("%s.names[%d]: %w", p, n, err)
			}
			if seen[name] {
				return fmt.Errorf("%s.names[%d]: %q is given twice", p, n, name)
			}
			seen[name] = true
		}
	}
	for j, e := range st.Errors {
		if e == "" {
			return fmt.Errorf("%s.errors[%d]: empty (it would match every error)", path, j)
		}
	}
	return nil
}

// checkSetName checks a KindSet name: "name" or "namespace/name", in
// namespace when one is given.
func checkSetName(name, namespace string) error {
	ns, n, found := strings.Cut(name, "/")
	if !found {
		ns, n = "", name
	}
	if n == "" || (found && ns == "") || strings.Contains(n, "/") {
		return fmt.Errorf("%q: want \"namespace/name\" or \"name\"", name)
	}
	if namespace != "" && ns != namespace {
		return fmt.Errorf("%q is not in namespace %q, which the set is restricted to", name, namespace)
	}
	return nil
}

func (o *Objects) validate(path string) error {
	hasObject := len(o.Object) > 0 && !bytes.Equal(bytes.TrimSpace(o.Object), []byte("null"))
	switch {
	case o.File != "" && hasObject:
		return fmt.Errorf("%s: set one of file and object, not both", path)
	case o.File == "" && !hasObject:
		return fmt.Errorf("%s: set one of file and object", path)
	case hasObject:
		_, err := o.Decode()
		if err != nil {
			return fmt.Errorf("%s.object: %w", path, err)
		}
	}
	return nil
}

// Decode returns Object in the number model of the objects dctl eval reads
// (integers as int64, other numbers as float64). It needs apiVersion, kind
// and metadata.name.
func (o *Objects) Decode() (map[string]any, error) {
	m, err := object.FromJSON(o.Object)
	if err != nil {
		return nil, err
	}
	for _, f := range []struct{ path, val string }{
		{"apiVersion", str(m["apiVersion"])}, {"kind", str(m["kind"])}, {"metadata.name", str(nested(m, "metadata", "name"))},
	} {
		if f.val == "" {
			return nil, fmt.Errorf("%s: required (a string)", f.path)
		}
	}
	if ns := nested(m, "metadata", "namespace"); ns != nil {
		if _, ok := ns.(string); !ok {
			return nil, fmt.Errorf("metadata.namespace: want a string, got %s", compact(ns))
		}
	}
	return m, nil
}

func (r ObjectRef) validate(path string) error {
	if err := checkKind(path, r.APIVersion, r.Kind); err != nil {
		return err
	}
	if r.Name == "" {
		return fmt.Errorf("%s.name: required", path)
	}
	return nil
}

func checkKind(path, apiVersion, kind string) error {
	if apiVersion == "" {
		return fmt.Errorf("%s.apiVersion: required", path)
	}
	if kind == "" {
		return fmt.Errorf("%s.kind: required", path)
	}
	return nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func nested(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}
