package apply

import (
	"encoding/json"
	"testing"

	sigsjson "sigs.k8s.io/json"
)

func doc(t *testing.T, s string) map[string]any {
	t.Helper()
	if s == "" {
		return nil
	}
	var m map[string]any
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts([]byte(s), &m); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return m
}

func TestMerge(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		observed, last, desired string
		want                    string
	}{{
		name:     "fields set by others are kept",
		observed: `{"spec":{"replicas":1,"defaulted":"x"},"status":{"a":1}}`,
		last:     `{"spec":{"replicas":1}}`,
		desired:  `{"spec":{"replicas":2}}`,
		want:     `{"spec":{"replicas":2,"defaulted":"x"},"status":{"a":1}}`,
	}, {
		name:     "fields the hook stopped setting are removed",
		observed: `{"metadata":{"labels":{"a":"1","b":"2","other":"x"}}}`,
		last:     `{"metadata":{"labels":{"a":"1","b":"2"}}}`,
		desired:  `{"metadata":{"labels":{"a":"1"}}}`,
		want:     `{"metadata":{"labels":{"a":"1","other":"x"}}}`,
	}, {
		name:     "without last applied nothing is removed",
		observed: `{"data":{"a":"1","b":"2"}}`,
		desired:  `{"data":{"a":"3"}}`,
		want:     `{"data":{"a":"3","b":"2"}}`,
	}, {
		name:     "null removes a field",
		observed: `{"data":{"a":"1","b":"2"}}`,
		desired:  `{"data":{"a":null}}`,
		want:     `{"data":{"b":"2"}}`,
	}, {
		name:     "associative list merged on name keeps a sidecar and defaults",
		observed: `{"containers":[{"name":"main","image":"a:1","imagePullPolicy":"IfNotPresent"},{"name":"sidecar","image":"s"}]}`,
		last:     `{"containers":[{"name":"main","image":"a:1"}]}`,
		desired:  `{"containers":[{"name":"main","image":"a:2"},{"name":"extra","image":"e"}]}`,
		want:     `{"containers":[{"name":"main","image":"a:2","imagePullPolicy":"IfNotPresent"},{"name":"sidecar","image":"s"},{"name":"extra","image":"e"}]}`,
	}, {
		name:     "associative list drops items only the hook had",
		observed: `{"ports":[{"port":80,"protocol":"TCP"},{"port":443,"protocol":"TCP"}]}`,
		last:     `{"ports":[{"port":80},{"port":443}]}`,
		desired:  `{"ports":[{"port":80}]}`,
		want:     `{"ports":[{"port":80,"protocol":"TCP"}]}`,
	}, {
		name:     "scalar lists are replaced",
		observed: `{"args":["a","b"]}`,
		last:     `{"args":["a","b"]}`,
		desired:  `{"args":["c"]}`,
		want:     `{"args":["c"]}`,
	}, {
		name:     "lists without a common key are replaced",
		observed: `{"items":[{"x":1},{"x":2}]}`,
		desired:  `{"items":[{"x":3}]}`,
		want:     `{"items":[{"x":3}]}`,
	}, {
		name:     "type change replaces",
		observed: `{"a":{"b":1}}`,
		desired:  `{"a":"s"}`,
		want:     `{"a":"s"}`,
	}, {
		name:     "a list the API server extended is settled when the hook still wants the same",
		observed: `{"tolerations":[{"key":"nodeType","operator":"Equal","value":"crawling","effect":"NoSchedule"},{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}]}`,
		last:     `{"tolerations":[{"key":"nodeType","operator":"Equal","value":"crawling","effect":"NoSchedule"}]}`,
		desired:  `{"tolerations":[{"key":"nodeType","operator":"Equal","value":"crawling","effect":"NoSchedule"}]}`,
		want:     `{"tolerations":[{"key":"nodeType","operator":"Equal","value":"crawling","effect":"NoSchedule"},{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}]}`,
	}, {
		name:     "a changed list replaces the extended one",
		observed: `{"finalizers":["a","server"]}`,
		last:     `{"finalizers":["a"]}`,
		desired:  `{"finalizers":["b"]}`,
		want:     `{"finalizers":["b"]}`,
	}, {
		name:     "a list someone else shortened is restored",
		observed: `{"args":["a"]}`,
		last:     `{"args":["a","b"]}`,
		desired:  `{"args":["a","b"]}`,
		want:     `{"args":["a","b"]}`,
	}, {
		name:     "a list without last applied is replaced",
		observed: `{"finalizers":["a","server"]}`,
		desired:  `{"finalizers":["a"]}`,
		want:     `{"finalizers":["a"]}`,
	}, {
		name:     "a quantity stored in canonical form is settled",
		observed: `{"limits":{"cpu":"1","memory":"1Gi"}}`,
		last:     `{"limits":{"cpu":"1000m","memory":"1024Mi"}}`,
		desired:  `{"limits":{"cpu":"1000m","memory":"1024Mi"}}`,
		want:     `{"limits":{"cpu":"1","memory":"1Gi"}}`,
	}, {
		name:     "a changed quantity is written",
		observed: `{"limits":{"cpu":"1"}}`,
		last:     `{"limits":{"cpu":"1000m"}}`,
		desired:  `{"limits":{"cpu":"500m"}}`,
		want:     `{"limits":{"cpu":"500m"}}`,
	}, {
		name:     "a scalar someone else changed is restored",
		observed: `{"replicas":5,"image":"other"}`,
		last:     `{"replicas":3,"image":"mine"}`,
		desired:  `{"replicas":3,"image":"mine"}`,
		want:     `{"replicas":3,"image":"mine"}`,
	}, {
		name:     "zero values the API server dropped are settled",
		observed: `{"spec":{"resources":{}}}`,
		last:     `{"spec":{"hostNetwork":false,"env":[],"resources":{"limits":{}},"nodeName":""}}`,
		desired:  `{"spec":{"hostNetwork":false,"env":[],"resources":{"limits":{}},"nodeName":""}}`,
		want:     `{"spec":{"resources":{}}}`,
	}, {
		name:     "a new zero value is written",
		observed: `{"spec":{}}`,
		last:     `{"spec":{}}`,
		desired:  `{"spec":{"paused":false}}`,
		want:     `{"spec":{"paused":false}}`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			obs := doc(t, tc.observed)
			before, _ := json.Marshal(obs)
			got := Merge(obs, doc(t, tc.last), doc(t, tc.desired))
			if !Equal(got, doc(t, tc.want)) {
				b, _ := json.Marshal(got)
				t.Errorf("got  %s\nwant %s", b, tc.want)
			}
			after, _ := json.Marshal(obs)
			if string(before) != string(after) {
				t.Errorf("observed was modified: %s", after)
			}
		})
	}
}

