package e2e

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Bounds of the benchmarks' counts. A count is a whole number of the
// decimal digits alone (no sign, no exponent, no separators).
const (
	// scaleMaxN bounds DCTL_SCALE_N: the local control plane's etcd keeps
	// every object in a backend of at most 2 GiB (etcd's default quota),
	// and a benchmark that fills it fails only after hours of writes.
	scaleMaxN = 1_000_000
	// maxRounds bounds DCTL_BENCH_ROUNDS.
	maxRounds = 100
)

// wholeNumber parses v as a count from lo to hi of units ("pods"); the
// error names env and says whether v is not a number or out of bounds.
func wholeNumber(env, v, units string, lo, hi int) (int, error) {
	if v == "" || strings.TrimLeft(v, "0123456789") != "" {
		return 0, fmt.Errorf("%s=%q: not a whole number of %s (want %d to %d)", env, v, units, lo, hi)
	}
	if n, err := strconv.Atoi(v); err == nil && n >= lo && n <= hi {
		return n, nil
	}
	return 0, fmt.Errorf("%s=%s: want %d to %d %s", env, v, lo, hi, units)
}

// scaleCount returns the object count the scale benchmarks create
// (DCTL_SCALE_N when set, scaleDefaultN otherwise), at least lo, at most
// scaleMaxN; units names what is counted in the error ("pods").
func scaleCount(lo int, units string) (int, error) {
	v, ok := os.LookupEnv(scaleNEnv)
	if !ok {
		return scaleDefaultN, nil
	}
	return wholeNumber(scaleNEnv, v, units, lo, scaleMaxN)
}

// roundCount returns DCTL_BENCH_ROUNDS, 1 when it is not set.
func roundCount() (int, error) {
	v, ok := os.LookupEnv(benchRoundsEnv)
	if !ok {
		return 1, nil
	}
	return wholeNumber(benchRoundsEnv, v, "rounds", 1, maxRounds)
}

// checkBenchCounts checks the benchmarks' counts in the environment,
// DCTL_SCALE_N (at least BenchmarkScale's minimum when the run selects it)
// and DCTL_BENCH_ROUNDS (set but empty is an error, not the default),
// before the suite builds dctl and starts its control plane, so that a
// typo fails at once. The test flags must be parsed.
func checkBenchCounts() error {
	lo, units := 1, "objects"
	if benchSelected("BenchmarkScale") {
		lo, units = scaleChanges, "pods"
	}
	_, nerr := scaleCount(lo, units)
	_, rerr := roundCount()
	return errors.Join(nerr, rerr)
}

// benchSelected reports whether go test's -bench pattern (the flag
// test.bench, parsed) selects the top-level benchmark name; false when
// no benchmark runs or the pattern does not compile (go test then says
// why itself).
func benchSelected(name string) bool {
	f := flag.Lookup("test.bench")
	if f == nil || f.Value.String() == "" {
		return false
	}
	top, _, _ := strings.Cut(f.Value.String(), "/")
	re, err := regexp.Compile(top)
	return err == nil && re.MatchString(name)
}

// checkBenchDctlArgs checks DCTL_BENCH_DCTL_ARGS before the suite starts
// its control plane: dctl (the binary the benchmarks start) parses them as
// `dctl start` flags, so that unknown flags and values of the wrong type
// fail at once instead of when a benchmark starts dctl, after its first
// phase; what `dctl start` checks once started (conflicting flags) still
// fails then.
func checkBenchDctlArgs(dctl string) error {
	v := os.Getenv(benchDctlArgsEnv)
	args := strings.Fields(v)
	if len(args) == 0 {
		return nil
	}
	out, err := exec.Command(dctl, append(append([]string{"start"}, args...), "--help")...).CombinedOutput()
	if err != nil {
		msg, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		return fmt.Errorf("%s=%q: not flags of dctl start: %s", benchDctlArgsEnv, v, msg)
	}
	return nil
}

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
