package watchcodec

import (
	"context"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
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
	w := &writeClient{Client: c, dyn: dyn}
	// The metadata client's configuration (client-go metadata.ConfigFor):
	// its negotiator decodes the protobuf and JSON Status of a refused
	// write.
	if w.meta, err = unversionedClient(metadata.ConfigFor(dcfg), opts.HTTPClient); err != nil {
		return nil, err
	}
	return w, nil
}

// AnswerlessPatcher sends patches whose answer nobody reads. The client
// NewClient returns implements it.
type AnswerlessPatcher interface {
	// PatchAnswerless sends data as a patch of type pt to the object of
	// kind gvk named name (in namespace, "" for a cluster-scoped kind), or
	// to its subresource ("" for none), with opts' dry run, force, field
	// manager and field validation. It is client-go's metadata client
	// Patch (the answer asked for as PartialObjectMetadata: the API server
	// encodes no more than the metadata, in protobuf), without the
	// decoding of the answer: only its status counts. It returns the
	// API server's error (an *apierrors.StatusError for a refused write),
	// or the RESTMapper's for a kind it does not know.
	PatchAnswerless(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, pt types.PatchType, data []byte, subresource string, opts ...client.PatchOption) error
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
	// meta sends PatchAnswerless's requests; nil in a WriteClient, which
	// then sends them through c's metadata client.
	meta rest.Interface
}

// PatchAnswerless sends a patch through c's PatchAnswerless when c is an
// AnswerlessPatcher, else through c with a PartialObjectMetadata object
// (controller-runtime's metadata client, which decodes the answer); the
// arguments are AnswerlessPatcher.PatchAnswerless's.
func PatchAnswerless(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, namespace, name string, pt types.PatchType, data []byte, subresource string, opts ...client.PatchOption) error {
	if p, ok := c.(AnswerlessPatcher); ok {
		return p.PatchAnswerless(ctx, gvk, namespace, name, pt, data, subresource, opts...)
	}
	return patchMetadata(ctx, c, gvk, namespace, name, pt, data, subresource, opts)
}

// patchMetadata sends a patch through c's metadata client.
func patchMetadata(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, namespace, name string, pt types.PatchType, data []byte, subresource string, opts []client.PatchOption) error {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	m.SetNamespace(namespace)
	m.SetName(name)
	if subresource != "" {
		return c.SubResource(subresource).Patch(ctx, m, client.RawPatch(pt, data), subResourcePatchOptions(opts)...)
	}
	return c.Patch(ctx, m, client.RawPatch(pt, data), opts...)
}

// partialObjectMetadataAccept is the Accept header of client-go's metadata
// client: the object's metadata only, in protobuf when the API server can.
const partialObjectMetadataAccept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"

func (c *writeClient) PatchAnswerless(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, pt types.PatchType, data []byte, subresource string, opts ...client.PatchOption) error {
	if c.meta == nil || name == "" {
		return patchMetadata(ctx, c.Client, gvk, namespace, name, pt, data, subresource, opts)
	}
	mapping, err := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	segments := make([]string, 0, 8)
	if mapping.Resource.Group == "" {
		segments = append(segments, "api", mapping.Resource.Version)
	} else {
		segments = append(segments, "apis", mapping.Resource.Group, mapping.Resource.Version)
	}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace && namespace != "" {
		// Without a namespace, the metadata client's path: the API
		// server answers NotFound.
		segments = append(segments, "namespaces", namespace)
	}
	segments = append(segments, mapping.Resource.Resource, name)
	if subresource != "" {
		segments = append(segments, subresource)
	}
	req := c.meta.Patch(pt).AbsPath(segments...).Body(data).SetHeader("Accept", partialObjectMetadataAccept)
	// The query parameters of metav1.PatchOptions, set as its parameter
	// codec sets them.
	o := (&client.PatchOptions{}).ApplyOptions(opts).AsPatchOptions()
	for _, d := range o.DryRun {
		req.Param("dryRun", d)
	}
	if o.Force != nil {
		req.Param("force", strconv.FormatBool(*o.Force))
	}
	if o.FieldManager != "" {
		req.Param("fieldManager", o.FieldManager)
	}
	if o.FieldValidation != "" {
		req.Param("fieldValidation", o.FieldValidation)
	}
	return req.Do(ctx).Error()
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
