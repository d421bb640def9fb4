package watchcodec

import (
	"encoding"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// toUnstructured returns the map decodeJSON makes of encoding/json's
// encoding of obj (a pointer to a struct, such as a typed API object
// decoded from protobuf), built by walking obj instead: the same keys and
// values (integers as int64, floats as the JSON text reads back, strings
// coerced to valid UTF-8 as encoding/json writes them, []byte as base64,
// the output of MarshalJSON and MarshalText methods decoded), with keys
// and short string values shared as decodeJSON shares them. Field names
// follow encoding/json's rules (json tags, "-", omitempty, omitzero,
// embedded structs); a struct with a field option it does not implement
// (",string") or a map key it cannot name is encoded with encoding/json
// and decoded. It returns encoding/json's error where Marshal fails (a
// MarshalJSON error, a NaN float, an unsupported type).
func toUnstructured(obj any) (map[string]any, error) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("toUnstructured: want a pointer to a struct, got %T", obj)
	}
	out, err := converterFor(v.Type()).conv(v, 0)
	if err != nil {
		return nil, err
	}
	m, ok := out.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("toUnstructured: %T does not encode as a JSON object", obj)
	}
	return m, nil
}

// convFunc converts v (of the converter's type) at nesting depth.
type convFunc func(v reflect.Value, depth int) (any, error)

// converter holds the convFunc of one type, set once built (a
// recursive type's converter refers to itself through it).
type converter struct {
	conv convFunc
}

var converters sync.Map // reflect.Type -> *converter

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	timeType          = reflect.TypeFor[metav1.Time]()
)

func converterFor(t reflect.Type) *converter {
	if c, ok := converters.Load(t); ok {
		return c.(*converter)
	}
	c := &converter{}
	// A placeholder first, so that a type that holds itself refers to
	// the converter being built; a concurrent build makes an equal one.
	c.conv = func(v reflect.Value, depth int) (any, error) {
		return nil, fmt.Errorf("watchcodec: converter of %v used before it was built", t)
	}
	if prev, loaded := converters.LoadOrStore(t, c); loaded {
		return prev.(*converter)
	}
	fn := buildConv(t, true)
	c.conv = fn
	return c
}

// buildConv follows encoding/json's choice of encoder for t
// (newTypeEncoder): MarshalJSON, then MarshalText (through the pointer
// when the value is addressable, with allowAddr), then the kind.
func buildConv(t reflect.Type, allowAddr bool) convFunc {
	switch t {
	case timeType:
		return convTime
	case reflect.PointerTo(timeType):
		return func(v reflect.Value, depth int) (any, error) {
			if v.IsNil() {
				return nil, nil
			}
			return convTime(v.Elem(), depth)
		}
	}
	if t.Kind() != reflect.Pointer && allowAddr && reflect.PointerTo(t).Implements(marshalerType) {
		return condAddr(convMarshaler, buildConv(t, false))
	}
	if t.Implements(marshalerType) {
		return convMarshaler
	}
	if t.Kind() != reflect.Pointer && allowAddr && reflect.PointerTo(t).Implements(textMarshalerType) {
		return condAddr(convTextMarshaler, buildConv(t, false))
	}
	if t.Implements(textMarshalerType) {
		return convTextMarshaler
	}
	switch t.Kind() {
	case reflect.Bool:
		return func(v reflect.Value, _ int) (any, error) { return v.Bool(), nil }
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return func(v reflect.Value, _ int) (any, error) { return v.Int(), nil }
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return func(v reflect.Value, _ int) (any, error) {
			if u := v.Uint(); u <= math.MaxInt64 {
				return int64(u), nil
			} else {
				// The digits read back as a float (decodeJSON).
				return float64(u), nil
			}
		}
	case reflect.Float32, reflect.Float64:
		bits := t.Bits()
		return func(v reflect.Value, _ int) (any, error) {
			var scratch [32]byte
			b, err := appendFloat(scratch[:0], v.Float(), bits)
			if err != nil {
				return nil, err
			}
			out, ok := decodeJSON(b)
			if !ok {
				return nil, fmt.Errorf("json: float %s does not read back", b)
			}
			return out, nil
		}
	case reflect.String:
		return func(v reflect.Value, _ int) (any, error) { return internString(v.String()), nil }
	case reflect.Interface:
		return func(v reflect.Value, depth int) (any, error) {
			if v.IsNil() {
				return nil, nil
			}
			e := v.Elem()
			return converterFor(e.Type()).conv(e, depth)
		}
	case reflect.Pointer:
		elem := t.Elem()
		return func(v reflect.Value, depth int) (any, error) {
			if v.IsNil() {
				return nil, nil
			}
			if depth > maxDepth {
				return nil, errDepth{}
			}
			return converterFor(elem).conv(v.Elem(), depth+1)
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 && !reflect.PointerTo(t.Elem()).Implements(marshalerType) && !reflect.PointerTo(t.Elem()).Implements(textMarshalerType) {
			return func(v reflect.Value, _ int) (any, error) {
				if v.IsNil() {
					return nil, nil
				}
				return base64.StdEncoding.EncodeToString(v.Bytes()), nil
			}
		}
		elem := t.Elem()
		return func(v reflect.Value, depth int) (any, error) {
			if v.IsNil() {
				return nil, nil
			}
			return convList(v, elem, depth)
		}
	case reflect.Array:
		elem := t.Elem()
		return func(v reflect.Value, depth int) (any, error) { return convList(v, elem, depth) }
	case reflect.Map:
		return buildMapConv(t)
	case reflect.Struct:
		return buildStructConv(t)
	}
	return func(v reflect.Value, _ int) (any, error) {
		return nil, &json.UnsupportedTypeError{Type: v.Type()}
	}
}

// condAddr is encoding/json's condAddrEncoder: the pointer's method when
// v is addressable, else the value's encoding.
func condAddr(addr, value convFunc) convFunc {
	return func(v reflect.Value, depth int) (any, error) {
		if v.CanAddr() {
			return addr(v.Addr(), depth)
		}
		return value(v, depth)
	}
}

func convList(v reflect.Value, elem reflect.Type, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errDepth{}
	}
	c := converterFor(elem)
	out := make([]any, v.Len())
	for i := range out {
		x, err := c.conv(v.Index(i), depth+1)
		if err != nil {
			return nil, err
		}
		out[i] = x
	}
	return out, nil
}

