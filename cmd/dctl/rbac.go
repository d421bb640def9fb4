package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/operator"
	"github.com/dcontroller/dcontroller/pkg/rbac"
)

type rbacOptions struct {
	files           []string
	kubeconfig      string
	offline         bool
	name            string
	serviceAccounts []string
	users           []string
	output          string
}

func newRBACCommand() *cobra.Command {
	o := &rbacOptions{}
	cmd := &cobra.Command{
		Use:   "rbac -f OPERATOR.yaml [-f ...]",
		Short: "Print the least-privilege RBAC rules the manager needs for the given operators and controllers",
		Long: `rbac prints a ClusterRole, and a Role for each namespace a source is
restricted to, that grant exactly the verbs the manager needs to run the
given operators:

  Watcher/Periodic source   get, list, watch
  Updater target            get, list, watch, create, update, delete
  Patcher target            get, list, watch, patch
  Applier target            get, list, watch, patch (server-side apply)
  target whose output sets status: <resource>/status update (Updater) or patch

Views and OneShot sources need nothing. The files may also hold
Metacontroller-style CompositeControllers and DecoratorControllers:

  parent / decorated resource   get, list, watch, update, patch; /status update;
                                /finalizers update (children's owner references)
  child / attachment resource   get, list, watch, create, update, patch, delete
  Secret or ConfigMap of a webhook's caBundle, authorization, basicAuth or
  clientTLS                     get on that object only (a Role)

The related resources of a customize hook are chosen at run time and are
not included (a warning says so). Each rule is explained by a comment.
The manager's own permissions (Operator and ResourceGraphDefinition objects,
their status, RGDs' instance CRDs, Events) are not included: the Helm chart
and config/rbac grant them.

Resource names come from the cluster's API discovery when a cluster is
reachable (--kubeconfig, $KUBECONFIG or ~/.kube/config); otherwise, or with
--offline, from the lowercase-plural rule (Ingress -> ingresses). With
--service-account or --user the output binds the roles; with -o values it
is the Helm chart's rbac.mode=scoped values:

  dctl rbac -f op.yaml -o values > rbac-values.yaml
  helm upgrade dcontroller charts/dcontroller --reuse-values -f rbac-values.yaml`,
		Example: `  dctl rbac -f examples/pod-container-num-annotator/operator.yaml --offline
  dctl rbac -f op.yaml --service-account dcontroller-system:dcontroller | kubectl apply -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRBAC(o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringArrayVarP(&o.files, "filename", "f", nil, "operator file (YAML stream of Operator objects); repeatable")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster whose API discovery names the resources (default: $KUBECONFIG or ~/.kube/config when reachable)")
	fs.BoolVar(&o.offline, "offline", false, "do not contact a cluster: name resources by the lowercase-plural rule")
	fs.StringVar(&o.name, "name", "dcontroller-operators", "name of the ClusterRole, the Roles and the bindings")
	fs.StringArrayVar(&o.serviceAccounts, "service-account", nil, "bind the roles to this ServiceAccount, as NAMESPACE:NAME; repeatable")
	fs.StringArrayVar(&o.users, "user", nil, "bind the roles to this user; repeatable")
	fs.StringVarP(&o.output, "output", "o", "yaml", "output format: yaml (RBAC objects) or values (Helm values for rbac.mode=scoped)")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

func runRBAC(o *rbacOptions, stdout, stderr io.Writer) error {
	if o.output != "yaml" && o.output != "values" {
		return fmt.Errorf("--output: unknown format %q (want yaml or values)", o.output)
	}
	if o.offline && o.kubeconfig != "" {
		return errors.New("--offline and --kubeconfig exclude each other")
	}
	var subjects []rbacv1.Subject
	for _, sa := range o.serviceAccounts {
		ns, name, ok := strings.Cut(sa, ":")
		if !ok || ns == "" || name == "" {
			return fmt.Errorf("--service-account %q: want NAMESPACE:NAME", sa)
		}
		subjects = append(subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns})
	}
	for _, u := range o.users {
		subjects = append(subjects, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: u})
	}
	var in rbac.Input
	for _, f := range o.files {
		if err := readControllers(f, &in); err != nil {
			return err
		}
	}
	mapper, disc, err := o.restMapper(stderr)
	if err != nil {
		return err
	}
	rules, err := rbac.ComputeInput(in, rbac.Options{Mapper: mapper, Discovery: disc})
	if err != nil {
		return err
	}
	for _, w := range rules.Warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	if o.output == "values" {
		b, err := rules.HelmValues()
		if err != nil {
			return err
		}
		_, err = stdout.Write(b)
		return err
	}
	var names []string
	for _, op := range in.Operators {
		names = append(names, "operator "+op.Name)
	}
	for _, cc := range in.Composites {
		names = append(names, "CompositeController "+cc.Name)
	}
	for _, dc := range in.Decorators {
		names = append(names, "DecoratorController "+dc.Name)
	}
	fmt.Fprintf(stdout, "# RBAC for %s, by dctl rbac.\n", strings.Join(names, ", "))
	if err := rules.Explain(stdout); err != nil {
		return err
	}
	return rbac.WriteYAML(stdout, rules.Objects(rbac.ObjectOptions{
		Name:     o.name,
		Subjects: subjects,
		Labels:   map[string]string{"app.kubernetes.io/part-of": "dcontroller"},
	}))
}

// readControllers adds the Operators, CompositeControllers and
// DecoratorControllers of a YAML or JSON stream to in; unknown fields and
// other kinds are errors.
func readControllers(path string, in *rbac.Input) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	objs, err := operator.DecodeObjects(fh)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(objs) == 0 {
		return fmt.Errorf("%s: no Operator, CompositeController or DecoratorController found", path)
	}
	strict := func(raw []byte, into any) error {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		return dec.Decode(into)
	}
	for i, obj := range objs {
		where := fmt.Sprintf("%s: object %d (%s %s)", path, i+1, obj.GetKind(), obj.GetName())
		raw, err := json.Marshal(obj.Object)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		gvk := obj.GroupVersionKind()
		switch {
		case gvk.GroupVersion() == opv1a1.GroupVersion && gvk.Kind == "Operator":
			ops, err := operator.DecodeOperators(bytes.NewReader(raw))
			if err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			in.Operators = append(in.Operators, ops...)
		case isRGD(obj.GetAPIVersion(), obj.GetKind()):
			c, err := compileRGD(raw, where)
			if err != nil {
				return err
			}
			in.Operators = append(in.Operators, c.Operator)
		case gvk.GroupVersion() == mcv1a1.GroupVersion && gvk.Kind == "CompositeController":
			cc := &mcv1a1.CompositeController{}
			if err := strict(raw, cc); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			in.Composites = append(in.Composites, cc)
		case gvk.GroupVersion() == mcv1a1.GroupVersion && gvk.Kind == "DecoratorController":
			dc := &mcv1a1.DecoratorController{}
			if err := strict(raw, dc); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			in.Decorators = append(in.Decorators, dc)
		default:
			return fmt.Errorf("%s: dctl rbac takes Operator (%s), CompositeController and DecoratorController (%s) and ResourceGraphDefinition (%s) objects", where, opv1a1.GroupVersion, mcv1a1.GroupVersion, krov1a1.GroupVersion)
		}
	}
	return nil
}

// restMapper returns a discovery-backed RESTMapper and the (cached)
// discovery client behind it, or nils to name resources offline. An
// explicit --kubeconfig must work; the default kubeconfig is used only
// when it reaches a cluster.
func (o *rbacOptions) restMapper(stderr io.Writer) (meta.RESTMapper, discovery.DiscoveryInterface, error) {
	if o.offline {
		return nil, nil, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.kubeconfig != "" {
		rules.ExplicitPath = o.kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err == nil {
		cfg.Timeout = 5 * time.Second
		var dc *discovery.DiscoveryClient
		if dc, err = discovery.NewDiscoveryClientForConfig(cfg); err == nil {
			if _, err = dc.ServerVersion(); err == nil {
				mc := memory.NewMemCacheClient(dc)
				return restmapper.NewDeferredDiscoveryRESTMapper(mc), mc, nil
			}
		}
	}
	if o.kubeconfig != "" {
		return nil, nil, fmt.Errorf("--kubeconfig %s: %w", o.kubeconfig, err)
	}
	fmt.Fprintf(stderr, "note: no reachable cluster (%v); resource names follow the lowercase-plural rule (pass --kubeconfig to use API discovery, --offline to silence this)\n", err)
	return nil, nil, nil
}
