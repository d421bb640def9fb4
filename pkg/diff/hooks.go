package diff

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/metacontroller"
	"github.com/dcontroller/dcontroller/pkg/object"
)

// HookOptions configure RunHooks.
type HookOptions struct {
	// Config reaches the cluster.
	Config *rest.Config
	// Controllers are *mcv1a1.CompositeController and
	// *mcv1a1.DecoratorController, as they would be applied.
	Controllers []client.Object
	// HookURLs and OnCall are metacontroller.RenderOptions'.
	HookURLs map[string]string
	OnCall   func(metacontroller.Call)
	// MaxObjects is Options.MaxObjects.
	MaxObjects int
	Logger     logr.Logger
}

// RunHooks previews what applying hook controllers (Metacontroller's
// CompositeController and DecoratorController) would change in the
// cluster of opts.Config; it writes nothing. It lists, once, every object
// of the parent and child resources (a CompositeController's
// parentResource and childResources, a DecoratorController's resources
// and attachments), and the CustomResourceDefinitions of their groups;
// renders the controllers on them offline (metacontroller.Render: the
// manager's own sync code, inline hooks in-process, webhooks called at
// their URL or opts.HookURLs'); and sends each object the rendering
// changed to the API server as a dry-run request (dryRun=All): a create,
// a replace with the listed resourceVersion (and a replace of the status
// subresource when the status changed and the kind has it), or a delete.
// Changes are the API server's answers compared with the listed objects,
// as Run's. Objects of related resources a customize hook asks for are
// not listed: the hook sees none.
//
// The error is one of: the cluster cannot be reached or listed, a
// resource a controller names is not served (the error names the
// controller and the spec path), an invalid controller. Syncs that
// failed (a hook that cannot be reached or answers wrongly) and the API
// server's refusals of dry-run requests are in Result.Errors.
func RunHooks(ctx context.Context, opts HookOptions) (*Result, error) {
	if opts.MaxObjects == 0 {
		opts.MaxObjects = DefaultMaxObjects
	}
	c, _, status, err := connect(opts.Config, opts.Logger)
	if err != nil {
		return nil, err
	}
	kinds := map[schema.GroupVersionKind]bool{}
	groups := map[string]bool{}
	for i, o := range opts.Controllers {
		var rules []mcv1a1.ResourceRule
		var paths []string
		switch v := o.(type) {
		case *mcv1a1.CompositeController:
			rules, paths = append(rules, v.Spec.ParentResource.ResourceRule), append(paths, "spec.parentResource")
			for j, r := range v.Spec.ChildResources {
				rules, paths = append(rules, r.ResourceRule), append(paths, fmt.Sprintf("spec.childResources[%d]", j))
			}
		case *mcv1a1.DecoratorController:
			for j, r := range v.Spec.Resources {
				rules, paths = append(rules, r.ResourceRule), append(paths, fmt.Sprintf("spec.resources[%d]", j))
			}
			for j, r := range v.Spec.Attachments {
				rules, paths = append(rules, r.ResourceRule), append(paths, fmt.Sprintf("spec.attachments[%d]", j))
			}
		default:
			return nil, fmt.Errorf("controllers[%d]: not a CompositeController or DecoratorController (%T)", i, o)
		}
		for j, r := range rules {
			gv, err := schema.ParseGroupVersion(r.APIVersion)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %s.apiVersion: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), paths[j], err)
			}
			gvk, err := c.mapper.KindFor(gv.WithResource(r.Resource))
			if err != nil {
				return nil, fmt.Errorf("%s %s: %s: resource %q of %s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), paths[j], r.Resource, r.APIVersion, err)
			}
			kinds[gvk] = true
			groups[gvk.Group] = true
		}
	}
	res := &Result{}
	var inputs []*unstructured.Unstructured
	// The CRDs of the groups involved tell Render the resources' names
	// and scopes.
	crd := schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}
	crds, err := c.list(ctx, crd, opts.MaxObjects)
	if err != nil {
		return nil, err
	}
	for _, u := range crds {
		if g, _, _ := unstructured.NestedString(u.Object, "spec", "group"); groups[g] {
			u.SetGroupVersionKind(crd)
			inputs = append(inputs, u)
		}
	}
	for _, gvk := range sortedKinds(kinds) {
		objs, err := c.list(ctx, gvk, opts.MaxObjects-res.Listed)
		if err != nil {
			return nil, err
		}
		res.Listed += len(objs)
		for _, u := range objs {
			u.SetGroupVersionKind(gvk)
			c.live[objectID{gvk, object.Key{Namespace: u.GetNamespace(), Name: u.GetName()}}] = u
			inputs = append(inputs, u)
		}
	}
	rendered, rerr := metacontroller.Render(ctx, opts.Controllers, inputs,
		metacontroller.RenderOptions{HookURLs: opts.HookURLs, OnCall: opts.OnCall, Logger: opts.Logger})
	if rendered == nil {
		return nil, rerr
	}
	res.Errors = append(res.Errors, leafErrors(rerr)...)
	for _, obj := range rendered.Objects {
		ch, err := c.dryRunWrite(ctx, obj, status[obj.GroupVersionKind()])
		if err != nil {
			res.Errors = append(res.Errors, err)
			continue
		}
		if ch != nil {
			res.Changes = append(res.Changes, *ch)
		}
	}
	for _, obj := range rendered.Deleted {
		gvk := obj.GroupVersionKind()
		key := object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}
		live := c.liveOf(gvk, key)
		if live == nil {
			continue
		}
		if err := c.dryRunDelete(ctx, live); err != nil {
			res.Errors = append(res.Errors, fmt.Errorf("delete %s %s: %w", gvk.Kind, key, err))
			continue
		}
		res.Changes = append(res.Changes, Change{Action: Delete, GVK: gvk, Key: key, Live: Compared(live.Object)})
	}
	sortChanges(res.Changes)
	res.DryRuns = c.dryRuns
	return res, nil
}

