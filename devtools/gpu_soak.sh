#!/usr/bin/env bash
# The soak steps of devtools/gpu.sh (soak, soak-start, soak-wait): testapps/soak under
# `cuxfer record --rewrite=pin` for SOAK_SECONDS (default 630: over the 10-minute
# per-command limit, so start it in the background and collect it in a later call):
#
#   bash devtools/gpu.sh build soak-start      ... later: bash devtools/gpu.sh soak-wait
#
# (soak-start runs `setsid bash devtools/gpu_soak.sh > /dev/null 2>&1 < /dev/null &`; the
# last line of SOAK_LOG is then "SOAK DONE rc=N"; artifacts in /tmp/soak.)
#
# It reads the app process's VmRSS, VmLck and VmPin (/proc/PID/status) every second and
# writes a line every 10 s into soak_samples.csv: t_s, vmrss_kb (the last reading),
# vmrss_min_kb (the lowest of the 10 s), vmlck_kb, vmpin_kb (the highest). The shim does
# not publish its pinned bytes while running, only in the trace at exit. Then the report
# (soak_report.txt, soak_report.json) and the verdict, each criterion on its own line:
#   exit    the app (and cuxfer record) exited 0
#   data    the app counted zero failed checks ("failures=0" in its summary)
#   rss     the RSS floor (lowest reading) of the last 120 s of the loop is < 5 % above the
#           floor of 60-180 s. Floors of many readings, not single samples: the app mallocs
#           and frees up to 2 x MAX_S per thread all the time, so one reading moves by
#           +-20 % and the floor of 10 s by +-7 % (H200, 64M, 4 threads: 0.82-1.22 GB); a
#           leak raises the floor
#   pinned  within the budget the report's note gives ("at most N bytes of pinned memory"):
#           PASS when the staging pool plus every registration ever made (an upper bound
#           of what was pinned at once) fits, else by the peak VmLck + VmPin; UNKNOWN (not
#           a failure) when that bound does not fit and VmLck + VmPin stay 0 (the NVIDIA
#           driver's pins are not accounted there: 0 on the H200)
# Files (soak_samples.csv, soak_report.txt/.json, soak_app.log, the traces) are written in
# SOAK_DIR (default /tmp/soak), which outlives the device call that started the soak (that
# call's $OUT may not), and copied into $OUT (default /tmp/out) at the end if it still
# exists. SOAK_LOG (default $SOAK_DIR/log) gets the whole log and the last line
# "SOAK DONE rc=N" (0 = PASS).
# The shim's per-thread event rings (CUXFER_BUFFER_EVENTS, 4 MiB a thread by default) are
# touched as they fill: up to that much RSS growth per recording thread is by design.
# Knobs: SOAK_SECONDS, SOAK_THREADS (4), SOAK_MAX_S (64M), SOAK_APP (soak-cudart_shared in
# $B/testapps/gpu, or a path), B (build dir, /tmp/b, made by `devtools/gpu.sh build`; the
# caller may run ctest in $B meanwhile).
set -u
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; B=${B:-/tmp/b}
SOAK_SECONDS=${SOAK_SECONDS:-630}; SOAK_THREADS=${SOAK_THREADS:-4}; SOAK_MAX_S=${SOAK_MAX_S:-64M}
SOAK_APP=${SOAK_APP:-soak-cudart_shared}
SOAK_DIR=${SOAK_DIR:-/tmp/soak}; SOAK_LOG=${SOAK_LOG:-$SOAK_DIR/log}
mkdir -p "$SOAK_DIR" "$(dirname "$SOAK_LOG")"; : > "$SOAK_LOG"
W=$SOAK_DIR
trap '' HUP  # survive the starting shell going away (setsid already detaches from its terminal)

