package rbac

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
)

// Verbs of the Metacontroller-style controllers (package metacontroller).
var (
	// ParentVerbs are the verbs on a CompositeController's parent resource
	// and a DecoratorController's resources: watched through an informer,
	// finalizers and annotations written with merge patches, and the whole
	// object updated when its kind has no status subresource.
	ParentVerbs = []string{"get", "list", "watch", "update", "patch"}
	// ParentStatusVerbs are the verbs on the parent's status subresource,
	// which takes the hook's status.
	ParentStatusVerbs = []string{"update"}
	// ParentFinalizersVerbs are the verbs on the parent's finalizers
	// subresource: children carry a controller owner reference with
	// blockOwnerDeletion, which the OwnerReferencesPermissionEnforcement
	// admission plugin allows only with update on <parent>/finalizers.
	ParentFinalizersVerbs = []string{"update"}
	// ChildVerbs are the verbs on child and attachment resources: watched,
	// created, updated (apply semantics, adoption and release are merge
	// patches) and deleted.
	ChildVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	// HookSecretVerbs are the verbs on a Secret or ConfigMap that a hook's
	// caBundle, authorization, basicAuth or clientTLS names: one direct get.
	HookSecretVerbs = []string{"get"}
)

// composite adds what a CompositeController needs, and warnings for what
// cannot be known from its spec.
func (c *computation) composite(cc *mcv1a1.CompositeController) error {
	who := Need{Operator: cc.Name, Controller: "CompositeController"}
	if err := c.parent(who, "spec.parentResource", cc.Spec.ParentResource.ResourceRule); err != nil {
		return err
	}
	for i, ch := range cc.Spec.ChildResources {
		if err := c.child(who, fmt.Sprintf("spec.childResources[%d]", i), ch.ResourceRule); err != nil {
			return err
		}
	}
	if h := cc.Spec.Hooks; h != nil {
		for _, hk := range []struct {
			name string
			hook *mcv1a1.Hook
		}{{"customize", h.Customize}, {"sync", h.Sync}, {"finalize", h.Finalize}, {"preUpdateChild", h.PreUpdateChild}, {"postUpdateChild", h.PostUpdateChild}} {
			c.hookSecrets(who, "spec.hooks."+hk.name, hk.hook)
		}
		if h.Customize != nil {
			c.warn(fmt.Sprintf("CompositeController %s: the related resources of the customize hook are chosen at run time; grant get, list, watch on them yourself", cc.Name))
		}
	}
	c.endpointSecrets(who, cc.Spec.EndpointConfigs)
	return nil
}

// decorator adds what a DecoratorController needs.
func (c *computation) decorator(dc *mcv1a1.DecoratorController) error {
	who := Need{Operator: dc.Name, Controller: "DecoratorController"}
	for i, r := range dc.Spec.Resources {
		if err := c.parent(who, fmt.Sprintf("spec.resources[%d]", i), r.ResourceRule); err != nil {
			return err
		}
	}
	for i, a := range dc.Spec.Attachments {
		if err := c.child(who, fmt.Sprintf("spec.attachments[%d]", i), a.ResourceRule); err != nil {
			return err
		}
	}
	if h := dc.Spec.Hooks; h != nil {
		for _, hk := range []struct {
			name string
			hook *mcv1a1.Hook
		}{{"customize", h.Customize}, {"sync", h.Sync}, {"finalize", h.Finalize}} {
			c.hookSecrets(who, "spec.hooks."+hk.name, hk.hook)
		}
		if h.Customize != nil {
			c.warn(fmt.Sprintf("DecoratorController %s: the related resources of the customize hook are chosen at run time; grant get, list, watch on them yourself", dc.Name))
		}
	}
	c.endpointSecrets(who, dc.Spec.EndpointConfigs)
	return nil
}

