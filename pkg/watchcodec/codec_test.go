package watchcodec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	restclientwatch "k8s.io/client-go/rest/watch"
)

// chunkReader returns at most n bytes per Read, as a network stream may.
type chunkReader struct {
	data []byte
	n    int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := min(r.n, len(p), len(r.data))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

type event struct {
	Type watch.EventType
	Obj  runtime.Object
}

// decodeStream runs a watch stream through the REST client's watch decoding
// (framer, streaming decoder, restclientwatch.Decoder) with the media-type
// support of ns, reading chunk bytes at a time. It returns the events and
// the error that ended the stream.
func decodeStream(t testing.TB, ns runtime.NegotiatedSerializer, data []byte, chunk int) ([]event, error) {
	t.Helper()
	n := runtime.NewClientNegotiator(ns, schema.GroupVersion{Version: "v1"})
	objDec, ss, fr, err := n.StreamDecoder(runtime.ContentTypeJSON, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := fr.NewFrameReader(io.NopCloser(&chunkReader{data: data, n: max(chunk, 1)}))
	d := restclientwatch.NewDecoder(streaming.NewDecoder(r, ss), objDec)
	var evs []event
	for len(evs) < 10000 {
		typ, obj, err := d.Decode()
		if err != nil {
			return evs, err
		}
		evs = append(evs, event{typ, obj})
	}
	t.Fatal("more than 10000 events")
	return nil, nil
}

func standard() runtime.NegotiatedSerializer {
	return dynamic.ConfigFor(&rest.Config{}).NegotiatedSerializer
}

// sameOutcome checks that ours decodes data exactly as client-go's dynamic
// client does: the same events, and an end of stream (io.EOF) or an error
// at the same place.
func sameOutcome(t testing.TB, data []byte, chunk int) {
	t.Helper()
	want, wantErr := decodeStream(t, standard(), data, chunk)
	got, gotErr := decodeStream(t, Wrap(standard()), data, chunk)
	if len(got) != len(want) {
		t.Fatalf("%q: %d events (ended by %v), client-go decodes %d (ended by %v)", data, len(got), gotErr, len(want), wantErr)
	}
	for i := range want {
		if customMetaKind(got[i].Obj, want[i].Obj) {
			continue
		}
		if got[i].Type != want[i].Type || !reflect.DeepEqual(got[i].Obj, want[i].Obj) {
			t.Fatalf("%q: event %d is %s %#v, client-go decodes %s %#v", data, i, got[i].Type, got[i].Obj, want[i].Type, want[i].Obj)
		}
	}
	if errors.Is(gotErr, io.EOF) != errors.Is(wantErr, io.EOF) {
		t.Fatalf("%q: the stream ended with %v, client-go's with %v", data, gotErr, wantErr)
	}
}

// customMetaKind reports the one deliberate difference from client-go: got
// is an unstructured object of a group other than the core and meta ones
// whose kind client-go made a typed meta.k8s.io object of (a custom
// resource named Status, APIGroup, ...).
func customMetaKind(got, want runtime.Object) bool {
	u, ok := got.(*unstructured.Unstructured)
	if !ok {
		return false
	}
	if _, typed := want.(*unstructured.Unstructured); typed || want == nil {
		return false
	}
	gvk := u.GroupVersionKind()
	return gvk.Group != "" && gvk.Group != metav1.GroupName && gvk.Kind == want.GetObjectKind().GroupVersionKind().Kind
}

const pod = `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"ns","resourceVersion":"12","labels":{"app":"a\"}{"},"annotations":{"x":"\\"}},"spec":{"containers":[{"name":"c","image":"x","ports":[{"containerPort":80}]}],"priority":0,"overhead":null,"weight":1.5,"big":12345678901234567890}}`

var seeds = []string{
	`{"type":"ADDED","object":` + pod + `}` + "\n",
	`{"type":"MODIFIED","object":` + pod + "}\n" + `{"type":"DELETED","object":` + pod + "}\n",
	`{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"99","annotations":{"k8s.io/initial-events-end":"true"}}}}` + "\n",
	`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (2)","reason":"Expired","code":410}}` + "\n",
	// Other envelope shapes and objects client-go decides.
	` {"type":"ADDED","object":` + pod + ` } ` + "\n\n",
	`{"object":` + pod + `,"type":"ADDED"}`,
	`{"type":"ADDED","object":` + pod + `,"type":"DELETED"}`,
	`{"type":"\u0041DDED","object":` + pod + `}`,
	`{"type":"ADDED","object":{"kind":"Status","apiVersion":"example.com/v1","metadata":{"name":"s"}}}`,
	`{"type":"ADDED","object":{"kind":"PodList","apiVersion":"v1","items":[]}}`,
	`{"type":"ADDED","object":{"apiVersion":"v1","metadata":{"name":"p"}}}`,
	`{"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"p"}}}`,
	`{"type":"ADDED","object":{"kind":"Pod","apiVersion":"a/b/c"}}`,
	`{"type":"ADDED","object":null}`,
	`{"type":"ADDED","object":[1]}`,
	`{"type":"SOMETHING","object":` + pod + `}`,
	// Malformed streams.
	`{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1",x}}`,
	`{"type":"ADDED","object":` + pod + `}}`,
	`{"type":"ADDED","object":` + pod,
	`{"type":"ADDED","object":` + pod + `}` + "\n" + `garbage`,
	`"string"`,
	`[{"type":"ADDED","object":` + pod + `}]`,
	``,
	"  \n ",
}

func TestDecodesAsClientGo(t *testing.T) {
	for _, s := range seeds {
		for _, chunk := range []int{1, 7, 64, 4096} {
			sameOutcome(t, []byte(s), chunk)
		}
	}
}

// TestDecodedEvents checks the results themselves (sameOutcome only
// compares with client-go): a pod event is an Unstructured, an ERROR event
// a typed Status.
func TestDecodedEvents(t *testing.T) {
	evs, err := decodeStream(t, Wrap(standard()), []byte(seeds[1]+seeds[3]), 4096)
	if !errors.Is(err, io.EOF) || len(evs) != 3 {
		t.Fatalf("got %d events, ended by %v", len(evs), err)
	}
	u, ok := evs[0].Obj.(*unstructured.Unstructured)
	if !ok || evs[0].Type != watch.Modified || u.GetName() != "p" || u.GetLabels()["app"] != `a"}{` {
		t.Fatalf("first event: %s %#v", evs[0].Type, evs[0].Obj)
	}
	if v, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "priority"); v != int64(0) {
		t.Fatalf("spec.priority is %#v, want int64(0)", v)
	}
	if evs[1].Type != watch.Deleted {
		t.Fatalf("second event is %s", evs[1].Type)
	}
	st, ok := evs[2].Obj.(*metav1.Status)
	if !ok || evs[2].Type != watch.Error || st.Code != 410 {
		t.Fatalf("third event: %s %#v", evs[2].Type, evs[2].Obj)
	}
}

// TestCustomResourceNamedLikeMetaKinds: a custom resource whose kind is
// Status or APIGroup is an unstructured object of its group with all its
// fields (client-go's dynamic client decodes it as a typed meta object, which
// an informer rejects); a core v1 Status is still a typed Status.
func TestCustomResourceNamedLikeMetaKinds(t *testing.T) {
	stream := `{"type":"ADDED","object":{"kind":"Status","apiVersion":"example.com/v1","metadata":{"name":"s"},"spec":{"x":1}}}
{"type":"MODIFIED","object":{"kind":"APIGroup","apiVersion":"example.com/v1","metadata":{"name":"g"}}}
{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","code":500}}
`
	evs, err := decodeStream(t, Wrap(standard()), []byte(stream), 4096)
	if !errors.Is(err, io.EOF) || len(evs) != 3 {
		t.Fatalf("got %d events, ended by %v", len(evs), err)
	}
	for i, kind := range []string{"Status", "APIGroup"} {
		u, ok := evs[i].Obj.(*unstructured.Unstructured)
		if !ok || u.GetKind() != kind || u.GroupVersionKind().Group != "example.com" {
			t.Fatalf("event %d: %#v, want an unstructured example.com %s", i, evs[i].Obj, kind)
		}
	}
	if x, _, _ := unstructured.NestedInt64(evs[0].Obj.(*unstructured.Unstructured).Object, "spec", "x"); x != 1 {
		t.Errorf("spec.x of the Status custom resource is %d, want 1", x)
	}
	if st, ok := evs[2].Obj.(*metav1.Status); !ok || st.Code != 500 {
		t.Errorf("ERROR event: %#v, want a typed Status", evs[2].Obj)
	}
}

// TestLargeEvents crosses the framer's and the streaming decoder's buffer
// sizes (32 KiB and 1 KiB initially) with events of up to 2 MiB.
func TestLargeEvents(t *testing.T) {
	var b bytes.Buffer
	for _, size := range []int{10, 1000, 40 << 10, 2 << 20, 100} {
		obj := map[string]any{"kind": "ConfigMap", "apiVersion": "v1",
			"metadata": map[string]any{"name": fmt.Sprint("cm-", size)},
			"data":     map[string]any{"k": strings.Repeat(`x"\{`, size/4)}}
		if err := json.NewEncoder(&b).Encode(map[string]any{"type": "ADDED", "object": obj}); err != nil {
			t.Fatal(err)
		}
	}
	for _, chunk := range []int{4096, 1 << 20} {
		sameOutcome(t, b.Bytes(), chunk)
		evs, err := decodeStream(t, Wrap(standard()), b.Bytes(), chunk)
		if !errors.Is(err, io.EOF) || len(evs) != 5 {
			t.Fatalf("got %d events, ended by %v", len(evs), err)
		}
		if n := evs[3].Obj.(*unstructured.Unstructured).GetName(); n != fmt.Sprint("cm-", 2<<20) {
			t.Fatalf("fourth event is %s", n)
		}
	}
}

func FuzzDecodesAsClientGo(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s), uint16(4096))
		f.Add([]byte(s), uint16(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, chunk uint16) {
		sameOutcome(t, data, int(chunk))
	})
}

