package watchcodec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// sameAsJSONPath checks toUnstructured(obj) against what a JSON client
// makes of obj: decodeJSON of encoding/json's encoding (the API server's
// JSON encoder), or an error where Marshal fails.
func sameAsJSONPath(t testing.TB, obj any) {
	t.Helper()
	data, jerr := json.Marshal(obj)
	got, err := toUnstructured(obj)
	if jerr != nil {
		if err == nil {
			t.Fatalf("toUnstructured(%T) = %v; encoding/json fails: %v", obj, got, jerr)
		}
		return
	}
	if err != nil {
		t.Fatalf("toUnstructured(%T): %v; encoding/json gives %s", obj, err, data)
	}
	want, ok := decodeJSON(data)
	if !ok {
		t.Fatalf("decodeJSON fails on encoding/json's %s", data)
	}
	if !reflect.DeepEqual(any(got), want) {
		gotJSON, _ := json.Marshal(got)
		t.Fatalf("toUnstructured(%T) =\n%s (%#v)\nencoding/json then decodeJSON:\n%s (%#v)", obj, gotJSON, got, data, want)
	}
}

// kubeTypes is every type of client-go's scheme that Protobuf takes (not
// the internal, meta.k8s.io and list ones), in a fixed order.
var kubeTypes = func() []reflect.Type {
	var gvks []schema.GroupVersionKind
	all := clientgoscheme.Scheme.AllKnownTypes()
	for gvk := range all {
		if gvk.Version != runtime.APIVersionInternal && Protobuf(gvk) {
			gvks = append(gvks, gvk)
		}
	}
	slices.SortFunc(gvks, func(a, b schema.GroupVersionKind) int {
		return cmpStrings(a.String(), b.String())
	})
	out := make([]reflect.Type, len(gvks))
	for i, gvk := range gvks {
		out[i] = all[gvk]
	}
	return out
}()

func cmpStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// protobufRoundTrip returns obj as a protobuf client receives it: encoded
// by client-go's protobuf serializer (the API server's) and decoded into a
// new typed object.
func protobufRoundTrip(t testing.TB, obj runtime.Object) runtime.Object {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(clientgoscheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		t.Fatal("client-go has no protobuf serializer")
	}
	gvks, _, err := clientgoscheme.Scheme.ObjectKinds(obj)
	if err != nil {
		t.Fatal(err)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvks[0])
	var buf bytes.Buffer
	if err := info.Serializer.Encode(obj, &buf); err != nil {
		t.Fatalf("protobuf encoding of %T: %v", obj, err)
	}
	out, _, err := info.Serializer.Decode(buf.Bytes(), nil, nil)
	if err != nil {
		t.Fatalf("protobuf decoding of %T: %v", obj, err)
	}
	return out
}

// fillKubeObject fills a new object of kubeTypes[i % len] from seed, as
// Kubernetes' own round-trip tests fill them (valid times, quantities,
// raw extensions), with few and small collections.
func fillKubeObject(seed int64, i int) runtime.Object {
	typ := kubeTypes[i%len(kubeTypes)]
	f := fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(seed), clientgoscheme.Codecs).NilChance(0.3).NumElements(0, 2).MaxDepth(12)
	obj := reflect.New(typ).Interface().(runtime.Object)
	f.Fill(obj)
	return obj
}

// checkKubeObject checks one filled object: the converter against the JSON
// path, on the object as a protobuf client receives it, and the protobuf
// decoder of Options.Protobuf against the JSON decoder of the object's
// JSON.
func checkKubeObject(t testing.TB, obj runtime.Object) {
	t.Helper()
	received := protobufRoundTrip(t, obj)
	sameAsJSONPath(t, received)

	info, _ := protobufInfo(Options{DropManagedFields: true})
	var buf bytes.Buffer
	if err := info.Serializer.Encode(received, &buf); err != nil {
		t.Fatal(err)
	}
	got, gvk, err := info.Serializer.Decode(buf.Bytes(), nil, nil)
	if err != nil {
		t.Fatalf("decoding %T from protobuf: %v", obj, err)
	}
	data, err := json.Marshal(received)
	if err != nil {
		t.Fatal(err)
	}
	want, _, ok, _ := decodeObject(data, Options{DropManagedFields: true})
	if !ok {
		t.Fatalf("the JSON decoder hands %s on", data)
	}
	u, isU := got.(*unstructured.Unstructured)
	if !isU || !reflect.DeepEqual(u.Object, want.Object) || *gvk != want.GroupVersionKind() {
		t.Fatalf("from protobuf: %#v (%v)\nfrom JSON: %#v (%v)", got, gvk, want.Object, want.GroupVersionKind())
	}
}

func TestToUnstructuredKubeTypes(t *testing.T) {
	if len(kubeTypes) < 100 {
		t.Fatalf("client-go's scheme has %d kinds", len(kubeTypes))
	}
	for i := range kubeTypes {
		for seed := int64(0); seed < 3; seed++ {
			checkKubeObject(t, fillKubeObject(seed*7919+int64(i), i))
		}
	}
}

