package dbsp

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unsafe"
)

// Document is a JSON object in the JSON data model: values are nil, bool,
// int64, float64, string, []any or map[string]any. Other Go integer and
// float types and json.Number are accepted and compared by numeric value.
type Document = map[string]any

// Tags separate the types in the hash space.
const (
	tagNil    uint64 = 0x9e3779b97f4a7c15
	tagFalse  uint64 = 0xc2b2ae3d27d4eb4f
	tagTrue   uint64 = 0x165667b19e3779f9
	tagNumber uint64 = 0x27d4eb2f165667c5
	tagFloat  uint64 = 0x94d049bb133111eb
	tagString uint64 = 0xbf58476d1ce4e5b9
	tagList   uint64 = 0xd6e8feb86659fd93
	tagMap    uint64 = 0xa0761d6478bd642f
	tagOther  uint64 = 0xe7037ed1a0b428db
)

// mix combines two 64-bit values into a well-distributed one (the folded
// 128-bit multiply of wyhash).
func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a^0xa0761d6478bd642f, b^0xe7037ed1a0b428db)
	return hi ^ lo
}

// Hash returns a 64-bit hash of a JSON value that is consistent with Equal:
// Equal(a, b) implies Hash(a) == Hash(b). It walks the value once without
// encoding it: strings are hashed with a wyhash-style function, numbers by
// numeric value (int64(1) and float64(1) hash alike), lists in order, and
// maps by an order-independent sum of their hashed key/value pairs, so no
// key sorting is needed. The seed is chosen per process: hashes must not be
// persisted.
func Hash(v any) uint64 { return hashWith(v, nil) }

// hint is the known hash of a map, by identity. Operators that build
// documents around documents whose hashes they hold (Join) pass hints so
// that hashing the result does not walk those parts again. A hint is only
// valid while the map it names is alive and unmodified, so hints never
// outlive the call that makes them.
type hint struct {
	p unsafe.Pointer
	h uint64
}

func mapPointer(m map[string]any) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&m)) }

func hashWith(v any, hints []hint) uint64 {
	switch x := v.(type) {
	case nil:
		return tagNil
	case string:
		return hashString(x) ^ tagString
	case map[string]any:
		if len(hints) > 0 {
			p := mapPointer(x)
			for _, h := range hints {
				if h.p == p {
					return h.h
				}
			}
		}
		var acc uint64
		for k, e := range x {
			var vh uint64
			if s, ok := e.(string); ok { // the common case, without the call
				vh = hashString(s) ^ tagString
			} else {
				vh = hashWith(e, hints)
			}
			acc += mix(hashString(k), vh)
		}
		return mix(acc^tagMap, uint64(len(x)))
	case []any:
		h := tagList
		for _, e := range x {
			h = mix(h, hashWith(e, hints))
		}
		return mix(h, uint64(len(x)))
	case bool:
		if x {
			return tagTrue
		}
		return tagFalse
	case int64:
		return mix(uint64(x), tagNumber)
	case float64:
		return hashFloat(x)
	}
	if n, ok := toNumber(v); ok {
		if n.isInt {
			return mix(uint64(n.i), tagNumber)
		}
		return hashFloat(n.f)
	}
	return mix(hashString(fmt.Sprintf("%T:%v", v, v)), tagOther)
}

func hashFloat(f float64) uint64 {
	if i, ok := floatToInt(f); ok {
		return mix(uint64(i), tagNumber)
	}
	if f != f { // all NaNs are one value for identity purposes
		return tagFloat
	}
	return mix(math.Float64bits(f), tagFloat)
}

// number is a numeric JSON value: an int64 when it is integral and in range,
// a float64 otherwise.
type number struct {
	i     int64
	f     float64
	isInt bool
}

// floatToInt reports the int64 value of an integral float in int64 range.
func floatToInt(f float64) (int64, bool) {
	if f == math.Trunc(f) && f >= -9.223372036854775808e18 && f < 9.223372036854775808e18 {
		return int64(f), true
	}
	return 0, false
}

