#!/usr/bin/env bash
# The getting-started scenario end to end on a local control plane:
# start etcd, kube-apiserver and kube-controller-manager, install the
# Operator CRD, run `dctl start`, apply the pod container-number annotator
# and some pods with kubectl, print the annotations and the operator status,
# then clean everything up.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
KUBECTL="$ROOT/bin/k8s/kubectl"
DCTL="$ROOT/bin/dctl"
WORK="$(mktemp -d -t dcontroller-demo-XXXXXX)"
DCTL_PID=""

cleanup() {
  set +e
  [[ -n "$DCTL_PID" ]] && kill "$DCTL_PID" 2>/dev/null && wait "$DCTL_PID" 2>/dev/null
  "$ROOT/hack/local-cluster.sh" stop "$WORK/cluster" >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT

# step names the next step and says how long the previous one took.
STEP_START=""
step() {
  [[ -n "$STEP_START" ]] && printf '    (%ds)\n' $((SECONDS - STEP_START))
  STEP_START=$SECONDS
  printf '\n\033[1m==> %s\033[0m\n' "$*"
}
k() { "$KUBECTL" --kubeconfig "$WORK/cluster/kubeconfig" "$@"; }

wait_for() { # description command...
  local what=$1; shift
  for _ in $(seq 150); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  echo "error: timed out waiting for $what; manager log:" >&2
  tail -30 "$WORK/dctl.log" >&2
  return 1
}

annotation_is() { [[ "$(k get pod "$1" -o jsonpath='{.metadata.annotations.dcontroller\.io/container-num}')" == "$2" ]]; }

step "Starting a local control plane (etcd, kube-apiserver, kube-controller-manager)"
"$ROOT/hack/local-cluster.sh" start "$WORK/cluster"

step "Installing the Operator CRD"
k apply -f "$ROOT/config/crd/dcontroller.io_operators.yaml"
k wait --for condition=established --timeout=30s crd/operators.dcontroller.io

step "Starting the manager: dctl start (log in $WORK/dctl.log)"
"$DCTL" start --kubeconfig "$WORK/cluster/kubeconfig" --metrics-addr 0 --health-addr 0 --api-server-addr 127.0.0.1:0 >"$WORK/dctl.log" 2>&1 &
DCTL_PID=$!

step "Applying the pod container-number annotator"
k apply -f "$ROOT/examples/pod-container-num-annotator/operator.yaml"

step "Creating pods: net-debug (1 container) and net-debug-2 (3 containers) in default, etcd in kube-system"
k run net-debug --image=docker.io/l7mp/net-debug:latest
k create -f - <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: net-debug-2
spec:
  containers:
  - name: net-debug-1
    image: docker.io/l7mp/net-debug:latest
  - name: net-debug-2
    image: docker.io/l7mp/net-debug:latest
  - name: net-debug-3
    image: docker.io/l7mp/net-debug:latest
YAML
k -n kube-system run etcd --image=registry.k8s.io/etcd:3.5.0

wait_for "the net-debug annotation" annotation_is net-debug 1
wait_for "the net-debug-2 annotation" annotation_is net-debug-2 3

step "kubectl get pod net-debug -o jsonpath='{.metadata.annotations}'"
k get pod net-debug -o jsonpath='{.metadata.annotations}'; echo
step "kubectl get pod net-debug-2 -o jsonpath='{.metadata.annotations}'"
k get pod net-debug-2 -o jsonpath='{.metadata.annotations}'; echo
step "kubectl -n kube-system get pod etcd -o jsonpath='{.metadata.annotations}' (other namespace: untouched)"
k -n kube-system get pod etcd -o jsonpath='{.metadata.annotations}'; echo

step "Operator status"
wait_for "the Ready condition" bash -c "[[ \$('$KUBECTL' --kubeconfig '$WORK/cluster/kubeconfig' get operators.dcontroller.io pod-container-num-annotator -o jsonpath='{.status.controllers[0].conditions[0].status}') == True ]]"
k get operators.dcontroller.io pod-container-num-annotator -o jsonpath='{range .status.controllers[*]}{.name}: Ready={.conditions[0].status} ({.conditions[0].message}){"\n"}{end}'

step "Cleaning up"
k delete pod net-debug net-debug-2
k -n kube-system delete pod etcd
k delete operators.dcontroller.io pod-container-num-annotator
echo "demo finished in ${SECONDS}s"
