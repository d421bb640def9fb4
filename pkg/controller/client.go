package controller

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/view"
)

// Client is what a controller reads and writes targets through. Errors are
// Kubernetes API errors (k8s.io/apimachinery/pkg/api/errors), so callers can
// test them with apierrors.IsNotFound and friends.
type Client interface {
	Get(ctx context.Context, gvk schema.GroupVersionKind, key object.Key) (*unstructured.Unstructured, error)
	Create(ctx context.Context, obj *unstructured.Unstructured) error
	Update(ctx context.Context, obj *unstructured.Unstructured) error
	Delete(ctx context.Context, gvk schema.GroupVersionKind, key object.Key) error
}

// StoreClient adapts a view.Store to Client.
type StoreClient struct{ Store *view.Store }

func (c StoreClient) Get(_ context.Context, gvk schema.GroupVersionKind, key object.Key) (*unstructured.Unstructured, error) {
	return c.Store.Get(gvk, key)
}

func (c StoreClient) Create(_ context.Context, obj *unstructured.Unstructured) error {
	_, err := c.Store.Create(obj)
	return err
}

func (c StoreClient) Update(_ context.Context, obj *unstructured.Unstructured) error {
	_, err := c.Store.Update(obj)
	return err
}

func (c StoreClient) Delete(_ context.Context, gvk schema.GroupVersionKind, key object.Key) error {
	return c.Store.Delete(gvk, key)
}