// resourceOf splits a Metacontroller resource rule (apiVersion and plural
// resource name) into its group and resource, checking it with the mapper
// when there is one (which also turns a singular name into the plural).
func (c *computation) resourceOf(path string, r mcv1a1.ResourceRule) (schema.GroupVersionResource, error) {
	gv, err := schema.ParseGroupVersion(r.APIVersion)
	if err != nil || r.APIVersion == "" {
		return schema.GroupVersionResource{}, fmt.Errorf("%s.apiVersion: invalid apiVersion %q", path, r.APIVersion)
	}
	if r.Resource == "" {
		return schema.GroupVersionResource{}, fmt.Errorf("%s.resource: must not be empty", path)
	}
	gvr := gv.WithResource(r.Resource)
	if c.opts.Mapper != nil {
		// The API server (and the controllers) also accept the singular
		// name; RBAC rules need the plural one.
		full, err := c.opts.Mapper.ResourceFor(gvr)
		if err != nil {
			c.warn(fmt.Sprintf("resource %s: not served by the cluster (%v)", displayGR(gvr.GroupResource()), err))
			return gvr, nil
		}
		gvr.Resource = full.Resource
	}
	return gvr, nil
}

func displayGR(gr schema.GroupResource) string {
	if gr.Group == "" {
		return gr.Resource
	}
	return gr.Resource + "." + gr.Group
}

func (c *computation) parent(who Need, path string, r mcv1a1.ResourceRule) error {
	gvr, err := c.resourceOf(path, r)
	if err != nil {
		return fmt.Errorf("%s %q: %w", who.Controller, who.Operator, err)
	}
	n := who
	n.Path, n.Group = path, gvr.Group
	for _, sub := range []struct {
		suffix, why string
		verbs       []string
	}{
		{"", "parent", ParentVerbs},
		{"/status", "parent status", ParentStatusVerbs},
		{"/finalizers", "owner of children with blockOwnerDeletion", ParentFinalizersVerbs},
	} {
		n.Resource, n.Verbs, n.Why = gvr.Resource+sub.suffix, sub.verbs, sub.why
		c.add(n)
	}
	return nil
}

func (c *computation) child(who Need, path string, r mcv1a1.ResourceRule) error {
	gvr, err := c.resourceOf(path, r)
	if err != nil {
		return fmt.Errorf("%s %q: %w", who.Controller, who.Operator, err)
	}
	n := who
	n.Path, n.Group, n.Resource, n.Verbs, n.Why = path, gvr.Group, gvr.Resource, ChildVerbs, "child"
	c.add(n)
	return nil
}

// hookSecrets adds the Secrets and ConfigMaps a webhook's connection
// settings name.
func (c *computation) hookSecrets(who Need, path string, h *mcv1a1.Hook) {
	if h == nil || h.Webhook == nil {
		return
	}
	w := h.Webhook
	c.connectionSecrets(who, path+".webhook", w.CABundle, w.Authorization, w.BasicAuth, w.ClientTLS)
}

func (c *computation) endpointSecrets(who Need, eps []mcv1a1.EndpointConfig) {
	for i, ep := range eps {
		c.connectionSecrets(who, fmt.Sprintf("spec.endpointConfigs[%d]", i), ep.CABundle, ep.Authorization, ep.BasicAuth, ep.ClientTLS)
	}
}

func (c *computation) connectionSecrets(who Need, path string, ca *mcv1a1.CABundleConfig, auth *mcv1a1.AuthorizationConfig, basic *mcv1a1.BasicAuthConfig, tls *mcv1a1.ClientTLSConfig) {
	ref := func(p, resource, ns, name string) {
		if name == "" {
			return
		}
		n := who
		n.Path, n.Resource, n.Namespace, n.ResourceName = p, resource, ns, name
		n.Verbs, n.Why = HookSecretVerbs, "webhook connection setting"
		c.add(n)
	}
	if ca != nil {
		if ca.SecretRef != nil {
			ref(path+".caBundle.secretRef", "secrets", ca.SecretRef.Namespace, ca.SecretRef.Name)
		}
		if ca.ConfigMapRef != nil {
			ref(path+".caBundle.configMapRef", "configmaps", ca.ConfigMapRef.Namespace, ca.ConfigMapRef.Name)
		}
	}
	if auth != nil {
		ref(path+".authorization.secretRef", "secrets", auth.SecretRef.Namespace, auth.SecretRef.Name)
	}
	if basic != nil {
		ref(path+".basicAuth.secretRef", "secrets", basic.SecretRef.Namespace, basic.SecretRef.Name)
	}
	if tls != nil {
		ref(path+".clientTLS.secretRef", "secrets", tls.SecretRef.Namespace, tls.SecretRef.Name)
	}
}
