package visualize_test

import (
	"os"
	"strings"

	"github.com/dcontroller/dcontroller/pkg/operator"
	"github.com/dcontroller/dcontroller/pkg/visualize"
)

// A one-controller operator as a Mermaid flowchart.
func ExampleGraph_Mermaid() {
	ops, _ := operator.DecodeOperators(strings.NewReader(`apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: ready-pods}
spec:
  controllers:
    - name: select-ready
      sources: [{apiGroup: "", kind: Pod}]
      pipeline:
        - "@select": {"@eq": ["$.status.phase", "Running"]}
        - "@project": {metadata: "$.metadata"}
      target: {kind: ReadyPod}
`))
	g, _ := visualize.Build(ops)
	_ = g.Mermaid(os.Stdout)
	// Output:
	// flowchart LR
	//   res_core_Pod(["Pod<br/>core"])
	//   subgraph op0["operator ready-pods"]
	//     view_ready_pods_ReadyPod[("ReadyPod<br/>view")]
	//     subgraph op0_c0["controller select-ready"]
	//       op0_c0_s0["@select<br/>{@eq: [$.status.phase, Running]}"]
	//       op0_c0_s1["@project<br/>{metadata: $.metadata}"]
	//     end
	//   end
	//   op0_c0_s0 --> op0_c0_s1
	//   res_core_Pod --> op0_c0_s0
	//   op0_c0_s1 -- "Updater" --> view_ready_pods_ReadyPod
	//   classDef resource fill:#e8f1fb,stroke:#3b73b9
	//   classDef view fill:#fdf3e1,stroke:#c98a1b
	//   classDef stage fill:#ffffff,stroke:#555555
	//   class res_core_Pod resource
	//   class view_ready_pods_ReadyPod view
	//   class op0_c0_s0,op0_c0_s1 stage
}