func toNumber(v any) (number, bool) {
	switch x := v.(type) {
	case int64:
		return number{i: x, isInt: true}, true
	case float64:
		if i, ok := floatToInt(x); ok {
			return number{i: i, isInt: true}, true
		}
		return number{f: x}, true
	case int:
		return number{i: int64(x), isInt: true}, true
	case int32:
		return number{i: int64(x), isInt: true}, true
	case int16:
		return number{i: int64(x), isInt: true}, true
	case int8:
		return number{i: int64(x), isInt: true}, true
	case uint:
		return toNumber(uint64(x))
	case uint64:
		if x > math.MaxInt64 {
			return number{f: float64(x)}, true
		}
		return number{i: int64(x), isInt: true}, true
	case uint32:
		return number{i: int64(x), isInt: true}, true
	case uint16:
		return number{i: int64(x), isInt: true}, true
	case uint8:
		return number{i: int64(x), isInt: true}, true
	case float32:
		return toNumber(float64(x))
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return number{i: i, isInt: true}, true
		}
		if f, err := strconv.ParseFloat(string(x), 64); err == nil {
			return toNumber(f)
		}
	}
	return number{}, false
}

func (n number) float() float64 {
	if n.isInt {
		return float64(n.i)
	}
	return n.f
}

func compareNumbers(a, b number) int {
	if a.isInt && b.isInt {
		return cmp.Compare(a.i, b.i)
	}
	return cmp.Compare(a.float(), b.float())
}

// sameMap reports whether two maps are the same map object.
func sameMap(a, b map[string]any) bool { return mapPointer(a) == mapPointer(b) }

// Equal reports whether two JSON values are deeply equal. Numbers are equal
// when their numeric values are (int64(1) equals float64(1.0)), a nil map
// equals an empty map, and NaN equals NaN so that every value can be a Z-set
// element. Values outside the JSON model fall back to reflect.DeepEqual.
func Equal(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case string:
		y, ok := b.(string)
		return ok && x == y
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		if sameMap(x, y) {
			return true
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !Equal(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		if len(x) > 0 && &x[0] == &y[0] {
			return true
		}
		for i := range x {
			if !Equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	}
	if na, ok := toNumber(a); ok {
		nb, ok := toNumber(b)
		if !ok {
			return false
		}
		if na.isInt != nb.isInt {
			return false
		}
		if na.isInt {
			return na.i == nb.i
		}
		return na.f == nb.f || (na.f != na.f && nb.f != nb.f)
	}
	return reflect.DeepEqual(a, b)
}

// rank orders the JSON types for Compare.
func rank(v any) int {
	switch v.(type) {
	case nil:
		return 0
	case bool:
		return 1
	case string:
		return 3
	case []any:
		return 4
	case map[string]any:
		return 5
	}
	if _, ok := toNumber(v); ok {
		return 2
	}
	return 6
}

// Compare is the canonical total order of JSON values, consistent with
// Equal: it returns 0 exactly when Equal(a, b). Types order as
// nil < false < true < numbers < strings < lists < maps; numbers compare by
// value (NaN first), strings bytewise, lists lexicographically, and maps as
// their sorted key/value sequences (key first, then value, a shorter prefix
// first).
func Compare(a, b any) int {
	ra, rb := rank(a), rank(b)
	if ra != rb {
		return cmp.Compare(ra, rb)
	}
	switch x := a.(type) {
	case nil:
		return 0
	case bool:
		y := b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case string:
		return strings.Compare(x, b.(string))
	case []any:
		y := b.([]any)
		for i := 0; i < len(x) && i < len(y); i++ {
			if c := Compare(x[i], y[i]); c != 0 {
				return c
			}
		}
		return cmp.Compare(len(x), len(y))
	case map[string]any:
		y := b.(map[string]any)
		if sameMap(x, y) {
			return 0
		}
		kx, ky := sortedKeys(x), sortedKeys(y)
		for i := 0; i < len(kx) && i < len(ky); i++ {
			if c := strings.Compare(kx[i], ky[i]); c != 0 {
				return c
			}
			if c := Compare(x[kx[i]], y[ky[i]]); c != 0 {
				return c
			}
		}
		return cmp.Compare(len(kx), len(ky))
	}
	if ra == 2 {
		na, _ := toNumber(a)
		nb, _ := toNumber(b)
		return compareNumbers(na, nb)
	}
	if reflect.DeepEqual(a, b) {
		return 0
	}
	return strings.Compare(fmt.Sprintf("%T:%v", a, a), fmt.Sprintf("%T:%v", b, b))
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
