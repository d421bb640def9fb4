package celkro

import (
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
	k8scel "k8s.io/apiserver/pkg/cel/library"
)

// CostLimit bounds the runtime cost of one evaluation, in the unit of
// cel-go's cost model (the unit of Kubernetes CEL validation's budget).
const CostLimit = 1_000_000

// InterruptEvery is how many comprehension iterations pass between two
// looks at the evaluation's context.
const InterruptEvery = 100

// MaxResultValues bounds the lists, maps and scalars one evaluation's
// result may hold once converted by ToJSON.
const MaxResultValues = 1 << 20

// MaxResultDepth bounds the nesting of an evaluation's result.
const MaxResultDepth = 100

// Env is the environment every kro expression starts from, with no
// variables: the CEL standard library; cel-go's two-variable comprehensions,
// lists, strings, bindings, optional types and encoders; the Kubernetes
// libraries kro includes (lists, URLs, regex, quantity, IP, CIDR, semver);
// and kro's own functions (Functions). This is the set kro's environment
// declares (kro's pkg/cel/environment.go), less its runtime library. The
// error is cel-go's, should the declarations clash.
var Env = sync.OnceValues(func() (*cel.Env, error) {
	opts := []cel.EnvOption{
		ext.TwoVarComprehensions(),
		ext.Lists(),
		ext.Strings(),
		ext.Bindings(),
		cel.OptionalTypes(),
		ext.Encoders(),
		k8scel.Lists(),
		k8scel.URLs(),
		k8scel.Regex(),
		k8scel.Quantity(),
		k8scel.IP(),
		k8scel.CIDR(),
		// kro's docs list semver(string, bool), which needs the
		// library's later version.
		k8scel.SemverLib(k8scel.SemverVersion(math.MaxUint32)),
	}
	opts = append(opts, Functions()...)
	return cel.NewEnv(opts...)
})

// ProgramOptions are the options a program of Env is built with: the cost
// limit CostLimit with CostEstimator's charges, and interruption every
// InterruptEvery comprehension iterations.
func ProgramOptions() []cel.ProgramOption {
	return []cel.ProgramOption{
		cel.CostLimit(CostLimit),
		cel.CostTracking(CostEstimator{}),
		cel.InterruptCheckFrequency(InterruptEvery),
	}
}

// IsOmit reports whether v is the value of omit().
func IsOmit(v ref.Val) bool {
	_, ok := v.(omitValue)
	return ok
}

// ToJSON converts a CEL value to the JSON data model: ints as int64, doubles
// as float64 (NaN and ±Inf are errors), durations as Go duration strings,
// timestamps as RFC 3339 UTC strings (as metav1 writes them), an absent
// optional as nil, omit() as omit (Omit{} by default). Bytes are an error
// (encode them, e.g. base64.encode(...)), as a uint above math.MaxInt64 and
// a map key that is not a string are (kro's rules). The result holds at most
// MaxResultValues values, nested at most MaxResultDepth deep.
func ToJSON(v ref.Val, omit any) (any, error) {
	n := 0
	return toJSON(v, 0, &n, omit, false)
}

// toJSON is ToJSON; bytesOK keeps bytes as []byte (encoding/json then
// writes them as standard base64) instead of refusing them.
func toJSON(v ref.Val, depth int, n *int, omit any, bytesOK bool) (any, error) {
	if depth > MaxResultDepth {
		return nil, fmt.Errorf("result nested more than %d levels deep", MaxResultDepth)
	}
	if *n++; *n > MaxResultValues {
		return nil, fmt.Errorf("result holds more than %d values", MaxResultValues)
	}
	switch x := v.(type) {
	case nil, types.Null:
		return nil, nil
	case types.Bool:
		return bool(x), nil
	case types.Int:
		return int64(x), nil
	case types.Uint:
		if uint64(x) > math.MaxInt64 {
			return nil, fmt.Errorf("uint %d overflows int64; convert it explicitly, e.g. string(...)", uint64(x))
		}
		return int64(x), nil
	case types.Double:
		if f := float64(x); math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("double %v is not a finite number (JSON has no such numbers)", f)
		}
		return float64(x), nil
	case types.String:
		return string(x), nil
	case types.Bytes:
		if bytesOK {
			return []byte(x), nil
		}
		return nil, errors.New("a bytes value cannot be a field value; encode it explicitly, e.g. base64.encode(...)")
	case types.Duration:
		return x.Duration.String(), nil
	case types.Timestamp:
		return x.Time.UTC().Format(time.RFC3339), nil
	case *types.Optional:
		if !x.HasValue() {
			return nil, nil
		}
		return toJSON(x.GetValue(), depth, n, omit, bytesOK)
	case omitValue:
		return omit, nil
	case *types.Err:
		return nil, x
	case traits.Mapper:
		out := map[string]any{}
		for it := x.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return nil, fmt.Errorf("map key %v is a %s, not a string", k, k.Type().TypeName())
			}
			e, err := toJSON(x.Get(k), depth+1, n, omit, bytesOK)
			if err != nil {
				return nil, err
			}
			out[string(ks)] = e
		}
		return out, nil
	case traits.Lister:
		size, ok := x.Size().(types.Int)
		if !ok {
			return nil, errors.New("list of unknown size")
		}
		out := make([]any, 0, int(min(int64(size), MaxResultValues)))
		for i := types.Int(0); i < size; i++ {
			e, err := toJSON(x.Get(i), depth+1, n, omit, bytesOK)
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, nil
	}
	return nil, fmt.Errorf("a %s value cannot be a field value", v.Type().TypeName())
}

// IsPending reports whether an evaluation error comes from data that is not
// there yet: a missing map key or field (kro waits for such an expression
// to become resolvable instead of failing).
func IsPending(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return hasPrefix(msg, "no such key") || hasPrefix(msg, "no such attribute")
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// CostEstimator charges kro's functions by the size of what they make and
// leaves the other functions to the Kubernetes libraries' estimator.
type CostEstimator struct{}

// CallCost implements interpreter.ActualCostEstimator.
func (CostEstimator) CallCost(function, overloadID string, args []ref.Val, result ref.Val) *uint64 {
	size := func(v ref.Val) uint64 {
		switch x := v.(type) {
		case types.String:
			return uint64(len(x))
		case types.Bytes:
			return uint64(len(x))
		case traits.Sizer:
			if s, ok := x.Size().(types.Int); ok && s > 0 {
				return uint64(s)
			}
		}
		return 0
	}
	switch function {
	case "json.unmarshal", "json.marshal", "random.seededString", "hash.fnv64a", "hash.sha256", "hash.md5":
		c := 1 + (size(result)+size(args[0]))/10
		return &c
	case "merge", "deepMerge", "lists.setAtIndex", "lists.insertAtIndex", "lists.removeAtIndex":
		c := 1 + size(result)
		return &c
	}
	return (&k8scel.CostEstimator{}).CallCost(function, overloadID, args, result)
}
