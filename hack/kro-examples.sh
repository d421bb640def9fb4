#!/usr/bin/env bash
# Runs kro's own examples (examples/kubernetes/ of a kro checkout) on a
# local control plane with `dctl start`: each example's RGDs and instances
# are applied unchanged with kubectl, and the resources and status kro's
# READMEs and docs state are waited for.
#
# Usage: hack/kro-examples.sh KRO_CHECKOUT [CASE...]
#   KRO_CHECKOUT  a checkout of github.com/kubernetes-sigs/kro (read only)
#   CASE          the cases to run (default: every directory under
#                 test/compat/kro/)
#   DCTL=<path>   the dctl to run (default: built from this tree)
#   TIMEOUT=<s>   how long each check waits (default: 60)
#
# `make test` runs it (test/compat TestKroExamples) on the examples of the
# kro Go module, fetched into the module cache. It starts its own control
# plane (hack/local-cluster.sh, from bin/k8s) with the project's CRDs and one
# `dctl start`. Exit status: 0 when
# every case gives its expected results, 1 otherwise, 2 on a usage error.
#
# Each case is a file test/compat/kro/<example>/steps, one step a line
# (empty lines and lines starting with # are skipped):
#   apply PATH                     kubectl apply -f KRO_CHECKOUT/PATH; deleted
#                                  again (reverse order) when the case ends
#   want KIND NAME JSONPATH VALUE  wait until `kubectl get KIND NAME -o
#                                  jsonpath=JSONPATH` prints VALUE (the rest of
#                                  the line; may be empty)
#   gone KIND NAME                 wait until the object does not exist
#   absent KIND NAME SECONDS       the object does not appear for SECONDS
#   pods-ready SELECTOR            mark the Pods SELECTOR selects Ready through
#                                  their status subresource (no kubelet runs)
#   pods-succeeded SELECTOR        mark the Pods SELECTOR selects Succeeded (a
#                                  Job's Pods: the Job controller then
#                                  completes the Job)
#   namespace NS                   the namespace of the steps after it
#                                  (default: default)
#   apply-error PATH TEXT          kubectl apply -f PATH fails with TEXT in
#                                  its error output
set -euo pipefail

