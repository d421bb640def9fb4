package operator

import (
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// CRDKinds is what an offline run knows of custom kinds from their
// CustomResourceDefinitions, in place of an API server that serves them:
// which are cluster-scoped, and the structural schema of each version,
// whose defaults an API server applies to the objects it stores.
type CRDKinds struct {
	cluster    map[schema.GroupKind]bool
	structural map[schema.GroupVersionKind]*structuralschema.Structural
}

// NewCRDKinds reads crds and the CustomResourceDefinitions among inputs
// (apiextensions.k8s.io/v1 objects; a later one of the same name wins). A
// version whose schema is not structural gets no defaults (an API server
// refuses such a CRD). The error names a CRD input that does not decode.
func NewCRDKinds(crds []*apiextensionsv1.CustomResourceDefinition, inputs []*unstructured.Unstructured) (*CRDKinds, error) {
	all := append([]*apiextensionsv1.CustomResourceDefinition(nil), crds...)
	for _, obj := range inputs {
		if obj.GetKind() != "CustomResourceDefinition" || obj.GroupVersionKind().Group != apiextensionsv1.GroupName {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, crd); err != nil {
			return nil, fmt.Errorf("CustomResourceDefinition %s: %w", obj.GetName(), err)
		}
		all = append(all, crd)
	}
	k := &CRDKinds{cluster: map[schema.GroupKind]bool{}, structural: map[schema.GroupVersionKind]*structuralschema.Structural{}}
	for _, crd := range all {
		gk := schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
		k.cluster[gk] = crd.Spec.Scope == apiextensionsv1.ClusterScoped
		for _, v := range crd.Spec.Versions {
			gvk := gk.WithVersion(v.Name)
			delete(k.structural, gvk)
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			internal := &apiextensions.JSONSchemaProps{}
			if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
				continue
			}
			if ss, err := structuralschema.NewStructural(internal); err == nil {
				k.structural[gvk] = ss
			}
		}
	}
	return k, nil
}

// ClusterScoped reports whether a CRD read says gk is cluster-scoped.
func (k *CRDKinds) ClusterScoped(gk schema.GroupKind) bool { return k != nil && k.cluster[gk] }

// Default returns obj with the defaults of its kind's version's schema
// applied, as an API server applies them when it stores the object
// (k8s.io/apiextensions-apiserver structural defaulting); obj itself when
// no CRD read defines the kind and version. obj is not modified.
func (k *CRDKinds) Default(obj *unstructured.Unstructured) *unstructured.Unstructured {
	if k == nil {
		return obj
	}
	ss := k.structural[obj.GroupVersionKind()]
	if ss == nil {
		return obj
	}
	out := obj.DeepCopy()
	structuraldefaulting.Default(out.Object, ss)
	return out
}
