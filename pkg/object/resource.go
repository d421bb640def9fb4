package object

import (
	"strings"

	"github.com/gobuffalo/flect"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ResourceName returns the resource (URL path segment) a kind is served as
// by the view API server: the lowercase plural of the kind, pluralised with
// the English rules of github.com/gobuffalo/flect exactly as controller-gen
// names CRDs (DeploymentSummary -> deploymentsummaries, Gateway -> gateways,
// Endpoints -> endpoints). Distinct kinds may share one resource name
// (Endpoint and Endpoints -> endpoints); only one of them can be served in a
// group.
func ResourceName(kind string) string {
	return flect.Pluralize(strings.ToLower(kind))
}

// clusterScoped are the built-in kinds (and dcontroller's and
// Metacontroller's own) that are not namespaced, as the Kubernetes API
// defines them.
var clusterScoped = map[schema.GroupKind]bool{
	{Kind: "Namespace"}: true, {Kind: "Node"}: true, {Kind: "PersistentVolume"}: true,
	{Kind: "ComponentStatus"}:                                                       true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                       true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                 true,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                    true,
	{Group: "storage.k8s.io", Kind: "CSINode"}:                                      true,
	{Group: "storage.k8s.io", Kind: "VolumeAttachment"}:                             true,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                              true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                             true,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                                    true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:               true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}: true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:   true,
	{Group: "gateway.networking.k8s.io", Kind: "GatewayClass"}:                      true,
	{Group: "dcontroller.io", Kind: "Operator"}:                                     true,
	{Group: "metacontroller.k8s.io", Kind: "CompositeController"}:                   true,
	{Group: "metacontroller.k8s.io", Kind: "DecoratorController"}:                   true,
}

// ClusterScoped reports whether gk is a well-known cluster-scoped kind
// (Namespace, Node, ClusterRole, CustomResourceDefinition, ...). Other
// kinds, custom resources included, are taken to be namespaced; where a
// cluster's discovery is at hand it decides instead.
func ClusterScoped(gk schema.GroupKind) bool { return clusterScoped[gk] }
