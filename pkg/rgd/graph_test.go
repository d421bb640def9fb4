package rgd

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// obj is a minimal template of a kind with the given metadata.name and
// extra top-level fields.
func obj(kind, name string, extra map[string]any) map[string]any {
	o := map[string]any{"apiVersion": "v1", "kind": kind, "metadata": map[string]any{"name": name}}
	for k, v := range extra {
		o[k] = v
	}
	return o
}

func res(id string, tmpl map[string]any) ResourceInput {
	return ResourceInput{ID: id, Template: tmpl}
}

// TestGraphWebApp builds a graph in the shape of a web application: a
// Deployment ready when its replicas are available, a Service naming it,
// an optional Ingress naming the Service, status from the Deployment and
// the Ingress.
func TestGraphWebApp(t *testing.T) {
	in := GraphInput{
		Resources: []ResourceInput{
			{ID: "deployment", ReadyWhen: []string{"${deployment.spec.replicas == deployment.status.availableReplicas}"},
				Template: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
					"metadata": map[string]any{"name": "${schema.spec.name}", "labels": map[string]any{"app.kubernetes.io/name": "${schema.spec.name}"}},
					"spec":     map[string]any{"replicas": "${schema.spec.replicas}"}}},
			{ID: "service", IncludeWhen: []string{"${schema.spec.service.enabled}"},
				Template: obj("Service", "${deployment.metadata.name}", map[string]any{"spec": map[string]any{"ports": []any{map[string]any{"targetPort": "${schema.spec.port}"}}}})},
			{ID: "ingress", IncludeWhen: []string{"${schema.spec.ingress.enabled}"},
				Template: obj("Ingress", "${deployment.metadata.name}-ing", map[string]any{"spec": map[string]any{"backend": "${service.metadata.name}"}})},
		},
		Status: map[string]any{
			"availableReplicas": "${deployment.status.availableReplicas}",
			"url":               "${ingress.status.loadBalancer.ingress[0].hostname}",
			"summary":           map[string]any{"name": "${schema.spec.name}"},
		},
	}
	g, err := BuildGraph(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"deployment", "service", "ingress"}; !reflect.DeepEqual(g.Order, want) {
		t.Fatalf("order %v, want %v", g.Order, want)
	}
	if d := g.Node("ingress").DependsOn; !reflect.DeepEqual(d, []string{"deployment", "service"}) {
		t.Fatalf("ingress depends on %v", d)
	}
	dep := g.Node("deployment")
	var paths []string
	for _, f := range dep.Fields {
		paths = append(paths, f.Path+"="+string(f.Kind))
	}
	want := []string{
		`spec.resources[0].template.metadata.labels["app.kubernetes.io/name"]=static`,
		"spec.resources[0].template.metadata.name=static",
		"spec.resources[0].template.spec.replicas=static",
	}
	if !reflect.DeepEqual(paths, want) {
		t.Fatalf("fields %q, want %q", paths, want)
	}
	if f := g.Node("service").Fields[0]; f.Kind != Dynamic || f.Rel != "metadata.name" {
		t.Fatalf("service name field %+v", f)
	}
	if f := g.Node("ingress").Fields[0]; f.Standalone || f.CEL() != `(deployment.metadata.name) + "-ing"` {
		t.Fatalf("ingress name field %+v", f)
	}
	var status []string
	for _, f := range g.Status {
		status = append(status, f.Path+"="+string(f.Kind))
	}
	if want := []string{"spec.schema.status.availableReplicas=dynamic", "spec.schema.status.summary.name=static", "spec.schema.status.url=dynamic"}; !reflect.DeepEqual(status, want) {
		t.Fatalf("status %q, want %q", status, want)
	}
}

