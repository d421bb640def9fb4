package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dcontroller/dcontroller/pkg/view"
)

// watchHistoryFlags bound the memory the view store spends on watches: the
// history of changes a watch can resume from and the queue of each watcher
// that falls behind (view.Options).
type watchHistoryFlags struct {
	limit      int
	bytes      resource.QuantityValue
	age        time.Duration
	queueBytes resource.QuantityValue
}

func (f *watchHistoryFlags) register(fs *pflag.FlagSet) {
	f.bytes.Quantity = *resource.NewQuantity(view.DefaultHistoryBytes, resource.BinarySI)
	f.queueBytes.Quantity = *resource.NewQuantity(view.DefaultWatchQueueBytes, resource.BinarySI)
	fs.IntVar(&f.limit, "watch-history-limit", view.DefaultHistoryLimit,
		"changes the view store keeps for watches that resume from a resourceVersion; older ones answer 410 Gone and the client lists again")
	fs.Var(&f.bytes, "watch-history-bytes",
		"memory the kept changes may take (estimated from the objects' size; a quantity such as 64Mi); the oldest are dropped past it")
	fs.DurationVar(&f.age, "watch-history-age", view.DefaultHistoryAge,
		"how long a change is kept for resuming watches")
	fs.Var(&f.queueBytes, "watch-queue-bytes",
		"memory the changes queued for one slow watch client may take until they are written to it (a quantity such as 64Mi); past it the watch is closed with 410 Gone (Expired) and the client lists again")
}

// apply sets the bounds on store; a bound that is not positive is a usage
// error.
func (f *watchHistoryFlags) apply(store *view.Store) error {
	bytes, queueBytes := f.bytes.Value(), f.queueBytes.Value()
	switch {
	case f.limit <= 0:
		return &exitError{code: 1, err: fmt.Errorf("--watch-history-limit: want a positive number, got %d", f.limit)}
	case bytes <= 0:
		return &exitError{code: 1, err: fmt.Errorf("--watch-history-bytes: want a positive quantity, got %s", f.bytes.String())}
	case f.age <= 0:
		return &exitError{code: 1, err: fmt.Errorf("--watch-history-age: want a positive duration, got %s", f.age)}
	case queueBytes <= 0:
		return &exitError{code: 1, err: fmt.Errorf("--watch-queue-bytes: want a positive quantity, got %s", f.queueBytes.String())}
	}
	opts := store.Options()
	opts.HistoryLimit, opts.HistoryBytes, opts.HistoryAge, opts.WatchQueueBytes = f.limit, bytes, f.age, queueBytes
	store.SetOptions(opts)
	return nil
}
