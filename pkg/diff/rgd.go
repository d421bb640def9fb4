package diff

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"
	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/rgd"
	"github.com/dcontroller/dcontroller/pkg/rgdruntime"
)

// rgdCRD is the instance CustomResourceDefinition a ResourceGraphDefinition
// named rgd compiles to (rgd.Compiled.CRD), and the uid of the RGD of that
// name in the cluster ("" when there is none).
type rgdCRD struct {
	rgd, uid string
	crd      *apiextensionsv1.CustomResourceDefinition
}

var rgdGVK = krov1a1.GroupVersion.WithKind("ResourceGraphDefinition")

// compileRGDs compiles each of opts.RGDs as the RGD runtime compiles the
// RGD object of that name in the cluster: with its uid, which the
// compiled resources carry in kro's resource-graph-definition-id label
// (read with a GET; no uid when there is no such RGD or kro's API is not
// served). The compiled Operator replaces the one of the same name among
// opts.Operators. It returns the instance CRDs.
func (c *cluster) compileRGDs(ctx context.Context, opts *Options) ([]rgdCRD, error) {
	var out []rgdCRD
	opts.Operators = append([]*opv1a1.Operator(nil), opts.Operators...)
	for _, g := range opts.RGDs {
		cp := g.DeepCopy()
		cp.UID = ""
		if ri, err := c.resource(rgdGVK, ""); err == nil {
			live, err := ri.Get(ctx, g.Name, metav1.GetOptions{})
			switch {
			case err == nil:
				cp.UID = live.GetUID()
			case !apierrors.IsNotFound(err):
				return nil, fmt.Errorf("ResourceGraphDefinition %s: %w", g.Name, err)
			}
		} else if !meta.IsNoMatchError(err) {
			return nil, err
		}
		comp, err := rgd.Compile(cp)
		if err != nil {
			return nil, fmt.Errorf("ResourceGraphDefinition %q: %w", g.Name, err)
		}
		replaced := false
		for i, op := range opts.Operators {
			if op.Name == comp.Operator.Name {
				opts.Operators[i], replaced = comp.Operator, true
			}
		}
		if !replaced {
			opts.Operators = append(opts.Operators, comp.Operator)
		}
		out = append(out, rgdCRD{rgd: g.Name, uid: string(cp.UID), crd: comp.CRD})
	}
	return out, nil
}

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// rgdKinds returns the instance kinds of crds with their storage version
// ("group/Kind" -> version, as operator.OfflineOptions.Versions) and the
// instance kinds with the status subresource.
func rgdKinds(crds []rgdCRD) (map[string]string, map[schema.GroupVersionKind]bool) {
	versions := map[string]string{}
	status := map[schema.GroupVersionKind]bool{}
	for _, c := range crds {
		for _, v := range c.crd.Spec.Versions {
			gvk := schema.GroupVersionKind{Group: c.crd.Spec.Group, Version: v.Name, Kind: c.crd.Spec.Names.Kind}
			if v.Storage {
				versions[gvk.Group+"/"+gvk.Kind] = v.Name
			}
			if v.Subresources != nil && v.Subresources.Status != nil {
				status[gvk] = true
			}
		}
	}
	return versions, status
}

// crdChange previews the write of an RGD's instance CRD as the RGD
// runtime makes it (rgdruntime's ensureCRD): refused when a CRD of that
// name exists that is not labelled for this RGD (kro's labels), else a
// server-side apply as rgdruntime.FieldManager of the CRD with the labels
// LabelOwned, LabelRGDName, LabelManagedBy and LabelRGDID (the uid of
// the RGD in the cluster, when there is one), sent with dryRun=All. It
// returns the change, nil when none.
func (c *cluster) crdChange(ctx context.Context, rc rgdCRD) (*Change, error) {
	ri, err := c.resource(crdGVK, "")
	if err != nil {
		return nil, err
	}
	key := object.Key{Name: rc.crd.Name}
	live, err := ri.Get(ctx, rc.crd.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return nil, fmt.Errorf("CustomResourceDefinition %s: %w", rc.crd.Name, err)
	default:
		l := live.GetLabels()
		owned := l[rgdruntime.LabelOwned] == "true"
		if _, ok := l[rgdruntime.LabelOwned]; !ok {
			owned = l[rgdruntime.LabelManagedBy] == "kro" || l[rgdruntime.LabelManagedBy] == rgdruntime.ManagedBy
		}
		if !owned || l[rgdruntime.LabelRGDName] != rc.rgd {
			return nil, fmt.Errorf("ResourceGraphDefinition %q: the CustomResourceDefinition %s exists and is not managed for it (labels %s, %s); it would be left as it is",
				rc.rgd, rc.crd.Name, rgdruntime.LabelOwned, rgdruntime.LabelRGDName)
		}
	}
	crd := rc.crd.DeepCopy()
	if crd.Labels == nil {
		crd.Labels = map[string]string{}
	}
	crd.Labels[rgdruntime.LabelOwned] = "true"
	crd.Labels[rgdruntime.LabelRGDName] = rc.rgd
	crd.Labels[rgdruntime.LabelManagedBy] = rgdruntime.ManagedBy
	if rc.uid != "" {
		crd.Labels[rgdruntime.LabelRGDID] = rc.uid
	}
	crd.APIVersion, crd.Kind = crdGVK.GroupVersion().String(), crdGVK.Kind
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	if err != nil {
		return nil, fmt.Errorf("CustomResourceDefinition %s: %w", rc.crd.Name, err)
	}
	delete(m, "status")
	unstructured.RemoveNestedField(m, "metadata", "creationTimestamp")
	c.count()
	ans, err := ri.Apply(ctx, crd.Name, &unstructured.Unstructured{Object: m},
		metav1.ApplyOptions{DryRun: dryRunAll, FieldManager: rgdruntime.FieldManager, Force: true})
	if err != nil {
		return nil, fmt.Errorf("ResourceGraphDefinition %q: the API server refuses the CustomResourceDefinition %s: %w", rc.rgd, rc.crd.Name, err)
	}
	after := Compared(ans.Object)
	if live == nil {
		return &Change{Action: Create, GVK: crdGVK, Key: key, Merged: after}, nil
	}
	before := Compared(live.Object)
	if object.Equal(before, after) {
		return nil, nil
	}
	return &Change{Action: Update, GVK: crdGVK, Key: key, Live: before, Merged: after}, nil
}
