package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// TestKroStatusFieldError: live, a status field whose expression fails
// (division by zero) is removed from the instance's status while the
// other fields, state ERROR and GraphResolved naming the field are
// written; once it evaluates again it is back and the state clears.
func TestKroStatusFieldError(t *testing.T) {
	startRGDManager(t)
	rgd := `apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata: {name: e2e-statuserr}
spec:
  schema:
    apiVersion: v1alpha1
    kind: StatusErr
    group: e2e.dcontroller.io
    spec:
      divisor: integer | default=0
    status:
      name: ${cm.metadata.name}
      ratio: ${100 / schema.spec.divisor}
  resources:
    - id: cm
      template:
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: "${schema.metadata.name}-se"}
`
	cleanupRGD(t, "e2e-statuserr", "statuserrs.e2e.dcontroller.io")
	mustKubectl(t, rgd, "apply", "-f", "-")
	inst := func(d int) string {
		return fmt.Sprintf("apiVersion: e2e.dcontroller.io/v1alpha1\nkind: StatusErr\nmetadata: {name: s1, namespace: default}\nspec: {divisor: %d}\n", d)
	}
	get := func() string {
		out, _ := kubectl(t, "", "get", "statuserrs.e2e.dcontroller.io", "s1", "-n", "default", "-o",
			`jsonpath={.status.name}|{.status.ratio}|{.status.state}|{.status.conditions[?(@.type=="GraphResolved")].message}`)
		return out
	}
	t.Cleanup(func() {
		_, _ = kubectl(t, "", "delete", "statuserrs.e2e.dcontroller.io", "s1", "-n", "default", "--wait=false")
	})
	for _, step := range []struct {
		divisor int
		want    string
	}{
		{4, "s1-se|25|ACTIVE|the resource graph is compiled"},
		{0, "s1-se||ERROR|spec.schema.status.ratio: division by zero"},
		{5, "s1-se|20|ACTIVE|the resource graph is compiled"},
	} {
		eventually(t, 30*time.Second, func() string {
			if _, err := kubectl(t, inst(step.divisor), "apply", "-f", "-"); err != nil {
				return err.Error()
			}
			if got := get(); got != step.want {
				return fmt.Sprintf("divisor %d: status %q, want %q", step.divisor, got, step.want)
			}
			return ""
		})
		if step.divisor == 0 {
			// Unset, not stored as null.
			out, _ := kubectl(t, "", "get", "statuserrs.e2e.dcontroller.io", "s1", "-n", "default", "-o", "json")
			var obj struct{ Status map[string]any }
			if err := json.Unmarshal([]byte(out), &obj); err != nil {
				t.Fatal(err)
			}
			if v, ok := obj.Status["ratio"]; ok {
				t.Errorf("the failing field is in the status: %v", v)
			}
		}
	}
	mustKubectl(t, "", "delete", "statuserrs.e2e.dcontroller.io", "s1", "-n", "default", "--timeout=30s")
	mustKubectl(t, "", "delete", "rgd", "e2e-statuserr", "--timeout=30s")
}
