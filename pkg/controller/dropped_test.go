package controller

import (
	"encoding/json"
	"testing"
)

// TestDroppedFields: a write is needed when the desired object no longer
// sets a path the last written one set; with droppedOutsideMetadataMaps,
// keys of metadata.labels and metadata.annotations do not count (the
// Updater tracks those by key), nor do metadata.finalizers and
// ownerReferences (an update carries them over from the object).
func TestDroppedFields(t *testing.T) {
	for _, tc := range []struct {
		name, prev, next     string
		all, outsideMetaMaps bool
	}{
		{"same", `{"spec":{"a":1},"metadata":{"name":"x"}}`, `{"spec":{"a":2},"metadata":{"name":"x"}}`, false, false},
		{"leaf dropped", `{"spec":{"a":1,"b":2}}`, `{"spec":{"a":1}}`, true, true},
		{"empty map dropped", `{"spec":{"a":{}}}`, `{"spec":{}}`, true, true},
		{"map became a leaf", `{"spec":{"a":{"b":1}}}`, `{"spec":{"a":1}}`, false, false},
		{"label dropped", `{"metadata":{"labels":{"l":"1"}}}`, `{"metadata":{"labels":{}}}`, true, false},
		{"labels map dropped", `{"metadata":{"name":"x","labels":{"l":"1"}}}`, `{"metadata":{"name":"x"}}`, true, false},
		{"annotation dropped", `{"metadata":{"annotations":{"a":"1"}}}`, `{"metadata":{"annotations":{"b":"2"}}}`, true, false},
		{"metadata field dropped", `{"metadata":{"name":"x","generateName":"g"}}`, `{"metadata":{"name":"x"}}`, true, true},
		{"finalizers dropped", `{"metadata":{"name":"x","finalizers":["f"]}}`, `{"metadata":{"name":"x"}}`, true, false},
		{"owner references dropped", `{"metadata":{"name":"x","ownerReferences":[{"name":"o"}]}}`, `{"metadata":{"name":"x"}}`, true, false},
		{"metadata dropped", `{"metadata":{"labels":{"l":"1"}}}`, `{}`, true, true},
		{"labels under spec count", `{"spec":{"labels":{"l":"1"}}}`, `{"spec":{"labels":{}}}`, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var prev, next map[string]any
			if err := json.Unmarshal([]byte(tc.prev), &prev); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.next), &next); err != nil {
				t.Fatal(err)
			}
			if got := droppedFields(prev, next); got != tc.all {
				t.Errorf("droppedFields = %v, want %v", got, tc.all)
			}
			if got := droppedOutsideMetadataMaps(prev, next); got != tc.outsideMetaMaps {
				t.Errorf("droppedOutsideMetadataMaps = %v, want %v", got, tc.outsideMetaMaps)
			}
		})
	}
}
