package dbsp

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

func TestEqualHashCompare(t *testing.T) {
	tests := []struct {
		name  string
		a, b  any
		equal bool
	}{
		{"nil", nil, nil, true},
		{"nil vs false", nil, false, false},
		{"bools", true, true, true},
		{"bool mismatch", true, false, false},
		{"int64 vs float64", int64(1), float64(1), true},
		{"int vs int64", 7, int64(7), true},
		{"json.Number", json.Number("3"), int64(3), true},
		{"json.Number float", json.Number("2.5"), 2.5, true},
		{"fraction", 1.5, int64(1), false},
		{"NaN is itself", math.NaN(), math.NaN(), true},
		{"number vs string", int64(1), "1", false},
		{"strings", "a", "a", true},
		{"string mismatch", "a", "b", false},
		{"nil map vs empty map", map[string]any(nil), map[string]any{}, true},
		{"empty map vs nil", map[string]any{}, nil, false},
		{"maps", map[string]any{"a": int64(1), "b": []any{"x"}}, map[string]any{"b": []any{"x"}, "a": 1.0}, true},
		{"map value mismatch", map[string]any{"a": int64(1)}, map[string]any{"a": int64(2)}, false},
		{"map key mismatch", map[string]any{"a": int64(1)}, map[string]any{"b": int64(1)}, false},
		{"swapped values", map[string]any{"a": int64(1), "b": int64(2)}, map[string]any{"a": int64(2), "b": int64(1)}, false},
		{"lists", []any{int64(1), "a"}, []any{1.0, "a"}, true},
		{"list order", []any{int64(1), "a"}, []any{"a", int64(1)}, false},
		{"list length", []any{int64(1)}, []any{int64(1), int64(1)}, false},
		{"list vs map", []any{}, map[string]any{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Equal(tc.a, tc.b); got != tc.equal {
				t.Fatalf("Equal = %v, want %v", got, tc.equal)
			}
			if got := Equal(tc.b, tc.a); got != tc.equal {
				t.Fatalf("Equal (swapped) = %v, want %v", got, tc.equal)
			}
			if tc.equal && Hash(tc.a) != Hash(tc.b) {
				t.Fatalf("equal values hash differently")
			}
			if !tc.equal && Hash(tc.a) == Hash(tc.b) {
				t.Fatalf("distinct values collide (possible, but not for these)")
			}
			c1, c2 := Compare(tc.a, tc.b), Compare(tc.b, tc.a)
			if (c1 == 0) != tc.equal || c1 != -c2 {
				t.Fatalf("Compare = %d/%d, inconsistent with Equal=%v", c1, c2, tc.equal)
			}
		})
	}
}

func TestCompareOrder(t *testing.T) {
	ordered := []any{
		nil, false, true, math.NaN(), int64(-3), 0.5, int64(1), 1.5, int64(1 << 60),
		"", "a", "b", []any{}, []any{int64(1)}, []any{int64(1), nil}, []any{int64(2)},
		map[string]any{}, map[string]any{"a": int64(1)}, map[string]any{"a": int64(1), "b": nil},
		map[string]any{"a": int64(2)}, map[string]any{"b": int64(0)},
	}
	for i := range ordered {
		for j := range ordered {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := Compare(ordered[i], ordered[j]); got != want {
				t.Errorf("Compare(%v, %v) = %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
}

// TestHashEqualRandom checks Equal ⇒ equal hashes and Compare ⇔ Equal on
// random values, including numerically equal values of different types.
func TestHashEqualRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for i := 0; i < 3000; i++ {
		a, b := randValue(r, 3), randValue(r, 3)
		eq := Equal(a, b)
		if eq && Hash(a) != Hash(b) {
			t.Fatalf("Equal(%v, %v) but hashes differ", a, b)
		}
		if (Compare(a, b) == 0) != eq {
			t.Fatalf("Compare(%v, %v) = %d but Equal = %v", a, b, Compare(a, b), eq)
		}
		if !Equal(a, a) || Hash(a) != Hash(reencode(a)) || !Equal(a, reencode(a)) {
			t.Fatalf("value %v not equal to its re-encoding", a)
		}
	}
}

// reencode returns an equal value built from fresh maps and slices, with
// integral numbers flipped between int64 and float64.
func reencode(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = reencode(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = reencode(e)
		}
		return l
	case int64:
		return float64(x)
	case float64:
		if x == math.Trunc(x) {
			return int64(x)
		}
	}
	return v
}

// randValue draws a small JSON value; small domains make equal values common.
func randValue(r *rand.Rand, depth int) any {
	n := 7
	if depth == 0 {
		n = 5
	}
	switch r.IntN(n) {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return int64(r.IntN(4))
	case 3:
		return float64(r.IntN(4)) / 2
	case 4:
		return string(rune('a' + r.IntN(3)))
	case 5:
		l := make([]any, r.IntN(3))
		for i := range l {
			l[i] = randValue(r, depth-1)
		}
		return l
	default:
		m := map[string]any{}
		for i := r.IntN(3); i > 0; i-- {
			m[string(rune('a'+r.IntN(3)))] = randValue(r, depth-1)
		}
		return m
	}
}

// TestHashHints checks that hashing with the known hashes of embedded
// documents gives the plain hash.
func TestHashHints(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for i := 0; i < 500; i++ {
		l := Document{"a": randValue(r, 2), "b": randValue(r, 2)}
		rr := Document{"c": randValue(r, 2)}
		compound := Document{"L": l, "R": rr, "x": []any{l}}
		hints := []hint{{p: mapPointer(l), h: Hash(l)}, {p: mapPointer(rr), h: Hash(rr)}}
		if got, want := hashWith(compound, hints), Hash(compound); got != want {
			t.Fatalf("hinted hash %x, plain hash %x of %v", got, want, compound)
		}
	}
}

// TestHashString checks every length class of hashString: equal strings
// hash alike, and strings differing in any one byte do not collide.
func TestHashString(t *testing.T) {
	seen := map[uint64]string{}
	for n := 0; n <= 70; n++ {
		base := make([]byte, n)
		for i := range base {
			base[i] = 'a' + byte(i%26)
		}
		s := string(base)
		if hashString(s) != hashString(string([]byte(s))) {
			t.Fatalf("equal strings of length %d hash differently", n)
		}
		variants := []string{s}
		for i := 0; i < n; i++ {
			b := []byte(s)
			b[i] ^= 1
			variants = append(variants, string(b))
		}
		for _, v := range variants {
			h := hashString(v)
			if other, ok := seen[h]; ok && other != v {
				t.Fatalf("%q and %q collide", v, other)
			}
			seen[h] = v
		}
	}
}
