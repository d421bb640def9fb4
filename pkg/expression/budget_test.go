package expression

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// costly runs fn within d and returns the bytes it allocated (TotalAlloc,
// which counts garbage too: a bound on the peak); the test fails when fn
// does not return within d.
func costly(t *testing.T, d time.Duration, fn func()) uint64 {
	t.Helper()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("evaluation did not return within %s", d)
	}
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// wantBudgetError checks that err is an *Error at path whose cause is a
// *BudgetError of limit.
func wantBudgetError(t *testing.T, err error, path, limit string) {
	t.Helper()
	var ee *Error
	var be *BudgetError
	if !errors.As(err, &ee) || !errors.As(err, &be) {
		t.Fatalf("error %v, want a budget error", err)
	}
	if ee.Path != path || be.Limit != limit {
		t.Fatalf("error %q: path %q, limit %q; want path %q, limit %q", err, ee.Path, be.Limit, path, limit)
	}
	if !strings.Contains(err.Error(), "evaluation exceeded its budget of ") {
		t.Fatalf("error %q does not say the budget was exceeded", err)
	}
}

const mib = 1 << 20

// The red team's input: a map over 65536 elements, each a list of 65536
// values (2³² values in all), stops at the values budget.
func TestBudgetSquareMap(t *testing.T) {
	e := mustParse(t, `{"x": {"@map": [{"@range": 65536}, {"@range": 65536}]}}`)
	var err error
	alloc := costly(t, 10*time.Second, func() { _, err = Eval(e, nil) })
	wantBudgetError(t, err, `x["@map"][0]["@range"]`, "values")
	if !strings.HasPrefix(err.Error(), `x["@map"][0]["@range"]: @range: evaluation exceeded its budget of 2097152 values`) {
		t.Fatalf("error %q", err)
	}
	if alloc > 256*mib {
		t.Fatalf("allocated %d MiB", alloc/mib)
	}
}

// A @fold that builds a string one character at a time copies the string
// so far at every step: quadratic, stopped by the bytes budget.
func TestBudgetQuadraticFold(t *testing.T) {
	e := mustParse(t, `{"@fold": [{"@concat": ["$$.acc", "x"]}, "", {"@range": 65536}]}`)
	var err error
	alloc := costly(t, 10*time.Second, func() { _, err = Eval(e, nil) })
	wantBudgetError(t, err, `["@fold"][0]["@concat"]`, "bytes")
	if alloc > 256*mib {
		t.Fatalf("allocated %d MiB", alloc/mib)
	}
}

// A @fold whose accumulator holds itself twice builds a value of 2¹⁰⁰
// nodes out of 200 lists: its result, its rendering, its hash and its
// comparison are all bounded.
func TestBudgetSharedValues(t *testing.T) {
	const fold = `{"@fold": [["$$.acc", "$$.acc"], [], {"@range": 100}]}`
	for _, tc := range []struct {
		spec, path, limit, msg string
	}{
		{fold, `["@fold"]`, "values", ""},
		{`{"@string": ` + fold + `}`, ``, "", "result longer than 16777216 bytes"},
		{`{"@hash": ` + fold + `}`, ``, "", "argument longer than 16777216 bytes as JSON"},
		{`{"@concat": [` + fold + `]}`, ``, "", "result longer than 16777216 bytes"},
		{`{"@eq": [` + fold + `, ` + fold + `]}`, `["@eq"]`, "steps", ""},
		{`{"@in": [` + fold + `, [` + fold + `]]}`, `["@in"]`, "steps", ""},
		{`{"@map": ["$$..*", [` + fold + `]]}`, `["@map"][0]`, "steps", ""},
	} {
		t.Run(tc.spec[:12], func(t *testing.T) {
			e := mustParse(t, tc.spec)
			var err error
			alloc := costly(t, 10*time.Second, func() { _, err = Eval(e, nil) })
			if tc.limit != "" {
				wantBudgetError(t, err, tc.path, tc.limit)
			} else if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v, want %q", err, tc.msg)
			}
			if alloc > 256*mib {
				t.Fatalf("allocated %d MiB", alloc/mib)
			}
		})
	}
}

// A @fold that nests its accumulator one level deeper at each step
// returns a value nested deeper than any later walk should recurse.
func TestBudgetDeepResult(t *testing.T) {
	e := mustParse(t, `{"@fold": [["$$.acc"], [], {"@range": 65536}]}`)
	var err error
	costly(t, 10*time.Second, func() { _, err = Eval(e, nil) })
	if err == nil || !strings.Contains(err.Error(), "result nested more than 10000 levels deep") {
		t.Fatalf("error %v, want the result nested too deep", err)
	}
}

