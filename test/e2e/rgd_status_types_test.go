package e2e

import (
	"strings"
	"testing"
	"time"

	krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"
)

const statusTypesRGD = `apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata: {name: e2e-status-types}
spec:
  schema:
    apiVersion: v1alpha1
    kind: TypedStatus
    group: e2e.dcontroller.io
    spec:
      port: integer | default=8080
    status:
      port: ${service.spec.ports[0].port}
      url: http://${service.spec.clusterIP}:${string(service.spec.ports[0].port)}
      service: ${service.spec}
      config: ${config.metadata}
      created: ${timestamp(config.metadata.creationTimestamp)}
      data: ${config.data}
      keys: ${size(config.data)}
  resources:
    - id: config
      template:
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: "${schema.metadata.name}"}
        data: {port: "${string(schema.spec.port)}", mode: fast}
    - id: service
      template:
        apiVersion: v1
        kind: Service
        metadata: {name: "${config.metadata.name}"}
        spec:
          selector: {app: "${schema.metadata.name}"}
          ports:
            - {name: http, port: 80, targetPort: "${schema.spec.port}"}
            - {name: named, port: 81, targetPort: http}
`

// TestRGDStatusTypes: the instance CRD's status fields are typed from
// their expressions, and the API server accepts, without pruning, what the
// controller writes into them: integers, strings, a date-time, a map, a
// whole Service spec as the API server filled it in (clusterIP, an
// int-or-string targetPort, defaults), and a ConfigMap's metadata (a time,
// labels, owner references). An RGD reading a field a built-in kind lacks
// is not Ready, naming the field.
func TestRGDStatusTypes(t *testing.T) {
	const ns, crd = "e2e-status-types", "typedstatuses.e2e.dcontroller.io"
	f := newRGDFixture(t, ns, "e2e-status-types", crd, statusTypesRGD)
	for path, want := range map[string]string{
		"port": "integer", "url": "string", "service": "object", "config": "object", "created": "string", "data": "object", "keys": "integer",
	} {
		got, err := kubectl(t, "", "get", "crd", crd, "-o", "jsonpath={.spec.versions[0].schema.openAPIV3Schema.properties.status.properties."+path+".type}")
		if err != nil || got != want {
			t.Errorf("status.%s: type %q (%v), want %s", path, got, err, want)
		}
	}
	mustKubectl(t, "apiVersion: e2e.dcontroller.io/v1alpha1\nkind: TypedStatus\nmetadata: {name: typed, namespace: "+ns+"}\nspec: {port: 9090}\n", "apply", "-f", "-")
	f.want("service", "typed", "{.spec.ports[0].targetPort}", "9090")
	ip := f.get("service", "typed", "{.spec.clusterIP}")
	created := f.get("configmap", "typed", "{.metadata.creationTimestamp}")
	if ip == "" || created == "" || strings.HasPrefix(ip, "error") {
		t.Fatalf("service %q, configmap %q", ip, created)
	}
	f.want("typedstatuses", "typed",
		"{.status.port} {.status.url} {.status.keys} {.status.data.port} {.status.created} {.status.state}",
		"80 http://"+ip+":80 2 9090 "+created+" ACTIVE")
	f.want("typedstatuses", "typed",
		"{.status.service.clusterIP} {.status.service.ports[0].targetPort} {.status.service.ports[1].targetPort} {.status.service.sessionAffinity}",
		ip+" 9090 http None")
	f.want("typedstatuses", "typed",
		"{.status.config.name} {.status.config.creationTimestamp} {.status.config.ownerReferences[0].kind} {.status.config.labels.kro\\.run/node-id}",
		"typed "+created+" TypedStatus config")

	// A field the Service kind does not have.
	const bad = "e2e-status-types-bad"
	cleanupRGD(t, bad, "")
	mustKubectl(t, strings.NewReplacer("name: e2e-status-types", "name: "+bad, "kind: TypedStatus", "kind: BadStatus",
		"service.spec.clusterIP}", "service.spec.clusterIp}").Replace(statusTypesRGD), "apply", "-f", "-")
	eventually(t, 60*time.Second, func() string {
		g, err := getRGD(t, bad)
		if err != nil {
			return err.Error()
		}
		if c := rgdCondition(g, krov1a1.ConditionReady); !strings.Contains(c, "spec.schema.status.url: type check: ") || !strings.Contains(c, "undefined field 'clusterIp'") {
			return "Ready " + c
		}
		return ""
	})
}
