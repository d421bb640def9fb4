package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// marshalDigest is outputDigest as defined: over json.Marshal's bytes.
func marshalDigest(doc map[string]any) string {
	b, _ := json.Marshal(doc)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func TestOutputDigestIsOverJSONMarshal(t *testing.T) {
	long := strings.Repeat("abcdefghij", 120)
	for _, tc := range []struct {
		name string
		doc  map[string]any
	}{
		{"empty", map[string]any{}},
		{"nil", nil},
		{"object", map[string]any{
			"apiVersion": "example.com/v1", "kind": "PodInfo",
			"metadata": map[string]any{"name": "a", "namespace": "default", "labels": map[string]any{"app": "x", "b": "y"}},
			"spec":     map[string]any{"podIP": "10.0.0.1", "n": int64(-42), "ok": true, "no": false, "none": nil},
		}},
		{"escapes", map[string]any{"a<b>&c": "\"quoted\" \\ back", "ctl": "tab\tnl\ncr\rbs\bff\f\x01", "html": "<script>&amp;</script>"}},
		{"unicode", map[string]any{"ü": "héllo wörld", "sep": "a\u2028b\u2029c", "bad": "\xff\xfe", "emoji": "😀"}},
		{"lists", map[string]any{"l": []any{int64(1), "two", []any{}, map[string]any{}, nil, []any(nil), map[string]any(nil)}}},
		{"numbers", map[string]any{"f": 1.5, "g": 1e21, "h": 0.000001, "i": float64(3), "j": 42, "k": int32(7), "u": uint64(math.MaxUint64), "n": json.Number("12.50")}},
		{"other types", map[string]any{"m": map[string]string{"z": "1", "a": "<2>"}, "s": []string{"x"}}},
		{"long strings", map[string]any{"x": long, "y": []any{long, long, long}, long: long}},
		{"not encodable", map[string]any{"nan": math.NaN()}},
		{"not encodable deep", map[string]any{"a": map[string]any{"b": []any{math.Inf(1)}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, want := digestHex(outputDigest(tc.doc)), marshalDigest(tc.doc); got != want {
				t.Errorf("outputDigest = %s, want %s (the digest of json.Marshal's encoding)", got, want)
			}
		})
	}
}
