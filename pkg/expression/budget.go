package expression

import (
	"context"
	"fmt"
	"math"
)

// Limits bound the work of one evaluation (see Budget). A zero field takes
// the default of DefaultLimits; a negative one means no bound.
type Limits struct {
	// Steps bounds the evaluation steps: one per operator call, one per
	// list element that a list operator iterates over, one per list
	// element or map entry that a comparison (@eq, @neq, @in, @contains)
	// or a non-singular "$$" query visits, and the actual cost of each
	// @cel call, one step per unit of cel-go's cost model (the unit of
	// Kubernetes CEL validation's cost budget).
	Steps int64
	// Values bounds the values built: one per element of each list and
	// entry of each map built (literal lists and maps are copied on every
	// evaluation and count too) and one per string built.
	Values int64
	// Bytes bounds the memory of the values built, estimated: the length
	// of every string built plus 16 bytes (one interface value) per list
	// element or map entry built.
	Bytes int64
}

// The defaults of Limits: far above what ordinary expressions take (a
// @project of a Kubernetes object takes tens of steps and values; the
// examples and tests of this project stay below 1% of each), while one
// evaluation stays within about a second of CPU and a few hundred MiB.
const (
	DefaultMaxSteps  = 1 << 22 // 4,194,304 steps
	DefaultMaxValues = 1 << 21 // 2,097,152 values
	DefaultMaxBytes  = 1 << 26 // 64 MiB
)

// DefaultLimits are the limits a zero Limits stands for.
var DefaultLimits = Limits{Steps: DefaultMaxSteps, Values: DefaultMaxValues, Bytes: DefaultMaxBytes}

// resolved returns l with zero fields set to their defaults and negative
// ones to no bound (math.MaxInt64).
func (l Limits) resolved() Limits {
	f := func(n, def int64) int64 {
		switch {
		case n == 0:
			return def
		case n < 0:
			return math.MaxInt64
		}
		return n
	}
	return Limits{Steps: f(l.Steps, DefaultMaxSteps), Values: f(l.Values, DefaultMaxValues), Bytes: f(l.Bytes, DefaultMaxBytes)}
}

// checkEvery is how many steps pass between two looks at the budget's
// context.
const checkEvery = 1024

// Budget counts the work of an evaluation against Limits and carries the
// context that cancels it. An evaluation that exceeds a limit stops with an
// *Error whose cause is a *BudgetError, located at the expression that
// exceeded it, e.g.
//
//	spec.controllers[0].pipeline[1]["@project"].x["@map"]: @map: evaluation exceeded its budget of 2097152 values
//
// One whose context ends stops within checkEvery (1024) steps with an
// *Error whose cause wraps the context's error ("evaluation cancelled:
// context canceled"; errors.Is(err, context.Canceled) holds).
//
// A Budget counts every evaluation that shares it: give each evaluation a
// fresh one (NewBudget), or Reset it between evaluations. A Budget is not
// safe for concurrent use.
type Budget struct {
	max  Limits
	ctx  context.Context
	done <-chan struct{}
	// used is what the evaluations since the last Reset took.
	used Limits
	// tick counts down the steps to the next look at done; Reset keeps it,
	// so that many short evaluations look at done too.
	tick int64
}

// NewBudget returns a budget of limits l (see Limits for zero and negative
// fields) whose evaluations stop when ctx ends; ctx may be nil (never
// cancelled).
func NewBudget(ctx context.Context, l Limits) *Budget {
	b := &Budget{max: l.resolved(), ctx: ctx, tick: checkEvery}
	if ctx != nil {
		b.done = ctx.Done()
	}
	return b
}

// Reset forgets the work counted so far; limits and context stay.
func (b *Budget) Reset() { b.used = Limits{} }

// Used returns the work counted since the budget was made or Reset.
func (b *Budget) Used() Limits { return b.used }

// Max returns the limits in force; no bound is math.MaxInt64.
func (b *Budget) Max() Limits { return b.max }

