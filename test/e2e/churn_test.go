package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/operator"
)

// groupOperator gathers the Pods of a namespace by their "group" label into
// one ConfigMap per group listing its members.
func groupOperator(name, ns string) string {
	return fmt.Sprintf(`apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: %s
spec:
  controllers:
    - name: group-members
      sources:
        - apiGroup: ""
          kind: Pod
          namespace: %s
      pipeline:
        - "@select":
            "@exists": "$.metadata.labels.group"
        - "@project":
            metadata:
              name:
                "@concat": ["group-", "$.metadata.labels.group"]
              namespace: "$.metadata.namespace"
            members: "$.metadata.name"
        - "@gather": ["$.metadata.name", "$.members"]
        - "@project":
            metadata: "$.metadata"
            data:
              count:
                "@string":
                  "@len": "$.members"
              members:
                "@join": [{"@sortBy": ["$$", "$.members"]}, ","]
      target:
        apiGroup: ""
        kind: ConfigMap
`, name, ns)
}

func churnPod(ns, name, group string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}},
	}
	if group != "" {
		p.Labels = map[string]string{"group": group}
	}
	return p
}

// churn runs `workers` goroutines doing `ops` random creates, label updates
// and deletes each over `names` pod names in ns.
func churn(t *testing.T, ns string, names, workers, ops int, seed uint64) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := 0; i < ops; i++ {
				name := fmt.Sprintf("p-%03d", rng.IntN(names))
				group := []string{"", "a", "b", "c", "d", "e"}[rng.IntN(6)]
				var err error
				switch rng.IntN(3) {
				case 0:
					err = k8sClient.Create(ctx, churnPod(ns, name, group))
				case 1:
					p := &corev1.Pod{}
					if err = k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err == nil {
						if group == "" {
							delete(p.Labels, "group")
						} else {
							if p.Labels == nil {
								p.Labels = map[string]string{}
							}
							p.Labels["group"] = group
						}
						err = k8sClient.Update(ctx, p)
					}
				case 2:
					err = k8sClient.Delete(ctx, churnPod(ns, name, ""))
				}
				if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// expectedConfigMaps computes with the offline evaluator (what `dctl eval`
// runs) the ConfigMaps the operator should produce from the current pods.
func expectedConfigMaps(t *testing.T, opYAML, ns string) map[string]map[string]any {
	t.Helper()
	ops, err := operator.DecodeOperators(strings.NewReader(opYAML))
	if err != nil {
		t.Fatal(err)
	}
	off, err := operator.NewOffline(ops, operator.OfflineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods := &corev1.PodList{}
	if err := k8sClient.List(context.Background(), pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&pods.Items[i])
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetAPIVersion("v1")
		u.SetKind("Pod")
		if err := off.Apply(context.Background(), u); err != nil {
			t.Fatal(err)
		}
	}
	out := map[string]map[string]any{}
	for _, obj := range off.Result() {
		data, _, _ := unstructured.NestedMap(obj.Object, "data")
		out[obj.GetName()] = data
	}
	return out
}

func actualConfigMaps(t *testing.T, ns, owner string) map[string]map[string]any {
	t.Helper()
	cms := &corev1.ConfigMapList{}
	if err := k8sClient.List(context.Background(), cms, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, cm := range cms.Items {
		if cm.Annotations[opv1a1.OwnerAnnotation] != owner {
			continue
		}
		data := map[string]any{}
		for k, v := range cm.Data {
			data[k] = v
		}
		out[cm.Name] = data
	}
	return out
}

func waitConverged(t *testing.T, opYAML, ns, owner string) {
	t.Helper()
	want := expectedConfigMaps(t, opYAML, ns)
	if len(want) == 0 {
		t.Fatal("the churn left no groups; the comparison would be empty")
	}
	eventually(t, 60*time.Second, func() string {
		got := actualConfigMaps(t, ns, owner)
		if !reflect.DeepEqual(got, want) {
			return fmt.Sprintf("cluster ConfigMaps differ from dctl eval's:\n got %v\nwant %v", got, want)
		}
		return ""
	})
}

// TestChurnMatchesEval: 500 pods created, relabelled and deleted by
// concurrent clients; the final ConfigMaps equal what the offline evaluator
// computes from the final pods: nothing lost, nothing stale.
func TestChurnMatchesEval(t *testing.T) {
	const ns = "e2e-churn"
	startManager(t)
	mustKubectl(t, "", "create", "namespace", ns)
	op := groupOperator("churn-groups", ns)
	mustKubectl(t, op, "apply", "-f", "-")
	churn(t, ns, 500, 8, 250, 1)
	waitConverged(t, op, ns, "churn-groups/group-members")
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "churn-groups")
}

// TestRestartConverges stops the manager in the middle of churn, changes and
// deletes sources while it is down, and starts it again: the targets converge
// to the same state, stale ConfigMaps are deleted, and a ConfigMap the
// operator did not write is never touched.
func TestRestartConverges(t *testing.T) {
	const ns = "e2e-restart-churn"
	stop := startManager(t)
	mustKubectl(t, "", "create", "namespace", ns)
	// Not written by the operator; must survive even though its name looks like a target.
	mustKubectl(t, "", "-n", ns, "create", "configmap", "group-z", "--from-literal=members=manual")
	op := groupOperator("restart-groups", ns)
	mustKubectl(t, op, "apply", "-f", "-")
	churn(t, ns, 200, 4, 150, 2)
	done := make(chan struct{})
	go func() {
		defer close(done)
		churn(t, ns, 200, 4, 150, 3)
	}()
	time.Sleep(300 * time.Millisecond)
	stop()
	<-done
	// While the manager is down: delete every pod of group "a" and move "b" to "z".
	pods := &corev1.PodList{}
	if err := k8sClient.List(context.Background(), pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		switch p.Labels["group"] {
		case "a":
			if err := k8sClient.Delete(context.Background(), p); err != nil {
				t.Fatal(err)
			}
		case "b":
			p.Labels["group"] = "y"
			if err := k8sClient.Update(context.Background(), p); err != nil {
				t.Fatal(err)
			}
		}
	}
	startManager(t)
	waitConverged(t, op, ns, "restart-groups/group-members")
	got := actualConfigMaps(t, ns, "restart-groups/group-members")
	if _, ok := got["group-a"]; ok {
		t.Error("stale group-a ConfigMap was not deleted")
	}
	manual := &corev1.ConfigMap{}
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "group-z"}, manual); err != nil || manual.Data["members"] != "manual" {
		t.Errorf("a ConfigMap the operator did not write was touched: %v %v", manual.Data, err)
	}
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "restart-groups")
}
