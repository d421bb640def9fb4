package watchcodec

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// sameAsMarshal checks that AppendJSON encodes v to encoding/json's bytes,
// or fails where it does.
func sameAsMarshal(t testing.TB, v any) {
	t.Helper()
	want, wantErr := json.Marshal(v)
	got, gotErr := AppendJSON([]byte("prefix"), v)
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("%#v: error %v, encoding/json's %v", v, gotErr, wantErr)
	}
	if wantErr == nil && !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("%#v:\n got  %s\n want prefix%s", v, got, want)
	}
}

var encodeSeeds = []any{
	nil, true, false, "", "plain", `q"uote\back`, "<a href='x'>&amp;</a>", "\x00\x01\x1f\x7f", "\b\f\n\r\t",
	"\u2028\u2029", "é ü 漢字 😀", "bad \xff\xfe utf8 \xc3", "\xed\xa0\x80",
	int64(0), int64(-1), int64(math.MaxInt64), int64(math.MinInt64), 42, int32(-7),
	0.0, math.Copysign(0, -1), 1.5, -2.25, 1e-6, 9.99e-7, 1e-7, 1e20, 1e21, 1.2345e21, 123456789.125, 5e-324, math.MaxFloat64,
	math.NaN(), math.Inf(1), json.Number("12.5e3"), json.Number("x"),
	map[string]any{}, []any{}, map[string]any(nil), []any(nil),
	map[string]any{"b": int64(1), "a": []any{"x", nil, map[string]any{"z<": 1.5, "": true}}, "é": "v", "A": false},
	map[string]any{"typed": map[string]string{"k": "v"}, "f32": float32(0.1), "u": uint8(3)},
}

func TestAppendJSONAsMarshal(t *testing.T) {
	for _, v := range encodeSeeds {
		sameAsMarshal(t, v)
	}
	many := map[string]any{}
	for i := range 100 {
		many[strings.Repeat("k", i%7)+string(rune('a'+i%26))+strings.Repeat("z", i)] = []any{int64(i), float64(i) / 3}
	}
	sameAsMarshal(t, many)
	deep := any("leaf")
	for range maxDepth + 5 {
		deep = []any{deep}
	}
	if _, err := AppendJSON(nil, deep); err == nil {
		t.Errorf("no error for a value nested %d deep", maxDepth+5)
	}
}

// FuzzAppendJSONAsMarshal encodes the values decoded from the input (as
// this package's decoder and encoding/json make them), the input as a
// string and as a key, and a float of the input's first 8 bytes.
func FuzzAppendJSONAsMarshal(f *testing.F) {
	f.Add([]byte(`{"a":[1,2.5,"x<>&",null,true],"b":{"c":"\u2028"}}`))
	f.Add([]byte("\xff\x00\"\\<"))
	f.Add([]byte(`[1e-7,1e21,123456789012345678901234567890,-0.0]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if v, ok := decodeJSON(data); ok {
			sameAsMarshal(t, v)
		}
		var std any
		if json.Unmarshal(data, &std) == nil {
			sameAsMarshal(t, std)
		}
		s := string(data)
		sameAsMarshal(t, map[string]any{s: s, "k": []any{s}})
		if len(data) >= 8 {
			bits := uint64(0)
			for _, b := range data[:8] {
				bits = bits<<8 | uint64(b)
			}
			sameAsMarshal(t, math.Float64frombits(bits))
		}
	})
}

// encodeBody encodes obj as the REST client encodes a request body with
// the media-type support of ns (the negotiator's JSON encoder for the
// object's version).
func encodeBody(t testing.TB, ns runtime.NegotiatedSerializer, obj runtime.Object) ([]byte, error) {
	t.Helper()
	enc, err := runtime.NewClientNegotiator(ns, schema.GroupVersion{Version: "v1"}).Encoder(runtime.ContentTypeJSON, nil)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.Encode(enc, obj)
}

// TestEncodesAsClientGo: request bodies of unstructured objects are
// client-go's bytes; other objects and failures are client-go's.
func TestEncodesAsClientGo(t *testing.T) {
	objs := []runtime.Object{
		&metav1.Status{Status: "Failure", Code: 409},
		&unstructured.Unstructured{},
		&unstructured.Unstructured{Object: map[string]any{"kind": "ConfigMap", "apiVersion": "v1", "data": map[string]any{"bad": math.NaN()}}},
		&unstructured.UnstructuredList{Object: map[string]any{"kind": "List", "apiVersion": "v1"}},
	}
	for _, v := range encodeSeeds {
		objs = append(objs, &unstructured.Unstructured{Object: map[string]any{"kind": "ConfigMap", "apiVersion": "v1",
			"metadata": map[string]any{"name": "c<&>", "labels": map[string]any{"a": "b"}}, "data": map[string]any{"v": v}}})
	}
	for _, obj := range objs {
		want, wantErr := encodeBody(t, standard(), obj)
		got, gotErr := encodeBody(t, Wrap(standard()), obj)
		if (gotErr == nil) != (wantErr == nil) || !bytes.Equal(got, want) {
			t.Errorf("%#v: encoded %q (%v), client-go %q (%v)", obj, got, gotErr, want, wantErr)
		}
	}
}

// TestEncodeIsOurs: an unstructured body is written by AppendJSON (a
// fraction of client-go's allocations), not handed on.
func TestEncodeIsOurs(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{"kind": "ConfigMap", "apiVersion": "v1",
		"metadata": map[string]any{"name": "c", "namespace": "n", "labels": map[string]any{"a": "b", "c": "d"}},
		"data":     map[string]any{"k1": "v1", "k2": "v2", "k3": "v3"}}}
	allocs := func(ns runtime.NegotiatedSerializer) float64 {
		enc, err := runtime.NewClientNegotiator(ns, schema.GroupVersion{Version: "v1"}).Encoder(runtime.ContentTypeJSON, nil)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		return testing.AllocsPerRun(100, func() {
			buf.Reset()
			if err := enc.Encode(obj, &buf); err != nil {
				t.Fatal(err)
			}
		})
	}
	ours, theirs := allocs(Wrap(standard())), allocs(standard())
	if ours*3 > theirs {
		t.Errorf("encoding a ConfigMap allocates %.0f times, client-go's encoder %.0f: want under a third", ours, theirs)
	}
	t.Logf("allocations per encoded ConfigMap: %.0f, client-go's %.0f", ours, theirs)
}
