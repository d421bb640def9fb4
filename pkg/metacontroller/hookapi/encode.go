package hookapi

import (
	"encoding/json"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/dcontroller/dcontroller/pkg/watchcodec"
)

// AppendJSON appends the request's JSON to buf: the bytes json.Marshal
// makes of it, with the observed objects (most of a request) encoded by
// watchcodec.AppendJSON instead of through reflection and
// Unstructured.MarshalJSON's second pass. Errors are those of encoding a
// value JSON cannot hold (a NaN).
func (r *CompositeRequest) AppendJSON(buf []byte) ([]byte, error) {
	return appendRequest(buf, "controller", r.Controller, "parent", r.Parent, "children", r.Children, r.Related, r.Finalizing)
}

// AppendJSON is CompositeRequest.AppendJSON for a DecoratorController's
// request.
func (r *DecoratorRequest) AppendJSON(buf []byte) ([]byte, error) {
	return appendRequest(buf, "controller", r.Controller, "object", r.Object, "attachments", r.Attachments, r.Related, r.Finalizing)
}

// appendRequest writes {"<ck>":controller,"<ok>":obj,"<mk>":objects,
// "related":related,"finalizing":finalizing}, the field order and names
// of both request types.
func appendRequest(buf []byte, ck string, controller any, ok string, obj *unstructured.Unstructured, mk string, objects, related ObjectMap, finalizing bool) ([]byte, error) {
	c, err := json.Marshal(controller)
	if err != nil {
		return buf, err
	}
	buf = append(append(append(append(buf, `{"`...), ck...), `":`...), c...)
	buf = append(append(append(buf, `,"`...), ok...), `":`...)
	if buf, err = appendObject(buf, obj); err != nil {
		return buf, err
	}
	buf = append(append(append(buf, `,"`...), mk...), `":`...)
	if buf, err = appendObjectMap(buf, objects); err != nil {
		return buf, err
	}
	buf = append(buf, `,"related":`...)
	if buf, err = appendObjectMap(buf, related); err != nil {
		return buf, err
	}
	if finalizing {
		return append(buf, `,"finalizing":true}`...), nil
	}
	return append(buf, `,"finalizing":false}`...), nil
}

// appendObject writes obj as json.Marshal does (null for none, and for
// one without content, as its MarshalJSON writes).
func appendObject(buf []byte, obj *unstructured.Unstructured) ([]byte, error) {
	if obj == nil || obj.Object == nil {
		return append(buf, "null"...), nil
	}
	return watchcodec.AppendJSON(buf, obj.Object)
}

// appendObjectMap writes m as json.Marshal does: keys sorted at both
// levels, null for a nil map.
func appendObjectMap(buf []byte, m ObjectMap) ([]byte, error) {
	if m == nil {
		return append(buf, "null"...), nil
	}
	return appendSortedMap(buf, m, func(buf []byte, objs map[string]*unstructured.Unstructured) ([]byte, error) {
		if objs == nil {
			return append(buf, "null"...), nil
		}
		return appendSortedMap(buf, objs, appendObject)
	})
}

// appendSortedMap writes m as json.Marshal writes a map with string keys:
// {"key":value,...} in key order, each value by value.
func appendSortedMap[V any](buf []byte, m map[string]V, value func([]byte, V) ([]byte, error)) ([]byte, error) {
	buf = append(buf, '{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf, _ = watchcodec.AppendJSON(buf, k)
		buf = append(buf, ':')
		var err error
		if buf, err = value(buf, m[k]); err != nil {
			return buf, err
		}
	}
	return append(buf, '}'), nil
}
