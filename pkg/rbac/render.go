package rbac

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// ObjectOptions configure Objects.
type ObjectOptions struct {
	// Name of the ClusterRole, the Roles and the bindings.
	Name string
	// Subjects, when set, are bound to the ClusterRole and every Role.
	Subjects []rbacv1.Subject
	// Labels are put on every object.
	Labels map[string]string
}

// Objects renders rules as a ClusterRole, one Role per namespace and,
// with subjects, a ClusterRoleBinding and one RoleBinding per Role. The
// ClusterRole is always there, even when empty.
func (r *Rules) Objects(opts ObjectOptions) []any {
	meta := func(ns string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: opts.Name, Namespace: ns, Labels: opts.Labels}
	}
	rules := r.Cluster
	if rules == nil {
		rules = []rbacv1.PolicyRule{}
	}
	out := []any{&rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: meta(""),
		Rules:      rules,
	}}
	if len(opts.Subjects) > 0 {
		out = append(out, &rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: meta(""),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: opts.Name},
			Subjects:   opts.Subjects,
		})
	}
	for _, ns := range r.Namespaces() {
		out = append(out, &rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: meta(ns),
			Rules:      r.Namespaced[ns],
		})
		if len(opts.Subjects) > 0 {
			out = append(out, &rbacv1.RoleBinding{
				TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
				ObjectMeta: meta(ns),
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: opts.Name},
				Subjects:   opts.Subjects,
			})
		}
	}
	return out
}

// Explain writes one comment line per need: who needs which verbs on
// which resource and why, e.g.
//
//	# annotator/annotate spec.controllers[0].target (Patcher target): pods: get, list, watch, patch
func (r *Rules) Explain(w io.Writer) error {
	for _, n := range r.Needs {
		res, sub, _ := strings.Cut(n.Resource, "/")
		if n.Group != "" {
			res += "." + n.Group
		}
		if sub != "" {
			res += "/" + sub
		}
		if n.ResourceName != "" {
			res += fmt.Sprintf(" %q", n.ResourceName)
		}
		where := ""
		if n.Namespace != "" {
			where = " in namespace " + n.Namespace
		}
		if _, err := fmt.Fprintf(w, "# %s/%s %s (%s): %s%s: %s\n", n.Operator, n.Controller, n.Path, n.Why, res, where, strings.Join(n.Verbs, ", ")); err != nil {
			return err
		}
	}
	for _, warn := range r.Warnings {
		if _, err := fmt.Fprintf(w, "# warning: %s\n", warn); err != nil {
			return err
		}
	}
	return nil
}

// WriteYAML writes objects as a YAML stream, each document starting with
// "---".
func WriteYAML(w io.Writer, objs []any) error {
	var buf bytes.Buffer
	for _, o := range objs {
		b, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		buf.WriteString("---\n")
		buf.Write(dropCreationTimestamp(b))
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// dropCreationTimestamp removes the "creationTimestamp: null" line that
// metav1.ObjectMeta always marshals.
func dropCreationTimestamp(b []byte) []byte {
	return bytes.ReplaceAll(b, []byte("  creationTimestamp: null\n"), nil)
}

// HelmValues renders rules as the values of the Helm chart's scoped RBAC
// mode: rbac.mode=scoped with rbac.scoped.clusterRules and
// rbac.scoped.namespacedRules.
func (r *Rules) HelmValues() ([]byte, error) {
	cluster := r.Cluster
	if cluster == nil {
		cluster = []rbacv1.PolicyRule{}
	}
	ns := r.Namespaced
	if ns == nil {
		ns = map[string][]rbacv1.PolicyRule{}
	}
	v := map[string]any{"rbac": map[string]any{
		"mode": "scoped",
		"scoped": map[string]any{
			"clusterRules":    cluster,
			"namespacedRules": ns,
		},
	}}
	return yaml.Marshal(v)
}
