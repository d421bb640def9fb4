package pipeline

import (
	"encoding/base64"
	"maps"
	"unicode/utf8"

	"github.com/dcontroller/dcontroller/pkg/dbsp"
)

// secretKind is the source kind whose documents are decoded on entry.
const secretKind = "Secret"

// DecodeSecret returns the document a source object becomes inside a
// pipeline. For a core Secret (apiVersion "v1", kind "Secret") every value
// of data that is standard base64 (RFC 4648 §4, as the API server stores
// it) decoding to valid UTF-8 text is replaced by the decoded text, so that
// `$.data.username` reads "admin", not "YWRtaW4=", as in Δ-controller;
// values that are not base64, or that decode to binary data (invalid UTF-8,
// which a JSON string cannot hold), are kept as they are. Any other document
// is returned unchanged. doc is never modified: a decoded Secret is a copy
// sharing everything but its top level and its data map.
//
// Nothing is encoded on the way out: a pipeline that writes a Secret sets
// stringData, which the API server encodes into data.
func DecodeSecret(doc dbsp.Document) dbsp.Document {
	if doc["kind"] != secretKind || doc["apiVersion"] != "v1" {
		return doc
	}
	data, ok := doc["data"].(map[string]any)
	if !ok || len(data) == 0 {
		return doc
	}
	var decoded map[string]any
	for k, v := range data {
		s, ok := v.(string)
		if !ok {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || !utf8.Valid(b) {
			continue
		}
		if decoded == nil {
			decoded = maps.Clone(data)
		}
		decoded[k] = string(b)
	}
	if decoded == nil {
		return doc
	}
	out := maps.Clone(doc)
	out["data"] = decoded
	return out
}

// decodeSecrets returns in with the Secret source collection (if the
// pipeline has one and it is in the input) decoded by DecodeSecret. in is
// not modified.
func (p *Pipeline) decodeSecrets(in map[string]*dbsp.ZSet) map[string]*dbsp.ZSet {
	z := in[secretKind]
	if z == nil || !p.secretSource {
		return in
	}
	dec := dbsp.NewZSet()
	z.Range(func(doc dbsp.Document, weight int) bool {
		dec.Insert(DecodeSecret(doc), weight)
		return true
	})
	out := maps.Clone(in)
	out[secretKind] = dec
	return out
}
