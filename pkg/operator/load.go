package operator

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/object"
)

// DecodeOperators reads a YAML or JSON stream of Operator objects
// (apiVersion dcontroller.io/v1alpha1, kind Operator). Unknown fields are an
// error, so a misspelt field is reported instead of ignored. Errors name the
// document number (1-based) and the operator.
func DecodeOperators(r io.Reader) ([]*opv1a1.Operator, error) {
	docs, err := splitDocuments(r)
	if err != nil {
		return nil, err
	}
	var out []*opv1a1.Operator
	for i, raw := range docs {
		var tm struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := json.Unmarshal(raw, &tm); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if tm.APIVersion == "" && tm.Kind == "" {
			var bare struct {
				Controllers json.RawMessage `json:"controllers"`
			}
			if json.Unmarshal(raw, &bare) == nil && len(bare.Controllers) > 0 {
				// The spec files Δ-controller's Go API loads by name.
				return nil, fmt.Errorf("document %d: controllers: this is the spec of an operator without the Operator around it; write it as an Operator: apiVersion: %s, kind: Operator, metadata: {name: <operator name>}, and this document under spec (the name also names the operator's view group <name>.view.dcontroller.io)",
					i+1, opv1a1.GroupVersion)
			}
		}
		if tm.APIVersion != opv1a1.GroupVersion.String() || tm.Kind != "Operator" {
			return nil, fmt.Errorf("document %d: expected apiVersion %s and kind Operator, got apiVersion %q kind %q",
				i+1, opv1a1.GroupVersion, tm.APIVersion, tm.Kind)
		}
		op := &opv1a1.Operator{}
		// Strict decoding as the API server does it: every unknown or
		// duplicate field is reported with its path.
		strict, err := sigsjson.UnmarshalStrict(raw, op, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if len(strict) > 0 {
			msgs := make([]string, len(strict))
			for j, e := range strict {
				msgs[j] = e.Error()
			}
			name := op.Name
			if name == "" {
				name = "?"
			}
			return nil, fmt.Errorf("document %d (operator %q): %s", i+1, name, strings.Join(msgs, "; "))
		}
		if op.Name == "" {
			return nil, fmt.Errorf("document %d: metadata.name: must not be empty", i+1)
		}
		// The CRD's schema refuses this for Operator objects; files get
		// the same rule.
		if l := op.Spec.Limits; l != nil && l.MaxDeltaEntries != nil && *l.MaxDeltaEntries < 1 {
			return nil, fmt.Errorf("document %d (operator %q): spec.limits.maxDeltaEntries: Invalid value: %d: should be greater than or equal to 1 (omit it for the manager's default)",
				i+1, op.Name, *l.MaxDeltaEntries)
		}
		out = append(out, op)
	}
	if len(out) == 0 {
		return nil, errors.New("no Operator found")
	}
	return out, nil
}

// DecodeObjects reads a YAML or JSON stream of Kubernetes objects into the
// unstructured model. Items of a `List` are returned in order. Every object
// needs apiVersion, kind and metadata.name.
func DecodeObjects(r io.Reader) ([]*unstructured.Unstructured, error) {
	docs, err := splitDocuments(r)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for i, raw := range docs {
		m, err := object.FromJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if m["kind"] == "List" || m["kind"] == "v1.List" {
			items, _ := m["items"].([]any)
			for j, it := range items {
				im, ok := it.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("document %d: items[%d]: not an object", i+1, j)
				}
				obj, err := checkObject(im)
				if err != nil {
					return nil, fmt.Errorf("document %d: items[%d]: %w", i+1, j, err)
				}
				out = append(out, obj)
			}
			continue
		}
		obj, err := checkObject(m)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		out = append(out, obj)
	}
	return out, nil
}

func checkObject(m map[string]any) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{Object: m}
	if obj.GetAPIVersion() == "" {
		return nil, errors.New("apiVersion: must not be empty")
	}
	if obj.GetKind() == "" {
		return nil, errors.New("kind: must not be empty")
	}
	if obj.GetName() == "" {
		return nil, errors.New("metadata.name: must not be empty")
	}
	return obj, nil
}

// splitDocuments splits a YAML (multi-document) or JSON stream into JSON
// documents, skipping empty ones. A YAML mapping that sets a key twice is
// an error (the YAML spec requires unique keys; a second key silently
// winning would hide a typo), as in kubectl's strict decoding.
func splitDocuments(r io.Reader) ([][]byte, error) {
	r = &limitedReader{r: r, left: MaxDecodeBytes}
	r, _, isJSON := utilyaml.GuessJSONStream(r, 4096)
	var out [][]byte
	keep := func(raw []byte) {
		trimmed := bytes.TrimSpace(raw)
		if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
			return
		}
		out = append(out, trimmed)
	}
	if !isJSON {
		yr := utilyaml.NewYAMLReader(bufio.NewReader(r))
		for n := 1; ; n++ {
			doc, err := yr.Read()
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			if err != nil {
				return nil, fmt.Errorf("document %d: %w", n, err)
			}
			raw, err := yaml.YAMLToJSONStrict(doc)
			if err != nil {
				return nil, fmt.Errorf("document %d: %w", n, err)
			}
			keep(raw)
		}
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	for n := 1; ; n++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		keep(raw)
	}
}

// MaxDecodeBytes bounds the bytes DecodeObjects and DecodeOperators read
// from one stream (a file of dctl eval, test or diff): 128 MiB, far above
// any real manifest or cluster dump of a few hundred thousand objects, and
// a bound on the memory a stream that never ends (/dev/zero) can take.
var MaxDecodeBytes int64 = 128 << 20

// ErrTooLarge is the error of a stream longer than MaxDecodeBytes.
var ErrTooLarge = fmt.Errorf("larger than %d MiB, the limit of one file", MaxDecodeBytes>>20)

// limitedReader is io.LimitReader that fails, instead of ending, once left
// bytes were read: a cut-off document must not decode as a shorter one.
type limitedReader struct {
	r    io.Reader
	left int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, ErrTooLarge
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}
