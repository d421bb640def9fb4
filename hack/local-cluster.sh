#!/usr/bin/env bash
# Start or stop a local Kubernetes control plane (etcd, kube-apiserver and
# kube-controller-manager) on loopback, with no container runtime, scheduler
# or kubelet.
#
#   hack/local-cluster.sh start DIR [--sharded-watch]
#                                     start it with data in DIR, write DIR/kubeconfig,
#                                     return once kube-apiserver's /readyz and
#                                     kube-controller-manager's /healthz answer;
#                                     --sharded-watch turns on the ShardedListAndWatch
#                                     feature gate (KEP-5866: list and watch with
#                                     ?shardSelector=shardRange(...))
#   hack/local-cluster.sh stop DIR    stop it
#   hack/local-cluster.sh status DIR  print whether it runs, where, and its feature gates
#
# The kube-apiserver flags follow what controller-runtime's envtest uses, so
# Pods can be created without a ServiceAccount (the ServiceAccount admission
# plugin is off). kube-controller-manager runs only the controllers that make
# sense without nodes (KCM_CONTROLLERS below): the garbage collector (objects
# whose owners are gone are deleted, as ownerReferences promise), the
# namespace controller (a deleted namespace is emptied and goes away), the
# Deployment, ReplicaSet and Job controllers (their Pods stay Pending: nothing
# schedules them; a script may mark them Ready or Succeeded itself), and the ServiceAccount and token controllers (the default
# ServiceAccount of each namespace). It uses its own credentials (a token in
# the group system:masters), not per-controller ServiceAccounts. Logs are in
# DIR/{etcd,kube-apiserver,kube-controller-manager}.log.
# Several clusters in different DIRs can run at once: ports are picked free.
# Binaries come from bin/k8s (make kube-binaries), or $KUBE_BIN_DIR.
# FEATURE_GATES=Gate1=true,Gate2=false passes feature gates to kube-apiserver
# (--feature-gates), on top of the one --sharded-watch sets.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${KUBE_BIN_DIR:-$ROOT/bin/k8s}"
# The controllers kube-controller-manager runs (its --controllers).
KCM_CONTROLLERS=garbage-collector-controller,namespace-controller,deployment-controller,replicaset-controller,job-controller,serviceaccount-controller,serviceaccount-token-controller

