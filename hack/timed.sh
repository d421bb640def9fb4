#!/usr/bin/env bash
# Runs one long build step and says what it is doing: the step's name, how
# long it usually takes, and, at the end, the time it took (or that it
# failed, with the command's exit code).
# Usage: hack/timed.sh "<what>" "<usual duration>" command [args...]
set -uo pipefail
what=$1 usual=$2
shift 2
echo "==> $what (usually $usual)" >&2
start=$SECONDS
"$@"
rc=$?
elapsed=$((SECONDS - start))
if ((rc == 0)); then
  printf '==> %s: done in %dm %02ds\n' "$what" $((elapsed / 60)) $((elapsed % 60)) >&2
else
  printf '==> %s: FAILED after %dm %02ds (exit code %d)\n' "$what" $((elapsed / 60)) $((elapsed % 60)) "$rc" >&2
fi
exit $rc