// BenchmarkWatchDecode decodes a stream of pod watch events (about 2 KB
// each, managedFields included, as an API server sends them) with
// client-go's dynamic client decoders and with this package's. Reported
// per event.
func BenchmarkWatchDecode(b *testing.B) {
	ev := []byte(`{"type":"MODIFIED","object":` + benchPod + "}\n")
	stream := bytes.Repeat(ev, 1000)
	for _, c := range []struct {
		name string
		ns   runtime.NegotiatedSerializer
	}{{"client-go", standard()}, {"watchcodec", Wrap(standard())}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				evs, err := decodeStream(b, c.ns, stream, 32<<10)
				if !errors.Is(err, io.EOF) || len(evs) != 1000 {
					b.Fatalf("%d events, %v", len(evs), err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/event")
		})
	}
}

const benchPod = `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"pod-0001","namespace":"bench-op-1","uid":"4f6c1f0e-8a53-4c1e-9d4c-2b4a1c7f9e01","resourceVersion":"123456","creationTimestamp":"2026-12-01T10:00:00Z","annotations":{"dcontroller.io/container-num":"1"},"managedFields":[{"manager":"e2e.test","operation":"Update","apiVersion":"v1","time":"2026-12-01T10:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:containers":{"k:{\"name\":\"c\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:resources":{},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}},{"manager":"dctl","operation":"Update","apiVersion":"v1","time":"2026-12-01T10:00:01Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{".":{},"f:dcontroller.io/container-num":{}}}}}]},"spec":{"containers":[{"name":"c","image":"x","resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"Always"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler","enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority"},"status":{"phase":"Pending","qosClass":"BestEffort"}}`

