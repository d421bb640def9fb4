package apply

import (
	"encoding/json"
	"fmt"
	"github.com/dcontroller/dcontroller/pkg/expression"
	"math"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	sigsjson "sigs.k8s.io/json"
)

// LastAppliedAnnotation holds the JSON of the last desired state applied to
// an object (without the annotation itself).
const LastAppliedAnnotation = "metacontroller.k8s.io/last-applied-configuration"

// conventionalKeys are the merge keys of associative lists, in order of
// preference (the patchMergeKeys used across the built-in Kubernetes API).
var conventionalKeys = []string{"name", "containerPort", "port", "mountPath", "devicePath", "ip", "type", "topologyKey"}

// LastApplied returns the configuration recorded in obj's
// LastAppliedAnnotation, or nil when there is none. A malformed annotation
// is an error.
func LastApplied(obj map[string]any) (map[string]any, error) {
	md, _ := obj["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	s, ok := ann[LastAppliedAnnotation].(string)
	if !ok || s == "" {
		return nil, nil
	}
	var out map[string]any
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("metadata.annotations[%q]: %w", LastAppliedAnnotation, err)
	}
	return out, nil
}

// WithLastApplied returns a deep copy of desired whose LastAppliedAnnotation
// holds the JSON of desired (keys sorted, so the same desired state always
// gives the same annotation).
func WithLastApplied(desired map[string]any) (map[string]any, error) {
	clean := runtime.DeepCopyJSON(desired)
	if md, ok := clean["metadata"].(map[string]any); ok {
		if ann, ok := md["annotations"].(map[string]any); ok {
			delete(ann, LastAppliedAnnotation)
			if len(ann) == 0 {
				delete(md, "annotations")
			}
		}
	}
	b, err := json.Marshal(clean)
	if err != nil {
		return nil, err
	}
	out := runtime.DeepCopyJSON(clean)
	md, ok := out["metadata"].(map[string]any)
	if !ok {
		md = map[string]any{}
		out["metadata"] = md
	}
	ann, ok := md["annotations"].(map[string]any)
	if !ok {
		ann = map[string]any{}
		md["annotations"] = ann
	}
	ann[LastAppliedAnnotation] = string(b)
	return out, nil
}

// Apply returns the object to write so that observed reaches desired, and
// whether it differs from observed (false: no write is needed). Neither
// argument is modified. A malformed last-applied annotation counts as
// absent: the merge then keeps every observed field the desired state does
// not set.
func Apply(observed, desired map[string]any) (map[string]any, bool, error) {
	last, err := LastApplied(observed)
	if err != nil {
		last = nil
	}
	want, err := WithLastApplied(desired)
	if err != nil {
		return nil, false, err
	}
	out := Merge(observed, last, want)
	return out, !Equal(out, observed), nil
}

// Merge returns a new object: observed with desired merged in, and the
// fields that lastApplied set but desired no longer sets removed. A null in
// desired removes the field. Inputs are not modified; the result shares no
// maps or lists with them.
func Merge(observed, lastApplied, desired map[string]any) map[string]any {
	return mergeMap(runtime.DeepCopyJSON(observed), lastApplied, desired)
}

// mergeMap merges into out (owned by the caller).
func mergeMap(out, last, desired map[string]any) map[string]any {
	for k, dv := range desired {
		if dv == nil {
			delete(out, k)
			continue
		}
		var lv any
		if last != nil {
			lv = last[k]
		}
		if _, ok := out[k]; !ok && lv != nil && isZero(dv) && Equal(lv, dv) {
			// Settled: the API server drops zero values of optional
			// fields (false, 0, "", {}, []) when it stores them.
			continue
		}
		out[k] = mergeValue(out[k], lv, dv)
	}
	for k := range last {
		if _, ok := desired[k]; !ok {
			delete(out, k)
		}
	}
	return out
}

func mergeValue(obs, last, desired any) any {
	switch d := desired.(type) {
	case map[string]any:
		o, ok := obs.(map[string]any)
		if !ok {
			return runtime.DeepCopyJSONValue(d)
		}
		l, _ := last.(map[string]any)
		return mergeMap(o, l, d)
	case []any:
		o, ok := obs.([]any)
		if !ok {
			return runtime.DeepCopyJSONValue(d)
		}
		l, _ := last.([]any)
		if key := listKey(o, l, d); key != "" {
			return mergeList(o, l, d, key)
		}
		if l != nil && Equal(l, d) && covers(o, d) {
			// Settled: the hook still wants what it applied last, and
			// the observed list holds all of it plus what the API
			// server (defaulting, admission) added.
			return o
		}
		return runtime.DeepCopyJSONValue(d)
	default:
		if last != nil && Equal(last, d) && (Equal(obs, d) || sameQuantity(obs, d)) {
			// Settled: unchanged, or the API server stored the applied
			// quantity in its canonical form ("1000m" as "1"). The
			// equality check first spares the steady state the parsing.
			return obs
		}
		return d
	}
}