// dryRunWrite sends obj, as a rendering left it, to the API server as a
// dry-run create (not listed) or replace (listed; with a dry-run replace
// of the status subresource when the kind has it and the status
// changed), and returns the change the answer makes to the listed
// object; nil when none.
func (c *cluster) dryRunWrite(ctx context.Context, obj *unstructured.Unstructured, hasStatus bool) (*Change, error) {
	gvk := obj.GroupVersionKind()
	key := object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	live := c.liveOf(gvk, key)
	if live != nil && object.Equal(Compared(live.Object), Compared(obj.Object)) {
		return nil, nil
	}
	ri, err := c.resource(gvk, key.Namespace)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", gvk.Kind, key, err)
	}
	body := obj.DeepCopy()
	body.SetManagedFields(nil)
	if live == nil {
		body.SetResourceVersion("")
		body.SetUID("")
		body.SetCreationTimestamp(metav1.Time{})
		c.count()
		ans, err := ri.Create(ctx, body, metav1.CreateOptions{DryRun: dryRunAll})
		if err != nil {
			return nil, fmt.Errorf("create %s %s: %w", gvk.Kind, key, err)
		}
		return &Change{Action: Create, GVK: gvk, Key: key, Merged: Compared(ans.Object)}, nil
	}
	body.SetResourceVersion(live.GetResourceVersion())
	body.SetUID(live.GetUID())
	c.count()
	ans, err := ri.Update(ctx, body, metav1.UpdateOptions{DryRun: dryRunAll})
	if err != nil {
		return nil, fmt.Errorf("update %s %s: %w", gvk.Kind, key, err)
	}
	if st, ok := obj.Object["status"]; hasStatus && ok && !object.Equal(st, live.Object["status"]) {
		c.count()
		sans, err := ri.UpdateStatus(ctx, body, metav1.UpdateOptions{DryRun: dryRunAll})
		if err != nil {
			return nil, fmt.Errorf("update the status of %s %s: %w", gvk.Kind, key, err)
		}
		if st, ok := sans.Object["status"]; ok {
			ans.Object["status"] = st
		}
	}
	before, after := Compared(live.Object), Compared(ans.Object)
	if object.Equal(before, after) {
		return nil, nil
	}
	return &Change{Action: Update, GVK: gvk, Key: key, Live: before, Merged: after}, nil
}

// dryRunDelete sends a dry-run delete of the listed object live.
func (c *cluster) dryRunDelete(ctx context.Context, live *unstructured.Unstructured) error {
	ri, err := c.resource(live.GroupVersionKind(), live.GetNamespace())
	if err != nil {
		return err
	}
	c.count()
	uid := live.GetUID()
	return ri.Delete(ctx, live.GetName(), metav1.DeleteOptions{DryRun: dryRunAll, Preconditions: &metav1.Preconditions{UID: &uid}})
}
