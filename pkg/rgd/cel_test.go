package rgd

import (
	"context"
	"errors"
	"github.com/dcontroller/dcontroller/pkg/expression/celkro"
	"reflect"
	"strings"
	"testing"
	"time"
)

// celVars is an instance and observed resources as the runtime binds them.
func celVars() map[string]any {
	return map[string]any{
		"schema": map[string]any{
			"metadata": map[string]any{"name": "my-app", "namespace": "default", "uid": "0b7a3c1e-5f0d-4a57-9a9a-0e1f2d3c4b5a"},
			"spec": map[string]any{
				"name": "awesome-app", "replicas": int64(3), "env": "prod", "image": "nginx",
				"tags":        []any{"b", "a", "b", "c"},
				"ports":       []any{int64(80), int64(443)},
				"extraLabels": map[string]any{"team": "web", "app": "override"},
				"jsonConfig":  `{"database": {"host": "db.local", "port": 5432}}`,
				"fqdn":        "a.b.c.example.com",
				"password":    "s3cret",
				"items":       []any{"app", "db"},
				"podSpec":     map[string]any{"securityContext": map[string]any{"fsGroup": int64(2000)}},
				"version":     "v1.2",
			},
		},
		"deployment": map[string]any{
			"metadata": map[string]any{"name": "web", "labels": map[string]any{"app": "web"}},
			"spec":     map[string]any{"replicas": int64(3)},
			"status": map[string]any{
				"availableReplicas": int64(3),
				"conditions": []any{
					map[string]any{"type": "Available", "status": "True"},
					map[string]any{"type": "Progressing", "status": "False"},
				},
			},
		},
		"config":     map[string]any{"data": map[string]any{"LOG_LEVEL": "debug"}},
		"workerPods": []any{map[string]any{"metadata": map[string]any{"name": "w-0"}, "status": map[string]any{"phase": "Running"}}, map[string]any{"metadata": map[string]any{"name": "w-1"}, "status": map[string]any{"phase": "Pending"}}},
	}
}