// BudgetError is the cause of an evaluation error when an evaluation
// exceeded one of its Limits.
type BudgetError struct {
	// Limit names the limit: "steps", "values" or "bytes".
	Limit string
	// Max is the limit's value.
	Max int64
}

// Error implements error.
func (e *BudgetError) Error() string {
	return fmt.Sprintf("evaluation exceeded its budget of %d %s", e.Max, e.Limit)
}

// step counts one step.
func (b *Budget) step() error {
	b.used.Steps++
	b.tick--
	if b.used.Steps > b.max.Steps || b.tick <= 0 {
		return b.check()
	}
	return nil
}

// charge counts steps, values and bytes. A nil budget counts nothing.
func (b *Budget) charge(steps, values, bytes int64) error {
	if b == nil {
		return nil
	}
	b.used.Steps += steps
	b.used.Values += values
	b.used.Bytes += bytes
	b.tick -= steps
	if b.used.Steps > b.max.Steps || b.used.Values > b.max.Values || b.used.Bytes > b.max.Bytes || b.tick <= 0 {
		return b.check()
	}
	return nil
}

// chargeValue counts a value built: a string (its length), a list or a map
// (16 bytes per element or entry); other values are free.
func (b *Budget) chargeValue(v any) error {
	switch x := v.(type) {
	case string:
		return b.charge(0, 1, int64(len(x)))
	case []any:
		return b.charge(0, int64(len(x)), 16*int64(len(x)))
	case map[string]any:
		return b.charge(0, int64(len(x)), 16*int64(len(x)))
	}
	return nil
}

// check reports the first limit exceeded, and looks at the context when
// it is due.
func (b *Budget) check() error {
	switch {
	case b.used.Steps > b.max.Steps:
		return &BudgetError{Limit: "steps", Max: b.max.Steps}
	case b.used.Values > b.max.Values:
		return &BudgetError{Limit: "values", Max: b.max.Values}
	case b.used.Bytes > b.max.Bytes:
		return &BudgetError{Limit: "bytes", Max: b.max.Bytes}
	}
	if b.tick <= 0 {
		if err := b.cancelled(); err != nil {
			b.tick = 0 // every later charge looks again, and fails
			return err
		}
		b.tick = checkEvery
	}
	return nil
}

// cancelled returns the cancellation error when the context ended.
func (b *Budget) cancelled() error {
	if b.done == nil {
		return nil
	}
	select {
	case <-b.done:
		return fmt.Errorf("evaluation cancelled: %w", context.Cause(b.ctx))
	default:
		return nil
	}
}

// budgetOf returns ctx's budget, nil when it has none.
func budgetOf(ctx *Context) *Budget {
	if ctx == nil {
		return nil
	}
	return ctx.Budget
}

// budgeted is a context with its own budget, in one allocation.
type budgeted struct {
	ctx Context
	b   Budget
}

// withDefaultBudget returns a copy of ctx (an empty context when nil)
// with a fresh budget of DefaultLimits.
func withDefaultBudget(ctx *Context) *Context {
	bc := &budgeted{b: Budget{max: DefaultLimits, tick: checkEvery}}
	if ctx != nil {
		bc.ctx = *ctx
	}
	bc.ctx.Budget = &bc.b
	return &bc.ctx
}

// Run evaluates e in ctx and checks the size of the result: evaluation
// runs under ctx.Budget (a fresh budget of DefaultLimits when nil), and
// the result, whose lists, maps and strings may be shared many times over
// (a list of one map a thousand times), must fit in the budget's Values
// and Bytes limits when counted as a tree (see Limits), and be nested at
// most 10000 levels deep. Errors are *Error values; a result over the
// limits is reported at e's path with a *BudgetError cause.
func Run(e Expression, ctx *Context) (any, error) {
	if ctx == nil || ctx.Budget == nil {
		ctx = withDefaultBudget(ctx)
	}
	v, err := e.Eval(ctx)
	if err != nil {
		return nil, err
	}
	if err := ctx.Budget.bound(v); err != nil {
		return nil, &Error{Path: e.Path(), Err: err}
	}
	return v, nil
}

