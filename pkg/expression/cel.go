package expression

import (
	"encoding/base64"
	"errors"
	"fmt"
	"github.com/dcontroller/dcontroller/pkg/expression/celkro"
	"math"
	"slices"
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

// CEL libraries of the map form of @cel ("library").
const (
	// celLibraryStandard is the default: the CEL standard library and the
	// cel-go string, list, set and math extensions.
	celLibraryStandard = "standard"
	// celLibraryKro is kro's environment (package celkro).
	celLibraryKro = "kro"
)

// celSelf is the variable the one-string form binds to the subject.
const celSelf = "self"

// parseCEL parses the two forms of @cel: a literal string (or a
// one-element list of one), CEL with the variable self; or a map
// {"expr": string, "vars": {name: expression, ...}, "library": "standard"
// | "kro"}, CEL with the variables named in vars, each bound to its
// expression's value (self too, unless vars names it), in the library's
// environment.
func parseCEL(c *call, arg any, sc scope) error {
	if l, ok := arg.([]any); ok && len(l) == 1 {
		arg = l[0]
	}
	m, ok := arg.(map[string]any)
	if !ok {
		if err := c.parseArg(arg, c.path, sc); err != nil {
			return err
		}
		return prepareCEL(c)
	}
	for k := range m {
		switch k {
		case "expr", "vars", "library":
		default:
			return newError(Field(c.path, k), c.op, "unknown key (want expr, vars and library)")
		}
	}
	src, ok := m["expr"].(string)
	if !ok {
		return newError(Field(c.path, "expr"), c.op, "a string is required, got %s", typeName(m["expr"]))
	}
	lib := celLibraryStandard
	if v, has := m["library"]; has {
		s, ok := v.(string)
		if !ok || (s != celLibraryStandard && s != celLibraryKro) {
			return newError(Field(c.path, "library"), c.op, "want %q or %q, got %v", celLibraryStandard, celLibraryKro, v)
		}
		lib = s
	}
	c.celKro = lib == celLibraryKro
	c.celVars = []string{}
	if v, has := m["vars"]; has && v != nil {
		vars, ok := v.(map[string]any)
		if !ok {
			return newError(Field(c.path, "vars"), c.op, "a map from variable names to expressions is required, got %s", typeName(v))
		}
		names := make([]string, 0, len(vars))
		for k := range vars {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			p := Field(Field(c.path, "vars"), k)
			if !isIdentifier(k) {
				return newError(p, c.op, "%q is not a CEL identifier", k)
			}
			x, err := parse(vars[k], p, sc)
			if err != nil {
				return err
			}
			c.celVars = append(c.celVars, k)
			c.args = append(c.args, x)
		}
	}
	var base *cel.Env
	var err error
	if c.celKro {
		base, err = celkro.Env()
	} else {
		base, err = celStandardEnv()
	}
	if err != nil {
		return c.errorf("CEL environment: %v", err)
	}
	decls := []cel.EnvOption{}
	if !slices.Contains(c.celVars, celSelf) {
		decls = append(decls, cel.Variable(celSelf, cel.DynType))
	}
	for _, n := range c.celVars {
		decls = append(decls, cel.Variable(n, cel.DynType))
	}
	env, err := base.Extend(decls...)
	if err != nil {
		return c.errorf("CEL environment: %v", err)
	}
	ast, iss := env.Compile(src)
	if iss != nil && iss.Err() != nil {
		return newError(Field(c.path, "expr"), c.op, "%v", iss.Err())
	}
	opts := []cel.ProgramOption{cel.CostLimit(celCostLimit), cel.InterruptCheckFrequency(celInterruptEvery)}
	if c.celKro {
		opts = celkro.ProgramOptions()
	}
	prog, err := env.Program(ast, opts...)
	if err != nil {
		return newError(Field(c.path, "expr"), c.op, "%v", err)
	}
	c.prog = prog
	return nil
}

// celStandardEnv is the standard library's environment with no variables.
var celStandardEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(ext.Strings(), ext.Lists(), ext.Sets(), ext.Math())
})

// prepareCEL compiles the CEL source of the one-string form, which must be
// a literal string.
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

// evalCEL evaluates the CEL program. The one-string form binds self to the
// local subject inside a list operator's per-element argument, else to the
// global subject. The map form binds each variable to its expression's
// value, and self as the one-string form does unless a variable is named
// so. With the kro library, an error from a missing map key or field (data
// that is not there yet, which kro waits for) gives null, omit() gives
// null, and the result follows kro's conversion rules (celkro.ToJSON).
func evalCEL(c *call, ctx *Context) (any, error) {
	var self any
	if ctx != nil {
		if c.local {
			self = ctx.Local
		} else {
			self = ctx.Subject
		}
	}
	var act interpreter.Activation = &selfActivation{self: self}
	if c.celVars != nil {
		vars := make(map[string]any, len(c.celVars)+1)
		vars[celSelf] = self
		for i, n := range c.celVars {
			v, err := c.args[i].Eval(ctx)
			if err != nil {
				return nil, err
			}
			vars[n] = v
		}
		a, err := interpreter.NewActivation(vars)
		if err != nil {
			return nil, c.errorf("%v", err)
		}
		act = a
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
		if c.celKro && celkro.IsPending(err) {
			return nil, nil
		}
		return nil, c.errorf("%v", err)
	}
	if c.celKro {
		v, err := celkro.ToJSON(out, nil)
		if err != nil {
			return nil, c.errorf("%v", err)
		}
		if err := c.account(ctx, v); err != nil {
			return nil, err
		}
		return v, nil
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
