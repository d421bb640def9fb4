package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"

	krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"
	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/diff"
	"github.com/dcontroller/dcontroller/pkg/metacontroller"
)

type diffOptions struct {
	operatorFiles []string
	kubeconfig    string
	context       string
	maxObjects    int
	limits        limitFlags
	hooks         evalHookFlags
}

func newDiffCommand() *cobra.Command {
	o := &diffOptions{}
	cmd := &cobra.Command{
		Use:   "diff -f OPERATOR.yaml [-f ...]",
		Short: "Show what applying operators would change in a live cluster, without changing it",
		Long: `diff previews what the given operators (Operators, or ResourceGraphDefinitions,
which compile to one; or hook controllers, see below) would change in the
cluster of the current kubeconfig if they were applied: it lists, once,
every object of the kinds their controllers read and write (no watch is
left running), runs the controllers on them as a manager (re)starting with
these operators would, and prints the target objects that would change:

  - created: objects the controllers would write that do not exist;
  - updated: a unified diff of the fields that would change;
  - deleted: objects the current version of an operator wrote (they carry
    its dcontroller.io/owner annotation) that this version no longer outputs;
    a Patcher removes only the fields it recorded, which shows as an update.

Each write the controllers would make is sent to the API server as a
dry-run request (dryRun=All): the server validates, defaults, merges
(server-side apply for Applier targets) and answers, and persists nothing.
So the diff is the API server's own result, the manager's rules included:
an Updater replaces the object (keeping what the server and other writers
own, as the manager does), a Patcher merges only its fields, and an object
another controller owns is left alone and reported ("conflict:" on stderr,
exit status 2, as the manager would report OwnerConflict).
Views are computed, not listed, and not printed: they live in a manager's
memory, not in the cluster. Fields the API server manages (managedFields,
resourceVersion, uid, creationTimestamp, generation, ...) are left out.

The output is as kubectl diff prints it: for each changed object, sorted by
apiVersion, kind, namespace and name, "diff -u -N live/NAME merged/NAME" and
a unified diff of the two as YAML, NAME being
<group>.<version>.<Kind>.<namespace>.<name>.

A ResourceGraphDefinition is compiled with the uid of the RGD of that name
in the cluster, as the RGD runtime compiles it, and its instance
CustomResourceDefinition is previewed as the runtime applies it (created
when missing; an instance kind not served yet has no instances).

Hook controllers (CompositeController, DecoratorController; not mixed with
Operators in one run): the objects of their parent and child resources
(a DecoratorController's resources and attachments) are listed and the
controllers are rendered on them as dctl eval renders them (inline
pipeline hooks in-process, webhooks called at their URL or --hook-url's;
--show-requests prints each request); each object the rendering changes is
sent as a dry-run create, replace (and status replace) or delete. Objects
of related resources a customize hook asks for are not listed.

The cluster is the one of --kubeconfig, else $KUBECONFIG, else
~/.kube/config, else the in-cluster configuration; --context picks a
context. The user needs list on the kinds read and written, and the write
verbs (checked by the dry-run requests) on the kinds written.

Exit status (as kubectl diff): 0 no differences, 1 differences, 2 an error:
an invalid operator file, a cluster that cannot be reached or listed, or
errors the controllers would report (printed to stderr as "error: ...",
the diff of everything else is still printed).`,
		Example: `  # What an edited operator would change in the current cluster
  dctl diff -f examples/pod-container-num-annotator/operator.yaml

  # Against another context; CI: fail on differences
  dctl diff --context staging -f operator.yaml || echo "changes pending"

  # A ResourceGraphDefinition, as it compiles to an Operator
  dctl diff -f examples/kro-webapp/operator.yaml

  # A CompositeController whose webhook runs locally
  dctl diff -f controller.yaml --hook-url my-controller=http://localhost:8080`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDiff(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringArrayVarP(&o.operatorFiles, "filename", "f", nil, "operator file (YAML stream of Operators or ResourceGraphDefinitions, or of hook controllers); repeatable")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
	fs.StringVar(&o.context, "context", "", "kubeconfig context to use (default: the current context)")
	fs.IntVar(&o.maxObjects, "max-objects", diff.DefaultMaxObjects, "the most objects listed over all kinds read and written; more is an error")
	o.limits.register(cmd)
	o.limits.registerKinds(cmd)
	o.hooks.register(cmd)
	// Usage errors exit with 2 too, as kubectl diff's errors do.
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: 2, err: err} })
	return cmd
}