func FuzzToUnstructuredKubeTypes(f *testing.F) {
	for i := 0; i < 20; i++ {
		f.Add(int64(i), uint16(i*37))
	}
	f.Fuzz(func(t *testing.T, seed int64, kind uint16) {
		checkKubeObject(t, fillKubeObject(seed, int(kind)))
	})
}

// Types for the encoding/json rules Kubernetes' types do not exercise.
type (
	EdgeEmbedded struct {
		X   int    `json:"x"`
		Dup string `json:"dup"`
		Amb string
	}
	edgeHidden struct {
		Dup  string `json:"dup"`
		Amb  string
		Deep string `json:"deep"`
	}
	EdgeTagged struct {
		Amb string `json:"Amb"`
	}
	edgeText    struct{ a, b string }
	edgePtrJSON struct{ N int }
	edgeValJSON struct{ N int }
	edgeZero    struct{ N int }
)

func (e edgeText) MarshalText() ([]byte, error) { return []byte(e.a + "/" + e.b), nil }
func (e *edgePtrJSON) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf(`{"ptr":%d}`, e.N)), nil
}
func (e edgeValJSON) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf(` [ %d , "v" ] `, e.N)), nil
}
func (e edgeZero) IsZero() bool { return e.N < 10 }

type edgeStruct struct {
	EdgeEmbedded
	*edgeHidden
	Skip       string         `json:"-"`
	Dash       string         `json:"-,"`
	Invalid    string         `json:"in valid\\name"`
	S          string         `json:"s"`
	E          string         `json:"e,omitempty"`
	Bytes      []byte         `json:"bytes"`
	NilBytes   []byte         `json:"nilBytes"`
	Arr        [3]byte        `json:"arr"`
	F          float64        `json:"f"`
	F32        float32        `json:"f32"`
	Big        float64        `json:"big"`
	Small      float64        `json:"small"`
	U          uint64         `json:"u"`
	I8         int8           `json:"i8"`
	M          map[string]int `json:"m"`
	NilMap     map[string]int `json:"nilMap"`
	BadKeys    map[string]int `json:"badKeys"`
	IntKeys    map[int]string `json:"intKeys"`
	TextKeys   map[edgeText]bool
	Iface      any
	IfaceNil   any
	T          metav1.Time  `json:"t"`
	TZero      metav1.Time  `json:"tZero"`
	TOmitZero  metav1.Time  `json:"tOmitZero,omitzero"`
	TP         *metav1.Time `json:"tp"`
	TPNil      *metav1.Time `json:"tpNil"`
	MT         metav1.MicroTime
	Dur        metav1.Duration
	Q          resource.Quantity
	IOS        intstr.IntOrString
	IOSStr     intstr.IntOrString
	Raw        runtime.RawExtension
	PtrJSON    edgePtrJSON
	PtrJSONMap map[string]edgePtrJSON
	ValJSON    edgeValJSON
	ValJSONPtr *edgeValJSON
	Zero       edgeZero  `json:"zero,omitzero"`
	NotZero    edgeZero  `json:"notZero,omitzero"`
	ZeroPtr    *edgeZero `json:"zeroPtr,omitzero"`
	Nested     []map[string][]*EdgeTagged
	Text       edgeText
	edgeUnexported
	EdgeTagged
}

type edgeUnexported struct{ Promoted string }

type edgeQuoted struct {
	N int    `json:"n,string"`
	S string `json:"s"`
}

func TestToUnstructuredEncodingJSONRules(t *testing.T) {
	ts := time.Date(2026, 3, 4, 5, 6, 7, 8, time.FixedZone("x", 3600))
	e := &edgeStruct{
		EdgeEmbedded: EdgeEmbedded{X: 1, Dup: "shallow", Amb: "a"},
		edgeHidden:   &edgeHidden{Dup: "deep", Amb: "b", Deep: "d"},
		Skip:         "skip", Dash: "dash", Invalid: "inv", S: "caf\xc3\xa9 \xff\xfe <&>",
		Bytes: []byte("hello\x00"), Arr: [3]byte{1, 2, 3},
		F: 1.0, F32: 0.1, Big: 1e21, Small: 1e-7, U: math.MaxUint64, I8: -8,
		M:        map[string]int{"a": 1, "": 2},
		BadKeys:  map[string]int{"\xff": 1, "\xfe": 2, "\uFFFD": 3, "ok": 4},
		IntKeys:  map[int]string{-1: "m", 2: "p"},
		TextKeys: map[edgeText]bool{{"a", "b"}: true},
		Iface:    map[string]any{"k": []any{1, 2.5, "x", nil, true}},
		T:        metav1.NewTime(ts), TOmitZero: metav1.Time{}, TP: &metav1.Time{Time: ts},
		MT:  metav1.NewMicroTime(ts),
		Dur: metav1.Duration{Duration: 90 * time.Second},
		Q:   resource.MustParse("1500m"), IOS: intstr.FromInt32(8080), IOSStr: intstr.FromString("http"),
		Raw:        runtime.RawExtension{Raw: []byte(`{"a": [1, 2.5, "x"]}`)},
		PtrJSON:    edgePtrJSON{N: 3},
		PtrJSONMap: map[string]edgePtrJSON{"v": {N: 4}},
		ValJSON:    edgeValJSON{N: 5}, ValJSONPtr: &edgeValJSON{N: 6},
		Zero: edgeZero{N: 5}, NotZero: edgeZero{N: 50},
		Nested:         []map[string][]*EdgeTagged{{"a": {{Amb: "t"}, nil}}, nil},
		Text:           edgeText{"c", "d"},
		edgeUnexported: edgeUnexported{Promoted: "p"},
		EdgeTagged:     EdgeTagged{Amb: "tagged"},
	}
	sameAsJSONPath(t, e)
	sameAsJSONPath(t, &edgeStruct{})
	sameAsJSONPath(t, &edgeQuoted{N: 3, S: "s"})
	sameAsJSONPath(t, &struct{ F float64 }{math.NaN()})
	sameAsJSONPath(t, &struct{ C chan int }{})
	sameAsJSONPath(t, &struct{ Raw runtime.RawExtension }{runtime.RawExtension{Raw: []byte("{")}})
}

