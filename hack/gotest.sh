#!/usr/bin/env bash
# Runs go test with the given arguments, keeps its whole output in a log
# file and, when it fails, repeats at the end what says why
# (hack/gotest_summary.py): each failed test with its messages (also with
# -v, which prints them before the test's "--- FAIL" line), a test that
# never finished, each failed package with its own output (a failing
# TestMain, os.Exit), build, vet and setup errors, panics with the place
# they happened, and what was running when go test's -timeout stopped a
# package. Goroutine dumps stay in the log; -json logs are read too.
# Usage: hack/gotest.sh [go test arguments...]
# Environment: GO (default go), GOTEST_LOG (default bin/test.log).
set -uo pipefail
log=${GOTEST_LOG:-bin/test.log}
# Check that the log can be written before go test runs, not after.
if ! err=$({ mkdir -p "$(dirname "$log")" && : >"$log"; } 2>&1); then
  echo "gotest.sh: cannot write the log file $log (GOTEST_LOG): ${err##*: }; go test not run" >&2
  exit 2
fi
"${GO:-go}" test "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if ((rc != 0)); then
  echo
  echo "==> go test failed (exit code $rc); what failed, from $log:"
  python3 "$(dirname "${BASH_SOURCE[0]}")/gotest_summary.py" "$log" "$("${GO:-go}" env GOROOT 2>/dev/null)"
fi
exit $rc
