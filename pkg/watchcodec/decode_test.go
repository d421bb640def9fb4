package watchcodec

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	kjson "sigs.k8s.io/json"
)

// sameAsSigsJSON checks decodeJSON against sigs.k8s.io/json's
// UnmarshalCaseSensitivePreserveInts: the same value when that accepts
// data, and false when it rejects it.
func sameAsSigsJSON(t testing.TB, data []byte) {
	t.Helper()
	var want any
	wantErr := kjson.UnmarshalCaseSensitivePreserveInts(data, &want)
	got, ok := decodeJSON(data)
	if wantErr != nil {
		if ok {
			t.Fatalf("decodeJSON(%q) = %#v, true; sigs.k8s.io/json rejects it: %v", data, got, wantErr)
		}
		if got, ok := decodeJSONWith(data, true); ok {
			t.Fatalf("decodeJSONWith(%q, true) = %#v, true; sigs.k8s.io/json rejects it: %v", data, got, wantErr)
		}
		return
	}
	if !ok {
		t.Fatalf("decodeJSON(%q) failed; sigs.k8s.io/json gives %#v", data, want)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeJSON(%q) = %#v; sigs.k8s.io/json gives %#v", data, got, want)
	}
	// Without managedFields: the same but for that field.
	got, ok = decodeJSONWith(data, true)
	if !ok {
		t.Fatalf("decodeJSONWith(%q, true) failed; sigs.k8s.io/json gives %#v", data, want)
	}
	if m, isMap := want.(map[string]any); isMap {
		if md, isMap := m["metadata"].(map[string]any); isMap {
			delete(md, "managedFields")
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeJSONWith(%q, true) = %#v; sigs.k8s.io/json without managedFields gives %#v", data, got, want)
	}
}

var decodeCases = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `1`, `-1`, `1.5`, `1e3`, `1E-3`, `-2.5e+10`,
	`9223372036854775807`, `9223372036854775808`, `-9223372036854775808`, `-9223372036854775809`,
	`1e400`, `-1e400`, `1e-400`, `01`, `1.`, `.5`, `-`, `+1`, `1e`, `1e+`, `0x10`, `NaN`, `Infinity`,
	`"a"`, `""`, `"\u00e9\n\t\"\\\/\b\f\r"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ud83dx"`, `"\ude00"`,
	`"\ud83d\u0041"`, `"\ud83d\ud83d\ude00"`, `"\u12"`, `"\x"`, "\"a\x01\"", "\"\xff\xfe\"", "\"caf\xc3\xa9\"",
	"\"\xc3\"", "\"\xed\xa0\x80\"", `"unterminated`, `{"a":1,"a":2}`, `{"a":1,}`, `[1,]`, `[1 2]`, `{"a" 1}`,
	`{a:1}`, `{"a":1}x`, ` {"a" : [ 1 , {"b":null} ] } `, `{"a":1}{}`, `tru`, `nul`, `[`, `{`, `{"a":`,
	`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"app":"x"}},"spec":{"containers":[{"name":"c","ports":[{"containerPort":80}]}]}}`,
	"\t\r\n[1]\n",
	`{"metadata":{"name":"a","managedFields":[{"manager":"kubectl","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:app":{}}}},"time":"2026-01-01T00:00:00Z","n":12345}]},"spec":{"managedFields":1}}`,
	`{"metadata":{"managedFields":[1e400]}}`, `{"metadata":{"managedFields":[1,]}}`, `{"metadata":{"managedFields":"\ud83d"},"x":{"metadata":{"managedFields":1}}}`,
	`{"metadata":{"managedFields":null,"managedFields":[{}]}}`, `[{"metadata":{"managedFields":1}}]`, `{"":""}`, `{"\u0061":1}`, `["a",["b",["c",{}]]]`,
}

func TestDecodeJSONAsSigsJSON(t *testing.T) {
	for _, c := range decodeCases {
		sameAsSigsJSON(t, []byte(c))
	}
	deep := strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth)
	sameAsSigsJSON(t, []byte(deep))
	sameAsSigsJSON(t, []byte("["+deep+"]"))
	sameAsSigsJSON(t, []byte(strings.Repeat(`{"a":`, maxDepth+1)+"1"+strings.Repeat("}", maxDepth+1)))
}

func FuzzDecodeJSON(f *testing.F) {
	for _, c := range decodeCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) { sameAsSigsJSON(t, data) })
}

