package rgd

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestScanString(t *testing.T) {
	lit := func(s string, off int) Part { return Part{Text: s, Offset: off} }
	ex := func(s string, off int) Part { return Part{Expr: true, Text: s, Offset: off} }
	for _, tc := range []struct {
		name string
		in   string
		want []Part
		err  error
	}{
		{"empty", "", nil, nil},
		{"no expression", "nginx:1.27", []Part{lit("nginx:1.27", 0)}, nil},
		{"standalone", "${schema.spec.replicas}", []Part{ex("schema.spec.replicas", 0)}, nil},
		{"template", "${schema.spec.name}-svc", []Part{ex("schema.spec.name", 0), lit("-svc", 19)}, nil},
		{"two expressions", "${schema.spec.prefix}-${schema.spec.name}",
			[]Part{ex("schema.spec.prefix", 0), lit("-", 21), ex("schema.spec.name", 22)}, nil},
		{"map literal braces", `${{"app": schema.spec.name}}`, []Part{ex(`{"app": schema.spec.name}`, 0)}, nil},
		{"brace in a double-quoted string", `${"}" + x}`, []Part{ex(`"}" + x`, 0)}, nil},
		{"brace in a single-quoted string", `${'}' + x}`, []Part{ex(`'}' + x`, 0)}, nil},
		{"escaped quote in a string", `${"a\"}" + x}`, []Part{ex(`"a\"}" + x`, 0)}, nil},
		{"literal ${VAR} through a CEL string", `echo "Hello ${"${USER}"}"`,
			[]Part{lit(`echo "Hello `, 0), ex(`"${USER}"`, 12), lit(`"`, 24)}, nil},
		{"shell default form", `${"${VAR:-default}"}`, []Part{ex(`"${VAR:-default}"`, 0)}, nil},
		{"dollar without brace is text", "$VAR $(date) $1", []Part{lit("$VAR $(date) $1", 0)}, nil},
		{"double dollar is no escape", "$${x}", []Part{lit("$", 0), ex("x", 1)}, nil},
		{"unterminated is text", "${schema.spec.name", []Part{lit("${schema.spec.name", 0)}, nil},
		{"unterminated then an expression", `${"} ${x}`, []Part{lit(`${"} `, 0), ex("x", 5)}, nil},
		{"json in single quotes", `${json.unmarshal('{"k": "v"}').k}`, []Part{ex(`json.unmarshal('{"k": "v"}').k`, 0)}, nil},
		{"multiline", "${\n  a &&\n  b\n}", []Part{ex("\n  a &&\n  b\n", 0)}, nil},
		{"empty expression", "${}", []Part{ex("", 0)}, nil},
		{"nested expression", "${a + ${b}}", nil, ErrNestedExpression},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ScanString(tc.in)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("error %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

func TestParseFieldForms(t *testing.T) {
	for _, tc := range []struct {
		in         string
		standalone bool
		cel        string
	}{
		{"${schema.spec.replicas}", true, "schema.spec.replicas"},
		{"app-${schema.spec.name}", false, `"app-" + (schema.spec.name)`},
		{`host=${db.status.endpoint}:${db.status.port}`, false, `"host=" + (db.status.endpoint) + ":" + (db.status.port)`},
		{"${a}${b}", false, "(a) + (b)"},
		{"${a}\n", false, `(a) + "\n"`},
	} {
		f, err := ParseField("p", tc.in)
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		if f.Standalone != tc.standalone || f.CEL() != tc.cel {
			t.Errorf("%q: standalone %v CEL %q, want %v %q", tc.in, f.Standalone, f.CEL(), tc.standalone, tc.cel)
		}
	}
	if f, err := ParseField("p", "plain"); f != nil || err != nil {
		t.Errorf("plain string: %v %v", f, err)
	}
}

func TestParseStandalone(t *testing.T) {
	if src, err := ParseStandalone("spec.resources[0].includeWhen[0]", "${schema.spec.enabled}"); err != nil || src != "schema.spec.enabled" {
		t.Fatalf("got %q %v", src, err)
	}
	// A block scalar's trailing newline makes it a template (kro's rule).
	_, err := ParseStandalone("spec.resources[0].includeWhen[0]", "${schema.spec.enabled}\n")
	if err == nil || !strings.HasPrefix(err.Error(), "spec.resources[0].includeWhen[0]: must be exactly one ${...} expression") {
		t.Fatalf("got %v", err)
	}
}

func TestFindFieldsPaths(t *testing.T) {
	tmpl := map[string]any{
		"apiVersion": "apps/v1",
		"metadata": map[string]any{
			"name":   "${schema.spec.name}",
			"labels": map[string]any{"app.kubernetes.io/name": "${schema.spec.name}"},
		},
		"spec": map[string]any{
			"replicas": "${schema.spec.replicas}",
			"template": map[string]any{"spec": map[string]any{"containers": []any{
				map[string]any{"name": "web", "image": "${schema.spec.image}:latest", "ports": []any{map[string]any{"containerPort": int64(80)}}},
			}}},
		},
	}
	fs, err := FindFields(tmpl, "spec.resources[2].template")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range fs {
		got = append(got, f.Path)
	}
	want := []string{
		`spec.resources[2].template.metadata.labels["app.kubernetes.io/name"]`,
		"spec.resources[2].template.metadata.name",
		"spec.resources[2].template.spec.replicas",
		"spec.resources[2].template.spec.template.spec.containers[0].image",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	_, err = FindFields(map[string]any{"a": []any{"${x ${y}}"}}, "spec.resources[0].template")
	var e *Error
	if !errors.As(err, &e) || e.Path != "spec.resources[0].template.a[0]" {
		t.Fatalf("got %v", err)
	}
}

func TestScanStringBounded(t *testing.T) {
	// An unterminated opener scans to the end of the string; past the step
	// bound (longer than any Kubernetes object) the string is refused.
	s := `${"` + strings.Repeat("a", maxScanSteps)
	start := time.Now()
	_, err := ScanString(s)
	if err == nil || !strings.Contains(err.Error(), "too many unterminated") {
		t.Fatalf("got %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %v", d)
	}
}

// FuzzScanString checks that the scanner never panics, stays bounded, and
// that its parts put back together give the input.
func FuzzScanString(f *testing.F) {
	for _, s := range []string{"", "${a}", "x-${a}-${b}", `${"}"}`, `${'{'}`, "${", "${{", `${"${x}"}`, "$${a}", `${"\"}`, "${a ${b}}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		parts, err := ScanString(s)
		if err != nil {
			return
		}
		var b strings.Builder
		for _, p := range parts {
			if p.Offset != b.Len() {
				t.Fatalf("part %q at %d, want %d", p.Text, p.Offset, b.Len())
			}
			if p.Expr {
				b.WriteString("${" + p.Text + "}")
			} else {
				b.WriteString(p.Text)
			}
		}
		if b.String() != s {
			t.Fatalf("parts give %q, want %q", b.String(), s)
		}
	})
}
