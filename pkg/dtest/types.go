package dtest

import "encoding/json"

// APIVersion and Kind identify a test document.
const (
	APIVersion = "dcontroller.io/v1alpha1"
	Kind       = "Test"
)

// Test is one test: the operators under test and the steps run on them.
// Its YAML form is documented in docs/testing.md.
type Test struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   TestMeta `json:"metadata"`
	Spec       TestSpec `json:"spec"`

	// File is the path of the file the test was read from, as given to
	// Parse; Index is the 1-based number of its document in that file.
	File  string `json:"-"`
	Index int    `json:"-"`
}

// TestMeta names a test.
type TestMeta struct {
	// Name is the test's name in reports and the subject of -run.
	Name string `json:"name"`
}

// TestSpec is what a test runs.
type TestSpec struct {
	// Operators are the files holding the Operators (and kro
	// ResourceGraphDefinitions) under test, as `dctl eval -f` reads them;
	// a relative path is relative to the test file's directory.
	Operators []string `json:"operators"`
	// Steps run in order; each one's assertions see the targets computed
	// from the inputs of that step and of every step before it.
	Steps []Step `json:"steps"`
}

// Step changes the inputs, then checks the targets.
type Step struct {
	// Name describes the step in reports (optional).
	Name string `json:"name,omitempty"`
	// Apply are objects created, or updated when they exist, in order.
	Apply []Objects `json:"apply,omitempty"`
	// Delete are objects deleted, in order, after Apply.
	Delete []ObjectRef `json:"delete,omitempty"`
	// Expect are objects that must exist among the targets, each matched
	// partially (Match): only the fields it gives are compared.
	Expect []Objects `json:"expect,omitempty"`
	// Absent are objects that must not exist among the targets.
	Absent []ObjectRef `json:"absent,omitempty"`
	// Exactly are kinds whose objects must be exactly the names given.
	Exactly []KindSet `json:"exactly,omitempty"`
	// Errors are substrings of the errors the controllers are expected to
	// report in this step: each must occur in a reported error and each
	// reported error must contain one. Without it, a reported error fails
	// the step.
	Errors []string `json:"errors,omitempty"`
}

// Objects are objects given inline or in a file: exactly one of File and
// Object is set.
type Objects struct {
	// File is a YAML or JSON stream of objects (a v1 List's items count one
	// by one), relative to the test file's directory.
	File string `json:"file,omitempty"`
	// Object is one object, with apiVersion, kind and metadata.name.
	Object json.RawMessage `json:"object,omitempty"`
}

// ObjectRef names one object.
type ObjectRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Namespace is empty for a cluster-scoped object.
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// KindSet is every object of a kind, by name.
type KindSet struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Namespace, when set, restricts the set to the objects of that
	// namespace.
	Namespace string `json:"namespace,omitempty"`
	// Names are "namespace/name" (or "name" for a cluster-scoped object);
	// an empty list says that there is none. Required.
	Names []string `json:"names"`
}
