#!/usr/bin/env bash
# devtools/gpu.sh, the GPU runner, checked without a GPU: its scripts parse (and
# pass shellcheck where it is installed), --help lists exactly the steps it has,
# an unknown step is refused before anything runs, and a failed step is reported
# in $OUT/<step>/log and $OUT/summary.txt while the next step still runs.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
RUNNER=$ROOT/devtools/gpu.sh
fail=0
bad() { echo "FAIL: $*"; fail=1; }

for f in "$ROOT"/devtools/*.sh; do bash -n "$f" || bad "bash -n $f"; done
if command -v shellcheck > /dev/null; then
  shellcheck -x -S warning "$ROOT"/devtools/gpu.sh "$ROOT"/devtools/gpu_env.sh "$ROOT"/devtools/gpu_soak.sh \
    "$ROOT"/devtools/gpu_external.sh || bad "shellcheck"
else
  echo "shellcheck not installed: not run"
fi

help=$(bash "$RUNNER" --help) || bad "--help exit status $?"
listed=$(sed -n '/^Setup$/,/^Examples$/p' <<<"$help" | grep -oE '^  [a-z][a-z-]*' | sed 's/^  //' | sort)
defined=$(grep -oE '^step_[a-z_]+\(\)' "$RUNNER" | sed 's/^step_//; s/()$//; s/_/-/g' | sort)
[ -n "$listed" ] || bad "--help lists no step"
[ "$listed" = "$defined" ] || bad "--help and the step functions differ: $(diff <(echo "$listed") <(echo "$defined") | grep '^[<>]' | tr '\n' ' ')"

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
OUT=$tmp/out bash "$RUNNER" tier no-such-step > "$tmp/unknown.txt" 2>&1
rc=$?
((rc == 2)) || bad "an unknown step: exit $rc, want 2"
grep -q "no step 'no-such-step'" "$tmp/unknown.txt" || bad "an unknown step is not named: $(cat "$tmp/unknown.txt")"
[ ! -e "$tmp/out/tier" ] || bad "a step ran although the command line named an unknown one"

# No build in $B: both steps fail, each says why, the second runs after the first failed.
OUT=$tmp/out B=$tmp/no-build bash "$RUNNER" tier sweep > "$tmp/run.txt" 2>&1
rc=$?
((rc == 1)) || bad "failed steps: exit $rc, want 1"
for s in tier sweep; do
  grep -q "run the build step first" "$tmp/out/$s/log" 2>/dev/null || bad "$s: no log saying why in \$OUT/$s/log"
  grep -qE "^$s +FAILED" "$tmp/out/summary.txt" 2>/dev/null || bad "$s: not in \$OUT/summary.txt as failed"
done
((fail)) && { echo "--- output"; cat "$tmp/run.txt"; exit 1; }
echo "gpu.sh: $(wc -w <<<"$listed") steps, --help and the runner agree"
