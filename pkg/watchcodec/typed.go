package watchcodec

import (
	"encoding"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
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
//
// The walk reads fields through their offsets (unsafe pointers into obj)
// rather than reflect.Value, which costs more per field. It changes
// nothing in obj but the canonical string a resource.Quantity caches.
func toUnstructured(obj any) (map[string]any, error) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("toUnstructured: want a pointer to a struct, got %T", obj)
	}
	out, err := converterFor(v.Type().Elem()).conv(v.UnsafePointer(), true, 0)
	if err != nil {
		return nil, err
	}
	m, ok := out.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("toUnstructured: %T does not encode as a JSON object", obj)
	}
	return m, nil
}

// convFunc converts the value p points to (of the converter's type) at
// nesting depth; addr says whether encoding/json would see the value as
// addressable (it calls a method with a pointer receiver only then).
type convFunc func(p unsafe.Pointer, addr bool, depth int) (any, error)

// converter holds the convFunc of one type (a recursive type's converter
// refers to itself through it).
type converter struct {
	conv convFunc
}

var (
	// converters holds the converters built, each published only once
	// it and every converter it refers to are (converterLocked).
	converters sync.Map // reflect.Type -> *converter
	// buildMu serialises the builds; building holds the converters of
	// the build under way.
	buildMu  sync.Mutex
	building map[reflect.Type]*converter
)

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	timeType          = reflect.TypeFor[metav1.Time]()
	quantityType      = reflect.TypeFor[resource.Quantity]()
	intOrStringType   = reflect.TypeFor[intstr.IntOrString]()
)

