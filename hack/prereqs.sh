#!/usr/bin/env bash
# Checks the tools the build, the tests and the demo need, before anything
# long starts: Go (at least the version go.mod names), make, curl (the
# local control plane's readiness probes), openssl (its service-account
# key) and python3 (its free ports, and the language-independence hook of
# test/e2e). Prints one line per missing tool with what to do, and exits 1 when
# any is missing. Usage: hack/prereqs.sh [--quiet]
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
quiet=false
[[ "${1:-}" == "--quiet" ]] && quiet=true

missing=0
miss() { echo "prerequisite missing: $*" >&2; missing=1; }

# version_ge A B: A >= B for dotted versions (1.26.0 >= 1.26).
version_ge() {
  local IFS=.
  local -a a=($1) b=($2)
  for i in 0 1 2; do
    local x=${a[i]:-0} y=${b[i]:-0}
    ((10#$x > 10#$y)) && return 0
    ((10#$x < 10#$y)) && return 1
  done
  return 0
}

want_go=$(awk '$1 == "go" {print $2; exit}' "$ROOT/go.mod")
if ! command -v "${GO:-go}" >/dev/null 2>&1; then
  miss "go: install Go $want_go or newer (the toolchain from the Go download page, or your distribution's golang package)"
else
  have_go=$("${GO:-go}" env GOVERSION 2>/dev/null | sed 's/^go//; s/[^0-9.].*$//')
  if [[ -z "$have_go" ]] || ! version_ge "$have_go" "$want_go"; then
    miss "go: found ${have_go:-an unknown version}, go.mod needs $want_go or newer"
  fi
fi
command -v make >/dev/null 2>&1 || miss "make: install GNU make (Debian/Ubuntu: apt-get install make)"
command -v curl >/dev/null 2>&1 || miss "curl: install curl (Debian/Ubuntu: apt-get install curl); the local control plane uses it to wait for etcd and kube-apiserver"
command -v openssl >/dev/null 2>&1 || miss "openssl: install openssl (Debian/Ubuntu: apt-get install openssl); the local control plane uses it for its service-account key"
command -v python3 >/dev/null 2>&1 || miss "python3: install Python 3 (Debian/Ubuntu: apt-get install python3); the local control plane uses it to pick free ports, and an end-to-end test runs a Python hook"

if ((missing)); then
  exit 1
fi
$quiet || echo "prerequisites: go $have_go (go.mod: $want_go), make, curl, openssl, python3: ok"
