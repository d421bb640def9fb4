package rgdruntime

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"
	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
)

func decodeRGD(t *testing.T, src string) *krov1a1.ResourceGraphDefinition {
	t.Helper()
	g := &krov1a1.ResourceGraphDefinition{}
	if err := yaml.UnmarshalStrict([]byte(src), g); err != nil {
		t.Fatal(err)
	}
	return g
}

const goodRGD = `
apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata: {name: app}
spec:
  schema:
    apiVersion: v1alpha1
    kind: App
    spec: {name: string | required=true, replicas: integer | default=1}
    status: {ready: "${config.data.ready}"}
  resources:
    - id: other
      template:
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: "${config.metadata.name}-other"}
    - id: config
      template:
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: "${schema.spec.name}"}
`

func TestCompileGraphStatus(t *testing.T) {
	c, err := Compile(decodeRGD(t, goodRGD))
	if err != nil {
		t.Fatal(err)
	}
	if c.CRD.Name != "apps.kro.run" || c.Operator == nil || c.Operator.Name != "rgd-app" {
		t.Errorf("CRD %s, operator %+v", c.CRD.Name, c.Operator)
	}
	order, res := graphStatus(c.Graph)
	if strings.Join(order, ",") != "config,other" {
		t.Errorf("topological order %v", order)
	}
	if len(res) != 2 || res[0].ID != "other" || len(res[0].Dependencies) != 1 || res[0].Dependencies[0].ID != "config" || res[1].ID != "config" || len(res[1].Dependencies) != 0 {
		t.Errorf("resources %+v", res)
	}
}

// TestCompileErrors: a bad RGD's error names the field at fault, whether
// the schema, a template or the status is wrong.
func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct{ from, to, want string }{
		{`metadata: {name: "${config.metadata.name}-other"}`, "metadata: {name: x}\n        spec: {replicas: \"${servce.spec.replicas}\"}",
			"spec.resources[0].template.spec.replicas: unknown identifier servce"},
		{"replicas: integer | default=1", "replicas: intger", `spec.schema.spec.replicas: unknown type "intger"`},
		{`status: {ready: "${config.data.ready}"}`, `status: {ready: "${cnfig.data.ready}"}`, "spec.schema.status.ready: unknown identifier cnfig"},
		{"- id: config", "- id: Config", "spec.resources[1].id"},
	} {
		src := strings.Replace(goodRGD, tc.from, tc.to, 1)
		if src == goodRGD {
			t.Fatalf("%q not found", tc.from)
		}
		_, err := Compile(decodeRGD(t, src))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("want an error starting %q, got %v", tc.want, err)
		}
	}
}

func TestSummarize(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	var st krov1a1.ResourceGraphDefinitionStatus
	setCondition(&st.Conditions, krov1a1.ConditionControllerReady, metav1.ConditionTrue, ReasonRunning, "controller is running", 1, t0)
	setCondition(&st.Conditions, krov1a1.ConditionGraphAccepted, metav1.ConditionTrue, ReasonValid, "ok", 1, t0)
	setCondition(&st.Conditions, krov1a1.ConditionKindReady, metav1.ConditionFalse, ReasonEstablishing, "waiting", 1, t0)
	summarize(&st, 1, t0, "")
	ready := findCondition(st.Conditions, krov1a1.ConditionReady)
	if st.State != krov1a1.ResourceGraphDefinitionStateInactive || ready.Status != metav1.ConditionFalse || *ready.Message != "KindReady: waiting" {
		t.Errorf("state %s, Ready %s %q", st.State, ready.Status, *ready.Message)
	}
	var types []string
	for _, c := range st.Conditions {
		types = append(types, string(c.Type))
	}
	if strings.Join(types, ",") != "GraphAccepted,KindReady,ControllerReady,Ready" {
		t.Errorf("condition order %v", types)
	}
	// The same status keeps its transition time; a flip takes the new one.
	setCondition(&st.Conditions, krov1a1.ConditionGraphAccepted, metav1.ConditionTrue, ReasonValid, "ok", 2, t1)
	setCondition(&st.Conditions, krov1a1.ConditionKindReady, metav1.ConditionTrue, ReasonReady, "served", 2, t1)
	summarize(&st, 2, t1, "")
	if c := findCondition(st.Conditions, krov1a1.ConditionGraphAccepted); !c.LastTransitionTime.Equal(&t0) || c.ObservedGeneration != 2 {
		t.Errorf("GraphAccepted %+v", c)
	}
	if c := findCondition(st.Conditions, krov1a1.ConditionKindReady); !c.LastTransitionTime.Equal(&t1) {
		t.Errorf("KindReady %+v", c)
	}
	ready = findCondition(st.Conditions, krov1a1.ConditionReady)
	if st.State != krov1a1.ResourceGraphDefinitionStateActive || ready.Status != metav1.ConditionTrue || *ready.Reason != ReasonReady {
		t.Errorf("state %s, Ready %+v", st.State, ready)
	}
	summarize(&st, 2, t1, "instances remain")
	if ready = findCondition(st.Conditions, krov1a1.ConditionReady); ready.Status != metav1.ConditionFalse || *ready.Reason != ReasonDeleting {
		t.Errorf("deleting: Ready %+v", ready)
	}
}

func TestControllerCondition(t *testing.T) {
	cs := func(name string, status metav1.ConditionStatus, reason, msg string) opv1a1.ControllerStatus {
		return opv1a1.ControllerStatus{Name: name, Conditions: []metav1.Condition{{Type: "Ready", Status: status, Reason: reason, Message: msg}}}
	}
	for _, tc := range []struct {
		name       string
		st         []opv1a1.ControllerStatus
		running    map[string]bool
		wantStatus metav1.ConditionStatus
		wantReason string
		wantMsg    string
	}{
		{"all running", []opv1a1.ControllerStatus{cs("a", "True", "Ready", ""), cs("b", "True", "Ready", "")}, map[string]bool{"a": true, "b": true},
			"True", ReasonRunning, "controller is running"},
		{"running with a failing write", []opv1a1.ControllerStatus{cs("a", "False", "WriteFailed", "1 target write(s) failing")}, map[string]bool{"a": true},
			"True", ReasonRunning, "controller is running; controller a: WriteFailed: 1 target write(s) failing"},
		{"starting", []opv1a1.ControllerStatus{cs("a", "True", "Ready", ""), cs("b", "False", "Starting", "Controller is starting: informer")}, map[string]bool{"a": true},
			"False", ReasonStarting, "controller b: Controller is starting: informer"},
		{"failed", []opv1a1.ControllerStatus{cs("a", "False", "InvalidSpec", "bad pipeline")}, nil,
			"False", ReasonFailedToStart, "controller a: bad pipeline"},
	} {
		s, r, m := controllerCondition(opv1a1.OperatorStatus{Controllers: tc.st}, tc.running)
		if s != tc.wantStatus || r != tc.wantReason || m != tc.wantMsg {
			t.Errorf("%s: got %s %s %q", tc.name, s, r, m)
		}
	}
}
