package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/controller"
	"github.com/dcontroller/dcontroller/pkg/dbsp"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/operator"
)

type evalOptions struct {
	operatorFiles []string
	inputFiles    []string
	output        string
	trace         bool
	limits        limitFlags
	hooks         evalHookFlags
}

func newEvalCommand() *cobra.Command {
	o := &evalOptions{}
	cmd := &cobra.Command{
		Use:   "eval -f OPERATOR.yaml|CONTROLLER.yaml [-i INPUT.yaml ...]",
		Short: "Run operators offline on objects from files and print the result",
		Long: `eval runs every controller of the given operators against an in-memory store,
without a cluster. The input files are YAML (or JSON) streams of Kubernetes
objects; they are applied in order, each as a creation or, when the object
already exists, an update (a deletion when it has metadata.deletionTimestamp
and no metadata.finalizers; deleting an object no earlier input creates is
an input error; with finalizers it is an update, the object being deleted
as the API server keeps it until they are removed).
Then every controller runs on all these changes at once, as a manager's first
list reaches it, until nothing changes any more (controllers chained through
views included). With --trace the inputs are run one at a time instead, so
each input's deltas can be followed; the final state is the same. Without
-i the controllers run on no objects: a check that the operators compile.

The output is the final state of every target kind: all objects of that kind,
sorted by apiVersion, kind, namespace and name, as a YAML stream (-o yaml) or
a v1 List (-o json), written as it is encoded. Writes are checked as the
API server checks them: an output of a namespaced native kind without
metadata.namespace is an error, with the API server's answer. With --trace,
each delta through each pipeline stage is printed to stderr as
"<operator>/<controller> <stage> <weight> <object>", after a line
"<operator>/<controller> dialect <dialect>" per controller naming the
meaning of its expressions: deltacontroller (a controller written with
target:) or dbsp (the successor's, for targets:).

Hook controllers: when the -f files hold Metacontroller CompositeControllers
or DecoratorControllers (with CustomResourceDefinitions, not mixed with
Operators), eval renders what the manager would do to the inputs (parents,
decorated objects, children, related objects): the parents and their
children as the manager would leave them (owner references, labels,
status with observedGeneration, finalizers), the finalize hook's work for
parents with metadata.deletionTimestamp, "deleted: KIND NS/NAME" on stderr
for each deletion. Inline pipeline hooks run in-process, webhooks are
called at their URL or at --hook-url's; --show-requests prints each hook
request to stderr. See docs/metacontroller.md, "Previewing offline".

Exit status: 0 on success, 1 when an operator or input is invalid, 2 when
the controllers ran but reported errors (printed to stderr; for hook
controllers, e.g. a hook that cannot be reached).`,
		Example: `  dctl eval -f examples/pod-container-num-annotator/operator.yaml \
    -i examples/pod-container-num-annotator/input.yaml

  # A CompositeController whose sync hook is a local server:
  dctl eval -f examples/metacontroller-podservice/controller.yaml \
    -i examples/metacontroller-podservice/podservice.yaml \
    --hook-url podservice-controller=http://127.0.0.1:8080 --show-requests`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runEval(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringArrayVarP(&o.operatorFiles, "filename", "f", nil, "operator file (YAML stream of Operator objects); repeatable")
	cmd.Flags().StringArrayVarP(&o.inputFiles, "input", "i", nil, "input file (YAML stream of objects, applied in order); repeatable")
	cmd.Flags().StringVarP(&o.output, "output", "o", "yaml", "output format: yaml or json")
	cmd.Flags().BoolVar(&o.trace, "trace", false, "print each delta through each pipeline stage to stderr")
	o.limits.register(cmd)
	o.hooks.register(cmd)
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

func runEval(ctx context.Context, o *evalOptions, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if o.output != "yaml" && o.output != "json" {
		return fmt.Errorf("--output: unknown format %q (want yaml or json)", o.output)
	}
	if hf, err := readHookControllers(o.operatorFiles); err != nil {
		return err
	} else if hf != nil {
		return runEvalHooks(ctx, o, hf, stdout, stderr)
	}
	var ops []*opv1a1.Operator
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range o.operatorFiles {
		loaded, lcrds, err := readOperatorsAndCRDs(f)
		if err != nil {
			return err
		}
		ops = append(ops, loaded...)
		crds = append(crds, lcrds...)
	}
	var inputs []*unstructured.Unstructured
	var where []string // "FILE: object N" of each input
	for _, f := range o.inputFiles {
		fh, err := os.Open(f)
		if err != nil {
			return err
		}
		objs, err := operator.DecodeObjects(fh)
		fh.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		inputs = append(inputs, objs...)
		for j := range objs {
			where = append(where, fmt.Sprintf("%s: object %d", f, j+1))
		}
	}
	off, runErrs, err := evaluate(ctx, ops, crds, inputs, where, o.limits, o.trace, stderr)
	if err != nil {
		return err
	}
	if err := writeObjects(stdout, o.output, off.Result()); err != nil {
		return err
	}
	if len(runErrs) > 0 {
		var all []error
		for _, e := range runErrs {
			all = append(all, leafErrors(e)...)
		}
		n := 0
		for _, e := range all {
			fmt.Fprintf(stderr, "error: %v\n", e)
			// An operator reports its first errors of a step and how many
			// more there were.
			var more *dbsp.MoreErrors
			if errors.As(e, &more) {
				n += more.N
			} else {
				n++
			}
		}
		return &exitError{code: 2, err: fmt.Errorf("%d error(s) while running the controllers", n)}
	}
	return nil
}

// evaluate runs ops offline on inputs as dctl eval does (dctl test runs
// every step through it too): inputs are checked as an API server checks
// them (where[i] names inputs[i] in the message), get the defaults of
// their kind's CRD (one of crds, the RGDs' instance CRDs, or one among the
// inputs: structural defaulting, as the API server applies it), applied in
// order (one at a time with trace, when each delta is printed to stderr),
// and the controllers run to a fixed point. The custom kinds those CRDs
// make cluster-scoped are written without a namespace. err is an invalid operator or input,
// found before anything runs; runErrs are the errors the controllers
// reported while running. The final state is the returned run's Result.
func evaluate(ctx context.Context, ops []*opv1a1.Operator, crds []*apiextensionsv1.CustomResourceDefinition,
	inputs []*unstructured.Unstructured, where []string,
	limits limitFlags, trace bool, stderr io.Writer) (off *operator.Offline, runErrs []error, err error) {
	kinds, err := operator.NewCRDKinds(crds, inputs)
	if err != nil {
		return nil, nil, err
	}
	defaulted := make([]*unstructured.Unstructured, len(inputs))
	for i, obj := range inputs {
		defaulted[i] = kinds.Default(obj)
	}
	inputs = defaulted
	for i, obj := range inputs {
		if err := object.ValidateMetadata(obj, obj.GetNamespace() != ""); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", where[i], err)
		}
	}
	if err := checkDeletions(inputs, where); err != nil {
		return nil, nil, err
	}
	opts := operator.OfflineOptions{Versions: map[string]string{},
		MaxDeltaEntries: limits.maxDeltaEntries, MaxObjectBytes: limits.maxObjectBytes, EvalLimits: limits.evalLimits(),
		StatusSubresource: operator.InputStatusSubresource(inputs), ClusterScoped: kinds.ClusterScoped}
	// A kind's version is its inputs' version, else the storage version of
	// its CustomResourceDefinition among the inputs.
	for gk, v := range operator.InputCRDVersions(inputs) {
		opts.Versions[gk] = v
	}
	for _, obj := range inputs {
		gvk := obj.GroupVersionKind()
		opts.Versions[gvk.Group+"/"+gvk.Kind] = gvk.Version
	}
	if trace {
		// A header per controller: the dialect its expressions run in.
		for _, op := range ops {
			for _, c := range op.Spec.Controllers {
				fmt.Fprintf(stderr, "%s/%s dialect %s\n", op.Name, c.Name, controller.DialectOf(c))
			}
		}
		opts.Trace = func(op, ctrl, stage string, delta *dbsp.ZSet) {
			for _, e := range delta.Entries() {
				b, _ := json.Marshal(e.Doc)
				fmt.Fprintf(stderr, "%s/%s %s %+d %s\n", op, ctrl, stage, e.Weight, b)
			}
		}
	}
	off, err = operator.NewOffline(ops, opts)
	if err != nil {
		return nil, nil, err
	}
	if err := off.Start(ctx); err != nil {
		runErrs = append(runErrs, err)
	}
	if trace {
		// One input at a time, so the trace shows each input's own deltas.
		for _, obj := range inputs {
			if err := off.Apply(ctx, obj); err != nil {
				runErrs = append(runErrs, err)
			}
		}
	} else if err := off.ApplyAll(ctx, inputs); err != nil {
		runErrs = append(runErrs, err)
	}
	return off, runErrs, nil
}

// checkDeletions refuses an input that deletes (has
// metadata.deletionTimestamp) an object no earlier input creates, or one an
// earlier input already deleted: as deleting a missing object at the API
// server, it is a mistake in the inputs (exit status 1), found before
// anything runs. where[i] names inputs[i] in the message.
func checkDeletions(inputs []*unstructured.Unstructured, where []string) error {
	type id struct {
		gvk schema.GroupVersionKind
		key object.Key
	}
	live := map[id]bool{}
	for i, obj := range inputs {
		k := id{obj.GroupVersionKind(), object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}}
		if obj.GetDeletionTimestamp() == nil || len(obj.GetFinalizers()) > 0 {
			live[k] = true
			continue
		}
		if !live[k] {
			return fmt.Errorf("%s: deletes %s %s, which no earlier input creates (or an earlier one deleted already)",
				where[i], k.gvk.Kind, k.key)
		}
		delete(live, k)
	}
	return nil
}

// leafErrors returns the errors joined in err (errors.Join, also nested
// and behind a wrapping prefix such as `operator "x": controller "y": `,
// which each leaf then carries), so that they are printed and counted one
// by one.
func leafErrors(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			if e != nil {
				out = append(out, leafErrors(e)...)
			}
		}
		return out
	}
	inner := errors.Unwrap(err)
	if inner == nil || !strings.HasSuffix(err.Error(), inner.Error()) {
		return []error{err}
	}
	leaves := leafErrors(inner)
	if len(leaves) < 2 {
		return []error{err}
	}
	prefix := strings.TrimSuffix(err.Error(), inner.Error())
	for i, e := range leaves {
		leaves[i] = fmt.Errorf("%s%w", prefix, e)
	}
	return leaves
}

func readOperators(path string) ([]*opv1a1.Operator, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	ops, err := operator.DecodeOperators(fh)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ops, nil
}