func BenchmarkPodFromProtobuf(b *testing.B) {
	pod := &corev1.Pod{}
	if err := json.Unmarshal([]byte(benchPod), pod); err != nil {
		b.Fatal(err)
	}
	info, _ := protobufInfo(Options{DropManagedFields: true})
	var buf bytes.Buffer
	if err := info.Serializer.Encode(pod, &buf); err != nil {
		b.Fatal(err)
	}
	data, err := json.Marshal(pod)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("protobuf", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := info.Serializer.Decode(buf.Bytes(), nil, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, ok, _ := decodeObject(data, Options{DropManagedFields: true}); !ok {
				b.Fatal("not decoded")
			}
		}
	})
}

// FuzzProtobufDecode feeds arbitrary bytes to the protobuf object decoder
// of Options.Protobuf (protobuf does not check that strings are UTF-8, so
// that decoded objects carry any bytes): it never panics, and what it
// decodes is what the JSON path makes of the same typed object.
func FuzzProtobufDecode(f *testing.F) {
	info, _ := protobufInfo(Options{DropManagedFields: true})
	raw, _ := runtime.SerializerInfoForMediaType(clientgoscheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	for i := 0; i < 8; i++ {
		obj := protobufRoundTrip(f, fillKubeObject(int64(i), i*23))
		var buf bytes.Buffer
		if err := raw.Serializer.Encode(obj, &buf); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal([]byte(benchPod), pod); err != nil {
		f.Fatal(err)
	}
	var buf bytes.Buffer
	if err := raw.Serializer.Encode(pod, &buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		got, gvk, err := info.Serializer.Decode(data, nil, nil)
		if err != nil {
			return
		}
		u, ok := got.(*unstructured.Unstructured)
		if !ok {
			return // a list or a meta.k8s.io kind, typed as client-go makes it
		}
		typed, _, err := raw.Serializer.Decode(data, nil, nil)
		if err != nil {
			t.Fatalf("client-go's decoder refuses what ours decoded: %v", err)
		}
		if acc, err := meta.Accessor(typed); err == nil {
			acc.SetManagedFields(nil)
		}
		jsonData, err := json.Marshal(typed)
		if err != nil {
			t.Fatalf("decoded %v, which encoding/json cannot encode: %v", gvk, err)
		}
		want, _, ok, _ := decodeObject(jsonData, Options{DropManagedFields: true})
		if !ok {
			t.Fatalf("the JSON decoder hands %s on", jsonData)
		}
		if !reflect.DeepEqual(u.Object, want.Object) {
			t.Fatalf("from protobuf: %#v\nfrom JSON: %#v", u.Object, want.Object)
		}
	})
}

// TestToUnstructuredConcurrentFirstUse converts objects of many kinds from
// several goroutines at once with no converter built yet: each gets the
// JSON path's object (no goroutine sees a converter under construction).
func TestToUnstructuredConcurrentFirstUse(t *testing.T) {
	converters.Clear()
	objs := make([]runtime.Object, 40)
	for i := range objs {
		objs[i] = protobufRoundTrip(t, fillKubeObject(int64(i), i*7))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8*len(objs))
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range objs {
				obj := objs[(i+g*5)%len(objs)]
				data, err := json.Marshal(obj)
				if err != nil {
					errs <- err
					return
				}
				want, _ := decodeJSON(data)
				got, err := toUnstructured(obj)
				if err != nil {
					errs <- fmt.Errorf("%T: %w", obj, err)
					return
				}
				if !reflect.DeepEqual(any(got), want) {
					errs <- fmt.Errorf("%T: %v, want %v", obj, got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
