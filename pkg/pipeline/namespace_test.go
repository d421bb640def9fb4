package pipeline

import (
	"errors"
	"strings"
	"testing"

	"github.com/dcontroller/dcontroller/pkg/expression"
)

func TestNamespaceLocal(t *testing.T) {
	pod := []string{"Pod"}
	podSvc := []string{"Pod", "Service"}
	abc := []string{"A", "B", "C"}
	const joinPodSvc = `{"@join": {"@and": [{"@eq": ["$.Pod.metadata.namespace", "$.Service.metadata.namespace"]}, {"@eq": ["$.Pod.metadata.labels.app", "$.Service.spec.selector.app"]}]}}`
	tests := []struct {
		name    string
		spec    string
		sources []string
		// wantPath is the Path of the refusal, "" for an accepted pipeline;
		// wantMsg a part of its message.
		wantPath, wantMsg string
	}{
		// accepted
		{"identity", `null`, pod, "", ""},
		{"no group stage", `[{"@select": {"@eq": ["$.spec.x", 1]}}, {"@project": {"spec": "$.spec"}}, {"@unwind": "$.spec.list"}]`, pod, "", ""},
		{"gather by namespace", `{"@gather": ["$.metadata.namespace", "$.spec.x"]}`, pod, "", ""},
		{"gather by list key", `{"@gather": [["$.spec.app", "$.metadata.namespace"], "$.metadata.name"]}`, pod, "", ""},
		{"gather by concat", `{"@mux": [{"@concat": ["$.metadata.namespace", "/", "$.spec.app"]}, "$.spec.x"]}`, pod, "", ""},
		{"concat after constants", `{"@gather": [{"@concat": ["ns", ":", "$.metadata.namespace"]}, "$.spec.x"]}`, pod, "", ""},
		{"concat with dot", `{"@gather": [{"@concat": ["$.metadata.namespace", ".", "$.metadata.name"]}, "$.spec.x"]}`, pod, "", ""},
		{"groupBy by map key", `{"@groupBy": [{"ns": "$.metadata.namespace", "app": "$.spec.app"}, "$.metadata.name"]}`, pod, "", ""},
		{"map key with setter elsewhere", `{"@groupBy": [{"ns": "$.metadata.namespace", "$.app": "$.spec.app"}, "$.metadata.name"]}`, pod, "", ""},
		{"key in a nested list", `{"@groupBy": [[["$.metadata.namespace"], "$.x"], "$.metadata.name"]}`, pod, "", ""},
		{"unwind then gather", `[{"@unwind": "$.spec.containers"}, {"@gather": ["$.metadata.namespace", "$.spec.containers"]}]`, pod, "", ""},
		{"select then groupBy", `[{"@select": true}, {"@groupBy": ["$.metadata.namespace", "$.metadata.name"]}]`, pod, "", ""},
		{"distinct", `[{"@project": {"metadata": {"namespace": "$.metadata.namespace"}}}, {"@distinct": null}]`, pod, "", ""},
		{"project keeps metadata", `[{"@project": {"metadata": "$.metadata", "spec": "$.spec"}}, {"@gather": ["$.metadata.namespace", "$.spec.x"]}]`, pod, "", ""},
		{"project copies namespace", `[{"@project": {"metadata": {"name": "$.metadata.name", "namespace": "$.metadata.namespace"}}}, {"@gather": ["$.metadata.namespace", "$.metadata.name"]}]`, pod, "", ""},
		{"project copies whole document", `[{"@project": {"$.": "$", "$.metadata.labels.x": "y"}}, {"@gather": ["$.metadata.namespace", "$.spec.x"]}]`, pod, "", ""},
		{"project setter copies namespace", `[{"@project": {"spec": "$.spec", "$.metadata.namespace": "$.metadata.namespace"}}, {"@gather": ["$.metadata.namespace", "$.spec.x"]}]`, pod, "", ""},
		{"project renames namespace", `[{"@project": {"ns": "$.metadata.namespace", "v": "$.spec.x"}}, {"@gather": ["$.ns", "$.v"]}]`, pod, "", ""},
		{"project into a list", `[{"@project": {"ids": ["$.metadata.name", "$.metadata.namespace"]}}, {"@gather": ["$.ids[1]", "$.ids"]}]`, pod, "", ""},
		{"project list form", `[{"@project": [{"metadata": "$.metadata"}, {"spec": "$.spec"}, {"$.metadata.labels.a": "b"}]}, {"@gather": ["$.metadata.namespace", "$.spec.x"]}]`, pod, "", ""},
		{"gather twice", `[{"@gather": ["$.metadata.namespace", "$.spec.x"]}, {"@gather": [["$.metadata.namespace", "$.spec.y"], "$.spec.z"]}]`, pod, "", ""},
		{"groupBy then gather on key", `[{"@groupBy": [{"ns": "$.metadata.namespace", "app": "$.spec.app"}, "$.metadata.name"]}, {"@gather": ["$.key.ns", "$.values"]}]`, pod, "", ""},
		{"groupBy list key then groupBy", `[{"@groupBy": [["$.metadata.namespace", "$.x"], "$.metadata.name"]}, {"@groupBy": ["$.key[0]", "$.values"]}]`, pod, "", ""},
		{"join without groups", joinPodSvc, podSvc, "", ""},
		{"join, gather by a source's namespace", `[` + joinPodSvc + `, {"@gather": ["$.Service.metadata.namespace", "$.Pod.metadata.name"]}]`, podSvc, "", ""},
		{"join, concat key", `[` + joinPodSvc + `, {"@groupBy": [{"@concat": ["$.Pod.metadata.namespace", "/", "$.Service.metadata.name"]}, "$.Pod.metadata.name"]}]`, podSvc, "", ""},
		{"join single equality, reversed", `{"@join": {"@eq": ["$.Service.metadata.namespace", "$.Pod.metadata.namespace"]}}`, podSvc, "", ""},
		{"join of three, chained", `{"@join": {"@and": [{"@eq": ["$.A.metadata.namespace", "$.B.metadata.namespace"]}, {"@eq": ["$.C.metadata.namespace", "$.B.metadata.namespace"]}]}}`, abc, "", ""},
		{"join of three, nested and", `[{"@join": {"@and": [{"@eq": ["$.A.metadata.namespace", "$.C.metadata.namespace"]}, {"@and": [{"@eq": ["$.B.metadata.namespace", "$.A.metadata.namespace"]}, {"@eq": ["$.B.x", "$.C.y"]}]}]}}, {"@gather": ["$.B.metadata.namespace", "$.A.spec"]}]`, abc, "", ""},
		{"join, project, gather", `[` + joinPodSvc + `, {"@project": {"metadata": "$.Pod.metadata", "svc": "$.Service.metadata.name"}}, {"@gather": ["$.metadata.namespace", "$.svc"]}]`, podSvc, "", ""},
		{"join, project source, gather", `[` + joinPodSvc + `, {"@project": {"pod": "$.Pod"}}, {"@gather": ["$.pod.metadata.namespace", "$.pod.spec"]}]`, podSvc, "", ""},
		{"aggregate form", `{"@join": {"@eq": ["$.Pod.metadata.namespace", "$.Service.metadata.namespace"]}, "@aggregate": [{"@gather": ["$.Pod.metadata.namespace", "$.Pod.spec"]}]}`, podSvc, "", ""},

		// refused: group keys
		{"gather key without namespace", `{"@gather": ["$.spec.app", "$.metadata.name"]}`, pod,
			`spec.controllers[0].pipeline["@gather"]`, `the @gather key does not depend on the namespace of the grouped documents ($.metadata.namespace), so one group may hold objects of several namespaces; put the namespace into the key, e.g. ["$.metadata.namespace", "$.spec.app"]`},
		{"groupBy constant key", `[{"@select": true}, {"@groupBy": ["all", "$.metadata.name"]}]`, pod,
			`spec.controllers[0].pipeline[1]["@groupBy"]`, `the @groupBy key does not depend on the namespace`},
		{"namespace compared in key", `{"@groupBy": [{"@eq": ["$.metadata.namespace", "default"]}, "$.metadata.name"]}`, pod,
			`spec.controllers[0].pipeline["@groupBy"]`, `does not depend on the namespace`},
		{"namespace under another operator", `{"@groupBy": [{"@len": "$.metadata.namespace"}, "$.metadata.name"]}`, pod,
			`spec.controllers[0].pipeline["@groupBy"]`, `does not depend on the namespace`},
		{"concat without separator", `{"@gather": [{"@concat": ["$.metadata.namespace", "$.spec.app"]}, "$.spec.x"]}`, pod,
			`spec.controllers[0].pipeline["@gather"]`, `does not depend on the namespace`},
		{"concat with a label separator", `{"@gather": [{"@concat": ["$.metadata.namespace", "-", "$.spec.app"]}, "$.spec.x"]}`, pod,
			`spec.controllers[0].pipeline["@gather"]`, `does not depend on the namespace`},
		{"concat with the namespace after a query", `{"@gather": [{"@concat": ["$.spec.app", "/", "$.metadata.namespace"]}, "$.spec.x"]}`, pod,
			`spec.controllers[0].pipeline["@gather"]`, `does not depend on the namespace`},
		{"concat of one operand", `{"@gather": [{"@concat": ["$.metadata.namespace"]}, "$.spec.x"]}`, pod,
			`spec.controllers[0].pipeline["@gather"]`, `does not depend on the namespace`},
		{"map key overwritten by a setter", `{"@groupBy": [{"ns": "$.metadata.namespace", "$.ns": "x"}, "$.metadata.name"]}`, pod,
			`spec.controllers[0].pipeline["@groupBy"]`, `does not depend on the namespace`},
		{"compound document grouped by a plain path", `[` + joinPodSvc + `, {"@gather": ["$.metadata.namespace", "$.Pod.spec"]}]`, podSvc,
			`spec.controllers[0].pipeline[1]["@gather"]`, `($.Pod.metadata.namespace), so one group may hold objects of several namespaces; put the namespace into the key, e.g. ["$.Pod.metadata.namespace", "$.metadata.namespace"]`},
		{"renamed namespace grouped by the old path", `[{"@project": {"ns": "$.metadata.namespace"}}, {"@gather": ["$.metadata.namespace", "$.ns"]}]`, pod,
			`spec.controllers[0].pipeline[1]["@gather"]`, `the @gather key does not depend on the namespace of the grouped documents ($.ns)`},

		// refused: joins
		{"join without namespace", `{"@join": {"@eq": ["$.Pod.metadata.labels.app", "$.Service.spec.selector.app"]}}`, podSvc,
			`spec.controllers[0].pipeline["@join"]`, `the join condition does not keep every joined document in one namespace: Service is not tied to Pod by an equality of metadata.namespace; add {"@eq": ["$.Pod.metadata.namespace", "$.Service.metadata.namespace"]}`},
		{"join namespace under or", `[{"@join": {"@or": [{"@eq": ["$.Pod.metadata.namespace", "$.Service.metadata.namespace"]}, {"@eq": ["$.Pod.x", "$.Service.x"]}]}}, {"@select": true}]`, podSvc,
			`spec.controllers[0].pipeline[0]["@join"]`, `Service is not tied to Pod`},
		{"join namespace under not", `{"@join": {"@not": {"@neq": ["$.Pod.metadata.namespace", "$.Service.metadata.namespace"]}}}`, podSvc,
			`spec.controllers[0].pipeline["@join"]`, `Service is not tied to Pod`},
		{"join namespace against a name", `{"@join": {"@eq": ["$.Pod.metadata.namespace", "$.Service.metadata.name"]}}`, podSvc,
			`spec.controllers[0].pipeline["@join"]`, `Service is not tied to Pod`},
		{"join namespace against a constant", `{"@join": {"@and": [{"@eq": ["$.Pod.metadata.namespace", "default"]}, {"@eq": ["$.Service.metadata.namespace", "default"]}]}}`, podSvc,
			`spec.controllers[0].pipeline["@join"]`, `Service is not tied to Pod`},
		{"join of three, one loose", `{"@join": {"@and": [{"@eq": ["$.A.metadata.namespace", "$.B.metadata.namespace"]}, {"@eq": ["$.B.x", "$.C.x"]}]}}`, abc,
			`spec.controllers[0].pipeline["@join"]`, `C is not tied to A by an equality of metadata.namespace; add {"@eq": ["$.A.metadata.namespace", "$.C.metadata.namespace"]}`},
		{"join of three, two loose", `{"@join": {"@eq": ["$.B.metadata.namespace", "$.C.metadata.namespace"]}}`, abc,
			`spec.controllers[0].pipeline["@join"]`, `B, C are not tied to A`},

		// refused: the namespace is lost before a group stage
		{"project drops metadata", `[{"@project": {"spec": "$.spec"}}, {"@gather": ["$.metadata.namespace", "$.spec.x"]}]`, pod,
			`spec.controllers[0].pipeline[1]["@gather"]`, `@gather groups documents, but the documents reaching it no longer hold the namespace of their objects (dropped or overwritten at spec.controllers[0].pipeline[0]["@project"])`},
		{"project sets namespace from a label", `[{"@project": {"metadata": {"name": "$.metadata.name", "namespace": "$.metadata.labels.ns"}}}, {"@gather": ["$.metadata.namespace", "$.metadata.name"]}]`, pod,
			`spec.controllers[0].pipeline[1]["@gather"]`, `dropped or overwritten at spec.controllers[0].pipeline[0]["@project"]`},
		{"project setter overwrites namespace", `[{"@project": {"metadata": "$.metadata", "$.metadata.namespace": "$.spec.ns"}}, {"@gather": ["$.metadata.namespace", "$.spec.x"]}]`, pod,
			`spec.controllers[0].pipeline[1]["@gather"]`, `no longer hold the namespace`},
		{"project root setter then constant namespace", `[{"@project": {"$.": "$", "$.metadata.namespace": "default"}}, {"@groupBy": ["$.metadata.namespace", "$.metadata.name"]}]`, pod,
			`spec.controllers[0].pipeline[1]["@groupBy"]`, `no longer hold the namespace`},
		{"project nested map replaces metadata", `[{"@project": {"$.": "$", "metadata": {"name": "$.metadata.name"}}}, {"@gather": ["$.metadata.namespace", "$.spec.x"]}]`, pod,
			`spec.controllers[0].pipeline[1]["@gather"]`, `no longer hold the namespace`},
		{"project list form overwrites namespace", `[{"@project": [{"metadata": "$.metadata"}, {"metadata": {"namespace": "$.spec.ns"}}]}, {"@gather": ["$.metadata.namespace", "$.spec.x"]}]`, pod,
			`spec.controllers[0].pipeline[1]["@gather"]`, `no longer hold the namespace`},
		{"project copies a label as metadata", `[{"@project": {"metadata": "$.metadata.labels"}}, {"@gather": ["$.metadata.namespace", "$.metadata.name"]}]`, pod,
			`spec.controllers[0].pipeline[1]["@gather"]`, `no longer hold the namespace`},
		{"project opaque root, conservatively", `[{"@project": {"$.": "$.spec.template", "metadata": "$.metadata"}}, {"@gather": ["$.metadata.namespace", "$.spec.x"]}]`, pod,
			`spec.controllers[0].pipeline[1]["@gather"]`, `no longer hold the namespace`},
		{"unwind over metadata", `[{"@unwind": "$.metadata"}, {"@gather": ["$.metadata.namespace", "$.spec.x"]}]`, pod,
			`spec.controllers[0].pipeline[1]["@gather"]`, `dropped or overwritten at spec.controllers[0].pipeline[0]["@unwind"]`},
		{"gather value over metadata", `[{"@gather": ["$.metadata.namespace", "$.metadata"]}, {"@groupBy": ["$.metadata.namespace", "$.spec"]}]`, pod,
			`spec.controllers[0].pipeline[1]["@groupBy"]`, `dropped or overwritten at spec.controllers[0].pipeline[0]["@gather"]`},
		{"groupBy concat key then gather", `[{"@groupBy": [{"@concat": ["$.metadata.namespace", "/", "$.x"]}, "$.metadata.name"]}, {"@gather": ["$.key", "$.values"]}]`, pod,
			`spec.controllers[0].pipeline[1]["@gather"]`, `dropped or overwritten at spec.controllers[0].pipeline[0]["@groupBy"]`},
		{"distinct after dropping the namespace", `[{"@select": true}, {"@project": {"spec": "$.spec"}}, {"@distinct": null}]`, pod,
			`spec.controllers[0].pipeline[2]["@distinct"]`, `@distinct merges equal documents, but the documents reaching it no longer hold the namespace of their objects (dropped or overwritten at spec.controllers[0].pipeline[1]["@project"])`},
		{"join, project drops namespaces", `[` + joinPodSvc + `, {"@project": {"pod": "$.Pod.metadata.name"}}, {"@gather": ["$.pod", "$.pod"]}]`, podSvc,
			`spec.controllers[0].pipeline[2]["@gather"]`, `dropped or overwritten at spec.controllers[0].pipeline[1]["@project"]`},
		{"aggregate form, key without namespace", `{"@join": {"@eq": ["$.Pod.metadata.namespace", "$.Service.metadata.namespace"]}, "@aggregate": [{"@select": true}, {"@gather": ["$.Pod.spec.app", "$.Pod.spec"]}]}`, podSvc,
			`spec.controllers[0].pipeline["@aggregate"][1]["@gather"]`, `does not depend on the namespace`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(mustJSON(t, tc.spec), tc.sources, Options{Path: path})
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			err = p.NamespaceLocal()
			if tc.wantPath == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ee *expression.Error
			if !errors.As(err, &ee) {
				t.Fatalf("got %v, want an *expression.Error at %s", err, tc.wantPath)
			}
			if ee.Path != tc.wantPath {
				t.Errorf("path %s, want %s", ee.Path, tc.wantPath)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("message\n%s\ndoes not contain\n%s", err, tc.wantMsg)
			}
			if !strings.HasSuffix(err.Error(), "or run the operator without spec.sharding: Namespace") {
				t.Errorf("message %s does not end with the way out", err)
			}
		})
	}
}
