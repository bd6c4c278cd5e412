#!/usr/bin/env bash
# cuxfer calibrate end to end on the simulated CUDA.
#   calibrate_test.sh CUXFER CALIBRATE_SIM CALIBRATE_REAL PAGEABLE_LOOP_SIM
set -euo pipefail
CUXFER=$1 SIM=$2 REAL=$3 APP=$4
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export CUXFER_PROFILE_DIR="$W/profiles"

# 1. No GPU here for the real program: one line, exit 77, nothing written.
if ! nvidia-smi -L >/dev/null 2>&1; then
  set +e; CUXFER_CALIBRATE_PROGRAM=$REAL "$CUXFER" calibrate >"$W/out" 2>"$W/err"; rc=$?; set -e
  [[ $rc == 77 ]] || fail "no GPU: exit $rc, want 77"
  grep -q "no GPU" "$W/err" || fail "no GPU: message missing: $(cat "$W/err")"
  [[ ! -e $CUXFER_PROFILE_DIR ]] || fail "no GPU: a profile directory was created"
fi

# 2. Simulated: a profile in the profile directory, valid, labelled simulated.
CUXFER_CALIBRATE_PROGRAM=$SIM "$CUXFER" calibrate --quick --max-size 4M >"$W/out" 2>"$W/err" || fail "calibrate: $(cat "$W/err")"
grep -q "SIMULATED CUDA" "$W/out" || fail "summary not labelled simulated: $(cat "$W/out")"
profile=$(ls "$CUXFER_PROFILE_DIR"/*.json) || fail "no profile written"
python3 - "$profile" <<'PY' || fail "profile content"
import json, sys
p = json.load(open(sys.argv[1]))
assert p["schema"] == "cuxfer.machine/1", p["schema"]
assert p["simulated"] is True
sizes = sorted({c["bytes"] for c in p["copy"]})
assert sizes[0] == 4 and sizes[-1] == 4 << 20, sizes
kinds = {(c["dir"], c["memory"]) for c in p["copy"]}
assert kinds == {("H2D", "pinned"), ("H2D", "pageable"), ("D2H", "pinned"), ("D2H", "pageable")}, kinds
assert all(c["gbps"] > 0 for c in p["copy"])
assert p["registration"] and p["host_memcpy"]
PY
# -o writes exactly there; a bad option is a usage error; an unwritable place is one line.
CUXFER_CALIBRATE_PROGRAM=$SIM "$CUXFER" calibrate --quick --max-size 64K -o "$W/x.json" >/dev/null 2>&1 || fail "-o"
[[ -s $W/x.json ]] || fail "-o: nothing written"
set +e
"$CUXFER" calibrate --max-size 12 >/dev/null 2>&1; [[ $? == 2 ]] || fail "--max-size 12 should be a usage error"
touch "$W/file"  # a path under a regular file is unwritable even for root
CUXFER_CALIBRATE_PROGRAM=$SIM "$CUXFER" calibrate --quick --max-size 64K -o "$W/file/p.json" >/dev/null 2>"$W/err"
[[ $? == 1 && $(wc -l <"$W/err") -ge 1 ]] || fail "unwritable output"
CUXFER_CALIBRATE_PROGRAM=/nonexistent/prog "$CUXFER" calibrate >/dev/null 2>"$W/err"; [[ $? == 1 ]] || fail "missing program"
set -e

# 3. record --rewrite=pin takes its staging thresholds from the profile; report its estimates.
"$CUXFER" record -o "$W/t" --rewrite=pin -- "$APP" 2 1M >"$W/out" 2>"$W/err" || fail "record: $(cat "$W/err")"
grep -q "staging thresholds from the machine profile" "$W/err" || fail "record did not use the profile: $(cat "$W/err")"
"$CUXFER" report "$W/t" >"$W/rep" || fail "report"
grep -q "estimates: machine profile" "$W/rep" || fail "report did not name the profile"
"$CUXFER" report --no-profile "$W/t" | grep -q "estimates: machine profile" && fail "--no-profile ignored"
set +e
"$CUXFER" report --profile /nonexistent.json "$W/t" >/dev/null 2>"$W/err"; rc=$?
set -e
[[ $rc == 1 ]] || fail "--profile of a missing file: exit $rc, want 1"
grep -q "cannot read /nonexistent.json" "$W/err" || fail "--profile of a missing file: $(cat "$W/err")"

# 4. Files another user could plant. The temporary file is a new one of
# calibrate's own: a symlink waiting at the old fixed name <profile>.tmp is
# never written through.
echo "victim" >"$W/victim"
ln -s "$W/victim" "$W/planted.json.tmp"
CUXFER_CALIBRATE_PROGRAM=$SIM "$CUXFER" calibrate --quick --max-size 64K -o "$W/planted.json" >/dev/null 2>"$W/err" ||
  fail "calibrate beside a planted symlink: $(cat "$W/err")"
[[ $(cat "$W/victim") == victim ]] || fail "calibrate wrote through the symlink at planted.json.tmp"
[[ -s $W/planted.json && ! -L $W/planted.json ]] || fail "no profile written beside the planted symlink"
# With HOME unset, no shared fallback (/tmp/.cache/cuxfer/machines): the
# user's home from the password database, or no profile with one line.
home=$(getent passwd "$(id -u)" | cut -d: -f6)
set +e
env -u HOME -u XDG_CACHE_HOME -u CUXFER_PROFILE_DIR CUXFER_CALIBRATE_PROGRAM=$SIM \
  "$CUXFER" record --rewrite=pin -o "$W/nohome" -- "$APP" 1 64K >/dev/null 2>"$W/err"
set -e
grep -q "/tmp/.cache" "$W/err" && fail "HOME unset: the profile was looked for in /tmp: $(cat "$W/err")"
if [[ -n $home && $home == /* ]]; then
  grep -q "in $home/.cache/cuxfer/machines\|from the machine profile" "$W/err" ||
    fail "HOME unset: not the password database's home ($home): $(cat "$W/err")"
fi
echo "calibrate_test: OK"
