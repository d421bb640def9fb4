#!/usr/bin/env bash
# Start or stop a local Kubernetes control plane (etcd + kube-apiserver) on
# loopback, with no container runtime, scheduler or controller-manager.
#
#   hack/local-cluster.sh start DIR [--sharded-watch]
#                                     start it with data in DIR, write DIR/kubeconfig,
#                                     return once /readyz answers; --sharded-watch turns
#                                     on the ShardedListAndWatch feature gate (KEP-5866:
#                                     list and watch with ?shardSelector=shardRange(...))
#   hack/local-cluster.sh stop DIR    stop it
#   hack/local-cluster.sh status DIR  print whether it runs, where, and its feature gates
#
# The flags follow what controller-runtime's envtest uses, so Pods can be
# created without a controller-manager (the ServiceAccount admission plugin is
# off). Several clusters in different DIRs can run at once: ports are picked free.
# Binaries come from bin/k8s (make kube-binaries), or $KUBE_BIN_DIR.
# FEATURE_GATES=Gate1=true,Gate2=false passes feature gates to kube-apiserver
# (--feature-gates), on top of the one --sharded-watch sets.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${KUBE_BIN_DIR:-$ROOT/bin/k8s}"

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

start() {
  for b in etcd kube-apiserver; do
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
  if [[ ! -f "$DIR/token" ]]; then
    token=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
    echo "$token" >"$DIR/token"
    echo "$token,admin,admin,system:masters" >"$DIR/certs/tokens.csv"
  fi
  token=$(cat "$DIR/token")

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

  cat >"$DIR/kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$api_port
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: $token
contexts:
- name: local
  context:
    cluster: local
    user: admin
    namespace: default
current-context: local
KUBECONFIG
  echo "cluster ready: export KUBECONFIG=$DIR/kubeconfig" >&2
}

stop() {
  local pid
  for f in apiserver etcd; do
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
