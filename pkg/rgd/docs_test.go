package rgd

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDocs checks docs/kro.md against the code: its example RGD compiles
// into the CRD it describes, every error it quotes is the error of an
// input, and its marker table lists exactly the markers the parser knows.
func TestDocs(t *testing.T) {
	b, err := os.ReadFile("../../docs/kro.md")
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)

	start := strings.Index(page, "```yaml\n")
	end := strings.Index(page[start+8:], "```")
	crd, err := CRD(decodeRGD(t, page[start+8:start+8+end]))
	if err != nil {
		t.Fatalf("the page's RGD: %v", err)
	}
	if crd.Name != "webapplications.mycompany.io" || crd.Spec.Names.ListKind != "WebApplicationList" ||
		crd.Spec.Names.Singular != "webapplication" || crd.Spec.Versions[0].Name != "v1alpha1" || crd.Spec.Versions[0].Subresources.Status == nil {
		t.Errorf("the page's RGD gives %s %+v", crd.Name, crd.Spec.Names)
	}

	for _, tc := range []struct{ schema, err string }{
		{"{apiVersion: v1, kind: A, spec: {replicas: strin}}", `spec.schema.spec.replicas: unknown type "strin"`},
		{"{apiVersion: v1, kind: A, spec: {replicas: integer | minLength=1}}", "spec.schema.spec.replicas: marker minLength: applies to strings, not an integer"},
		{"{apiVersion: v1, kind: A, types: {Person: {employer: Company}, Company: {employees: '[]Person'}}}",
			"spec.schema.types.Company: custom types form a cycle: Company -> Person -> Company"},
		{`{apiVersion: v1, kind: A, spec: {mode: 'string | enum="debug,info" default=trace'}}`,
			`spec.schema.spec.mode: the API server would refuse the generated CRD: default: Unsupported value: "trace": supported values: "debug", "info"`},
	} {
		_, err := CRD(decodeRGD(t, "spec: {schema: "+tc.schema+"}"))
		if err == nil || err.Error() != tc.err {
			t.Errorf("%s: got %v, want %s", tc.schema, err, tc.err)
		}
		if !strings.Contains(page, "\n"+tc.err+"\n") {
			t.Errorf("docs/kro.md does not quote the error %q", tc.err)
		}
	}

	documented := map[string]bool{}
	table := page[strings.Index(page, "| Marker |"):]
	table = table[:strings.Index(table, "\n\n")]
	for _, m := range regexp.MustCompile("`([a-zA-Z]+)=").FindAllStringSubmatch(table, -1) {
		documented[m[1]] = true
	}
	for k := range markerKeys {
		if !documented[k] {
			t.Errorf("docs/kro.md's marker table lacks %s", k)
		}
	}
	for k := range documented {
		if !markerKeys[k] {
			t.Errorf("docs/kro.md's marker table lists %s, which the parser does not know", k)
		}
	}
}