func runDiff(ctx context.Context, o *diffOptions, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	fail := func(err error) error { return &exitError{code: 2, err: err} }
	if len(o.operatorFiles) == 0 {
		return fail(errors.New(`required flag "filename" (-f) not set`))
	}
	hf, err := readHookControllers(o.operatorFiles)
	if err != nil {
		return fail(err)
	}
	var urls map[string]string
	if hf != nil {
		if urls, err = o.hooks.urls(); err != nil {
			return fail(err)
		}
	}
	var ops []*opv1a1.Operator
	var rgds []*krov1a1.ResourceGraphDefinition
	files := map[string]string{}
	for _, f := range o.operatorFiles {
		if hf != nil {
			break
		}
		loaded, fileRGDs, err := readOperatorsAndRGDsAll(f)
		if err != nil {
			return fail(err)
		}
		rgds = append(rgds, fileRGDs...)
		for _, op := range loaded {
			files[op.Name] = f
		}
		ops = append(ops, loaded...)
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.kubeconfig != "" {
		rules.ExplicitPath = o.kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: o.context}).ClientConfig()
	if err != nil {
		return fail(fmt.Errorf("loading the kubeconfig: %w", kubeconfigError(rules, err)))
	}
	var res *diff.Result
	if hf != nil {
		hopts := diff.HookOptions{Config: cfg, Controllers: hf.controllers, HookURLs: urls, MaxObjects: o.maxObjects, Logger: ctrl.Log.WithName("diff")}
		if o.hooks.showRequests {
			hopts.OnCall = func(c metacontroller.Call) { printHookRequest(stderr, c) }
		}
		res, err = diff.RunHooks(ctx, hopts)
	} else {
		res, err = diff.Run(ctx, diff.Options{Config: cfg, Operators: ops, Files: files, RGDs: rgds,
			MaxDeltaEntries: o.limits.maxDeltaEntries, MaxObjectBytes: o.limits.maxObjectBytes, EvalLimits: o.limits.evalLimits(),
			KindLimits: o.limits.kindLimits(), MaxObjects: o.maxObjects, Logger: ctrl.Log.WithName("diff")})
	}
	if err != nil {
		return fail(err)
	}
	if err := res.WriteUnified(stdout); err != nil {
		return fail(err)
	}
	for _, c := range res.Conflicts {
		fmt.Fprintf(stderr, "conflict: operator %q: controller %q: %s: %s %s %s\n", c.Operator, c.Controller, c.Path, c.GVK.Kind, c.Key, conflictText(c.Owner, c.NotCreated))
	}
	for _, e := range res.Errors {
		fmt.Fprintf(stderr, "error: %v\n", e)
	}
	// A conflict is an error the manager would report (OwnerConflict in the
	// Operator's status): the edit would not do all it says, so a CI gate
	// must not pass it as a mere difference.
	if len(res.Errors)+len(res.Conflicts) > 0 {
		return fail(fmt.Errorf("%d error(s) and %d conflict(s) while running the controllers", len(res.Errors), len(res.Conflicts)))
	}
	if len(res.Changes) > 0 {
		return &exitError{code: 1, err: fmt.Errorf("%d object(s) would change", len(res.Changes)), quiet: true}
	}
	return nil
}

// printHookRequest prints a hook request as dctl eval --show-requests
// does.
func printHookRequest(w io.Writer, c metacontroller.Call) {
	var buf bytes.Buffer
	if json.Indent(&buf, c.Request, "", "  ") != nil {
		buf.Reset()
		buf.Write(c.Request)
	}
	fmt.Fprintf(w, "# %s %s hook request for %s\n%s\n", c.Controller, c.Hook, c.Parent, buf.Bytes())
}

// conflictText says why a target object is left alone.
func conflictText(owner, notCreated string) string {
	if notCreated != "" {
		return "exists and " + notCreated + "; not written"
	}
	return "is owned by " + owner + " (annotation " + opv1a1.OwnerAnnotation + "); not written"
}
