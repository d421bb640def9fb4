package rgd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/operator"
)

// TestCompileExamples compiles every example RGD into its Operator,
// compares the Operator with its golden file (<name>.operator.yaml; run
// with -update to rewrite them and review the diff) and loads it as the
// runtime does, so the pipelines compile.
func TestCompileExamples(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "examples", "*.rgd.yaml"))
	more, _ := filepath.Glob(filepath.Join("testdata", "compile", "*.rgd.yaml"))
	files = append(files, more...)
	if len(files) < 10 {
		t.Fatalf("found %d example RGDs", len(files))
	}
	// The schema examples keep only some resources; one's status reads a
	// resource it left out.
	wantErr := map[string]string{
		"vote-app.rgd.yaml": "spec.schema.status.serviceName: unknown identifier service",
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			r := decodeRGD(t, string(src))
			c, err := Compile(r)
			if want, ok := wantErr[filepath.Base(f)]; ok {
				if err == nil || err.Error() != want {
					t.Fatalf("got error %v, want %s", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.CRD == nil || c.Operator.Name != OperatorName(r.Name) {
				t.Fatalf("incomplete result %+v", c)
			}
			if _, err := operator.NewOffline([]*opv1a1.Operator{c.Operator}, operator.OfflineOptions{}); err != nil {
				t.Fatalf("the runtime refuses the compiled Operator: %v", err)
			}
			got, err := yaml.Marshal(c.Operator)
			if err != nil {
				t.Fatal(err)
			}
			golden := strings.TrimSuffix(f, ".rgd.yaml") + ".operator.yaml"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if string(got) != string(want) {
				t.Errorf("Operator differs from %s (run with -update and review the diff):\n%s", golden, got)
			}
		})
	}
}