// covers reports whether observed holds everything desired sets: equal
// scalars, maps with every desired key covered, and lists whose desired
// items are covered, in order, by distinct observed items (extra observed
// items, anywhere, are allowed).
func covers(observed, desired any) bool {
	switch d := desired.(type) {
	case map[string]any:
		o, ok := observed.(map[string]any)
		if !ok {
			return false
		}
		for k, dv := range d {
			ov, ok := o[k]
			if !ok && isZero(dv) {
				continue
			}
			if !ok || !covers(ov, dv) {
				return false
			}
		}
		return true
	case []any:
		o, ok := observed.([]any)
		if !ok {
			return false
		}
		i := 0
		for _, dv := range d {
			for i < len(o) && !covers(o[i], dv) {
				i++
			}
			if i == len(o) {
				return false
			}
			i++
		}
		return true
	default:
		return Equal(observed, desired)
	}
}

// isZero reports whether v is the zero value of its JSON type, which the
// API server omits when it stores an optional field: false, 0, "", an
// empty map or an empty list.
func isZero(v any) bool {
	switch x := v.(type) {
	case bool:
		return !x
	case string:
		return x == ""
	case int64:
		return x == 0
	case int:
		return x == 0
	case float64:
		return x == 0
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

// sameQuantity reports whether a and b are two spellings of one
// resource.Quantity (Kubernetes' canonical number format, used for
// resources, limits and capacities): "1000m" and "1", "0.5" and "500m".
// Values that are not quantities are never the same here.
func sameQuantity(a, b any) bool {
	qa, ok := quantityOf(a)
	if !ok {
		return false
	}
	qb, ok := quantityOf(b)
	return ok && qa.Cmp(qb) == 0
}

func quantityOf(v any) (resource.Quantity, bool) {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case int64:
		s = strconv.FormatInt(x, 10)
	case int:
		s = strconv.Itoa(x)
	case float64:
		s = strconv.FormatFloat(x, 'f', -1, 64)
	default:
		return resource.Quantity{}, false
	}
	q, err := resource.ParseQuantity(s)
	return q, err == nil
}

// listKey returns the merge key of an associative list, or "" for a list
// that is replaced whole. The key comes from the desired items (or, when
// the desired list is empty, the last applied ones); every item of all
// three lists must be an object with a distinct scalar value for it.
func listKey(obs, last, desired []any) string {
	sample := desired
	if len(sample) == 0 {
		sample = last
	}
	if len(sample) == 0 {
		return ""
	}
	for _, k := range conventionalKeys {
		if hasUniqueKey(sample, k) && hasUniqueKey(obs, k) && hasUniqueKey(last, k) && hasUniqueKey(desired, k) {
			return k
		}
	}
	return ""
}

func hasUniqueKey(items []any, key string) bool {
	seen := make(map[string]bool, len(items))
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			return false
		}
		ks, ok := scalarKey(m[key])
		if !ok || seen[ks] {
			return false
		}
		seen[ks] = true
	}
	return true
}

// scalarKey renders a merge-key value; numbers render by value so that
// 80 and 80.0 are the same key.
func scalarKey(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return "s:" + x, true
	case bool:
		return "b:" + strconv.FormatBool(x), true
	case int64:
		return "n:" + strconv.FormatInt(x, 10), true
	case int:
		return "n:" + strconv.Itoa(x), true
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<62 {
			return "n:" + strconv.FormatInt(int64(x), 10), true
		}
		return "n:" + strconv.FormatFloat(x, 'g', -1, 64), true
	}
	return "", false
}

// mergeList merges associative lists on key: observed items keep their
// order (merged with their desired twin, dropped when only the last applied
// state had them, kept when someone else added them), and new desired items
// are appended in desired order.
func mergeList(obs, last, desired []any, key string) []any {
	index := func(items []any) map[string]map[string]any {
		m := make(map[string]map[string]any, len(items))
		for _, it := range items {
			im := it.(map[string]any)
			k, _ := scalarKey(im[key])
			m[k] = im
		}
		return m
	}
	des, lst := index(desired), index(last)
	out := make([]any, 0, len(obs)+len(desired))
	seen := map[string]bool{}
	for _, it := range obs {
		om := it.(map[string]any)
		k, _ := scalarKey(om[key])
		if dm, ok := des[k]; ok {
			out = append(out, mergeMap(om, lst[k], dm))
			seen[k] = true
			continue
		}
		if _, ok := lst[k]; ok {
			continue
		}
		out = append(out, om)
	}
	for _, it := range desired {
		dm := it.(map[string]any)
		k, _ := scalarKey(dm[key])
		if !seen[k] {
			out = append(out, runtime.DeepCopyJSONValue(dm))
		}
	}
	return out
}

// Equal compares two JSON values; numbers compare by value (int64 3 equals
// float64 3.0), so a hook that writes 3.0 causes no update of a stored 3.
// It is the expression language's deep equality.
func Equal(a, b any) bool { return expression.DeepEqual(a, b) }