// TestKeysShared: the same key in two decoded objects is one string.
func TestKeysShared(t *testing.T) {
	a, _ := decodeJSON([]byte(`{"metadata":{"name":"a"}}`))
	b, _ := decodeJSON([]byte(`{"metadata":{"name":"b"}}`))
	keyData := func(v any) *byte {
		for k := range v.(map[string]any) {
			return unsafe.StringData(k)
		}
		return nil
	}
	if keyData(a) != keyData(b) {
		t.Fatal(`two decoded objects hold their own copies of the key "metadata"`)
	}
}

// TestDecodedPodsHeap: 2,000 pods as an informer holds them take less heap
// decoded here than decoded by sigs.k8s.io/json (maps of their final size,
// shared keys); the figures are logged.
func TestDecodedPodsHeap(t *testing.T) {
	const n = 2000
	raw := make([][]byte, n)
	for i := range raw {
		raw[i] = []byte(fmt.Sprintf(podJSON, i, i%50, i%7, i))
	}
	heap := func(decode func([]byte) any) float64 {
		objs := make([]any, n)
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for i, b := range raw {
			objs[i] = decode(b)
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		runtime.KeepAlive(objs)
		return float64(m1.HeapAlloc-m0.HeapAlloc) / n
	}
	sigs := heap(func(b []byte) any {
		var v any
		if err := kjson.UnmarshalCaseSensitivePreserveInts(b, &v); err != nil {
			t.Fatal(err)
		}
		return v
	})
	ours := heap(func(b []byte) any {
		v, ok := decodeJSON(b)
		if !ok {
			t.Fatal("decodeJSON failed on a pod")
		}
		return v
	})
	t.Logf("heap per pod: sigs.k8s.io/json %.0f B, decodeJSON %.0f B (%.2f)", sigs, ours, ours/sigs)
	if ours >= sigs*0.95 {
		t.Fatalf("decoded pods take %.0f B each, sigs.k8s.io/json's %.0f B: not less", ours, sigs)
	}
}

// podJSON is a pod of about 1.5 KB as the API server sends it (name
// index, label and annotation variety, pod IP index).
const podJSON = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-%05d","namespace":"default","uid":"0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0","resourceVersion":"123456","creationTimestamp":"2026-01-02T03:04:05Z","labels":{"app":"web-%d","pod-template-hash":"7d9f8c6b5","tier":"frontend"},"annotations":{"example.com/owner":"team-%d"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7d9f8c6b5","uid":"1a2b3c4d-5e6f-7081-92a3-b4c5d6e7f809","controller":true,"blockOwnerDeletion":true}]},"spec":{"containers":[{"name":"main","image":"registry.example/web:1.2.3","ports":[{"containerPort":8080,"protocol":"TCP"}],"env":[{"name":"MODE","value":"production"}],"resources":{"requests":{"cpu":"100m","memory":"128Mi"}},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","serviceAccountName":"default","schedulerName":"default-scheduler","tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}],"priority":0,"enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority"},"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-01-02T03:04:09Z"}],"podIP":"10.0.%d.1","qosClass":"Burstable","startTime":"2026-01-02T03:04:05Z"}}`

// TestValuesShared: a string value repeated across objects is one string
// and one interface value; decoding from several goroutines at once (as
// several informers do) gives every one the right values.
func TestValuesShared(t *testing.T) {
	a, _ := decodeJSON([]byte(`{"status":{"phase":"Running"}}`))
	b, _ := decodeJSON([]byte(`{"status":{"phase":"Running"}}`))
	pa := a.(map[string]any)["status"].(map[string]any)["phase"].(string)
	pb := b.(map[string]any)["status"].(map[string]any)["phase"].(string)
	if unsafe.StringData(pa) != unsafe.StringData(pb) {
		t.Fatal(`two decoded objects hold their own copies of the value "Running"`)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				doc := fmt.Sprintf(`{"v":"value-%d","w":"shared"}`, (i*7+g)%300)
				v, ok := decodeJSON([]byte(doc))
				if !ok {
					t.Errorf("decoding %s failed", doc)
					return
				}
				m := v.(map[string]any)
				if m["v"] != fmt.Sprintf("value-%d", (i*7+g)%300) || m["w"] != "shared" {
					t.Errorf("decoding %s gave %v", doc, m)
					return
				}
			}
		}()
	}
	wg.Wait()
}