// TestGraphOrder checks kro's topological order: dependencies first, ties
// by declaration order, whatever order the resources are declared in.
func TestGraphOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []ResourceInput
		want []string
	}{
		{"parallel", []ResourceInput{res("api", obj("A", "${schema.spec.name}-api", nil)), res("worker", obj("A", "w", nil)), res("cron", obj("A", "c", nil))},
			[]string{"api", "worker", "cron"}},
		{"chain declared backwards", []ResourceInput{
			res("service", obj("S", "${deployment.metadata.name}", nil)),
			res("deployment", obj("D", "${configmap.metadata.name}", nil)),
			res("configmap", obj("C", "cm", nil))},
			[]string{"configmap", "deployment", "service"}},
		{"diamond", []ResourceInput{
			res("app", obj("D", "${database.status.endpoint}-${cache.status.endpoint}", nil)),
			res("database", obj("P", "${schema.spec.name}-db", nil)),
			res("cache", obj("R", "${schema.spec.name}-cache", nil)),
			res("audit", obj("A", "audit", nil))},
			[]string{"database", "cache", "app", "audit"}},
		{"a later root waits for nothing", []ResourceInput{
			res("b", obj("B", "${a.metadata.name}", nil)),
			res("c", obj("C", "c", nil)),
			res("a", obj("A", "a", nil))},
			[]string{"c", "a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := BuildGraph(GraphInput{Resources: tc.in})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g.Order, tc.want) {
				t.Fatalf("order %v, want %v", g.Order, tc.want)
			}
		})
	}
}

func TestGraphCollections(t *testing.T) {
	in := GraphInput{Resources: []ResourceInput{
		{ID: "workerPods", ForEach: []map[string]string{{"worker": "${schema.spec.workers}"}, {"zone": "${config.data.?zones.orValue([])}"}},
			ReadyWhen: []string{"${each.status.phase == 'Running'}"},
			Template:  obj("Pod", "${schema.metadata.name + '-' + worker + '-' + zone}", map[string]any{"spec": map[string]any{"nodeSelector": "${schema.spec.pin ? {'zone': zone} : omit()}"}})},
		{ID: "config", ExternalRef: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "${schema.spec.configName}"}}},
		{ID: "teamConfigs", ExternalRef: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"team": "a"}}}}},
		{ID: "summary", Template: obj("ConfigMap", "${schema.metadata.name}-summary", map[string]any{"data": map[string]any{
			"pods":  "${workerPods.map(p, p.metadata.name).join(', ')}",
			"teams": "${string(size(teamConfigs))}"}})},
		{ID: "backups", ForEach: []map[string]string{{"pod": "${workerPods}"}},
			Template: obj("CronJob", "${pod.metadata.name}-backup", nil)},
	}}
	g, err := BuildGraph(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"config", "workerPods", "teamConfigs", "summary", "backups"}; !reflect.DeepEqual(g.Order, want) {
		t.Fatalf("order %v, want %v", g.Order, want)
	}
	w := g.Node("workerPods")
	if !w.Collection || len(w.ForEach) != 2 || w.ForEach[1].Path != "spec.resources[0].forEach[1].zone" {
		t.Fatalf("workerPods %+v", w)
	}
	if w.Fields[0].Kind != Iteration {
		t.Fatalf("name field kind %s", w.Fields[0].Kind)
	}
	if !g.Node("teamConfigs").Collection || g.Node("config").Collection || !g.Node("config").External {
		t.Fatal("external reference kinds")
	}
}

