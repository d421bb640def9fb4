package controller

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/view"
)

func TestStatusNeedsUpdate(t *testing.T) {
	m := func(kv ...any) map[string]any {
		out := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	known := func(st any) priorStatus {
		return priorStatus{status: st, had: st != nil, known: true, wrote: st != nil}
	}
	for _, tc := range []struct {
		name  string
		cur   any
		curOK bool
		des   any
		desOK bool
		prior priorStatus
		want  bool
	}{
		{name: "no status, none written", cur: m("x", "1"), curOK: true, prior: priorStatus{known: true}, want: false},
		{name: "no status, none on the server", want: false, prior: priorStatus{wrote: true}},
		{name: "status dropped: cleared", cur: m("a", "1"), curOK: true, prior: known(m("a", "1")), want: true},
		{name: "status dropped after a restart (record)", cur: m("a", "1"), curOK: true, prior: priorStatus{wrote: true}, want: true},
		{name: "status dropped, already cleared to {}", cur: m(), curOK: true, prior: known(m("a", "1")), want: false},
		{name: "new status", des: m("a", "1"), desOK: true, prior: priorStatus{known: true}, want: true},
		{name: "holds the output", cur: m("a", int64(1)), curOK: true, des: m("a", float64(1)), desOK: true, prior: known(m("a", int64(1))), want: false},
		{name: "holds the output and more (known)", cur: m("a", "1", "b", "2"), curOK: true, des: m("a", "1"), desOK: true, prior: known(m("a", "1")), want: false},
		{name: "holds the output and more (after a restart)", cur: m("a", "1", "b", "2"), curOK: true, des: m("a", "1"), desOK: true, want: true},
		{name: "changed by someone else", cur: m("a", "2"), curOK: true, des: m("a", "1"), desOK: true, prior: known(m("a", "1")), want: true},
		{name: "a field dropped", cur: m("a", "1", "b", "2"), curOK: true, des: m("a", "1"), desOK: true, prior: known(m("a", "1", "b", "2")), want: true},
		{name: "a nested field dropped", cur: m("c", m("x", "1", "y", "2")), curOK: true, des: m("c", m("x", "1")), desOK: true, prior: known(m("c", m("x", "1", "y", "2"))), want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := statusNeedsUpdate(tc.cur, tc.curOK, tc.des, tc.desOK, tc.prior); got != tc.want {
				t.Errorf("statusNeedsUpdate = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestManagedKeysStatusEncoding: the record of an output that sets a
// status encodes as json.Marshal does, reads back, and keeps its digest
// where recordLists and withDigest find it.
func TestManagedKeysStatusEncoding(t *testing.T) {
	for _, m := range []managedKeys{
		{Status: true},
		{Status: true, Output: "0123456789abcdef"},
		{Labels: []string{"a"}, Annotations: []string{"b"}, Status: true, Output: "0123456789abcdef"},
	} {
		want, _ := json.Marshal(m)
		got := m.encode()
		if got != string(want) {
			t.Errorf("encode %+v = %s, want %s", m, got, want)
		}
		if back := parseManagedRecord(got); !reflect.DeepEqual(back, m) {
			t.Errorf("parse(%s) = %+v, want %+v", got, back, m)
		}
		if m.Output != "" {
			if _, ok := recordLists(got); !ok {
				t.Errorf("recordLists(%s): no digest found", got)
			}
			if rec, ok := withDigest(got, 1); !ok || parseManagedRecord(rec).Output != digestHex(1) || !parseManagedRecord(rec).Status {
				t.Errorf("withDigest(%s) = %s, %v", got, rec, ok)
			}
		}
	}
}

func TestStatusOfNull(t *testing.T) {
	if _, ok := statusOf(map[string]any{"status": nil}); ok {
		t.Error("a null status counts as a status")
	}
	doc := map[string]any{"spec": 1, "status": map[string]any{"a": 1}}
	if got := withoutStatus(doc); len(got) != 1 || got["spec"] != 1 || len(doc) != 2 {
		t.Errorf("withoutStatus = %v (doc now %v)", got, doc)
	}
}

// callLog is a Client over a view store that logs which endpoint each
// write goes to and what it carries (the store itself has no status
// subresource; only the routing is under test).
type callLog struct {
	StoreClient
	calls []string
	sent  []map[string]any
}

func (l *callLog) log(op string, v any) {
	l.calls = append(l.calls, op)
	var doc map[string]any
	switch t := v.(type) {
	case []byte:
		doc, _ = object.FromJSON(t)
	case *unstructured.Unstructured:
		doc = object.DeepCopyMap(t.Object)
	}
	l.sent = append(l.sent, doc)
}

func (l *callLog) Patch(ctx context.Context, gvk schema.GroupVersionKind, key object.Key, p []byte) error {
	l.log("patch", p)
	return l.StoreClient.Patch(ctx, gvk, key, p)
}

func (l *callLog) PatchStatus(ctx context.Context, gvk schema.GroupVersionKind, key object.Key, p []byte) error {
	l.log("patch-status", p)
	return l.StoreClient.PatchStatus(ctx, gvk, key, p)
}

// TestPatcherSendsStatusToSubresource: with the status subresource, the
// status part of a Patcher's merge patch goes to PatchStatus and the rest,
// with the record that lists the status fields, to Patch; a dropped status
// field is removed through PatchStatus; without the subresource the patch
// is sent whole.
func TestPatcherSendsStatusToSubresource(t *testing.T) {
	ctx := context.Background()
	gvk := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	key := object.Key{Namespace: "ns", Name: "w"}
	for _, sub := range []bool{true, false} {
		store := view.NewStore()
		existing := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"x": "1"}}}
		existing.SetGroupVersionKind(gvk)
		existing.SetNamespace(key.Namespace)
		existing.SetName(key.Name)
		if _, err := store.Create(existing); err != nil {
			t.Fatal(err)
		}
		log := &callLog{StoreClient: StoreClient{Store: store}}
		hasStatus := func(schema.GroupVersionKind) (bool, error) { return sub, nil }
		ctrl := &Controller{opts: Options{Operator: "op", Client: log, HasStatus: hasStatus}, name: "c", owner: "op/c"}
		c, err := newTarget(ctrl, "Widget", gvk, opv1a1.Patcher, "spec.controllers[0].target")
		if err != nil {
			t.Fatal(err)
		}
		if c.Status != sub {
			t.Fatalf("Status %v, want %v (Options.HasStatus)", c.Status, sub)
		}
		out := func(st map[string]any) map[string]any {
			return map[string]any{"metadata": map[string]any{"name": "w", "namespace": "ns"}, "spec": map[string]any{"y": "2"}, "status": st}
		}
		if _, err := c.patch(ctx, key, out(map[string]any{"a": "1", "b": "2"})); err != nil {
			t.Fatal(err)
		}
		if !sub {
			if !reflect.DeepEqual(log.calls, []string{"patch"}) || log.sent[0]["status"] == nil {
				t.Fatalf("without the subresource: calls %v, sent %v", log.calls, log.sent)
			}
			continue
		}
		if !reflect.DeepEqual(log.calls, []string{"patch", "patch-status"}) {
			t.Fatalf("calls %v, want patch then patch-status", log.calls)
		}
		if _, ok := log.sent[0]["status"]; ok {
			t.Errorf("main patch carries status: %v", log.sent[0])
		}
		rec, _, _ := unstructured.NestedString(log.sent[0], "metadata", "annotations", c.patchRecord)
		if rec != `["/spec/y","/status/a","/status/b"]` {
			t.Errorf("record %s", rec)
		}
		if want := map[string]any{"status": map[string]any{"a": "1", "b": "2"}}; !reflect.DeepEqual(log.sent[1], want) {
			t.Errorf("status patch %v, want %v", log.sent[1], want)
		}
		// The output drops status.b: its removal goes to /status, and
		// the record (main endpoint) lists status.a alone.
		log.calls, log.sent = nil, nil
		if _, err := c.patch(ctx, key, out(map[string]any{"a": "1"})); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(log.calls, []string{"patch", "patch-status"}) {
			t.Fatalf("calls %v, want patch then patch-status", log.calls)
		}
		rec, _, _ = unstructured.NestedString(log.sent[0], "metadata", "annotations", c.patchRecord)
		if rec != `["/spec/y","/status/a"]` {
			t.Errorf("record %s", rec)
		}
		if want := map[string]any{"status": map[string]any{"a": "1", "b": nil}}; !reflect.DeepEqual(log.sent[1], want) {
			t.Errorf("status patch %v, want %v", log.sent[1], want)
		}
		// Unchanged: nothing is sent.
		log.calls, log.sent = nil, nil
		if wrote, err := c.patch(ctx, key, out(map[string]any{"a": "1"})); err != nil || wrote || len(log.calls) != 0 {
			t.Fatalf("unchanged output: wrote %v, err %v, calls %v", wrote, err, log.calls)
		}
	}
}
