#!/usr/bin/env bash
# Runs the example operators of Δ-controller's successor (l7mp/dbsp, its
# dcontroller/examples) through `dctl eval`, their files unmodified, on our
# own inputs, and compares the results with our expected results.
#
# Usage: hack/successor-examples.sh DBSP_CHECKOUT
#   DBSP_CHECKOUT  a checkout of github.com/l7mp/dbsp (read only)
#   DCTL=<path>    the dctl to run (default: built from this tree into a
#                  temporary directory)
#
# A manual tool, not part of `make test`: it needs a checkout of another
# repository. Exit status: 0 when every step gives its expected result, 1 on
# a mismatch, 2 on a usage error.
#
# The cases are the directories under test/compat/dbsp/. Each holds:
#   operator        one line: the operator file's path in the checkout;
#                   "<path> as <name>" when the file is a bare `controllers:`
#                   list, run as the spec of an Operator named <name>
#   NN-<step>.yaml  inputs, applied in the order of their names; step NN is
#                   run on the inputs 01..NN together, so each step's result
#                   is the state after the changes so far
#   NN-<step>.expected        the exact stdout of `dctl eval` after step NN
#                             (exit status 0), or
#   NN-<step>.expected-error  dctl exits non-zero and its stderr holds each
#                             line of this file that is neither empty nor a
#                             comment (#)
set -euo pipefail
shopt -s nullglob

if (($# != 1)); then
  sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
checkout=$1
root=$(cd "$(dirname "$0")/.." && pwd)
cases=$root/test/compat/dbsp
if [[ ! -d $checkout/dcontroller/examples ]]; then
  echo "error: $checkout/dcontroller/examples: not found; give the path of a checkout of l7mp/dbsp" >&2
  exit 2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dctl=${DCTL:-}
if [[ -z $dctl ]]; then
  (cd "$root" && go build -o "$tmp/dctl" ./cmd/dctl)
  dctl=$tmp/dctl
fi

fail=0
for dir in "$cases"/*/; do
  name=$(basename "$dir")
  if [[ ! -f $dir/operator ]]; then
    echo "FAIL $name: no operator file" >&2
    fail=1
    continue
  fi
  as='' opname=''
  read -r opfile as opname <"$dir/operator" || true
  src=$checkout/$opfile
  if [[ ! -f $src ]]; then
    echo "FAIL $name: $opfile: not found in $checkout" >&2
    fail=1
    continue
  fi
  op=$src
  if [[ $as == as && -n $opname ]]; then
    # A bare controllers: list becomes an Operator's spec, the file's text
    # unchanged but indented under spec:.
    op=$tmp/$name-operator.yaml
    printf 'apiVersion: dcontroller.io/v1alpha1\nkind: Operator\nmetadata:\n  name: %s\nspec:\n' "$opname" >"$op"
    sed 's/^/  /' "$src" >>"$op"
  elif [[ -n $as ]]; then
    echo "FAIL $name: operator: want \"<path>\" or \"<path> as <name>\"" >&2
    fail=1
    continue
  fi
  inputs=()
  steps=("$dir"/[0-9][0-9]-*.yaml)
  if ((${#steps[@]} == 0)); then
    echo "FAIL $name: no NN-<step>.yaml inputs" >&2
    fail=1
    continue
  fi
  for step in "${steps[@]}"; do
    inputs+=(-i "$step")
    base=${step%.yaml}
    label="$name/$(basename "$base")"
    rc=0
    "$dctl" eval -f "$op" "${inputs[@]}" >"$tmp/out" 2>"$tmp/err" || rc=$?
    if [[ -f $base.expected ]]; then
      if ((rc != 0)); then
        echo "FAIL $label: dctl eval exited $rc:" >&2
        cat "$tmp/err" >&2
        fail=1
      elif ! diff -u "$base.expected" "$tmp/out" >"$tmp/diff"; then
        echo "FAIL $label: the result differs from $(basename "$base").expected:" >&2
        cat "$tmp/diff" >&2
        fail=1
      else
        echo "ok   $label"
      fi
    elif [[ -f $base.expected-error ]]; then
      missing=0
      while IFS= read -r line; do
        [[ -z $line || $line == '#'* ]] && continue
        if ! grep -qF -- "$line" "$tmp/err"; then
          echo "FAIL $label: stderr lacks: $line" >&2
          missing=1
        fi
      done <"$base.expected-error"
      if ((rc == 0)); then
        echo "FAIL $label: dctl eval succeeded; the expected error is gone (update the case and docs/dbsp.md)" >&2
        fail=1
      elif ((missing)); then
        echo "stderr was:" >&2
        cat "$tmp/err" >&2
        fail=1
      else
        echo "ok   $label (the documented error)"
      fi
    else
      echo "FAIL $label: neither $(basename "$base").expected nor .expected-error exists" >&2
      fail=1
    fi
  done
done
exit $fail