// Work that builds nothing (a condition on 2³² pairs) stops at the steps
// budget.
func TestBudgetSteps(t *testing.T) {
	list := make([]any, 65536)
	for i := range list {
		list[i] = int64(i)
	}
	e := mustParse(t, `{"@all": [{"@all": [{"@gte": ["$$", 0]}, "$.list"]}, "$.list"]}`)
	var err error
	alloc := costly(t, 10*time.Second, func() { _, err = Eval(e, map[string]any{"list": list}) })
	wantBudgetError(t, err, `["@all"][0]["@all"]`, "steps")
	if alloc > 16*mib {
		t.Fatalf("allocated %d MiB", alloc/mib)
	}
}

// Limits are configurable: a smaller budget stops earlier, a negative
// field removes the bound, and @cel's actual cost counts as steps.
func TestBudgetLimits(t *testing.T) {
	run := func(spec string, l Limits) error {
		_, err := Run(mustParse(t, spec), &Context{Subject: pod(t), Budget: NewBudget(nil, l)})
		return err
	}
	if err := run(`{"@range": 1000}`, Limits{Values: 999}); err == nil {
		t.Fatal("a list of 1000 values within a budget of 999")
	} else {
		wantBudgetError(t, err, `["@range"]`, "values")
	}
	if err := run(`{"@range": 1000}`, Limits{Values: 1000}); err != nil {
		t.Fatal(err)
	}
	if err := run(`{"@map": [{"@range": 1000}, {"@range": 1000}]}`, Limits{Values: -1, Bytes: -1}); err != nil {
		t.Fatal(err)
	}
	if err := run(`{"@string": {"@range": 1000}}`, Limits{Bytes: 100}); err == nil {
		t.Fatal("a string of 3890 bytes within a budget of 100 bytes")
	}
	err := run(`{"@cel": "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map(x, [x, x, x].map(y, y * x)).size()"}`, Limits{Steps: 20})
	wantBudgetError(t, err, `["@cel"]`, "steps")
}

// A pod's @project takes a small fraction of the default budget.
func TestBudgetOrdinaryExpression(t *testing.T) {
	e := mustParse(t, `{
	  "metadata": {"name": "$.metadata.name", "labels": {"app": "$.metadata.labels.app"},
	    "annotations": {"n": {"@string": {"@len": ["$.spec.containers"]}}}},
	  "spec": {"images": {"@map": ["$$.image", "$.spec.containers"]},
	    "ports": {"@sortBy": ["$$", {"@filter": [{"@gt": ["$$", 0]}, [443, 80, 8080]]}]},
	    "hash": {"@hash": "$.spec"}, "in": {"@in": ["c1", "$.spec.containers[*].name"]}}
	}`)
	b := NewBudget(nil, Limits{})
	if _, err := Run(e, &Context{Subject: pod(t), Budget: b}); err != nil {
		t.Fatal(err)
	}
	used, max := b.Used(), b.Max()
	if used.Steps*100 > max.Steps || used.Values*100 > max.Values || used.Bytes*100 > max.Bytes {
		t.Fatalf("used %+v of %+v", used, max)
	}
	if used.Steps == 0 || used.Values == 0 || used.Bytes == 0 {
		t.Fatalf("used %+v: nothing counted", used)
	}
}

// An evaluation whose context ends returns within a second, with an error
// at the expression it was in that wraps context.Canceled.
func TestBudgetCancel(t *testing.T) {
	list := make([]any, 65536)
	for i := range list {
		list[i] = int64(i)
	}
	e := mustParse(t, `{"@all": [{"@all": [{"@gte": ["$$", 0]}, "$.list"]}, "$.list"]}`)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		// Unbounded: without the cancellation it runs for minutes.
		b := NewBudget(ctx, Limits{Steps: -1, Values: -1, Bytes: -1})
		_, err := Run(e, &Context{Subject: map[string]any{"list": list}, Budget: b})
		errc <- err
	}()
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case err := <-errc:
		var ee *Error
		if !errors.Is(err, context.Canceled) || !errors.As(err, &ee) || !strings.HasPrefix(ee.Path, `["@all"]`) {
			t.Fatalf("error %v, want a cancellation inside the expression", err)
		}
		if !strings.Contains(err.Error(), "evaluation cancelled: context canceled") {
			t.Fatalf("error %q", err)
		}
	case <-time.After(time.Second):
		t.Fatal("the evaluation went on for a second after its context ended")
	}
}

// A @cel call in progress stops when the context ends too.
func TestBudgetCancelCEL(t *testing.T) {
	e := mustParse(t, `{"@cel": "self.list.all(x, self.list.all(y, x + y >= 0))"}`)
	list := make([]any, 4096)
	for i := range list {
		list[i] = int64(i)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := NewBudget(ctx, Limits{Steps: -1})
	_, err := Run(e, &Context{Subject: map[string]any{"list": list}, Budget: b})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want a cancellation", err)
	}
}
