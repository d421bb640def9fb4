package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	yamlv2 "go.yaml.in/yaml/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// jsonIndent is the indentation of dctl's JSON output.
const jsonIndent = "    "

// writeObjects prints objs to w as a YAML stream ("yaml", documents
// separated by "---") or as the JSON of a v1 List ("json", indented by
// four spaces). The encoding streams: its memory is proportional to the
// objects and their depth, not to the printed text, which an indented
// encoding makes proportional to size times depth. The objects are nested
// at most 10000 levels deep, as the view store keeps them: YAML decoding,
// which the YAML encoding goes through for its number types, refuses
// deeper ones.
func writeObjects(w io.Writer, format string, objs []*unstructured.Unstructured) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	var err error
	if format == "json" {
		items := make([]any, 0, len(objs))
		for _, obj := range objs {
			items = append(items, obj.Object)
		}
		list := map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{}, "items": items}
		var scratch bytes.Buffer
		if err = writeIndentedJSON(bw, list, 0, &scratch); err == nil {
			err = bw.WriteByte('\n')
		}
	} else {
		for i, obj := range objs {
			if i > 0 {
				if _, err = bw.WriteString("---\n"); err != nil {
					break
				}
			}
			if err = writeYAML(bw, obj.Object); err != nil {
				break
			}
		}
	}
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return err
}

// writeIndentedJSON writes v to w as json.MarshalIndent(v, "", jsonIndent)
// would at nesting level depth (the same bytes: sorted map keys, the same
// escaping), without building the text in memory. scratch is reused for
// the encoding of scalars.
func writeIndentedJSON(w *bufio.Writer, v any, depth int, scratch *bytes.Buffer) error {
	newline := func(d int) {
		w.WriteByte('\n')
		for i := 0; i < d; i++ {
			w.WriteString(jsonIndent)
		}
	}
	switch t := v.(type) {
	case map[string]any:
		if len(t) == 0 {
			_, err := w.WriteString("{}")
			return err
		}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		w.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				w.WriteByte(',')
			}
			newline(depth + 1)
			if err := writeScalar(w, k); err != nil {
				return err
			}
			w.WriteString(": ")
			if err := writeIndentedJSON(w, t[k], depth+1, scratch); err != nil {
				return err
			}
		}
		newline(depth)
		return w.WriteByte('}')
	case []any:
		if len(t) == 0 {
			_, err := w.WriteString("[]")
			return err
		}
		w.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				w.WriteByte(',')
			}
			newline(depth + 1)
			if err := writeIndentedJSON(w, e, depth+1, scratch); err != nil {
				return err
			}
		}
		newline(depth)
		return w.WriteByte(']')
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if len(b) > 0 && (b[0] == '{' || b[0] == '[') {
			// Another type that encodes as a map or list: indent its
			// encoding as MarshalIndent would.
			scratch.Reset()
			if err := json.Indent(scratch, b, strings.Repeat(jsonIndent, depth), jsonIndent); err != nil {
				return err
			}
			b = scratch.Bytes()
		}
		_, err = w.Write(b)
		return err
	}
}

// writeScalar writes the JSON encoding of a string or number.
func writeScalar(w *bufio.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// writeYAML writes obj as sigs.k8s.io/yaml's Marshal would (its JSON
// read back as YAML 1.1, for the number types, and encoded by
// go.yaml.in/yaml/v2), streaming the YAML text to w.
func writeYAML(w io.Writer, obj map[string]any) error {
	j, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("error marshaling into JSON: %w", err)
	}
	var v any
	if err := yamlv2.Unmarshal(j, &v); err != nil {
		return err
	}
	enc := yamlv2.NewEncoder(w)
	if err := enc.Encode(v); err != nil {
		return err
	}
	return enc.Close()
}
