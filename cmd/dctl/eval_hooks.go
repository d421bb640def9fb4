package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"
	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/metacontroller"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/operator"
)

// evalHookFlags are the flags of dctl eval for hook controllers.
type evalHookFlags struct {
	hookURLs     []string
	showRequests bool
}

func (f *evalHookFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&f.hookURLs, "hook-url", nil,
		"hook controllers: send a controller's hooks to another URL, NAME=URL; NAME is the controller's name "+
			"(each of its hooks goes to URL's scheme, host and port, keeping a webhook's own path) or CONTROLLER/HOOK "+
			"(sync, finalize or customize: that hook goes to exactly URL); repeatable")
	cmd.Flags().BoolVar(&f.showRequests, "show-requests", false,
		"hook controllers: print each hook request sent (its JSON body) to stderr")
}

// hookURLs parses --hook-url NAME=URL flags.
func (f *evalHookFlags) urls() (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range f.hookURLs {
		name, u, ok := strings.Cut(kv, "=")
		if !ok || name == "" || u == "" {
			return nil, fmt.Errorf("--hook-url %q: want NAME=URL (NAME: a controller's name, or CONTROLLER/HOOK)", kv)
		}
		if c, h, ok := strings.Cut(name, "/"); ok && (c == "" || (h != "sync" && h != "finalize" && h != "customize")) {
			return nil, fmt.Errorf("--hook-url %q: the hook after %q must be sync, finalize or customize", kv, c+"/")
		}
		out[name] = u
	}
	return out, nil
}

// hookFiles are the CompositeControllers and DecoratorControllers of the
// -f files, and the CustomResourceDefinitions among them (which name the
// parent and child resources).
type hookFiles struct {
	controllers []client.Object
	crds        []*unstructured.Unstructured
}

// readHookControllers reads the -f files when they hold hook controllers
// (CompositeController, DecoratorController); nil when none does. Hook
// controllers do not mix with Operators or ResourceGraphDefinitions in
// one run; CustomResourceDefinitions may come with them. Controllers are
// decoded strictly (an unknown field is an error). Errors name the file
// and the object.
func readHookControllers(files []string) (*hookFiles, error) {
	type doc struct {
		where string
		obj   *unstructured.Unstructured
	}
	var docs []doc
	hooks, others := 0, ""
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		objs, err := operator.DecodeObjects(fh)
		fh.Close()
		if err != nil {
			// Left to the Operator reader, which reports it.
			return nil, nil
		}
		for i, obj := range objs {
			where := fmt.Sprintf("%s: object %d (%s %s)", f, i+1, obj.GetKind(), obj.GetName())
			docs = append(docs, doc{where, obj})
			switch gvk := obj.GroupVersionKind(); {
			case gvk.GroupVersion() == mcv1a1.GroupVersion && (gvk.Kind == "CompositeController" || gvk.Kind == "DecoratorController"):
				hooks++
			case gvk.Group == "apiextensions.k8s.io" && gvk.Kind == "CustomResourceDefinition":
			case others == "":
				others = where
			}
		}
	}
	if hooks == 0 {
		return nil, nil
	}
	if others != "" {
		return nil, fmt.Errorf("%s: with hook controllers (CompositeController, DecoratorController: %s), -f takes only them and CustomResourceDefinitions: "+
			"Operators (%s) and ResourceGraphDefinitions (%s) run in an eval of their own, the objects to run on are inputs (-i)",
			others, mcv1a1.GroupVersion, opv1a1.GroupVersion, krov1a1.GroupVersion)
	}
	out := &hookFiles{}
	for _, d := range docs {
		raw, err := json.Marshal(d.obj.Object)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.where, err)
		}
		var into client.Object
		switch d.obj.GetKind() {
		case "CompositeController":
			into = &mcv1a1.CompositeController{}
		case "DecoratorController":
			into = &mcv1a1.DecoratorController{}
		default:
			out.crds = append(out.crds, d.obj)
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(into); err != nil {
			return nil, fmt.Errorf("%s: %w", d.where, err)
		}
		out.controllers = append(out.controllers, into)
	}
	return out, nil
}

// runEvalHooks is dctl eval of hook controllers: metacontroller.Render of
// the inputs, its objects printed as runEval prints targets, deletions
// and (--show-requests) the hook requests on stderr. Invalid controllers
// or inputs exit with status 1, failed syncs (a hook that cannot be
// reached or answers wrongly) with 2.
func runEvalHooks(ctx context.Context, o *evalOptions, hf *hookFiles, stdout, stderr io.Writer) error {
	if o.trace {
		return fmt.Errorf("--trace: hook controllers have no pipeline stages to trace; --show-requests prints their hook requests")
	}
	urls, err := o.hooks.urls()
	if err != nil {
		return err
	}
	inputs := append([]*unstructured.Unstructured(nil), hf.crds...)
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
		for j, obj := range objs {
			if err := object.ValidateMetadata(obj, obj.GetNamespace() != ""); err != nil {
				return fmt.Errorf("%s: object %d: %w", f, j+1, err)
			}
		}
		inputs = append(inputs, objs...)
	}
	opts := metacontroller.RenderOptions{HookURLs: urls}
	if o.hooks.showRequests {
		opts.OnCall = func(c metacontroller.Call) {
			var buf bytes.Buffer
			if json.Indent(&buf, c.Request, "", "  ") != nil {
				buf.Reset()
				buf.Write(c.Request)
			}
			fmt.Fprintf(stderr, "# %s %s hook request for %s\n%s\n", c.Controller, c.Hook, c.Parent, buf.Bytes())
		}
	}
	res, rerr := metacontroller.Render(ctx, hf.controllers, inputs, opts)
	if res == nil {
		return rerr
	}
	if err := writeObjects(stdout, o.output, res.Objects); err != nil {
		return err
	}
	for _, d := range res.Deleted {
		fmt.Fprintf(stderr, "deleted: %s %s\n", d.GetKind(), nsName(d))
	}
	if rerr != nil {
		all := leafErrors(rerr)
		for _, e := range all {
			fmt.Fprintf(stderr, "error: %v\n", e)
		}
		return &exitError{code: 2, err: fmt.Errorf("%d error(s) while running the controllers", len(all))}
	}
	return nil
}

func nsName(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}