// decodeInto decodes data as a REST response into an Unstructured holding
// a stale field (Result.Into's path: the negotiator's JSON decoder, no
// default kind) with the media-type support of ns.
func decodeInto(t testing.TB, ns runtime.NegotiatedSerializer, data []byte) (runtime.Object, *unstructured.Unstructured, *schema.GroupVersionKind, error) {
	t.Helper()
	dec, err := runtime.NewClientNegotiator(ns, schema.GroupVersion{Version: "v1"}).Decoder(runtime.ContentTypeJSON, nil)
	if err != nil {
		t.Fatal(err)
	}
	into := &unstructured.Unstructured{Object: map[string]any{"stale": true}}
	obj, gvk, err := dec.Decode(data, nil, into)
	return obj, into, gvk, err
}

// sameInto checks that ours decodes a response into an Unstructured as
// client-go's dynamic client does: the same object returned and left in
// the target, the same kind, an error for the same input.
func sameInto(t testing.TB, data []byte) {
	t.Helper()
	wantObj, wantInto, wantGVK, wantErr := decodeInto(t, standard(), data)
	gotObj, gotInto, gotGVK, gotErr := decodeInto(t, Wrap(standard()), data)
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("%q: error %v, client-go's %v", data, gotErr, wantErr)
	}
	if wantErr != nil {
		return
	}
	if !reflect.DeepEqual(gotObj, wantObj) || !reflect.DeepEqual(gotInto, wantInto) || !reflect.DeepEqual(gotGVK, wantGVK) {
		t.Fatalf("%q: decoded %#v into %#v (%v), client-go %#v into %#v (%v)", data, gotObj, gotInto, gotGVK, wantObj, wantInto, wantGVK)
	}
}

var responseSeeds = []string{
	pod,
	`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c","managedFields":[{"manager":"m","fieldsV1":{"f:data":{}}}]},"data":{"a":"b"}}`,
	`{"kind":"BenchParent","apiVersion":"e2e.example.com/v1","metadata":{"name":"p"},"status":{"children":3}}`,
	`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","code":404}`,
	`{"kind":"Status","apiVersion":"example.com/v1","metadata":{"name":"s"}}`,
	`{"kind":"PodList","apiVersion":"v1","items":[]}`,
	`{"apiVersion":"v1","metadata":{"name":"p"}}`,
	`{"kind":"Pod","metadata":{"name":"p"}}`,
	`{"kind":"Pod","apiVersion":"a/b/c"}`,
	`null`, `[1]`, `"x"`, `{"kind":"Pod","apiVersion":"v1",x}`, ``,
}

func TestDecodesIntoAsClientGo(t *testing.T) {
	for _, s := range responseSeeds {
		sameInto(t, []byte(s))
	}
	// And the result itself: the target holds the response, not the
	// stale field.
	obj, into, gvk, err := decodeInto(t, Wrap(standard()), []byte(responseSeeds[1]))
	if err != nil || obj != runtime.Object(into) || into.GetName() != "c" || into.Object["stale"] != nil || gvk.Kind != "ConfigMap" {
		t.Fatalf("decoded %#v into %#v (%v), %v", obj, into, gvk, err)
	}
}

func FuzzDecodesIntoAsClientGo(f *testing.F) {
	for _, s := range responseSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sameInto(t, data)
	})
}
