package expression

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"
)

// celCostLimit bounds the runtime cost of one @cel evaluation (the unit of
// cel-go's cost model, as used by Kubernetes CEL validation). The cost a
// call actually took is then counted to the evaluation's budget, one step
// per unit (see Limits.Steps), so that the default steps budget holds
// four such calls.
const celCostLimit = 1_000_000

// celInterruptEvery is how many comprehension iterations pass between two
// looks at the context of a cancellable evaluation.
const celInterruptEvery = 100

// celEnv is the shared CEL environment: one dynamically typed variable
// "self", the standard library and the cel-go string, list, set and math
// extensions.
var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("self", cel.DynType),
		ext.Strings(),
		ext.Lists(),
		ext.Sets(),
		ext.Math(),
	)
})

// prepareCEL compiles the CEL source, which must be a literal string.
func prepareCEL(c *call) error {
	lit, ok := c.args[0].(*literal)
	if !ok {
		return c.errorf("argument must be a literal string")
	}
	src, ok := lit.v.(string)
	if !ok {
		return c.errorf("argument must be a string, got %s", typeName(lit.v))
	}
	env, err := celEnv()
	if err != nil {
		return c.errorf("CEL environment: %v", err)
	}
	ast, iss := env.Compile(src)
	if iss != nil && iss.Err() != nil {
		return c.errorf("%v", iss.Err())
	}
	prog, err := env.Program(ast, cel.CostLimit(celCostLimit), cel.InterruptCheckFrequency(celInterruptEvery))
	if err != nil {
		return c.errorf("%v", err)
	}
	c.prog = prog
	return nil
}

// selfActivation binds "self" without allocating a map.
type selfActivation struct{ self any }

func (a *selfActivation) ResolveName(name string) (any, bool) {
	if name == "self" {
		return a.self, true
	}
	return nil, false
}

func (a *selfActivation) Parent() interpreter.Activation { return nil }

// evalCEL evaluates the CEL program with self bound to the local subject
// inside a list operator's per-element argument, else to the global subject.
func evalCEL(c *call, ctx *Context) (any, error) {
	act := &selfActivation{}
	if ctx != nil {
		if c.local {
			act.self = ctx.Local
		} else {
			act.self = ctx.Subject
		}
	}
	b := budgetOf(ctx)
	var out ref.Val
	var det *cel.EvalDetails
	var err error
	if b != nil && b.done != nil {
		out, det, err = c.prog.ContextEval(b.ctx, act)
	} else {
		out, det, err = c.prog.Eval(act)
	}
	if b != nil && det != nil && det.ActualCost() != nil {
		if cerr := c.charge(ctx, int64(min(*det.ActualCost(), celCostLimit)), 0, 0); cerr != nil {
			return nil, cerr
		}
	}
	if err != nil {
		if b != nil {
			if cerr := b.cancelled(); cerr != nil {
				return nil, c.budgetError(cerr)
			}
		}
		return nil, c.errorf("%v", err)
	}
	v, err := celToModel(out, 0, b)
	if err != nil {
		var be *BudgetError
		if errors.As(err, &be) {
			return nil, c.budgetError(err)
		}
		return nil, c.errorf("%v", err)
	}
	return v, nil
}

// celToModel converts a CEL value to the data model: int and uint to int64
// (a uint above math.MaxInt64 to float64), double to float64, bytes to
// standard base64, timestamps to RFC 3339 strings, durations to Go duration
// strings, lists to []any and maps to map[string]any (non-string keys
// converted as by @string). A NaN or ±Inf double anywhere in the result is
// an error (JSON, RFC 8259 §6, and the Kubernetes API have no such numbers).
// The lists and maps made are counted to b (nil: not counted).
func celToModel(v ref.Val, depth int, b *Budget) (any, error) {
	if depth > maxNormalizeDepth {
		return nil, fmt.Errorf("CEL result nested too deeply")
	}
	switch x := v.(type) {
	case types.Null:
		return nil, nil
	case types.Bool:
		return bool(x), nil
	case types.Int:
		return int64(x), nil
	case types.Uint:
		if uint64(x) > math.MaxInt64 {
			return float64(x), nil
		}
		return int64(x), nil
	case types.Double:
		if f := float64(x); math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("CEL result holds the double %s, not a finite number (%s)", formatFloat(f), nonFiniteHint)
		}
		return float64(x), nil
	case types.String:
		return string(x), nil
	case types.Bytes:
		return base64.StdEncoding.EncodeToString(x), nil
	case types.Timestamp:
		return x.Time.UTC().Format(time.RFC3339Nano), nil
	case types.Duration:
		return x.Duration.String(), nil
	case *types.Err:
		return nil, x
	case traits.Mapper:
		if n, ok := x.Size().(types.Int); ok {
			if err := b.charge(int64(n), int64(n), 16*int64(n)); err != nil {
				return nil, err
			}
		}
		out := map[string]any{}
		it := x.Iterator()
		for it.HasNext() == types.True {
			k := it.Next()
			kv, err := celToModel(k, depth+1, b)
			if err != nil {
				return nil, err
			}
			val, err := celToModel(x.Get(k), depth+1, b)
			if err != nil {
				return nil, err
			}
			out[toString(kv)] = val
		}
		return out, nil
	case traits.Lister:
		n, ok := x.Size().(types.Int)
		if !ok {
			return nil, fmt.Errorf("CEL list of unknown size")
		}
		if err := b.charge(int64(n), int64(n), 16*int64(n)); err != nil {
			return nil, err
		}
		out := make([]any, 0, int(n))
		for i := types.Int(0); i < n; i++ {
			e, err := celToModel(x.Get(i), depth+1, b)
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, nil
	}
	if v == nil {
		return nil, nil
	}
	return nil, fmt.Errorf("unsupported CEL result of type %s", v.Type().TypeName())
}
