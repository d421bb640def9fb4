package object

import (
	"encoding/base64"
	"maps"
)

// FoldSecretStringData does to a core Secret (apiVersion "v1", kind
// "Secret") what the API server does on every write: each stringData value
// that is a string is base64-encoded (RFC 4648 §4) into data under the same
// key, overriding what data held there, and stringData is removed. Other
// objects are left alone. doc is modified in place (data is replaced by a
// copy, so a data map shared with another object is not changed). Non-string
// stringData values are dropped, where the API server would refuse the
// object.
func FoldSecretStringData(doc map[string]any) {
	if doc["kind"] != "Secret" || doc["apiVersion"] != "v1" {
		return
	}
	sd, ok := doc["stringData"]
	if !ok {
		return
	}
	delete(doc, "stringData")
	m, _ := sd.(map[string]any)
	if len(m) == 0 {
		return
	}
	data, _ := doc["data"].(map[string]any)
	data = maps.Clone(data)
	if data == nil {
		data = map[string]any{}
	}
	for k, v := range m {
		if s, ok := v.(string); ok {
			data[k] = base64.StdEncoding.EncodeToString([]byte(s))
		}
	}
	doc["data"] = data
}
