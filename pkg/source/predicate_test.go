package source

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func obj(gen int64, rv string, labels, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod"}}
	u.SetName("p")
	u.SetGeneration(gen)
	u.SetResourceVersion(rv)
	u.SetLabels(labels)
	u.SetAnnotations(annotations)
	return u
}

func TestPredicates(t *testing.T) {
	base := obj(1, "1", map[string]string{"a": "1"}, map[string]string{"x": "1"})
	genChanged := obj(2, "2", map[string]string{"a": "1"}, map[string]string{"x": "1"})
	labelChanged := obj(1, "2", map[string]string{"a": "2"}, map[string]string{"x": "1"})
	annChanged := obj(1, "2", map[string]string{"a": "1"}, map[string]string{"x": "2"})
	for _, tc := range []struct {
		spec string
		new  *unstructured.Unstructured
		want bool
	}{
		{`"GenerationChanged"`, genChanged, true},
		{`"GenerationChanged"`, labelChanged, false},
		{`"ResourceVersionChanged"`, labelChanged, true},
		{`"ResourceVersionChanged"`, base, false},
		{`"LabelChanged"`, labelChanged, true},
		{`"LabelChanged"`, annChanged, false},
		{`"AnnotationChanged"`, annChanged, true},
		{`{"or": ["GenerationChanged", "LabelChanged"]}`, labelChanged, true},
		{`{"or": ["GenerationChanged", "LabelChanged"]}`, annChanged, false},
		{`{"and": ["ResourceVersionChanged", {"not": "LabelChanged"}]}`, annChanged, true},
		{`{"and": ["ResourceVersionChanged", {"not": "LabelChanged"}]}`, labelChanged, false},
	} {
		p, err := ParsePredicate([]byte(tc.spec), "predicate")
		if err != nil {
			t.Fatalf("%s: %v", tc.spec, err)
		}
		if got := p.Update(base, tc.new); got != tc.want {
			t.Errorf("%s on %v: got %v, want %v", p, tc.new.Object["metadata"], got, tc.want)
		}
	}
}

func TestPredicateErrors(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{`"Sometimes"`, `spec.p: unknown predicate "Sometimes"`},
		{`{"xor": []}`, `unknown predicate operator "xor"`},
		{`{"and": []}`, `spec.p.and: want a non-empty list`},
		{`{"and": ["LabelChanged", 3]}`, `spec.p.and[1]: a predicate is a name`},
		{`{"not": "X", "and": []}`, `exactly one key`},
		{`[`, `spec.p: unexpected end`},
	} {
		_, err := ParsePredicate([]byte(tc.spec), "spec.p")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.spec, err, tc.want)
		}
	}
}

func TestParsePeriod(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want time.Duration
		err  string
	}{
		{"", DefaultPeriod, ""},
		{`{}`, DefaultPeriod, ""},
		{`{"period": "30s"}`, 30 * time.Second, ""},
		{`{"period": "soon"}`, 0, "parameters.period: time: invalid duration"},
		{`{"period": "-1s"}`, 0, "must be positive"},
	} {
		got, err := ParsePeriod([]byte(tc.raw), "parameters")
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.raw, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: got %v, %v", tc.raw, got, err)
		}
	}
}