// converterFor returns t's converter, building it (and those of the types
// it holds) on its first use.
func converterFor(t reflect.Type) *converter {
	if c, ok := converters.Load(t); ok {
		return c.(*converter)
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	return converterLocked(t)
}

// converterLocked is converterFor with buildMu held, for the builders: a
// converter under construction is found in building (so that a type that
// holds itself refers to its own), and the outermost build publishes them
// all once each is complete, so that no other goroutine uses one before.
func converterLocked(t reflect.Type) *converter {
	if c, ok := converters.Load(t); ok {
		return c.(*converter)
	}
	if c, ok := building[t]; ok {
		return c
	}
	outermost := building == nil
	if outermost {
		building = map[reflect.Type]*converter{}
	}
	c := &converter{}
	building[t] = c
	c.conv = buildConv(t, true)
	if outermost {
		for bt, bc := range building {
			converters.Store(bt, bc)
		}
		building = nil
	}
	return c
}

// valueAt is the value of type t at p.
func valueAt(t reflect.Type, p unsafe.Pointer) reflect.Value {
	return reflect.NewAt(t, p).Elem()
}

// sliceHeader is the layout of a Go slice.
type sliceHeader struct {
	data     unsafe.Pointer
	len, cap int
}

// buildConv follows encoding/json's choice of encoder for t
// (newTypeEncoder): MarshalJSON, then MarshalText (through the pointer
// when the value is addressable, with allowAddr), then the kind. The
// marshalers of metav1.Time, resource.Quantity and intstr.IntOrString,
// the most frequent in Kubernetes objects, are done without their bytes.
func buildConv(t reflect.Type, allowAddr bool) convFunc {
	switch t {
	case timeType:
		return convTime
	case reflect.PointerTo(timeType):
		return func(p unsafe.Pointer, _ bool, depth int) (any, error) {
			q := *(*unsafe.Pointer)(p)
			if q == nil {
				return nil, nil
			}
			return convTime(q, true, depth)
		}
	case quantityType:
		return convQuantity
	case intOrStringType:
		return convIntOrString
	}
	if t.Kind() != reflect.Pointer && allowAddr && reflect.PointerTo(t).Implements(marshalerType) {
		return condAddr(methodConv(t, true, decodeMarshaled), buildConv(t, false))
	}
	if t.Implements(marshalerType) {
		return methodConv(t, false, decodeMarshaled)
	}
	if t.Kind() != reflect.Pointer && allowAddr && reflect.PointerTo(t).Implements(textMarshalerType) {
		return condAddr(methodConv(t, true, textMarshaled), buildConv(t, false))
	}
	if t.Implements(textMarshalerType) {
		return methodConv(t, false, textMarshaled)
	}
	switch t.Kind() {
	case reflect.Bool:
		return func(p unsafe.Pointer, _ bool, _ int) (any, error) { return *(*bool)(p), nil }
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return intConv(t.Kind())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return uintConv(t.Kind())
	case reflect.Float32:
		return func(p unsafe.Pointer, _ bool, _ int) (any, error) { return floatValue(float64(*(*float32)(p)), 32) }
	case reflect.Float64:
		return func(p unsafe.Pointer, _ bool, _ int) (any, error) { return floatValue(*(*float64)(p), 64) }
	case reflect.String:
		return func(p unsafe.Pointer, _ bool, _ int) (any, error) { return internString(*(*string)(p)), nil }
	case reflect.Interface:
		return func(p unsafe.Pointer, _ bool, depth int) (any, error) {
			v := valueAt(t, p)
			if v.IsNil() {
				return nil, nil
			}
			e := v.Elem()
			// An interface's value is not addressable.
			tmp := reflect.New(e.Type())
			tmp.Elem().Set(e)
			return converterFor(e.Type()).conv(tmp.UnsafePointer(), false, depth)
		}
	case reflect.Pointer:
		elem := converterLocked(t.Elem())
		return func(p unsafe.Pointer, _ bool, depth int) (any, error) {
			q := *(*unsafe.Pointer)(p)
			if q == nil {
				return nil, nil
			}
			if depth > maxDepth {
				return nil, errDepth{}
			}
			return elem.conv(q, true, depth+1)
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 && !reflect.PointerTo(t.Elem()).Implements(marshalerType) && !reflect.PointerTo(t.Elem()).Implements(textMarshalerType) {
			return func(p unsafe.Pointer, _ bool, _ int) (any, error) {
				h := (*sliceHeader)(p)
				if h.data == nil {
					return nil, nil
				}
				return base64.StdEncoding.EncodeToString(unsafe.Slice((*byte)(h.data), h.len)), nil
			}
		}
		elem, size := converterLocked(t.Elem()), t.Elem().Size()
		return func(p unsafe.Pointer, _ bool, depth int) (any, error) {
			h := (*sliceHeader)(p)
			if h.data == nil {
				return nil, nil
			}
			return convList(h.data, h.len, size, elem, true, depth)
		}
	case reflect.Array:
		elem, size, n := converterLocked(t.Elem()), t.Elem().Size(), t.Len()
		return func(p unsafe.Pointer, addr bool, depth int) (any, error) {
			return convList(p, n, size, elem, addr, depth)
		}
	case reflect.Map:
		return buildMapConv(t)
	case reflect.Struct:
		return buildStructConv(t)
	}
	return func(unsafe.Pointer, bool, int) (any, error) {
		return nil, &json.UnsupportedTypeError{Type: t}
	}
}

func intConv(k reflect.Kind) convFunc {
	switch k {
	case reflect.Int8:
		return func(p unsafe.Pointer, _ bool, _ int) (any, error) { return int64(*(*int8)(p)), nil }
	case reflect.Int16:
		return func(p unsafe.Pointer, _ bool, _ int) (any, error) { return int64(*(*int16)(p)), nil }
	case reflect.Int32:
		return func(p unsafe.Pointer, _ bool, _ int) (any, error) { return int64(*(*int32)(p)), nil }
	case reflect.Int64:
		return func(p unsafe.Pointer, _ bool, _ int) (any, error) { return *(*int64)(p), nil }
	}
	return func(p unsafe.Pointer, _ bool, _ int) (any, error) { return int64(*(*int)(p)), nil }
}

func uintConv(k reflect.Kind) convFunc {
	var get func(unsafe.Pointer) uint64
	switch k {
	case reflect.Uint8:
		get = func(p unsafe.Pointer) uint64 { return uint64(*(*uint8)(p)) }
	case reflect.Uint16:
		get = func(p unsafe.Pointer) uint64 { return uint64(*(*uint16)(p)) }
	case reflect.Uint32:
		get = func(p unsafe.Pointer) uint64 { return uint64(*(*uint32)(p)) }
	case reflect.Uint64:
		get = func(p unsafe.Pointer) uint64 { return *(*uint64)(p) }
	case reflect.Uintptr:
		get = func(p unsafe.Pointer) uint64 { return uint64(*(*uintptr)(p)) }
	default:
		get = func(p unsafe.Pointer) uint64 { return uint64(*(*uint)(p)) }
	}
	return func(p unsafe.Pointer, _ bool, _ int) (any, error) {
		if u := get(p); u <= math.MaxInt64 {
			return int64(u), nil
		} else {
			// The digits read back as a float (decodeJSON).
			return float64(u), nil
		}
	}
}

// floatValue is what decodeJSON reads back from encoding/json's text of f.
func floatValue(f float64, bits int) (any, error) {
	var scratch [32]byte
	b, err := appendFloat(scratch[:0], f, bits)
	if err != nil {
		return nil, err
	}
	out, ok := decodeJSON(b)
	if !ok {
		return nil, fmt.Errorf("json: float %s does not read back", b)
	}
	return out, nil
}

// condAddr is encoding/json's condAddrEncoder: the pointer's method when
// the value is addressable, else the value's encoding.
func condAddr(addr, value convFunc) convFunc {
	return func(p unsafe.Pointer, isAddr bool, depth int) (any, error) {
		if isAddr {
			return addr(p, true, depth)
		}
		return value(p, false, depth)
	}
}

func convList(data unsafe.Pointer, n int, size uintptr, elem *converter, addr bool, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errDepth{}
	}
	out := make([]any, n)
	for i := range out {
		x, err := elem.conv(unsafe.Add(data, uintptr(i)*size), addr, depth+1)
		if err != nil {
			return nil, err
		}
		out[i] = x
	}
	return out, nil
}

// convTime is metav1.Time's MarshalJSON (null when zero, RFC 3339 in UTC
// to the second), without the bytes in between.
func convTime(p unsafe.Pointer, _ bool, _ int) (any, error) {
	t := (*metav1.Time)(p).Time
	if t.IsZero() {
		return nil, nil
	}
	var scratch [64]byte
	return internValue(t.UTC().AppendFormat(scratch[:0], time.RFC3339)), nil
}

// convQuantity is resource.Quantity's MarshalJSON: its canonical string
// (String caches it in the Quantity, as decoding one from protobuf does).
func convQuantity(p unsafe.Pointer, _ bool, _ int) (any, error) {
	return internString((*resource.Quantity)(p).String()), nil
}

// convIntOrString is intstr.IntOrString's MarshalJSON.
func convIntOrString(p unsafe.Pointer, _ bool, _ int) (any, error) {
	v := (*intstr.IntOrString)(p)
	switch v.Type {
	case intstr.Int:
		return int64(v.IntVal), nil
	case intstr.String:
		return internString(v.StrVal), nil
	}
	return nil, &json.MarshalerError{Type: intOrStringType, Err: fmt.Errorf("impossible IntOrString.Type")}
}

// methodConv is encoding/json's marshalerEncoder and
// textMarshalerEncoder: conv called with the pointer p (addr) or the value
// at p (a nil pointer is null).
func methodConv(t reflect.Type, addr bool, conv func(reflect.Type, any) (any, error)) convFunc {
	return func(p unsafe.Pointer, _ bool, _ int) (any, error) {
		if addr {
			return conv(t, reflect.NewAt(t, p).Interface())
		}
		v := valueAt(t, p)
		if t.Kind() == reflect.Pointer && v.IsNil() {
			return nil, nil
		}
		return conv(t, v.Interface())
	}
}

// decodeMarshaled decodes what m's MarshalJSON writes.
func decodeMarshaled(t reflect.Type, m any) (any, error) {
	b, err := m.(json.Marshaler).MarshalJSON()
	if err != nil {
		return nil, &json.MarshalerError{Type: t, Err: err}
	}
	out, ok := decodeJSON(b)
	if !ok {
		return nil, &json.MarshalerError{Type: t, Err: fmt.Errorf("invalid JSON from MarshalJSON")}
	}
	return out, nil
}

// textMarshaled is m's MarshalText as a string (coerced to valid UTF-8).
func textMarshaled(t reflect.Type, m any) (any, error) {
	b, err := m.(encoding.TextMarshaler).MarshalText()
	if err != nil {
		return nil, &json.MarshalerError{Type: t, Err: err}
	}
	return internString(string(b)), nil
}

// viaJSON converts a value of a type this file does not walk: encoding/json
// encodes it and decodeJSON reads it back.
func viaJSON(t reflect.Type) convFunc {
	return func(p unsafe.Pointer, addr bool, _ int) (any, error) {
		var v any
		if addr {
			v = reflect.NewAt(t, p).Interface()
		} else {
			v = valueAt(t, p).Interface()
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		out, ok := decodeJSON(b)
		if !ok {
			return nil, fmt.Errorf("json: %v does not read back", t)
		}
		return out, nil
	}
}

// buildMapConv converts a map as encoding/json does: keys that are
// strings, TextMarshalers or integers (in that order of preference),
// nil as null. A map's values are not addressable.
func buildMapConv(t reflect.Type) convFunc {
	kt, et := t.Key(), t.Elem()
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
		return viaJSON(t)
	}
	elem := converterLocked(et)
	if kt.Kind() == reflect.String && et.Kind() == reflect.String && !et.Implements(marshalerType) &&
		!reflect.PointerTo(et).Implements(marshalerType) && !et.Implements(textMarshalerType) &&
		!reflect.PointerTo(et).Implements(textMarshalerType) {
		// Labels, annotations and the like: read as map[string]string
		// (the same layout for any string kinds).
		return func(p unsafe.Pointer, _ bool, depth int) (any, error) {
			m := *(*map[string]string)(p)
			if m == nil {
				return nil, nil
			}
			out := make(map[string]any, len(m))
			for k, v := range m {
				if !utf8.ValidString(k) {
					return convMapSorted(valueAt(t, p), keyOf, elem, depth)
				}
				out[internKeyString(k)] = internString(v)
			}
			return out, nil
		}
	}
	return func(p unsafe.Pointer, _ bool, depth int) (any, error) {
		v := valueAt(t, p)
		if v.IsNil() {
			return nil, nil
		}
		if depth > maxDepth {
			return nil, errDepth{}
		}
		out := make(map[string]any, v.Len())
		tmp := reflect.New(et)
		it := v.MapRange()
		for it.Next() {
			k, err := keyOf(it.Key())
			if err != nil {
				return nil, &json.MarshalerError{Type: kt, Err: err}
			}
			if !utf8.ValidString(k) {
				return convMapSorted(v, keyOf, elem, depth)
			}
			tmp.Elem().Set(it.Value())
			x, err := elem.conv(tmp.UnsafePointer(), false, depth+1)
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
	tmp := reflect.New(v.Type().Elem())
	for _, e := range entries {
		tmp.Elem().Set(e.val)
		x, err := c.conv(tmp.UnsafePointer(), false, depth+1)
		if err != nil {
			return nil, err
		}
		out[internKeyString(coerceUTF8(e.key))] = x
	}
	return out, nil
}

// structField is one JSON member of a struct: its name, the path of
// field indexes to it (through embedded structs), and how to reach it and
// test it from the struct's address.
type structField struct {
	name      string
	index     []int
	typ       reflect.Type
	omitEmpty bool
	omitZero  bool

	steps   []fieldStep
	conv    *converter
	isEmpty func(unsafe.Pointer) bool
	isZero  func(unsafe.Pointer) bool
}

// fieldStep is one field of a member's path: its offset, and whether it
// is an embedded pointer to follow to the next step.
type fieldStep struct {
	offset uintptr
	deref  bool
}

// buildStructConv lists t's JSON members as encoding/json's typeFields
// does (exported fields, embedded structs without a tag name promoted,
// of several fields of one name the shallowest, or the only tagged one
// at that depth, wins; ambiguous names are dropped).
func buildStructConv(t reflect.Type) convFunc {
	fields, ok := jsonFields(t)
	if !ok {
		return viaJSON(t)
	}
	for i := range fields {
		f := &fields[i]
		at := t
		for j, x := range f.index {
			sf := at.Field(x)
			step := fieldStep{offset: sf.Offset}
			at = sf.Type
			if j < len(f.index)-1 && at.Kind() == reflect.Pointer {
				step.deref = true
				at = at.Elem()
			}
			f.steps = append(f.steps, step)
		}
		f.conv = converterLocked(f.typ)
		if f.omitEmpty {
			f.isEmpty = emptyCheck(f.typ)
		}
		if f.omitZero {
			f.isZero = zeroCheck(f.typ)
		}
	}
	return func(p unsafe.Pointer, addr bool, depth int) (any, error) {
		if depth > maxDepth {
			return nil, errDepth{}
		}
		// The members are collected first, so that the map is made at
		// its final size (most fields of a Kubernetes type are omitted
		// when empty).
		var stack [64]member
		members := stack[:0]
	next:
		for i := range fields {
			f := &fields[i]
			fp, faddr := p, addr
			for _, st := range f.steps {
				fp = unsafe.Add(fp, st.offset)
				if st.deref {
					if fp = *(*unsafe.Pointer)(fp); fp == nil {
						continue next
					}
					faddr = true
				}
			}
			if f.omitEmpty && f.isEmpty(fp) {
				continue
			}
			if f.omitZero && f.isZero(fp) {
				continue
			}
			x, err := f.conv.conv(fp, faddr, depth+1)
			if err != nil {
				return nil, err
			}
			members = append(members, member{f.name, x})
		}
		out := make(map[string]any, len(members))
		for _, m := range members {
			out[m.name] = m.value
		}
		return out, nil
	}
}

// member is a struct member converted, before its object is made.
type member struct {
	name  string
	value any
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

// emptyCheck is encoding/json's omitempty test for a value of type t.
func emptyCheck(t reflect.Type) func(unsafe.Pointer) bool {
	switch t.Kind() {
	case reflect.Array:
		n := t.Len()
		return func(unsafe.Pointer) bool { return n == 0 }
	case reflect.Map:
		return func(p unsafe.Pointer) bool { return valueAt(t, p).Len() == 0 }
	case reflect.Slice:
		return func(p unsafe.Pointer) bool { return (*sliceHeader)(p).len == 0 }
	case reflect.String:
		return func(p unsafe.Pointer) bool { return len(*(*string)(p)) == 0 }
	case reflect.Pointer:
		return func(p unsafe.Pointer) bool { return *(*unsafe.Pointer)(p) == nil }
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface:
		return func(p unsafe.Pointer) bool { return valueAt(t, p).IsZero() }
	}
	return func(unsafe.Pointer) bool { return false }
}

// zeroCheck is encoding/json's omitzero test for a value of type t: its
// IsZero method (a nil pointer receiver counts as zero), else the zero
// value.
func zeroCheck(t reflect.Type) func(unsafe.Pointer) bool {
	type isZeroer interface{ IsZero() bool }
	isZeroerType := reflect.TypeFor[isZeroer]()
	switch {
	case t == timeType:
		return func(p unsafe.Pointer) bool { return (*metav1.Time)(p).IsZero() }
	case t.Kind() == reflect.Pointer && t.Implements(isZeroerType):
		return func(p unsafe.Pointer) bool {
			v := valueAt(t, p)
			return v.IsNil() || v.Interface().(isZeroer).IsZero()
		}
	case t.Implements(isZeroerType):
		return func(p unsafe.Pointer) bool { return valueAt(t, p).Interface().(isZeroer).IsZero() }
	case reflect.PointerTo(t).Implements(isZeroerType):
		// encoding/json calls it on the value or on a copy of it.
		return func(p unsafe.Pointer) bool { return reflect.NewAt(t, p).Interface().(isZeroer).IsZero() }
	}
	return func(p unsafe.Pointer) bool { return valueAt(t, p).IsZero() }
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