soak_main() {
  echo "== $(date -u) $(nvidia-smi -L 2>&1 | head -2) commit $(git rev-parse --short HEAD 2>/dev/null)"
  local X=$B/bin/cuxfer APP=$SOAK_APP
  [[ $APP == */* ]] || APP=$B/testapps/gpu/$SOAK_APP
  [ -x "$X" ] && [ -x "$APP" ] || { echo "FAIL: $X or $APP not built (bash devtools/gpu.sh build)"; return 2; }
  rm -rf "$W/soak-traces"
  echo "== $SOAK_APP $SOAK_SECONDS $SOAK_THREADS $SOAK_MAX_S under cuxfer record --rewrite=pin"
  # Hermetic thresholds are not wanted here: the machine profile, if any, is what users get.
  "$X" record -q --rewrite=pin -o "$W/soak-traces" -- "$APP" "$SOAK_SECONDS" "$SOAK_THREADS" "$SOAK_MAX_S" \
    > "$W/soak_app.log" 2>&1 &
  local rec=$! pid="" t0 now
  t0=$(date +%s)
  # The app prints its pid first ("soak: pid=N ..."): cuxfer record's child, not cuxfer itself.
  for _ in $(seq 600); do
    pid=$(sed -n 's/^soak: pid=\([0-9]*\).*/\1/p' "$W/soak_app.log" | head -1)
    [ -n "$pid" ] || ! kill -0 $rec 2>/dev/null && break
    sleep 0.1
  done
  echo "cuxfer record pid $rec, app pid ${pid:-?}"
  echo "t_s,vmrss_kb,vmrss_min_kb,vmlck_kb,vmpin_kb" > "$W/soak_samples.csv"
  local rss lck pin min=0 mlck=0 mpin=0 next=10
  while [ -n "$pid" ] && [ -r "/proc/$pid/status" ]; do
    # 0 0 0 once the process is gone or a zombie (no Vm* lines).
    read -r rss lck pin < <(awk '$1 == "VmRSS:" { r = $2 } $1 == "VmLck:" { l = $2 } $1 == "VmPin:" { p = $2 }
                                 END { print r + 0, l + 0, p + 0 }' "/proc/$pid/status" 2>/dev/null || echo 0 0 0)
    if (( ${rss:-0} > 0 )); then
      (( min == 0 || rss < min )) && min=$rss
      (( lck > mlck )) && mlck=$lck
      (( pin > mpin )) && mpin=$pin
    fi
    now=$(( $(date +%s) - t0 ))
    if (( now >= next && min > 0 )); then
      echo "$now,$rss,$min,$mlck,$mpin" >> "$W/soak_samples.csv"
      min=0 mlck=0 mpin=0 next=$(( next + 10 ))
    fi
    sleep 1
  done
  wait $rec; local rc=$?
  echo "cuxfer record exited $rc after $(( $(date +%s) - t0 )) s"
  grep -E "^soak: (progress|summary|traffic|FAILED)|soak: OK" "$W/soak_app.log" | tail -12
  "$X" report "$W/soak-traces" > "$W/soak_report.txt" 2>&1
  "$X" report --json -o "$W/soak_report.json" "$W/soak-traces" 2>> "$W/soak_report.txt"
  sed -n '/^Rewrite/,/^$/p' "$W/soak_report.txt"

  python3 - "$rc" "$W/soak_app.log" "$W/soak_samples.csv" "$W/soak_report.json" "$SOAK_SECONDS" <<'PY'
import csv, json, re, sys
rc, app_log, samples_csv, report_json = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
seconds = int(sys.argv[5])
verdict = {}
verdict["exit"] = ("PASS" if rc == 0 else "FAIL", f"cuxfer record / app exit status {rc}")
log = open(app_log, errors="replace").read()
m = re.findall(r"^soak: summary .*failures=(\d+)", log, re.M)
verdict["data"] = ("PASS" if m and int(m[-1]) == 0 else "FAIL",
                   f"failed checks {m[-1] if m else '(no summary line: the app did not finish)'}")
rows = [{k: int(v) for k, v in r.items()} for r in csv.DictReader(open(samples_csv))]
loop = [r for r in rows if r["t_s"] <= seconds]  # not the app's shutdown, which frees its buffers
early = [r for r in loop if 60 <= r["t_s"] <= 180]
late = [r for r in loop if loop and r["t_s"] > loop[-1]["t_s"] - 120]
if early and loop[-1]["t_s"] > early[0]["t_s"]:
    a, b = min(r["vmrss_min_kb"] for r in early), min(r["vmrss_min_kb"] for r in late)
    growth = (b - a) / max(a, 1)
    overlap = " (the windows overlap: run shorter than 300 s)" if late[0]["t_s"] <= early[-1]["t_s"] else ""
    verdict["rss"] = ("PASS" if growth < 0.05 else "FAIL",
                      f"VmRSS floor {a} kB at {early[0]['t_s']}-{early[-1]['t_s']} s -> {b} kB at "
                      f"{late[0]['t_s']}-{late[-1]['t_s']} s ({100 * growth:+.2f} %, limit +5 %){overlap}; "
                      f"readings {min(r['vmrss_min_kb'] for r in loop)}-{max(r['vmrss_kb'] for r in loop)} kB")
else:
    verdict["rss"] = ("FAIL", f"no sample at 60-180 s and a later one ({len(rows)} samples): run too short?")
budget, pool, registered = None, 0, 0
try:
    rep = json.load(open(report_json))
    for p in rep.get("processes", []):
        for note in p.get("notes", []):
            b = re.search(r"at most (\d+) bytes of pinned memory", note)
            if b:
                budget = int(b.group(1))
    rw = rep.get("rewrite", {})
    pool, registered = rw.get("pool_bytes") or 0, rw.get("registration_bytes") or 0
    print(f"report: staged {rw.get('staged_calls')} calls, registered {rw.get('registered_calls')}, passed through "
          f"{rw.get('passthrough_pageable_calls')}; registrations made {rw.get('registrations')} "
          f"({rw.get('registration_bytes')} B in all), pool {pool} B")
except (OSError, ValueError) as e:
    print(f"report: cannot read {report_json}: {e}")
peak = max(((r["vmlck_kb"] + r["vmpin_kb"]) * 1024 for r in rows), default=0)
if budget is None:
    verdict["pinned"] = ("FAIL", "no 'at most N bytes of pinned memory' note in the report (was the rewrite on?)")
elif (pool or 0) > budget:
    verdict["pinned"] = ("FAIL", f"staging pool {pool} B over the budget {budget} B")
elif pool + registered <= budget:
    verdict["pinned"] = ("PASS", f"staging pool {pool} B + every registration made {registered} B <= budget "
                                 f"{budget} B (peak VmLck + VmPin {peak} B)")
elif peak == 0:
    verdict["pinned"] = ("UNKNOWN", f"pool {pool} B + registrations made {registered} B exceed the budget "
                                    f"{budget} B as a sum (churn), and VmLck + VmPin stayed 0 (the driver's "
                                    "pins are not accounted there)")
else:
    verdict["pinned"] = ("PASS" if peak <= budget else "FAIL",
                         f"peak VmLck + VmPin {peak} B, budget {budget} B (pool {pool} B)")
for k, (v, why) in verdict.items():
    print(f"{v:7} {k:6} {why}")
ok = all(v in ("PASS", "UNKNOWN") for v, _ in verdict.values())
print("SOAK", "PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY
}

soak_main 2>&1 | tee -a "$SOAK_LOG"
rc=${PIPESTATUS[0]}
echo "SOAK DONE rc=$rc" >> "$SOAK_LOG"
# Best effort: the caller's $OUT may be gone by now.
if [ -d "$OUT" ] && [ "$(cd "$OUT" && pwd -P)" != "$(cd "$W" && pwd -P)" ]; then
  cp -a "$W"/soak_samples.csv "$W"/soak_report.txt "$W"/soak_report.json "$W"/soak_app.log "$SOAK_LOG" "$OUT"/ 2>/dev/null
fi
exit $rc