func TestGraphErrors(t *testing.T) {
	cm := func(name string) map[string]any { return obj("ConfigMap", name, nil) }
	for _, tc := range []struct {
		name string
		in   GraphInput
		want string
	}{
		{"cycle", GraphInput{Resources: []ResourceInput{res("a", cm("${b.metadata.name}")), res("b", cm("${a.metadata.name}"))}},
			"spec.resources: resources form a cycle: a -> b -> a"},
		{"longer cycle after a root", GraphInput{Resources: []ResourceInput{
			res("base", cm("r")), res("x", cm("${z.metadata.name}")), res("y", cm("${x.metadata.name}-${base.metadata.name}")), res("z", cm("${y.metadata.name}"))}},
			"spec.resources: resources form a cycle: x -> z -> y -> x"},
		{"cycle through includeWhen", GraphInput{Resources: []ResourceInput{
			{ID: "a", IncludeWhen: []string{"${b.status.ready}"}, Template: cm("a")}, res("b", cm("${a.metadata.name}"))}},
			"spec.resources: resources form a cycle: a -> b -> a"},
		{"self reference", GraphInput{Resources: []ResourceInput{res("a", cm("${a.metadata.uid}"))}},
			"spec.resources[0].template.metadata.name: a resource cannot reference itself (a)"},
		{"unknown identifier", GraphInput{Resources: []ResourceInput{res("a", obj("ConfigMap", "x", map[string]any{"data": map[string]any{"k": "${servce.metadata.name}"}}))}},
			"spec.resources[0].template.data.k: unknown identifier servce"},
		{"unknown identifier in status", GraphInput{Resources: []ResourceInput{res("a", cm("x"))}, Status: map[string]any{"x": "${b.status.y}"}},
			"spec.schema.status.x: unknown identifier b"},
		{"each outside readyWhen", GraphInput{Resources: []ResourceInput{res("a", cm("${each.x}"))}},
			"spec.resources[0].template.metadata.name: each is only available in readyWhen of a collection"},
		{"iterator of another resource", GraphInput{Resources: []ResourceInput{
			{ID: "a", ForEach: []map[string]string{{"item2": "${schema.spec.list}"}}, Template: cm("${item2}")}, res("b", cm("${item2}"))}},
			"spec.resources[1].template.metadata.name: iterator item2 is not in scope here"},
		{"iterators reading each other", GraphInput{Resources: []ResourceInput{
			{ID: "a", ForEach: []map[string]string{{"x": "${schema.spec.l}"}, {"y": "${x}"}}, Template: cm("${x}-${y}")}}},
			"spec.resources[0].forEach[1].y: iterator x is not in scope here"},
		{"iterator not in identity", GraphInput{Resources: []ResourceInput{
			{ID: "a", ForEach: []map[string]string{{"x": "${schema.spec.l}"}, {"y": "${schema.spec.m}"}}, Template: obj("ConfigMap", "${x}", map[string]any{"data": map[string]any{"y": "${y}"}})}}},
			"spec.resources[0].forEach: every iterator must be used in metadata.name or metadata.namespace so that each item is its own object; not used: y"},
		{"readyWhen names another resource", GraphInput{Resources: []ResourceInput{
			res("a", cm("a")), {ID: "b", ReadyWhen: []string{"${a.status.ready}"}, Template: cm("b")}}},
			"spec.resources[1].readyWhen[0]: may only reference b, not a"},
		{"readyWhen names schema", GraphInput{Resources: []ResourceInput{{ID: "b", ReadyWhen: []string{"${schema.spec.replicas > 3}"}, Template: cm("b")}}},
			"spec.resources[0].readyWhen[0]: may only reference b, not schema"},
		{"collection readyWhen names the id", GraphInput{Resources: []ResourceInput{
			{ID: "pods", ForEach: []map[string]string{{"w": "${schema.spec.l}"}}, ReadyWhen: []string{"${pods.all(p, true)}"}, Template: cm("${w}")}}},
			"spec.resources[0].readyWhen[0]: may only reference each, not pods"},
		{"readyWhen not a bool", GraphInput{Resources: []ResourceInput{{ID: "b", ReadyWhen: []string{"${'yes'}"}, Template: cm("b")}}},
			"spec.resources[0].readyWhen[0]: must return a bool, got string"},
		{"includeWhen not standalone", GraphInput{Resources: []ResourceInput{{ID: "b", IncludeWhen: []string{"${schema.spec.on}\n"}, Template: cm("b")}}},
			"spec.resources[0].includeWhen[0]: must be exactly one ${...} expression"},
		{"omit in includeWhen", GraphInput{Resources: []ResourceInput{{ID: "b", IncludeWhen: []string{"${omit()}"}, Template: cm("b")}}},
			"spec.resources[0].includeWhen[0]: omit() can only be used in resource template fields"},
		{"omit in the name", GraphInput{Resources: []ResourceInput{res("b", cm("${omit()}"))}},
			"spec.resources[0].template.metadata.name: omit() can only be used in resource template fields"},
		{"schema status", GraphInput{Resources: []ResourceInput{res("b", cm("${schema.status.x}"))}},
			"spec.resources[0].template.metadata.name: schema.status is not readable"},
		{"refused function", GraphInput{Resources: []ResourceInput{res("b", cm("x"))}, Status: map[string]any{"c": "${runtime.condition(schema, 'Ready')}"}},
			"spec.schema.status.c: function runtime.condition is not supported"},
		{"status conditions", GraphInput{Resources: []ResourceInput{res("b", cm("x"))}, Status: map[string]any{"conditions": []any{"${x}"}}},
			"spec.schema.status.conditions: custom status conditions are not supported"},
		{"status literal", GraphInput{Resources: []ResourceInput{res("b", cm("x"))}, Status: map[string]any{"a": map[string]any{"b": "fixed"}}},
			"spec.schema.status.a.b: a status field must be an expression"},
		{"status constant", GraphInput{Resources: []ResourceInput{res("b", cm("x"))}, Status: map[string]any{"a": "${1 + 1}"}},
			"spec.schema.status.a: a status field must reference schema or a resource"},
		{"syntax", GraphInput{Resources: []ResourceInput{res("b", obj("ConfigMap", "x", map[string]any{"data": map[string]any{"k": "${schema.spec.}"}}))}},
			"spec.resources[0].template.data.k: CEL syntax"},
		{"nested expression", GraphInput{Resources: []ResourceInput{res("b", cm("${a ${b}}"))}},
			`spec.resources[0].template.metadata.name: offset 4: nested "${" outside a string literal`},
		{"bad id", GraphInput{Resources: []ResourceInput{res("My-app", cm("x"))}},
			`spec.resources[0].id: id "My-app" must be lowerCamelCase`},
		{"reserved id", GraphInput{Resources: []ResourceInput{res("schema", cm("x"))}},
			`spec.resources[0].id: id "schema" is a reserved word`},
		{"duplicate id", GraphInput{Resources: []ResourceInput{res("a", cm("x")), res("a", cm("y"))}},
			`spec.resources[1].id: duplicate resource id "a"`},
		{"template and externalRef", GraphInput{Resources: []ResourceInput{{ID: "a", Template: cm("x"), ExternalRef: cm("y")}}},
			"spec.resources[0]: template and externalRef are exclusive"},
		{"neither", GraphInput{Resources: []ResourceInput{{ID: "a"}}},
			"spec.resources[0]: one of template or externalRef is required"},
		{"no kind", GraphInput{Resources: []ResourceInput{res("a", map[string]any{"apiVersion": "v1", "metadata": map[string]any{}})}},
			"spec.resources[0].template.kind: a non-empty string is required"},
		{"forEach two entries", GraphInput{Resources: []ResourceInput{{ID: "a", ForEach: []map[string]string{{"x": "${[1]}", "y": "${[2]}"}}, Template: cm("x")}}},
			"spec.resources[0].forEach[0]: must map exactly one iterator name to an expression, got 2 entries"},
		{"iterator named like a resource", GraphInput{Resources: []ResourceInput{{ID: "a", ForEach: []map[string]string{{"b": "${[1]}"}}, Template: cm("${b}")}, res("b", cm("b"))}},
			`spec.resources[0].forEach[0]: iterator name "b" is also a resource id`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := BuildGraph(tc.in)
			var e *Error
			if !errors.As(err, &e) || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("got %v\nwant %s", err, tc.want)
			}
		})
	}
}
