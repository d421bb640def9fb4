package main

import (
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dcontroller/dcontroller/pkg/view"
)

func TestWatchHistoryFlags(t *testing.T) {
	parse := func(args ...string) (*view.Store, error) {
		var f watchHistoryFlags
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		f.register(fs)
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		s := view.NewStore()
		return s, f.apply(s)
	}
	s, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Options(); got.HistoryLimit != view.DefaultHistoryLimit || got.HistoryBytes != view.DefaultHistoryBytes ||
		got.HistoryAge != view.DefaultHistoryAge || got.WatchQueueBytes != view.DefaultWatchQueueBytes {
		t.Errorf("defaults: %+v", got)
	}
	s, err = parse("--watch-history-limit=100", "--watch-history-bytes=8Mi", "--watch-history-age=30s", "--watch-queue-bytes=1M")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Options(); got.HistoryLimit != 100 || got.HistoryBytes != 8<<20 || got.HistoryAge != 30*time.Second || got.WatchQueueBytes != 1_000_000 {
		t.Errorf("set: %+v", got)
	}
	for _, bad := range [][]string{{"--watch-history-bytes=0"}, {"--watch-history-age=0s"}, {"--watch-queue-bytes=-1"}, {"--watch-history-limit=0"}} {
		if _, err := parse(bad...); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// TestMaxWatchesPerUserFlag: a negative bound is a usage error naming the
// flag.
func TestMaxWatchesPerUserFlag(t *testing.T) {
	var f apiServerFlags
	cmd := &cobra.Command{Use: "test"}
	f.register(cmd, "127.0.0.1:0")
	if err := cmd.Flags().Parse([]string{"--max-watches-per-user=-1"}); err != nil {
		t.Fatal(err)
	}
	_, err := f.newServer(view.NewStore(), nil, nil, false, logr.Discard())
	if err == nil || !strings.Contains(err.Error(), "--max-watches-per-user") {
		t.Errorf("--max-watches-per-user=-1: %v", err)
	}
}