// bound checks that v, counted as a tree, fits in the Values and Bytes
// limits and in maxNormalizeDepth levels; the walk stops at the first
// limit passed.
func (b *Budget) bound(v any) error {
	t := tally{max: b.max}
	return t.walk(v, 0)
}

// tally counts the values and bytes of a value counted as a tree.
type tally struct {
	max           Limits
	values, bytes int64
}

func (t *tally) walk(v any, depth int) error {
	switch x := v.(type) {
	case string:
		t.values++
		t.bytes += int64(len(x))
	case []any:
		if err := t.container(len(x), depth); err != nil {
			return err
		}
		for _, e := range x {
			if err := t.walk(e, depth+1); err != nil {
				return err
			}
		}
	case map[string]any:
		if err := t.container(len(x), depth); err != nil {
			return err
		}
		for _, e := range x {
			if err := t.walk(e, depth+1); err != nil {
				return err
			}
		}
	}
	return t.over()
}

func (t *tally) container(n, depth int) error {
	if depth > maxNormalizeDepth {
		return fmt.Errorf("result nested more than %d levels deep", maxNormalizeDepth)
	}
	t.values += int64(n)
	t.bytes += 16 * int64(n)
	return t.over()
}

func (t *tally) over() error {
	switch {
	case t.values > t.max.Values:
		return &BudgetError{Limit: "values", Max: t.max.Values}
	case t.bytes > t.max.Bytes:
		return &BudgetError{Limit: "bytes", Max: t.max.Bytes}
	}
	return nil
}

// visit walks v as a tree, charging one step per list element and map
// entry, and stops at the first limit passed: the price of a traversal
// (a JSONPath selection, a comparison) whose cost is the size of the
// value, which sharing may make far larger than the values built.
func (b *Budget) visit(v any) error {
	if b == nil {
		return nil
	}
	var walk func(v any, depth int) error
	walk = func(v any, depth int) error {
		switch x := v.(type) {
		case []any:
			if depth > maxNormalizeDepth {
				return fmt.Errorf("value nested more than %d levels deep", maxNormalizeDepth)
			}
			if err := b.charge(int64(len(x)), 0, 0); err != nil {
				return err
			}
			for _, e := range x {
				if err := walk(e, depth+1); err != nil {
					return err
				}
			}
		case map[string]any:
			if depth > maxNormalizeDepth {
				return fmt.Errorf("value nested more than %d levels deep", maxNormalizeDepth)
			}
			if err := b.charge(int64(len(x)), 0, 0); err != nil {
				return err
			}
			for _, e := range x {
				if err := walk(e, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(v, 0)
}

// equal is DeepEqual that charges one step per list element and map entry
// compared to b (nil: no bound).
func equal(x, y any, b *Budget) (bool, error) {
	if b == nil {
		return DeepEqual(x, y), nil
	}
	var err error
	eq := deepEqual(x, y, func(n int) bool {
		if err == nil {
			err = b.charge(int64(n), 0, 0)
		}
		return err == nil
	})
	return eq, err
}

// Tally counts the values and bytes of several values, each counted as a
// tree (see Run), against a budget's Values and Bytes limits: what a
// pipeline stage emits for one input document, where each output shares
// most of the input (an @unwind of a long list copies the rest of the
// document into every output, and hashing each output walks it whole).
type Tally struct {
	t tally
	b *Budget
}

// NewTally returns an empty tally against b's limits (DefaultLimits when b
// is nil) that also stops when b's context ends.
func (b *Budget) NewTally() *Tally {
	if b == nil {
		return &Tally{t: tally{max: DefaultLimits}}
	}
	return &Tally{t: tally{max: b.max}, b: b}
}

// Add counts v; it returns a *BudgetError once the values added so far
// pass a limit, and the cancellation error once the budget's context ended.
func (t *Tally) Add(v any) error {
	if t.b != nil {
		if err := t.b.cancelled(); err != nil {
			return err
		}
	}
	return t.t.walk(v, 0)
}
