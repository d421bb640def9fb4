package controller

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dcontroller/dcontroller/pkg/object"
)

// DefaultMaxDeltaEntries is the default bound of the entries one pipeline
// stage may emit for one source change (Options.MaxDeltaEntries). It is
// far above what one change touches in ordinary controllers (the
// containers of one Pod, the Pods behind one Service, the objects of one
// namespace), while the few hundred MB that 10⁵ fresh documents may take
// bound what one change can cost the manager that runs every operator.
const DefaultMaxDeltaEntries = 100000

// DefaultMaxObjectBytes is the default bound of the JSON encoding of one
// target object a controller writes (Options.MaxObjectBytes): 1.5 MiB,
// etcd's default --max-request-bytes, above which the API server refuses
// to store an object.
const DefaultMaxObjectBytes = 3 << 19

// limitOf returns the effective bound of an option: def when 0, none (0)
// when negative.
func limitOf(n, def int) int {
	switch {
	case n == 0:
		return def
	case n < 0:
		return 0
	}
	return n
}

// sizeLimited refuses to send an object whose JSON encoding is over max
// bytes: the API server would refuse to store it. Patches are checked by
// their own size (the patched object is the server's to check).
type sizeLimited struct {
	Client
	max int
}

func (s sizeLimited) check(obj *unstructured.Unstructured) error {
	if n, ok := jsonSizeBound(obj.Object, s.max); ok && n <= s.max {
		return nil // far below the bound: no need to encode it
	}
	b, err := json.Marshal(obj.Object)
	if err != nil {
		return err
	}
	return s.checkLen(obj.GetKind(), len(b))
}

func (s sizeLimited) checkLen(kind string, n int) error {
	if n <= s.max {
		return nil
	}
	return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
		"the %s is %d bytes encoded as JSON, over the limit of %d bytes for one object (dctl --max-object-bytes); it was not sent", kind, n, s.max))
}

// GetLive reads through the wrapped Client's LiveReader, else its Get.
func (s sizeLimited) GetLive(ctx context.Context, gvk schema.GroupVersionKind, key object.Key) (*unstructured.Unstructured, error) {
	if lr, ok := s.Client.(LiveReader); ok {
		return lr.GetLive(ctx, gvk, key)
	}
	return s.Client.Get(ctx, gvk, key)
}

func (s sizeLimited) Create(ctx context.Context, obj *unstructured.Unstructured) error {
	if err := s.check(obj); err != nil {
		return err
	}
	return s.Client.Create(ctx, obj)
}

func (s sizeLimited) Update(ctx context.Context, obj *unstructured.Unstructured) error {
	if err := s.check(obj); err != nil {
		return err
	}
	return s.Client.Update(ctx, obj)
}

func (s sizeLimited) Apply(ctx context.Context, obj *unstructured.Unstructured, fieldManager string) error {
	if err := s.check(obj); err != nil {
		return err
	}
	return s.Client.Apply(ctx, obj, fieldManager)
}

func (s sizeLimited) Patch(ctx context.Context, gvk schema.GroupVersionKind, key object.Key, mergePatch []byte) error {
	if err := s.checkLen(gvk.Kind+" patch", len(mergePatch)); err != nil {
		return err
	}
	return s.Client.Patch(ctx, gvk, key, mergePatch)
}

func (s sizeLimited) UpdateStatus(ctx context.Context, obj *unstructured.Unstructured) error {
	if err := s.check(obj); err != nil {
		return err
	}
	return s.Client.UpdateStatus(ctx, obj)
}

func (s sizeLimited) ApplyStatus(ctx context.Context, obj *unstructured.Unstructured, fieldManager string) error {
	if err := s.check(obj); err != nil {
		return err
	}
	return s.Client.ApplyStatus(ctx, obj, fieldManager)
}

func (s sizeLimited) PatchStatus(ctx context.Context, gvk schema.GroupVersionKind, key object.Key, mergePatch []byte) error {
	if err := s.checkLen(gvk.Kind+" status patch", len(mergePatch)); err != nil {
		return err
	}
	return s.Client.PatchStatus(ctx, gvk, key, mergePatch)
}

// jsonSizeBound returns an upper bound of the length of v's JSON encoding
// (each string byte counted as the 6 of a \u escape, numbers at their
// longest), computed without encoding. ok is false for a value of another
// type than the unstructured model holds (maps, lists, strings, bool,
// int64, float64, nil), or as soon as the bound passes limit.
func jsonSizeBound(v any, limit int) (n int, ok bool) {
	var walk func(v any) bool
	walk = func(v any) bool {
		switch t := v.(type) {
		case nil:
			n += 4
		case bool:
			n += 5
		case string:
			n += 2 + 6*len(t)
		case int64:
			n += 20
		case float64:
			n += 25
		case map[string]any:
			n += 2
			for k, e := range t {
				n += 4 + 6*len(k) // quotes, colon and comma
				if !walk(e) {
					return false
				}
			}
		case []any:
			n += 2
			for _, e := range t {
				n++
				if !walk(e) {
					return false
				}
			}
		default:
			return false
		}
		return n <= limit
	}
	ok = walk(v)
	return n, ok
}

// sizeLimitedOffline is sizeLimited over a client without server-side
// apply.
type sizeLimitedOffline struct{ sizeLimited }

// NoServerSideApply marks a client without server-side apply.
func (sizeLimitedOffline) NoServerSideApply() {}

// limitSize wraps cl in the object size check of max bytes.
func limitSize(cl Client, max int) Client {
	s := sizeLimited{Client: cl, max: max}
	if _, offline := cl.(interface{ NoServerSideApply() }); offline {
		return sizeLimitedOffline{s}
	}
	return s
}