// convTime is metav1.Time's MarshalJSON (null when zero, RFC 3339 in UTC
// to the second), without the bytes in between.
func convTime(v reflect.Value, _ int) (any, error) {
	var t time.Time
	if v.CanAddr() {
		t = v.Addr().Interface().(*metav1.Time).Time
	} else {
		t = v.Interface().(metav1.Time).Time
	}
	if t.IsZero() {
		return nil, nil
	}
	var scratch [64]byte
	b := t.UTC().AppendFormat(scratch[:0], time.RFC3339)
	return internValue(b), nil
}

// convMarshaler decodes what v's MarshalJSON writes (encoding/json's
// marshalerEncoder: a nil pointer is null).
func convMarshaler(v reflect.Value, _ int) (any, error) {
	if v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, nil
	}
	m, ok := v.Interface().(json.Marshaler)
	if !ok {
		return nil, nil
	}
	b, err := m.MarshalJSON()
	if err != nil {
		return nil, &json.MarshalerError{Type: v.Type(), Err: err}
	}
	out, ok := decodeJSON(b)
	if !ok {
		return nil, &json.MarshalerError{Type: v.Type(), Err: fmt.Errorf("invalid JSON from MarshalJSON")}
	}
	return out, nil
}

// convTextMarshaler is encoding/json's textMarshalerEncoder: MarshalText's
// bytes as a string (coerced to valid UTF-8), a nil pointer is null.
func convTextMarshaler(v reflect.Value, _ int) (any, error) {
	if v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, nil
	}
	m, ok := v.Interface().(encoding.TextMarshaler)
	if !ok {
		return nil, nil
	}
	b, err := m.MarshalText()
	if err != nil {
		return nil, &json.MarshalerError{Type: v.Type(), Err: err}
	}
	return internString(string(b)), nil
}

// viaJSON converts a value of a type this file does not walk: encoding/json
// encodes it and decodeJSON reads it back.
func viaJSON(v reflect.Value, _ int) (any, error) {
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return nil, err
	}
	out, ok := decodeJSON(b)
	if !ok {
		return nil, fmt.Errorf("json: %v does not read back", v.Type())
	}
	return out, nil
}

