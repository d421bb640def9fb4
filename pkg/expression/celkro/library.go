package celkro

import (
	"crypto/md5" //nolint:gosec // kro's hash.md5 is a checksum, not a security primitive.
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"reflect"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// MaxSeededStringLength bounds the length random.seededString may return
// (kro has no bound; a bound keeps one expression from allocating without
// limit before the cost limit can see the result).
const MaxSeededStringLength = 1 << 16

// SeededAlphabet is the alphabet of random.seededString: digits, then
// lower-case ASCII letters.
const SeededAlphabet = "0123456789abcdefghijklmnopqrstuvwxyz"

// Functions declares kro's own CEL functions (kro's pkg/cel/library, as
// documented in website/docs/docs/concepts/rgd/04-cel-libraries.md): hash.*,
// json.*, random.*, map merge/deepMerge, lists.*AtIndex and omit(). Each
// returns the same values as kro's for the same arguments, so resources
// keep their values when an RGD moves over.
func Functions() []cel.EnvOption {
	listT := cel.ListType(cel.TypeParamType("T"))
	mapKV := cel.MapType(cel.TypeParamType("K"), cel.TypeParamType("V"))
	return []cel.EnvOption{
		cel.Function("hash.fnv64a", cel.Overload("hash.fnv64a_string",
			[]*cel.Type{cel.StringType}, cel.BytesType, cel.UnaryBinding(func(v ref.Val) ref.Val {
				h := fnv.New64a()
				h.Write([]byte(v.(types.String)))
				return types.Bytes(h.Sum(nil))
			}))),
		cel.Function("hash.sha256", cel.Overload("hash.sha256_string",
			[]*cel.Type{cel.StringType}, cel.BytesType, cel.UnaryBinding(func(v ref.Val) ref.Val {
				sum := sha256.Sum256([]byte(v.(types.String)))
				return types.Bytes(sum[:])
			}))),
		cel.Function("hash.md5", cel.Overload("hash.md5_string",
			[]*cel.Type{cel.StringType}, cel.BytesType, cel.UnaryBinding(func(v ref.Val) ref.Val {
				sum := md5.Sum([]byte(v.(types.String))) //nolint:gosec // see import
				return types.Bytes(sum[:])
			}))),
		cel.Function("json.unmarshal", cel.Overload("json.unmarshal_string",
			[]*cel.Type{cel.StringType}, cel.DynType, cel.UnaryBinding(jsonUnmarshal))),
		cel.Function("json.marshal", cel.Overload("json.marshal_dyn",
			[]*cel.Type{cel.DynType}, cel.StringType, cel.UnaryBinding(jsonMarshal))),
		cel.Function("random.seededString", cel.Overload("random.seededString_int_string",
			[]*cel.Type{cel.IntType, cel.StringType}, cel.StringType, cel.BinaryBinding(seededString))),
		cel.Function("random.seededInt", cel.Overload("random.seededInt_int_int_string",
			[]*cel.Type{cel.IntType, cel.IntType, cel.StringType}, cel.IntType, cel.FunctionBinding(seededInt))),
		cel.Function("merge", cel.MemberOverload("map_merge",
			[]*cel.Type{mapKV, mapKV}, mapKV, cel.BinaryBinding(mapMerge))),
		cel.Function("deepMerge", cel.MemberOverload("dyn_deepmerge_dyn",
			[]*cel.Type{cel.DynType, cel.DynType}, cel.DynType, cel.BinaryBinding(mapDeepMerge))),
		cel.Function("lists.setAtIndex", cel.Overload("lists.setAtIndex_list_int_T",
			[]*cel.Type{listT, cel.IntType, cel.TypeParamType("T")}, listT, cel.FunctionBinding(listSetAt))),
		cel.Function("lists.insertAtIndex", cel.Overload("lists.insertAtIndex_list_int_T",
			[]*cel.Type{listT, cel.IntType, cel.TypeParamType("T")}, listT, cel.FunctionBinding(listInsertAt))),
		cel.Function("lists.removeAtIndex", cel.Overload("lists.removeAtIndex_list_int",
			[]*cel.Type{listT, cel.IntType}, listT, cel.BinaryBinding(listRemoveAt))),
		cel.Function(OmitFunction, cel.Overload("omit_void",
			[]*cel.Type{}, cel.DynType, cel.FunctionBinding(func(...ref.Val) ref.Val { return omitValue{} }))),
	}
}

// OmitFunction is kro's field-removal function.
const OmitFunction = "omit"

// Omit is the Go value of omit() (ToJSON gives what its caller asks for): the field
// (a map key, or a list element) is left out of the rendered object.
type Omit struct{}

// omitType is the CEL type of omit()'s value.
var omitType = types.NewOpaqueType("kro.omit")

// omitValue is the CEL value omit() returns; it compares with nothing.
type omitValue struct{}

func (omitValue) ConvertToNative(t reflect.Type) (any, error) {
	if t == reflect.TypeOf(Omit{}) || t.Kind() == reflect.Interface {
		return Omit{}, nil
	}
	return nil, fmt.Errorf("omit() cannot be converted to %v", t)
}

func (omitValue) ConvertToType(t ref.Type) ref.Val {
	if t == types.TypeType {
		return omitType
	}
	return types.NewErr("omit() cannot be converted to %v", t)
}

func (omitValue) Equal(ref.Val) ref.Val {
	return types.NewErr("omit() removes a field and cannot be compared")
}

func (omitValue) Type() ref.Type { return omitType }

func (omitValue) Value() any { return Omit{} }

// jsonUnmarshal parses a JSON document into a CEL value (RFC 8259 via
// encoding/json: numbers are doubles, as kro's are).
func jsonUnmarshal(v ref.Val) ref.Val {
	var out any
	if err := json.Unmarshal([]byte(v.(types.String)), &out); err != nil {
		return types.NewErr("json.unmarshal: %v", err)
	}
	return types.DefaultTypeAdapter.NativeToValue(out)
}

// jsonMarshal serialises a CEL value as JSON (map keys sorted, as
// encoding/json writes them).
func jsonMarshal(v ref.Val) ref.Val {
	n := 0
	native, err := toJSON(v, 0, &n, Omit{}, true)
	if err != nil {
		return types.NewErr("json.marshal: %v", err)
	}
	if native == (Omit{}) {
		return types.NewErr("json.marshal: omit() cannot be serialised")
	}
	b, err := json.Marshal(native)
	if err != nil {
		return types.NewErr("json.marshal: %v", err)
	}
	return types.String(b)
}

// seededString returns n characters of SeededAlphabet picked from the
// SHA-256 digest of seed: character i is the big-endian uint32 at byte
// 4*(i mod 8) of the digest, modulo 36. The digest is 32 bytes, so the
// pattern repeats every 8 characters (kro's output, kept for equal values).
func seededString(length, seed ref.Val) ref.Val {
	n := int64(length.(types.Int))
	if n <= 0 {
		return types.NewErr("random.seededString: length must be positive, got %d", n)
	}
	if n > MaxSeededStringLength {
		return types.NewErr("random.seededString: length %d is over the bound of %d", n, MaxSeededStringLength)
	}
	sum := sha256.Sum256([]byte(seed.(types.String)))
	out := make([]byte, n)
	for i := range out {
		at := (i * 4) % len(sum)
		out[i] = SeededAlphabet[binary.BigEndian.Uint32(sum[at:at+4])%uint32(len(SeededAlphabet))]
	}
	return types.String(out)
}

// seededInt returns min + (the big-endian uint64 of the first 8 bytes of
// SHA-256(seed)) mod (max - min): an integer in [min, max).
func seededInt(args ...ref.Val) ref.Val {
	lo, hi := int64(args[0].(types.Int)), int64(args[1].(types.Int))
	if lo >= hi {
		return types.NewErr("random.seededInt: min %d must be less than max %d", lo, hi)
	}
	sum := sha256.Sum256([]byte(args[2].(types.String)))
	span := uint64(hi - lo)
	return types.Int(lo + int64(binary.BigEndian.Uint64(sum[:8])%span))
}

// mapMerge returns a map with the entries of self and other; other's value
// wins for a key in both.
func mapMerge(self, other ref.Val) ref.Val {
	a, aok := self.(traits.Mapper)
	b, bok := other.(traits.Mapper)
	if !aok || !bok {
		return types.NewErr("no such overload: %v.merge(%v)", self.Type(), other.Type())
	}
	out := make(map[ref.Val]ref.Val)
	for it := a.Iterator(); it.HasNext() == types.True; {
		k := it.Next()
		out[k] = a.Get(k)
	}
	for it := b.Iterator(); it.HasNext() == types.True; {
		k := it.Next()
		out[k] = b.Get(k)
	}
	return types.NewRefValMap(types.DefaultTypeAdapter, out)
}

// mapDeepMerge is mapMerge where a key whose values are both maps gets the
// deep merge of the two; lists and scalars are replaced.
func mapDeepMerge(self, other ref.Val) ref.Val {
	a, aok := self.(traits.Mapper)
	b, bok := other.(traits.Mapper)
	if !aok || !bok {
		return types.NewErr("no such overload: %v.deepMerge(%v)", self.Type(), other.Type())
	}
	return deepMerge(a, b)
}

func deepMerge(a, b traits.Mapper) ref.Val {
	if b.Size() == types.IntZero {
		return a
	}
	if a.Size() == types.IntZero {
		return b
	}
	out := make(map[ref.Val]ref.Val)
	for it := a.Iterator(); it.HasNext() == types.True; {
		k := it.Next()
		out[k] = a.Get(k)
	}
	for it := b.Iterator(); it.HasNext() == types.True; {
		k := it.Next()
		bv := b.Get(k)
		if av, ok := out[k]; ok {
			am, aok := av.(traits.Mapper)
			bm, bok := bv.(traits.Mapper)
			if aok && bok {
				out[k] = deepMerge(am, bm)
				continue
			}
		}
		out[k] = bv
	}
	return types.NewRefValMap(types.DefaultTypeAdapter, out)
}

// listElems returns the elements of a CEL list.
func listElems(v ref.Val) ([]ref.Val, bool) {
	l, ok := v.(traits.Lister)
	if !ok {
		return nil, false
	}
	n := int64(l.Size().(types.Int))
	out := make([]ref.Val, 0, n+1)
	for i := int64(0); i < n; i++ {
		out = append(out, l.Get(types.Int(i)))
	}
	return out, true
}

// listSetAt replaces the element at index, which must be in [0, size).
func listSetAt(args ...ref.Val) ref.Val {
	elems, ok := listElems(args[0])
	if !ok {
		return types.NewErr("lists.setAtIndex: first argument must be a list")
	}
	i := int64(args[1].(types.Int))
	if i < 0 || i >= int64(len(elems)) {
		return types.NewErr("lists.setAtIndex: index %d out of bounds [0, %d)", i, len(elems))
	}
	elems[i] = args[2]
	return types.NewRefValList(types.DefaultTypeAdapter, elems)
}

// listInsertAt inserts before index, which must be in [0, size].
func listInsertAt(args ...ref.Val) ref.Val {
	elems, ok := listElems(args[0])
	if !ok {
		return types.NewErr("lists.insertAtIndex: first argument must be a list")
	}
	i := int64(args[1].(types.Int))
	if i < 0 || i > int64(len(elems)) {
		return types.NewErr("lists.insertAtIndex: index %d out of bounds [0, %d]", i, len(elems))
	}
	elems = append(elems, nil)
	copy(elems[i+1:], elems[i:])
	elems[i] = args[2]
	return types.NewRefValList(types.DefaultTypeAdapter, elems)
}

// listRemoveAt removes the element at index, which must be in [0, size).
func listRemoveAt(list, index ref.Val) ref.Val {
	elems, ok := listElems(list)
	if !ok {
		return types.NewErr("lists.removeAtIndex: first argument must be a list")
	}
	i := int64(index.(types.Int))
	if i < 0 || i >= int64(len(elems)) {
		return types.NewErr("lists.removeAtIndex: index %d out of bounds [0, %d)", i, len(elems))
	}
	return types.NewRefValList(types.DefaultTypeAdapter, append(elems[:i], elems[i+1:]...))
}
