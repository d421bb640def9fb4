package e2e

import (
	"strings"
	"testing"
)

// TestBenchCounts checks what the benchmarks' counts accept and the error
// of each kind of bad value.
func TestBenchCounts(t *testing.T) {
	for _, c := range []struct {
		v    string
		want int
		err  string
	}{
		{v: "200", want: 200},
		{v: "1000000", want: 1000000},
		{v: "0200", want: 200},
		{v: "", err: `DCTL_SCALE_N="": not a whole number of pods (want 200 to 1000000)`},
		{v: "abc", err: `not a whole number of pods`},
		{v: "-5", err: `not a whole number of pods`},
		{v: "1e5", err: `not a whole number of pods`},
		{v: "10_000", err: `not a whole number of pods`},
		{v: " 200", err: `not a whole number of pods`},
		{v: "0", err: `DCTL_SCALE_N=0: want 200 to 1000000 pods`},
		{v: "199", err: `DCTL_SCALE_N=199: want 200 to 1000000 pods`},
		{v: "1000001", err: `DCTL_SCALE_N=1000001: want 200 to 1000000 pods`},
		{v: "99999999999999999999999", err: `want 200 to 1000000 pods`},
	} {
		n, err := wholeNumber(scaleNEnv, c.v, "pods", 200, scaleMaxN)
		switch {
		case c.err == "" && (err != nil || n != c.want):
			t.Errorf("%q: got %d, %v; want %d", c.v, n, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: got %d, %v; want an error with %q", c.v, n, err, c.err)
		}
	}
}
