package watchcodec

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
)

// NewClient is a client.NewClientFunc (controller-runtime's
// manager.Options.NewClient): client.New(cfg, opts) whose writes of
// unstructured objects decode their responses in one parse (see
// WriteClient). Options that client.New implements by wrapping its client
// (DryRun, FieldOwner, FieldValidation) leave it as client.New made it.
func NewClient(cfg *rest.Config, opts client.Options) (client.Client, error) {
	c, err := client.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	if (opts.DryRun != nil && *opts.DryRun) || opts.FieldOwner != "" || opts.FieldValidation != "" {
		return c, nil
	}
	dcfg := rest.CopyConfig(cfg)
	if dcfg.WarningHandler == nil && dcfg.WarningHandlerWithContext == nil {
		// As client.New: the API server's warnings are logged.
		dcfg.WarningHandlerWithContext = crlog.NewKubeAPIWarningLogger(crlog.KubeAPIWarningLoggerOptions{})
	}
	dyn, err := NewDynamic(dcfg, opts.HTTPClient)
	if err != nil {
		return nil, err
	}
	return WriteClient(c, dyn), nil
}

// WriteClient returns c with its writes of *unstructured.Unstructured
// objects (Create, Update, Patch, and Update and Patch of the status
// subresource) sent through dyn, a dynamic client of this package
// (NewDynamic), which decodes each response in one parse where
// controller-runtime's unstructured client scans it for its kind, scans it
// again for validity and then decodes it. The request (path, body, query
// parameters made from the options) and what the caller gets back (the
// error, the object replaced by the response, its apiVersion and kind
// kept as given where c keeps them) are those of c. Everything else,
// and a write c could not map to a resource (its error is c's), goes to c.
func WriteClient(c client.Client, dyn dynamic.Interface) client.Client {
	return &writeClient{Client: c, dyn: dyn}
}

type writeClient struct {
	client.Client
	dyn dynamic.Interface
}

// resource returns the dynamic client of obj's resource, in obj's
// namespace when the resource is namespaced, or false when obj is not
// unstructured or its kind does not map.
func (c *writeClient) resource(obj client.Object) (dynamic.ResourceInterface, *unstructured.Unstructured, bool) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil, false
	}
	gvk := u.GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" {
		return nil, nil, false
	}
	m, err := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, nil, false
	}
	namespaced := m.Scope.Name() == meta.RESTScopeNameNamespace
	if namespaced && u.GetNamespace() == "" {
		// c refuses it before sending (client-go's "an empty namespace
		// may not be set ..." errors).
		return nil, nil, false
	}
	r := c.dyn.Resource(m.Resource)
	if namespaced {
		return r.Namespace(u.GetNamespace()), u, true
	}
	return r, u, true
}

func (c *writeClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	r, u, ok := c.resource(obj)
	if !ok {
		return c.Client.Create(ctx, obj, opts...)
	}
	o := &client.CreateOptions{}
	o.ApplyOptions(opts)
	gvk := u.GroupVersionKind()
	out, err := r.Create(ctx, u, *o.AsCreateOptions())
	if err != nil {
		return err
	}
	u.Object = out.Object
	u.SetGroupVersionKind(gvk)
	return nil
}

func (c *writeClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	r, u, ok := c.resource(obj)
	if !ok || u.GetName() == "" {
		return c.Client.Update(ctx, obj, opts...)
	}
	o := &client.UpdateOptions{}
	o.ApplyOptions(opts)
	gvk := u.GroupVersionKind()
	out, err := r.Update(ctx, u, *o.AsUpdateOptions())
	if err != nil {
		return err
	}
	u.Object = out.Object
	u.SetGroupVersionKind(gvk)
	return nil
}

func (c *writeClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return c.patch(ctx, obj, patch, nil, opts)
}

// patch sends patch to obj, or to its subresource when there is one.
func (c *writeClient) patch(ctx context.Context, obj client.Object, patch client.Patch, subresource []string, opts []client.PatchOption) error {
	r, u, ok := c.resource(obj)
	if !ok || u.GetName() == "" || patch.Type() == "" {
		if len(subresource) > 0 {
			return c.Client.SubResource(subresource[0]).Patch(ctx, obj, patch, subResourcePatchOptions(opts)...)
		}
		return c.Client.Patch(ctx, obj, patch, opts...)
	}
	data, err := patch.Data(obj)
	if err != nil {
		return err
	}
	o := &client.PatchOptions{}
	o.ApplyOptions(opts)
	gvk := u.GroupVersionKind()
	out, err := r.Patch(ctx, u.GetName(), patch.Type(), data, *o.AsPatchOptions(), subresource...)
	if err != nil {
		return err
	}
	u.Object = out.Object
	if len(subresource) > 0 {
		// As c's subresource patch: the kind stays as given.
		u.SetGroupVersionKind(gvk)
	}
	return nil
}

func (c *writeClient) Status() client.SubResourceWriter { return c.SubResource("status") }

func (c *writeClient) SubResource(subResource string) client.SubResourceClient {
	sc := c.Client.SubResource(subResource)
	if subResource != "status" {
		return sc
	}
	return &statusWriter{SubResourceClient: sc, c: c}
}

// statusWriter sends Update and Patch of the status subresource of an
// unstructured object through the one-parse dynamic client; the rest is
// c's.
type statusWriter struct {
	client.SubResourceClient
	c *writeClient
}

func (s *statusWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	o := &client.SubResourceUpdateOptions{}
	o.ApplyOptions(opts)
	r, u, ok := s.c.resource(obj)
	if !ok || o.SubResourceBody != nil || u.GetName() == "" {
		return s.SubResourceClient.Update(ctx, obj, opts...)
	}
	out, err := r.UpdateStatus(ctx, u, *o.AsUpdateOptions())
	if err != nil {
		return err
	}
	u.Object = out.Object
	return nil
}

func (s *statusWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	o := &client.SubResourcePatchOptions{}
	o.ApplyOptions(opts)
	if o.SubResourceBody != nil {
		return s.SubResourceClient.Patch(ctx, obj, patch, opts...)
	}
	return s.c.patch(ctx, obj, patch, []string{"status"}, []client.PatchOption{&o.PatchOptions})
}

// subResourcePatchOptions turns patch options back into subresource
// patch options (no SubResourceBody).
func subResourcePatchOptions(opts []client.PatchOption) []client.SubResourcePatchOption {
	o := &client.PatchOptions{}
	o.ApplyOptions(opts)
	return []client.SubResourcePatchOption{&client.SubResourcePatchOptions{PatchOptions: *o}}
}