func TestApplyNoChange(t *testing.T) {
	desired := doc(t, `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s","labels":{"a":"1"}},"spec":{"ports":[{"port":80.0}]}}`)
	created, err := WithLastApplied(desired)
	if err != nil {
		t.Fatal(err)
	}
	// What the API server stores: defaults added, integers as int64.
	observed := doc(t, mustJSON(t, created))
	observed["metadata"].(map[string]any)["uid"] = "u1"
	observed["spec"].(map[string]any)["ports"] = []any{map[string]any{"port": int64(80), "protocol": "TCP", "targetPort": int64(80)}}
	observed["spec"].(map[string]any)["clusterIP"] = "10.0.0.1"
	out, changed, err := Apply(observed, desired)
	if err != nil || changed {
		t.Fatalf("unchanged desired state: changed=%v err=%v\n%s", changed, err, mustJSON(t, out))
	}
	desired["metadata"].(map[string]any)["labels"] = map[string]any{"b": "2"}
	out, changed, _ = Apply(observed, desired)
	if !changed {
		t.Fatal("changed labels: want a write")
	}
	labels := out["metadata"].(map[string]any)["labels"].(map[string]any)
	if len(labels) != 1 || labels["b"] != "2" {
		t.Errorf("labels %v, want only b=2 (a was set by the hook before)", labels)
	}
	if out["spec"].(map[string]any)["clusterIP"] != "10.0.0.1" {
		t.Error("server-set clusterIP lost")
	}
	last, _ := LastApplied(out)
	if !Equal(last, desired) {
		t.Errorf("last applied %v, want %v", last, desired)
	}
}

func TestLastAppliedMalformed(t *testing.T) {
	obs := doc(t, `{"metadata":{"annotations":{"metacontroller.k8s.io/last-applied-configuration":"{bad"}},"data":{"a":"1","b":"2"}}`)
	if _, err := LastApplied(obs); err == nil {
		t.Error("want an error for a malformed annotation")
	}
	out, changed, err := Apply(obs, doc(t, `{"data":{"a":"1"}}`))
	if err != nil || !changed || out["data"].(map[string]any)["b"] != "2" {
		t.Errorf("malformed annotation counts as absent: %v %v %v", out, changed, err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
