package operator

import (
	"context"
	"strings"
	"testing"

	"github.com/dcontroller/dcontroller/pkg/view"
)

// TestOfflineClose: Close detaches the run and closes the store NewOffline
// made (view.Store.Close stops its history timer, which otherwise keeps the
// store, and every object of the run, reachable until it fires: a process
// making one run per step, as dctl test does, held every step's objects);
// a store given in OfflineOptions is the caller's and stays open.
func TestOfflineClose(t *testing.T) {
	ops, err := DecodeOperators(strings.NewReader(groupOperator))
	if err != nil {
		t.Fatal(err)
	}
	run := func(store *view.Store) *Offline {
		off, err := NewOffline(ops, OfflineOptions{Store: store})
		if err != nil {
			t.Fatal(err)
		}
		if err := off.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := off.ApplyAll(context.Background(), groupPods(5)); err != nil {
			t.Fatal(err)
		}
		off.Close()
		return off
	}
	if off := run(nil); !off.Store.Closed() {
		t.Error("the store NewOffline made is not closed")
	}
	given := view.NewStore()
	if run(given); given.Closed() {
		t.Error("the caller's store was closed")
	}
	given.Close()
}