// buildMapConv converts a map as encoding/json does: keys that are
// strings, integers or TextMarshalers (in that order of preference),
// nil as null.
func buildMapConv(t reflect.Type) convFunc {
	kt := t.Key()
	var keyOf func(reflect.Value) (string, error)
	switch {
	case kt.Kind() == reflect.String:
		keyOf = func(k reflect.Value) (string, error) { return k.String(), nil }
	case kt.Implements(textMarshalerType):
		keyOf = func(k reflect.Value) (string, error) {
			if k.Kind() == reflect.Pointer && k.IsNil() {
				return "", nil
			}
			b, err := k.Interface().(encoding.TextMarshaler).MarshalText()
			return string(b), err
		}
	case kt.Kind() >= reflect.Int && kt.Kind() <= reflect.Int64:
		keyOf = func(k reflect.Value) (string, error) { return strconv.FormatInt(k.Int(), 10), nil }
	case kt.Kind() >= reflect.Uint && kt.Kind() <= reflect.Uintptr:
		keyOf = func(k reflect.Value) (string, error) { return strconv.FormatUint(k.Uint(), 10), nil }
	default:
		return viaJSON
	}
	elem := t.Elem()
	return func(v reflect.Value, depth int) (any, error) {
		if v.IsNil() {
			return nil, nil
		}
		if depth > maxDepth {
			return nil, errDepth{}
		}
		c := converterFor(elem)
		out := make(map[string]any, v.Len())
		it := v.MapRange()
		for it.Next() {
			k, err := keyOf(it.Key())
			if err != nil {
				return nil, &json.MarshalerError{Type: kt, Err: err}
			}
			if !utf8.ValidString(k) {
				return convMapSorted(v, keyOf, c, depth)
			}
			x, err := c.conv(it.Value(), depth+1)
			if err != nil {
				return nil, err
			}
			out[internKeyString(k)] = x
		}
		return out, nil
	}
}

// convMapSorted converts a map with a key that is not valid UTF-8: such
// keys are written coerced, so that two keys can be one in the JSON,
// where the later in encoding/json's order (sorted by key) wins.
func convMapSorted(v reflect.Value, keyOf func(reflect.Value) (string, error), c *converter, depth int) (any, error) {
	type entry struct {
		key string
		val reflect.Value
	}
	var entries []entry
	it := v.MapRange()
	for it.Next() {
		k, err := keyOf(it.Key())
		if err != nil {
			return nil, &json.MarshalerError{Type: v.Type().Key(), Err: err}
		}
		entries = append(entries, entry{k, it.Value()})
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	out := make(map[string]any, len(entries))
	for _, e := range entries {
		x, err := c.conv(e.val, depth+1)
		if err != nil {
			return nil, err
		}
		out[internKeyString(coerceUTF8(e.key))] = x
	}
	return out, nil
}

// structField is one JSON member of a struct: its name, the path of
// field indexes to it (through embedded structs) and its options.
type structField struct {
	name      string
	index     []int
	typ       reflect.Type
	omitEmpty bool
	omitZero  bool
	isZero    func(reflect.Value) bool
}

// buildStructConv lists t's JSON members as encoding/json's typeFields
// does (exported fields, embedded structs without a tag name promoted,
// of several fields of one name the shallowest, or the only tagged one
// at that depth, wins; ambiguous names are dropped).
func buildStructConv(t reflect.Type) convFunc {
	fields, ok := jsonFields(t)
	if !ok {
		return viaJSON
	}
	convs := make([]*converter, len(fields))
	for i, f := range fields {
		convs[i] = converterFor(f.typ)
	}
	return func(v reflect.Value, depth int) (any, error) {
		if depth > maxDepth {
			return nil, errDepth{}
		}
		// The members are collected first, so that the map is made at
		// its final size (most fields of a Kubernetes type are omitted
		// when empty).
		sp := memberPool.Get().(*[]member)
	next:
		for i := range fields {
			f := &fields[i]
			fv := v
			for j, x := range f.index {
				if j > 0 && fv.Kind() == reflect.Pointer {
					if fv.IsNil() {
						continue next
					}
					fv = fv.Elem()
				}
				fv = fv.Field(x)
			}
			if f.omitEmpty && isEmptyValue(fv) {
				continue
			}
			if f.omitZero && f.isZero(fv) {
				continue
			}
			x, err := convs[i].conv(fv, depth+1)
			if err != nil {
				putMembers(sp)
				return nil, err
			}
			*sp = append(*sp, member{f.name, x})
		}
		out := make(map[string]any, len(*sp))
		for _, m := range *sp {
			out[m.name] = m.value
		}
		putMembers(sp)
		return out, nil
	}
}

// member is a struct member converted, before its object is made.
type member struct {
	name  string
	value any
}

// memberPool holds the lists of a struct's members being converted (one
// for each nesting level of a conversion).
var memberPool = sync.Pool{New: func() any { s := make([]member, 0, 64); return &s }}

// putMembers empties the list and returns it to the pool unless it grew
// oversized.
func putMembers(sp *[]member) {
	clear(*sp)
	*sp = (*sp)[:0]
	if cap(*sp) <= maxScratch {
		memberPool.Put(sp)
	}
}

// jsonFields is encoding/json's typeFields for t; false for a field
// option it does not implement here (",string").
func jsonFields(t reflect.Type) ([]structField, bool) {
	type candidate struct {
		structField
		tagged bool
	}
	var cands []candidate
	type level struct {
		t     reflect.Type
		index []int
	}
	current, next := []level{}, []level{{t: t}}
	visited := map[reflect.Type]bool{}
	for len(next) > 0 {
		current, next = next, nil
		count := map[string]int{}
		var found []candidate
		for _, l := range current {
			if visited[l.t] {
				continue
			}
			visited[l.t] = true
			for i := 0; i < l.t.NumField(); i++ {
				sf := l.t.Field(i)
				if sf.Anonymous {
					ft := sf.Type
					if ft.Kind() == reflect.Pointer {
						ft = ft.Elem()
					}
					if !sf.IsExported() && ft.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				if !validTagName(name) {
					name = ""
				}
				index := append(slices.Clip(l.index), i)
				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				optList := strings.Split(opts, ",")
				if slices.Contains(optList, "string") {
					switch ft.Kind() {
					case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
						reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
						reflect.Float32, reflect.Float64, reflect.String:
						return nil, false
					}
				}
				if name != "" || !sf.Anonymous || ft.Kind() != reflect.Struct {
					tagged := name != ""
					if name == "" {
						name = sf.Name
					}
					f := candidate{structField: structField{
						name:      internKeyString(name),
						index:     index,
						typ:       sf.Type,
						omitEmpty: slices.Contains(optList, "omitempty"),
						omitZero:  slices.Contains(optList, "omitzero"),
					}, tagged: tagged}
					if f.omitZero {
						f.isZero = zeroCheck(sf.Type)
					}
					found = append(found, f)
					count[name]++
					continue
				}
				next = append(next, level{t: ft, index: index})
			}
		}
		// Names already taken at a shallower depth dominate.
		for _, f := range found {
			if slices.ContainsFunc(cands, func(c candidate) bool { return c.name == f.name }) {
				continue
			}
			if count[f.name] == 1 {
				cands = append(cands, f)
				continue
			}
			// Several at this depth: the only tagged one, else none.
			tagged := 0
			var pick candidate
			for _, g := range found {
				if g.name == f.name && g.tagged {
					tagged++
					pick = g
				}
			}
			if tagged == 1 {
				cands = append(cands, pick)
			} else {
				// Drop the name (and keep it taken).
				cands = append(cands, candidate{structField: structField{name: f.name}})
			}
		}
	}
	out := make([]structField, 0, len(cands))
	for _, c := range cands {
		if c.index != nil {
			out = append(out, c.structField)
		}
	}
	return out, true
}

// validTagName is encoding/json's isValidTag.
func validTagName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c > utf8.RuneSelf):
			return false
		}
	}
	return true
}