func testEnv(t *testing.T) *Env {
	t.Helper()
	env, err := NewEnv(Declarations{Resources: []string{"deployment", "config"}, Collections: []string{"workerPods"}})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// TestCELDocumentedForms evaluates the expression forms and library
// functions kro's docs show (03-cel-expressions.md, 04-cel-libraries.md).
func TestCELDocumentedForms(t *testing.T) {
	env := testEnv(t)
	for _, tc := range []struct {
		src  string
		want any
	}{
		// Referencing data, field paths, indexing.
		{`schema.spec.name`, "awesome-app"},
		{`schema.spec.replicas`, int64(3)},
		{`deployment.status.conditions[0].type`, "Available"},
		{`deployment.metadata.labels`, map[string]any{"app": "web"}},
		// The optional operator.
		{`config.data.?DATABASE_URL`, nil},
		{`config.data.?LOG_LEVEL.orValue("info")`, "debug"},
		{`config.data.?MAX.orValue("100")`, "100"},
		{`schema.spec.?replicas.orValue(1)`, int64(3)},
		{`deployment.status.?readyReplicas.orValue(0) > 0`, false},
		// Common patterns.
		{`schema.spec.env == "prod" ? "nginx:stable" : "nginx:latest"`, "nginx:stable"},
		{`{"app": schema.spec.name, "env": schema.spec.env}`, map[string]any{"app": "awesome-app", "env": "prod"}},
		{`string(schema.spec.replicas)`, "3"},
		{`"arn:aws:iam::%s:role/%s".format(["123", "admin"])`, "arn:aws:iam::123:role/admin"},
		{`deployment.status.conditions.filter(c, c.status == "True").map(c, c.type)`, []any{"Available"}},
		{`deployment.status.conditions.exists(c, c.type == "Available" && c.status == "True")`, true},
		{`workerPods.map(p, p.metadata.name).join(", ")`, "w-0, w-1"},
		{`size(workerPods.filter(w, w.status.phase == "Running"))`, int64(1)},
		{`workerPods.all(w, w.status.phase == "Running")`, false},
		{`schema.spec.tags.sortBy(t, t)`, []any{"a", "b", "b", "c"}},
		// Two-variable comprehensions.
		{`{"cpu": 2, "memory": 4}.transformMap(k, v, v * 2)`, map[string]any{"cpu": int64(4), "memory": int64(8)}},
		{`{"a": 1, "b": 5, "c": 3}.transformMap(k, v, v > 1, v * 10)`, map[string]any{"b": int64(50), "c": int64(30)}},
		{`{"us-east-1": "primary", "eu-west-1": "secondary"}.transformMapEntry(k, v, {v: k})`, map[string]any{"primary": "us-east-1", "secondary": "eu-west-1"}},
		{`schema.spec.items.transformMapEntry(i, v, {v: string(i)})`, map[string]any{"app": "0", "db": "1"}},
		{`{"APP": "nginx"}.transformList(k, v, k + "=" + v)`, []any{"APP=nginx"}},
		{`{"hello": "world", "taco": "bell"}.all(k, v, k != v)`, true},
		{`[1, 2].exists(i, v, i == 1 && v == 2)`, true},
		// kro: hash, json, random, maps, index mutation.
		{`"%x".format([hash.sha256("abc")])`, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{`"%x".format([hash.fnv64a("")])`, "cbf29ce484222325"},
		{`"%x".format([hash.md5("abc")])`, "900150983cd24fb0d6963f7d28e17f72"},
		{`base64.encode(hash.fnv64a(""))`, "y/Kc5IQiIyU="},
		{`json.unmarshal(schema.spec.jsonConfig).database.host`, "db.local"},
		{`json.unmarshal('{"exampleJSONKey": "exampleJSONValue"}').exampleJSONKey`, "exampleJSONValue"},
		{`json.marshal({"name": schema.spec.name, "replicas": schema.spec.replicas})`, `{"name":"awesome-app","replicas":3}`},
		{`json.marshal([1, "a", true, null])`, `[1,"a",true,null]`},
		// The seeded values were computed apart (a Python script of the
		// algorithm seededString and seededInt document).
		{`random.seededString(10, "seed")`, "qakd42wvqa"},
		{`random.seededString(3, "seed") == random.seededString(3, "seed")`, true},
		{`random.seededInt(30000, 32768, "seed")`, int64(32522)},
		{`{"app": schema.spec.name, "managed-by": "kro"}.merge(schema.spec.extraLabels)`, map[string]any{"app": "override", "managed-by": "kro", "team": "web"}},
		{`{"securityContext": {"runAsNonRoot": true}}.deepMerge(schema.spec.podSpec)`, map[string]any{"securityContext": map[string]any{"runAsNonRoot": true, "fsGroup": int64(2000)}}},
		{`lists.setAtIndex(schema.spec.tags, 1, "new")`, []any{"b", "new", "b", "c"}},
		{`lists.insertAtIndex(schema.spec.items, 0, "first")`, []any{"first", "app", "db"}},
		{`lists.insertAtIndex(schema.spec.items, 2, "last")`, []any{"app", "db", "last"}},
		{`lists.removeAtIndex(schema.spec.ports, 0)`, []any{int64(443)}},
		{`schema.spec.env == "prod" ? {"kubernetes.io/hostname": "n1"} : omit()`, map[string]any{"kubernetes.io/hostname": "n1"}},
		{`schema.spec.env == "dev" ? {"kubernetes.io/hostname": "n1"} : omit()`, Omit{}},
		// cel-go strings, lists, encoders.
		{`schema.spec.fqdn.split(".")[0]`, "a"},
		{`schema.spec.fqdn.split(".").slice(0, 1).join(".")`, "a"},
		{`schema.spec.name.substring(0, 5)`, "aweso"},
		{`"Hello".lowerAscii() + "hello".upperAscii()`, "helloHELLO"},
		{`schema.spec.fqdn.indexOf(":") >= 0`, false},
		{`"a_b".replace("_", "-")`, "a-b"},
		{`"  x ".trim()`, "x"},
		{`"abc".reverse()`, "cba"},
		{`strings.quote("a\"b")`, `"a\"b"`},
		{`schema.spec.tags.sort().distinct()`, []any{"a", "b", "c"}},
		{`[[1, 2], [3]].flatten()`, []any{int64(1), int64(2), int64(3)}},
		{`lists.range(3)`, []any{int64(0), int64(1), int64(2)}},
		{`[1, 2, 3].reverse()`, []any{int64(3), int64(2), int64(1)}},
		{`base64.encode(bytes(schema.spec.password))`, "czNjcmV0"},
		{`string(base64.decode("czNjcmV0"))`, "s3cret"},
		{`cel.bind(n, schema.spec.name, n + "-" + n)`, "awesome-app-awesome-app"},
		// Kubernetes libraries.
		{`url("https://example.com:80/path").getHostname()`, "example.com"},
		{`isURL("https://example.com")`, true},
		{`"v1.2.3 and v4.5.6".findAll('[0-9]+\\.[0-9]+\\.[0-9]+')`, []any{"1.2.3", "4.5.6"}},
		{`schema.spec.name.matches('^[a-z][a-z0-9-]*$')`, true},
		{`quantity("500Mi").isLessThan(quantity("1Gi")) ? "small" : "large"`, "small"},
		{`quantity("1Gi").asInteger()`, int64(1073741824)},
		{`[100, 200, 300].sum()`, int64(600)},
		{`string([100, 200, 300].sum())`, "600"},
		{`schema.spec.ports.max()`, int64(443)},
		{`schema.spec.tags.indexOf("c")`, int64(3)},
		{`[1, 2, 3].isSorted()`, true},
		{`isIP("10.0.0.1") && ip("10.0.0.1").family() == 4`, true},
		{`ip.isCanonical("2001:db8::1")`, true},
		{`cidr("10.0.0.0/8").containsIP("10.1.2.3")`, true},
		{`cidr("192.168.0.0/24").prefixLength()`, int64(24)},
		{`semver("1.2.3").major()`, int64(1)},
		{`semver(schema.spec.version, true).minor()`, int64(2)},
		{`isSemver("v1.0", true)`, true},
		// Results in the data model.
		{`duration("90s")`, "1m30s"},
		{`timestamp("2024-01-02T03:04:05.5Z")`, "2024-01-02T03:04:05Z"},
		{`optional.none()`, nil},
		{`2.5`, 2.5},
		{`3u`, int64(3)},
	} {
		t.Run(tc.src, func(t *testing.T) {
			x, err := env.Compile(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			got, err := x.Eval(context.Background(), celVars())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

// TestSeededStringRepeats pins the shape of random.seededString's output:
// 36 characters, repeating every 8 (the digest is 32 bytes, 4 per
// character), as kro's.
func TestSeededStringRepeats(t *testing.T) {
	x, err := testEnv(t).Compile(`random.seededString(20, "0b7a3c1e")`)
	if err != nil {
		t.Fatal(err)
	}
	v, err := x.Eval(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := v.(string)
	if len(s) != 20 || s[:8] != s[8:16] || s[:4] != s[16:] {
		t.Fatalf("got %q", s)
	}
	for _, c := range s {
		if !strings.ContainsRune(celkro.SeededAlphabet, c) {
			t.Fatalf("character %q not in the alphabet", c)
		}
	}
}

func TestCELCompileErrors(t *testing.T) {
	env := testEnv(t)
	for _, tc := range []struct{ src, want string }{
		{``, "empty expression"},
		{`schema.spec.`, "CEL syntax"},
		{`foo.bar`, "unknown identifier foo"},
		{`schema.spec.x + bar + foo`, "unknown identifier bar, foo"},
		{`runtime.newCondition({})`, "function runtime.newCondition is not supported: custom status conditions"},
		{`runtime.condition(schema, "Ready").status`, "function runtime.condition is not supported"},
		{`frobnicate(1)`, "undeclared reference to 'frobnicate'"},
		{`hash.sha512("x")`, "unknown function hash.sha512"},
		{`1 + "a"`, "found no matching overload"},
	} {
		_, err := env.Compile(tc.src)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.src, err, tc.want)
		}
	}
}

func TestCELReferences(t *testing.T) {
	env, err := NewEnv(Declarations{Resources: []string{"deployment", "service"}, Iterators: []string{"worker"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		src  string
		want []Reference
	}{
		{`schema.spec.name`, []Reference{{"schema", "spec.name"}}},
		{`deployment.status.conditions.exists(c, c.type == "Ready")`, []Reference{{"deployment", "status.conditions"}}},
		{`service.status.?loadBalancer.?ingress[0].?hostname`, []Reference{{"service", "status.loadBalancer.ingress[0].hostname"}}},
		{`schema.spec.workers[schema.spec.i]`, []Reference{{"schema", "spec.workers"}, {"schema", "spec.i"}}},
		{`deployment.metadata.labels["app.kubernetes.io/name"]`, []Reference{{"deployment", `metadata.labels["app.kubernetes.io/name"]`}}},
		{`schema.metadata.name + "-" + worker`, []Reference{{"schema", "metadata.name"}, {"worker", ""}}},
		{`hash.sha256(schema.spec.x)`, []Reference{{"schema", "spec.x"}}},
		{`[1].map(schema, schema + 1)`, nil},
		{`has(deployment.status.ready)`, []Reference{{"deployment", "status.ready"}}},
		{`cel.bind(d, deployment, d.spec)`, []Reference{{"deployment", ""}}},
	} {
		x, err := env.Compile(tc.src)
		if err != nil {
			t.Fatalf("%q: %v", tc.src, err)
		}
		if !reflect.DeepEqual(x.References, tc.want) {
			t.Errorf("%q: got %v, want %v", tc.src, x.References, tc.want)
		}
	}
}

func TestCELEvalErrors(t *testing.T) {
	env := testEnv(t)
	for _, tc := range []struct {
		src, want string
		pending   bool
	}{
		{`"app-" + schema.spec.replicas`, "no such overload", false},
		{`hash.sha256("x")`, "bytes value cannot be a field value; encode it explicitly", false},
		{`{1: "a"}`, "map key 1 is a int, not a string", false},
		{`18446744073709551615u`, "overflows int64", false},
		{`1.0 / 0.0`, "not a finite number", false},
		{`deployment.status.missing`, "no such key", true},
		{`random.seededString(0, "x")`, "length must be positive", false},
		{`random.seededString(100000, "x")`, "over the bound", false},
		{`random.seededInt(5, 5, "x")`, "must be less than max", false},
		{`lists.setAtIndex([1], 1, 2)`, "out of bounds [0, 1)", false},
		{`lists.insertAtIndex([1], 2, 2)`, "out of bounds [0, 1]", false},
		{`json.unmarshal("{")`, "json.unmarshal", false},
		{`lists.range(2000000)`, "exceeds maximum allowed (1000000)", false},
		{`lists.range(1000).map(i, lists.range(1000).map(j, i * j)).size()`, "cost limit", false},
	} {
		x, err := env.Compile(tc.src)
		if err != nil {
			t.Fatalf("%q: %v", tc.src, err)
		}
		_, err = x.Eval(context.Background(), celVars())
		var ee *EvalError
		if !errors.As(err, &ee) || !strings.Contains(err.Error(), tc.want) || ee.Pending != tc.pending {
			t.Errorf("%q: got %v (pending %v), want %q (pending %v)", tc.src, err, ee != nil && ee.Pending, tc.want, tc.pending)
		}
	}
}

func TestCELEvalCancelled(t *testing.T) {
	x, err := testEnv(t).Compile(`lists.range(1000).all(i, lists.range(1000).all(j, i * j >= 0))`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	_, err = x.Eval(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("got %v", err)
	}
	if time.Since(start) > time.Second {
		t.Fatal("cancellation too slow")
	}
}