if (($# < 1)); then
  sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
checkout=$1
shift
root=$(cd "$(dirname "$0")/.." && pwd)
cases=$root/test/compat/kro
timeout=${TIMEOUT:-60}
if [[ ! -d $checkout/examples/kubernetes ]]; then
  echo "error: $checkout/examples/kubernetes: not found; give the path of a checkout of kubernetes-sigs/kro" >&2
  exit 2
fi
names=("$@")
if ((${#names[@]} == 0)); then
  for d in "$cases"/*/; do names+=("$(basename "$d")"); done
fi

tmp=$(mktemp -d)
dctl_pid=''
cleanup() {
  if [[ -n $dctl_pid ]]; then kill "$dctl_pid" 2>/dev/null || true; wait "$dctl_pid" 2>/dev/null || true; fi
  "$root/hack/local-cluster.sh" stop "$tmp/cluster" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

dctl=${DCTL:-}
if [[ -z $dctl ]]; then
  (cd "$root" && go build -o "$tmp/dctl" ./cmd/dctl)
  dctl=$tmp/dctl
fi
kubectl=${KUBECTL:-$root/bin/k8s/kubectl}

"$root/hack/local-cluster.sh" start "$tmp/cluster" >"$tmp/cluster.log" 2>&1 || {
  cat "$tmp/cluster.log" >&2
  exit 1
}
export KUBECONFIG=$tmp/cluster/kubeconfig
k() { "$kubectl" "$@"; }
for f in "$root"/config/crd/*_*.yaml; do k apply --server-side -f "$f" >/dev/null; done
k wait --for=condition=Established --timeout=60s crd --all >/dev/null
"$dctl" start --health-addr 0 --metrics-addr 0 --api-server-addr 127.0.0.1:0 >"$tmp/dctl.log" 2>&1 &
dctl_pid=$!

# wait_for DESCRIPTION COMMAND...: run COMMAND until it succeeds or the
# timeout passes.
wait_for() {
  local what=$1 end=$((SECONDS + timeout))
  shift
  until "$@"; do
    if ((SECONDS >= end)); then
      echo "  timed out: $what" >&2
      return 1
    fi
    sleep 1
  done
}

fail=0
for name in "${names[@]}"; do
  steps=$cases/$name/steps
  if [[ ! -f $steps ]]; then
    echo "FAIL $name: $steps: not found" >&2
    fail=1
    continue
  fi
  ns=default applied=() ok=1 n=0
  while IFS= read -r line || [[ -n $line ]]; do
    n=$((n + 1))
    [[ -z ${line// /} || $line == '#'* ]] && continue
    read -r op a1 a2 a3 rest <<<"$line"
    case $op in
    namespace)
      ns=$a1
      k create namespace "$ns" >/dev/null 2>&1 || true
      ;;
    apply)
      if ! out=$(k -n "$ns" apply -f "$checkout/$a1" 2>&1); then
        echo "  $name:$n: kubectl apply -f $a1: $out" >&2
        ok=0
        break
      fi
      applied=("$a1" "${applied[@]}")
      ;;
    apply-error)
      text=${line#apply-error "$a1" }
      if out=$(k -n "$ns" apply -f "$checkout/$a1" 2>&1); then
        echo "  $name:$n: kubectl apply -f $a1 succeeded, want an error with: $text" >&2
        applied=("$a1" "${applied[@]}")
        ok=0
        break
      elif [[ $out != *"$text"* ]]; then
        echo "  $name:$n: kubectl apply -f $a1: $out; want: $text" >&2
        ok=0
        break
      fi
      ;;
    want)
      value=${line#want "$a1" "$a2" "$a3"}
      value=${value# }
      got() { [[ $(k -n "$ns" get "$a1" "$a2" -o "jsonpath=$a3" 2>&1) == "$value" ]]; }
      if ! wait_for "$a1 $a2 $a3 = \"$value\"" got; then
        echo "  $name:$n: $a1 $a2 $a3 is \"$(k -n "$ns" get "$a1" "$a2" -o "jsonpath=$a3" 2>&1)\", want \"$value\"" >&2
        ok=0
        break
      fi
      ;;
    gone)
      isgone() { ! k -n "$ns" get "$a1" "$a2" >/dev/null 2>&1; }
      if ! wait_for "$a1 $a2 gone" isgone; then
        echo "  $name:$n: $a1 $a2 still exists" >&2
        ok=0
        break
      fi
      ;;
    absent)
      end=$((SECONDS + a3))
      while ((SECONDS < end)); do
        if k -n "$ns" get "$a1" "$a2" >/dev/null 2>&1; then
          echo "  $name:$n: $a1 $a2 exists" >&2
          ok=0
          break 2
        fi
        sleep 1
      done
      ;;
    pods-ready | pods-succeeded)
      pods() { [[ -n $(k -n "$ns" get pods -l "$a1" -o name) ]]; }
      if ! wait_for "pods $a1" pods; then
        ok=0
        break
      fi
      if [[ $op == pods-ready ]]; then
        status='{"status":{"conditions":[{"type":"Initialized","status":"True"},{"type":"Ready","status":"True"}]}}'
      else
        status='{"status":{"phase":"Succeeded"}}'
      fi
      for p in $(k -n "$ns" get pods -l "$a1" -o name); do
        k -n "$ns" patch "$p" --subresource=status --type=merge -p "$status" >/dev/null
      done
      ;;
    *)
      echo "  $name:$n: unknown step $op" >&2
      ok=0
      break
      ;;
    esac
  done <"$steps"
  for f in "${applied[@]}"; do
    k -n "$ns" delete -f "$checkout/$f" --ignore-not-found --timeout=60s >/dev/null 2>&1 || true
  done
  if ((ok)); then
    echo "ok   $name"
  else
    echo "FAIL $name (dctl log: the last lines)" >&2
    tail -n 5 "$tmp/dctl.log" >&2
    fail=1
  fi
done
exit $fail