// isEmptyValue is encoding/json's omitempty test.
func isEmptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

// zeroCheck is encoding/json's omitzero test for t: its IsZero method
// (a nil pointer receiver counts as zero), else the zero value.
func zeroCheck(t reflect.Type) func(reflect.Value) bool {
	type isZeroer interface{ IsZero() bool }
	isZeroerType := reflect.TypeFor[isZeroer]()
	switch {
	case t.Kind() == reflect.Pointer && t.Implements(isZeroerType):
		return func(v reflect.Value) bool {
			return v.IsNil() || v.Interface().(isZeroer).IsZero()
		}
	case t.Implements(isZeroerType):
		return func(v reflect.Value) bool { return v.Interface().(isZeroer).IsZero() }
	case reflect.PointerTo(t).Implements(isZeroerType):
		return func(v reflect.Value) bool {
			if !v.CanAddr() {
				// encoding/json copies the value to call the method.
				c := reflect.New(v.Type()).Elem()
				c.Set(v)
				v = c
			}
			return v.Addr().Interface().(isZeroer).IsZero()
		}
	}
	return reflect.Value.IsZero
}

// coerceUTF8 is s as encoding/json writes it: each byte of an invalid
// UTF-8 sequence becomes U+FFFD.
func coerceUTF8(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// internString is internValue for a string (coerced to valid UTF-8 first).
func internString(s string) any {
	if !utf8.ValidString(s) {
		s = coerceUTF8(s)
	}
	if len(s) > maxInternedValue {
		return s
	}
	slot := &valueTable[maphash.String(valueSeed, s)&(valueSlots-1)]
	if e := slot.Load(); e != nil && e.s == s {
		return e.v
	}
	e := &valueEntry{s: s, v: s}
	slot.Store(e)
	return e.v
}

// internKeyString is internKey for a string.
func internKeyString(s string) string {
	if len(s) > maxInternedKey {
		return s
	}
	keyTable.RLock()
	k, ok := keyTable.m[s]
	keyTable.RUnlock()
	if ok {
		return k
	}
	keyTable.Lock()
	defer keyTable.Unlock()
	if k, ok := keyTable.m[s]; ok {
		return k
	}
	if len(keyTable.m) < maxInternedKeys {
		keyTable.m[s] = s
	}
	return s
}
