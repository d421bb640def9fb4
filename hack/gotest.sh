#!/usr/bin/env bash
# Runs go test with the given arguments, keeps its whole output in a log
# file and, when it fails, repeats at the end what says why: each failed
# test with its messages, each failed package, panics, and the tests that
# were running when go test's -timeout stopped a package (go test prints
# those at the top of a long goroutine dump, far from the end).
# Usage: hack/gotest.sh [go test arguments...]
# Environment: GO (default go), GOTEST_LOG (default bin/test.log).
set -uo pipefail
log=${GOTEST_LOG:-bin/test.log}
mkdir -p "$(dirname "$log")"
"${GO:-go}" test "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if ((rc != 0)); then
  echo
  echo "==> go test failed (exit code $rc); what failed, from $log:"
  awk '
    # A failed test and the indented lines under it (its messages), at
    # most 40 of them.
    /^[ \t]*--- FAIL/ { print; msg = 40; next }
    msg > 0 && /^[ \t]+/ && !/^[ \t]*--- / { print; msg--; next }
    { msg = 0 }
    /^panic: / { print }
    # A timeout: go test lists the tests running then, one per line.
    /^[ \t]*running tests:/ { print; run = 1; next }
    run && /^[ \t]+Test/ { print; next }
    { run = 0 }
    /^FAIL[ \t]/ { print }
  ' "$log"
fi
exit $rc