usage() {
  awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'
  exit "${1:-1}"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

wait_ready() { # url what pidfile timeout_s [curl args...]
  local url=$1 what=$2 pidfile=$3 timeout=$4; shift 4
  local deadline=$((SECONDS + timeout))
  until curl -fsS "$@" "$url" >/dev/null 2>&1; do
    if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
      echo "error: $what exited; see $DIR/$what.log" >&2
      tail -5 "$DIR/$what.log" >&2 || true
      return 1
    fi
    if ((SECONDS > deadline)); then
      echo "error: $what did not become ready within ${timeout}s; see $DIR/$what.log" >&2
      tail -20 "$DIR/$what.log" >&2 || true
      return 1
    fi
    sleep 0.2
  done
}

write_kubeconfig() { # file api_port user token namespace
  cat >"$1" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$2
    insecure-skip-tls-verify: true
users:
- name: $3
  user:
    token: $4
contexts:
- name: local
  context:
    cluster: local
    user: $3
    namespace: $5
current-context: local
KUBECONFIG
}

start() {
  for b in etcd kube-apiserver kube-controller-manager; do
    if [[ ! -x "$BIN/$b" ]]; then
      echo "error: $BIN/$b not found; run 'make kube-binaries' first" >&2
      exit 1
    fi
  done
  mkdir -p "$DIR"
  DIR="$(cd "$DIR" && pwd)"
  if [[ -f "$DIR/apiserver.pid" ]] && kill -0 "$(cat "$DIR/apiserver.pid")" 2>/dev/null; then
    echo "error: a cluster already runs in $DIR (stop it first)" >&2
    exit 1
  fi
  mkdir -p "$DIR/etcd" "$DIR/certs"

  local etcd_port etcd_peer api_port token
  etcd_port=$(free_port); etcd_peer=$(free_port); api_port=$(free_port)
  echo "starting etcd on 127.0.0.1:$etcd_port" >&2
  "$BIN/etcd" --data-dir "$DIR/etcd" --name local \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
    --initial-cluster "local=http://127.0.0.1:$etcd_peer" \
    --unsafe-no-fsync >"$DIR/etcd.log" 2>&1 &
  echo $! >"$DIR/etcd.pid"
  wait_ready "http://127.0.0.1:$etcd_port/health" etcd "$DIR/etcd.pid" 30

  if [[ ! -f "$DIR/certs/sa.key" ]]; then
    openssl genrsa -out "$DIR/certs/sa.key" 2048 2>/dev/null
    openssl rsa -in "$DIR/certs/sa.key" -pubout -out "$DIR/certs/sa.pub" 2>/dev/null
  fi
  local kcm_token
  [[ -f "$DIR/token" ]] || od -An -tx1 -N16 /dev/urandom | tr -d ' \n' >"$DIR/token"
  [[ -f "$DIR/controller-manager.token" ]] || od -An -tx1 -N16 /dev/urandom | tr -d ' \n' >"$DIR/controller-manager.token"
  token=$(cat "$DIR/token")
  kcm_token=$(cat "$DIR/controller-manager.token")
  printf '%s\n' "$token,admin,admin,system:masters" \
    "$kcm_token,system:kube-controller-manager,system:kube-controller-manager,system:masters" >"$DIR/certs/tokens.csv"

  local gates="${FEATURE_GATES:-}"
  if [[ $SHARDED_WATCH == 1 ]]; then
    gates="ShardedListAndWatch=true${gates:+,$gates}"
  fi
  local gate_args=()
  [[ -z $gates ]] || gate_args=(--feature-gates "$gates")
  echo "$gates" >"$DIR/feature-gates"

  echo "starting kube-apiserver on 127.0.0.1:$api_port${gates:+ with feature gates $gates}" >&2
  "$BIN/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$etcd_port" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
    --endpoint-reconciler-type none \
    --cert-dir "$DIR/certs" \
    --token-auth-file "$DIR/certs/tokens.csv" \
    --authorization-mode RBAC \
    --service-cluster-ip-range 10.0.0.0/24 \
    --allow-privileged=true \
    --disable-admission-plugins ServiceAccount \
    --service-account-issuer "https://127.0.0.1:$api_port/" \
    --service-account-key-file "$DIR/certs/sa.pub" \
    --service-account-signing-key-file "$DIR/certs/sa.key" \
    "${gate_args[@]}" \
    >"$DIR/kube-apiserver.log" 2>&1 &
  echo $! >"$DIR/apiserver.pid"
  wait_ready "https://127.0.0.1:$api_port/readyz" kube-apiserver "$DIR/apiserver.pid" 120 -k -H "Authorization: Bearer $token"

  write_kubeconfig "$DIR/kubeconfig" "$api_port" admin "$token" default
  write_kubeconfig "$DIR/controller-manager.kubeconfig" "$api_port" system:kube-controller-manager "$kcm_token" kube-system

  # The controller manager serves /healthz on a loopback port of its own,
  # with a self-signed certificate in DIR/controller-manager-certs.
  local kcm_port
  kcm_port=$(free_port)
  echo "starting kube-controller-manager on 127.0.0.1:$kcm_port (controllers: $KCM_CONTROLLERS)" >&2
  "$BIN/kube-controller-manager" \
    --kubeconfig "$DIR/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$DIR/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$DIR/controller-manager.kubeconfig" \
    --authentication-skip-lookup \
    --bind-address 127.0.0.1 --secure-port "$kcm_port" \
    --cert-dir "$DIR/controller-manager-certs" \
    --controllers "$KCM_CONTROLLERS" \
    --use-service-account-credentials=false \
    --service-account-private-key-file "$DIR/certs/sa.key" \
    --root-ca-file "$DIR/certs/apiserver.crt" \
    --leader-elect=false \
    --kube-api-qps 100 --kube-api-burst 200 \
    >"$DIR/kube-controller-manager.log" 2>&1 &
  echo $! >"$DIR/controller-manager.pid"
  echo "$kcm_port" >"$DIR/controller-manager.port"
  wait_ready "https://127.0.0.1:$kcm_port/healthz" kube-controller-manager "$DIR/controller-manager.pid" 60 -k

  echo "cluster ready: export KUBECONFIG=$DIR/kubeconfig" >&2
}

stop() {
  local pid
  for f in controller-manager apiserver etcd; do
    if [[ -f "$DIR/$f.pid" ]]; then
      pid=$(cat "$DIR/$f.pid")
      if kill "$pid" 2>/dev/null; then
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
      fi
      rm -f "$DIR/$f.pid"
    fi
  done
  echo "cluster in $DIR stopped" >&2
}

status() {
  if [[ -f "$DIR/apiserver.pid" ]] && kill -0 "$(cat "$DIR/apiserver.pid")" 2>/dev/null; then
    local gates
    gates=$(cat "$DIR/feature-gates" 2>/dev/null || true)
    echo "running: $(grep server: "$DIR/kubeconfig" | awk '{print $2}') (KUBECONFIG=$DIR/kubeconfig)${gates:+ feature gates: $gates}"
    if [[ -f "$DIR/controller-manager.pid" ]] && kill -0 "$(cat "$DIR/controller-manager.pid")" 2>/dev/null; then
      echo "kube-controller-manager: running on https://127.0.0.1:$(cat "$DIR/controller-manager.port") (controllers: $KCM_CONTROLLERS)"
    else
      echo "kube-controller-manager: stopped (see $DIR/kube-controller-manager.log)"
    fi
  else
    echo "stopped"
    return 1
  fi
}

case "${1:-}" in -h|--help|help) usage 0 ;; esac
SHARDED_WATCH=0
if [[ $# -eq 3 && $1 == start && $3 == --sharded-watch ]]; then
  SHARDED_WATCH=1
elif [[ $# -ne 2 ]]; then
  usage
fi
DIR=$2
case "$1" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  -h|--help|help) usage 0 ;;
  *) usage ;;
esac
