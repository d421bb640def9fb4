package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var updateHooks = flag.Bool("update-hooks", false, "rewrite the expected outputs under testdata/hooks/")

// evalHooks runs dctl eval with the given options and returns stdout,
// stderr and the error.
func evalHooks(t *testing.T, o *evalOptions) (string, string, error) {
	t.Helper()
	if o.output == "" {
		o.output = "yaml"
	}
	var stdout, stderr bytes.Buffer
	err := runEval(t.Context(), o, &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

// golden compares got with testdata/hooks/<name> (rewritten with
// -update-hooks).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "hooks", name)
	if *updateHooks {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update-hooks to create it)", err)
	}
	if string(want) != got {
		t.Errorf("output differs from %s (run with -update-hooks and review the diff):\n%s", path, got)
	}
}

func example(parts ...string) string {
	return filepath.Join(append([]string{"..", "..", "examples"}, parts...)...)
}

// The inline pipeline PodService: the Pod and the Service as the manager
// creates them (controller-uid label, owner reference, last-applied
// annotation) and the parent's status after the follow-up syncs (it
// counts the children), with observedGeneration.
func TestEvalHooksPodServicePipeline(t *testing.T) {
	out, stderr, err := evalHooks(t, &evalOptions{
		operatorFiles: []string{example("metacontroller-podservice-pipeline", "controller.yaml")},
		inputFiles:    []string{example("metacontroller-podservice-pipeline", "podservice.yaml")},
	})
	if err != nil {
		t.Fatalf("dctl eval: %v\n%s", err, stderr)
	}
	golden(t, "podservice-pipeline.yaml", out)
	for _, want := range []string{"kind: Pod\n", "kind: Service\n", "observedGeneration: 1", "pods: 1", "services: 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// startPodServiceHook starts examples/metacontroller-podservice's Python
// hook on a free port and returns its base URL.
func startPodServiceHook(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is required: %v", err)
	}
	cmd := exec.Command(py, example("metacontroller-podservice", "podservice_hook.py"), "0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("python hook: %v", err)
	}
	var port int
	if _, err := fmt.Sscanf(strings.TrimSpace(line), "listening on %d", &port); err != nil {
		t.Fatalf("python hook printed %q", line)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", port)
}

// The webhook PodService with its Python hook running locally, reached
// through --hook-url: the output is what that hook returns, the same
// children and status as the inline pipeline's (the two hooks answer
// alike), and --show-requests prints the requests the hook received.
func TestEvalHooksPythonWebhook(t *testing.T) {
	base := startPodServiceHook(t)
	out, stderr, err := evalHooks(t, &evalOptions{
		operatorFiles: []string{example("metacontroller-podservice", "controller.yaml"), example("metacontroller-podservice", "crd.yaml")},
		inputFiles:    []string{example("metacontroller-podservice", "podservice.yaml")},
		hooks:         evalHookFlags{hookURLs: []string{"podservice-controller=" + base}, showRequests: true},
	})
	if err != nil {
		t.Fatalf("dctl eval: %v\n%s", err, stderr)
	}
	golden(t, "podservice-webhook.yaml", out)
	pipeline, err := os.ReadFile(filepath.Join("testdata", "hooks", "podservice-pipeline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if out != string(pipeline) {
		t.Errorf("the Python hook's rendering differs from the inline pipeline's:\n%s", out)
	}
	// Three syncs, as the manager makes them: create the children, report
	// them in the status, observe that nothing changes.
	resp, err := http.Get(base + "/calls")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var calls struct{ Calls int }
	if err := json.NewDecoder(resp.Body).Decode(&calls); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(stderr, "# compositecontroller/podservice-controller sync hook request for PodService default/web\n"); n != 3 || calls.Calls != 3 {
		t.Errorf("want 3 requests printed and served, got %d printed, %d served:\n%s", n, calls.Calls, stderr)
	}
	// The path of the spec's URL (/sync) is kept; the request body is the
	// hook API's.
	first := stderr[strings.Index(stderr, "\n")+1:]
	first = first[:strings.Index(first, "\n}\n")+2]
	var req struct {
		Controller map[string]any            `json:"controller"`
		Parent     map[string]any            `json:"parent"`
		Children   map[string]map[string]any `json:"children"`
		Finalizing *bool                     `json:"finalizing"`
	}
	if err := json.Unmarshal([]byte(first), &req); err != nil {
		t.Fatalf("first printed request: %v\n%s", err, first)
	}
	if req.Controller["kind"] != "CompositeController" || req.Parent["kind"] != "PodService" || req.Children["Pod.v1"] == nil || req.Finalizing == nil || *req.Finalizing {
		t.Errorf("first request: %s", first)
	}
	if !strings.Contains(first, `"url": "http://podservice-hook.metacontroller/sync"`) {
		t.Errorf("the request's controller is not the one written (URL overridden in it?):\n%s", first)
	}
}

// The DecoratorController example: the labelled ConfigMap gets its
// annotation, the backup copy is an attachment owned by it and marked
// with the decorator's name.
func TestEvalHooksDecorator(t *testing.T) {
	out, stderr, err := evalHooks(t, &evalOptions{
		operatorFiles: []string{example("metacontroller-decorator-pipeline", "controller.yaml")},
		inputFiles:    []string{example("metacontroller-decorator-pipeline", "configmap.yaml")},
	})
	if err != nil {
		t.Fatalf("dctl eval: %v\n%s", err, stderr)
	}
	golden(t, "decorator-pipeline.yaml", out)
	for _, want := range []string{"name: settings-backup", "backup.example.com/copy: settings-backup",
		"metacontroller.k8s.io/decorator-controller: configmap-backup", "kind: ConfigMap\n    name: settings\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// A parent with metadata.deletionTimestamp is finalized: the finalize
// hook is called (finalizing: true) with its children, its answer
// deletes them, and once it says finalized the controller's finalizer
// goes (the parent's other finalizer keeps it). A live parent of the same
// controller gets the finalizer and its Pod.
func TestEvalHooksFinalize(t *testing.T) {
	out, stderr, err := evalHooks(t, &evalOptions{
		operatorFiles: []string{filepath.Join("testdata", "hooks", "finalize-controller.yaml")},
		inputFiles:    []string{filepath.Join("testdata", "hooks", "deleting.yaml")},
		hooks:         evalHookFlags{showRequests: true},
	})
	if err != nil {
		t.Fatalf("dctl eval: %v\n%s", err, stderr)
	}
	golden(t, "finalize.yaml", out)
	if n := strings.Count(stderr, "# compositecontroller/podservice-finalize finalize hook request for PodService shop/web\n"); n != 2 {
		t.Errorf("want 2 finalize requests (with the Pod, then without), got %d:\n%s", n, stderr)
	}
	if n := strings.Count(stderr, "# compositecontroller/podservice-finalize finalize hook request for PodService shop/old\n"); n != 1 {
		t.Errorf("want 1 finalize request for the parent without children, got %d:\n%s", n, stderr)
	}
	if !strings.Contains(stderr, `"finalizing": true`) || !strings.Contains(stderr, "deleted: Pod shop/web-pod\n") {
		t.Errorf("stderr:\n%s", stderr)
	}
	for _, want := range []string{"- example.com/keep\n", "phase: Finalizing", "- metacontroller.io/compositecontroller-podservice-finalize\n", "name: live-pod"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "name: web-pod") {
		t.Errorf("the finalized parent's Pod is still there:\n%s", out)
	}
}

// An unreachable hook: exit status 2, the error names the controller, the
// hook and its URL; the other parents are still rendered.
func TestEvalHooksUnreachable(t *testing.T) {
	out, stderr, err := evalHooks(t, &evalOptions{
		operatorFiles: []string{example("metacontroller-podservice", "controller.yaml")},
		inputFiles:    []string{example("metacontroller-podservice", "podservice.yaml")},
		hooks:         evalHookFlags{hookURLs: []string{"podservice-controller/sync=http://127.0.0.1:1/sync"}},
	})
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 2 {
		t.Fatalf("want exit status 2, got %v", err)
	}
	want := "error: controller podservice-controller: sync hook (PodService default/web): spec.hooks.sync: Unavailable: POST http://127.0.0.1:1/sync: "
	if !strings.HasPrefix(stderr, want) || !strings.Contains(stderr, "connection refused") {
		t.Errorf("stderr:\n%s\nwant it to start with %q", stderr, want)
	}
	if strings.Contains(out, "kind: Pod\n") {
		t.Errorf("children rendered without an answer:\n%s", out)
	}
	// The same through the command line: the flags and the exit status.
	var stdout, errOut bytes.Buffer
	code := Execute([]string{"eval", "-f", example("metacontroller-podservice", "controller.yaml"),
		"-i", example("metacontroller-podservice", "podservice.yaml"),
		"--hook-url", "podservice-controller=http://127.0.0.1:1", "--show-requests"}, nil, &stdout, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "# compositecontroller/podservice-controller sync hook request for PodService default/web\n") ||
		!strings.Contains(errOut.String(), "error: controller podservice-controller: sync hook (PodService default/web): spec.hooks.sync: Unavailable: POST http://127.0.0.1:1/sync: ") {
		t.Errorf("dctl eval exit %d, stderr:\n%s", code, errOut.String())
	}
}

// Bad input: a hook controller mixed with an Operator, a malformed
// --hook-url, a controller naming an unknown resource, a hook answer with
// an undeclared child kind.
func TestEvalHooksBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mc := example("metacontroller-podservice-pipeline", "controller.yaml")
	ps := example("metacontroller-podservice-pipeline", "podservice.yaml")
	for _, tc := range []struct {
		name  string
		o     *evalOptions
		code  int
		error string
	}{{
		name:  "mixed",
		o:     &evalOptions{operatorFiles: []string{mc, example("pod-container-num-annotator", "operator.yaml")}},
		code:  1,
		error: "pod-container-num-annotator/operator.yaml: object 1 (Operator pod-container-num-annotator): with hook controllers (CompositeController, DecoratorController: metacontroller.k8s.io/v1alpha1), -f takes only them and CustomResourceDefinitions",
	}, {
		name:  "parent-in-f",
		o:     &evalOptions{operatorFiles: []string{mc, ps}},
		code:  1,
		error: "podservice.yaml: object 1 (PodService web): with hook controllers",
	}, {
		name:  "hook-url-unknown-controller",
		o:     &evalOptions{operatorFiles: []string{mc}, inputFiles: []string{ps}, hooks: evalHookFlags{hookURLs: []string{"podservice/sync=http://127.0.0.1:1"}}},
		code:  1,
		error: `hook URL "podservice/sync": no controller is named "podservice"`,
	}, {
		name:  "hook-url-not-http",
		o:     &evalOptions{operatorFiles: []string{mc}, inputFiles: []string{ps}, hooks: evalHookFlags{hookURLs: []string{"podservice-pipeline=ftp://x"}}},
		code:  1,
		error: `controllers[0] (CompositeController podservice-pipeline): hook URL of podservice-pipeline/sync: spec.hooks.sync.webhook.url: "ftp://x" is not an http(s) URL`,
	}, {
		name:  "hook-url",
		o:     &evalOptions{operatorFiles: []string{mc}, hooks: evalHookFlags{hookURLs: []string{"podservice-pipeline/resync=http://x"}}},
		code:  1,
		error: "--hook-url \"podservice-pipeline/resync=http://x\": the hook after \"podservice-pipeline/\" must be sync, finalize or customize",
	}, {
		name: "unknown-resource",
		o: &evalOptions{operatorFiles: []string{write("c.yaml", `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: c}
spec:
  parentResource: {apiVersion: example.com/v1, resource: widgets}
  hooks: {sync: {pipeline: {children: []}}}
`)}},
		code:  1,
		error: `controllers[0] (CompositeController c): spec.parentResource: resource "widgets" in "example.com/v1"`,
	}, {
		name: "undeclared-child",
		o: &evalOptions{operatorFiles: []string{write("d.yaml", `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: d}
spec:
  generateSelector: true
  parentResource: {apiVersion: examples.dcontroller.io/v1, resource: podservices}
  childResources: [{apiVersion: v1, resource: pods}]
  hooks:
    sync:
      pipeline:
        children: [{apiVersion: v1, kind: Secret, metadata: {name: x}}]
`)}, inputFiles: []string{ps}},
		code:  2,
		error: "controller d: sync hook (PodService default/web): spec.hooks.sync: InvalidResponse: children[0]: Secret.v1 is not a declared child resource",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, err := evalHooks(t, tc.o)
			if err == nil {
				t.Fatal("no error")
			}
			code := 1
			var ee *exitError
			if errors.As(err, &ee) {
				code = ee.code
			}
			if code != tc.code || !strings.Contains(err.Error()+"\n"+stderr, tc.error) {
				t.Errorf("exit %d, error %v\n%s\nwant exit %d and %q", code, err, stderr, tc.code, tc.error)
			}
		})
	}
}

// A customize hook: its rules select related objects among the inputs
// (names in the parent's namespace, a v1 customize hook), which the sync
// request carries; the hook is asked once per parent.
func TestEvalHooksCustomize(t *testing.T) {
	out, stderr, err := evalHooks(t, &evalOptions{
		operatorFiles: []string{filepath.Join("testdata", "hooks", "customize-controller.yaml")},
		inputFiles:    []string{filepath.Join("testdata", "hooks", "customize-input.yaml")},
		hooks:         evalHookFlags{showRequests: true},
	})
	if err != nil {
		t.Fatalf("dctl eval: %v\n%s", err, stderr)
	}
	golden(t, "customize-expected.yaml", out)
	for _, want := range []string{"related: 1\n", "color: blue\n", "name: web-merged\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(stderr, "# compositecontroller/configured customize hook request for PodService shop/web\n"); n != 1 {
		t.Errorf("want one customize request, got %d:\n%s", n, stderr)
	}
}
