#!/usr/bin/env bash
# Developer run on the GPU machine: the zero-copy path and `cuxfer tune` on the
# apps made for them (zc_params: zero copy should win; zc_reread: it should
# lose; pageable_pipeline: register/stage should win). For each: tune, then an
# independent check that the chosen policy's speedup reproduces (observe and
# policy runs interleaved, the apps' own median step times), checksums equal.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; B=/tmp/b
source devtools/gpu_env.sh
{
echo "== $(date -u) $(nvidia-smi -L) commit $(git rev-parse --short HEAD 2>/dev/null)"
gpu_configure_build cuxfer_cli cuxfer_shim cuxfer_memhooks zc_params-nvcc_shared zc_reread-nvcc_shared pageable_pipeline-nvcc_shared
X=$B/bin/cuxfer; G=$B/testapps/gpu
step() { grep -o 'median_step_us=[0-9.]*' | cut -d= -f2; }
sum() { grep -o 'checksum=[0-9a-f]*'; }
APPS=${APPS:-"zc_params-nvcc_shared 2000 256|zc_reread-nvcc_shared 20 64M 100|pageable_pipeline-nvcc_shared 8 256M 32M"}
IFS='|' read -ra LIST <<< "$APPS"
for app in "${LIST[@]}"; do
  name=${app%%-*}; set -- $app; bin=$1; shift
  echo "== tune $name"
  t0=$(date +%s.%N)
  $X tune --reps ${REPS:-3} --max-runs ${MAX_RUNS:-16} -o $OUT/$name.policy.json --report $OUT/$name.tune.txt --keep-traces $OUT/$name-traces -- $G/$bin "$@" 2>&1 | tail -25
  echo "tune took $(python3 -c "print(round($(date +%s.%N)-$t0,1))") s"
  python3 -c "import json; [print(' kept:', e['path'], e['site'].get('source', e['site']['offset']), '|', e.get('reason','')[-160:]) for e in json.load(open('$OUT/$name.policy.json'))['entries']]"
  sed -n '1,60p' $OUT/$name.tune.txt
  echo "== independent runs: observe vs policy (median step us, checksum)"
  for i in 1 2 3; do
    echo "observe $($X record -q -o /tmp/o-$name-$i -- $G/$bin "$@" | tee /tmp/o.txt | step) $(sum </tmp/o.txt)"
    echo "policy  $($X record -q -o /tmp/p-$name-$i --policy $OUT/$name.policy.json -- $G/$bin "$@" | tee /tmp/p.txt | step) $(sum </tmp/p.txt)"
    echo "plain   $($G/$bin "$@" | tee /tmp/n.txt | step) $(sum </tmp/n.txt)"
  done
  $X report /tmp/p-$name-1 | sed -n '/^Rewrite/,/^$/p'
done
[ -n "${SKIP_FORCED:-}" ] && exit 0
echo "== forced zero copy on zc_reread (what tune measured, repeated): policy of every candidate"
CUXFER_FINGERPRINT_MIN=64 $X record -q -o /tmp/zr-obs -- $G/zc_reread-nvcc_shared 20 64M 100 >/dev/null
$X policy -q -o /tmp/zr-all.json /tmp/zr-obs
python3 - <<'PY' /tmp/zr-all.json /tmp/zr-zc.json
import json, sys
d = json.load(open(sys.argv[1])); d["entries"] = [e for e in d["entries"] if e["path"] == "zero_copy"]
json.dump(d, open(sys.argv[2], "w")); print("zero_copy entries:", len(d["entries"]))
PY
for i in 1 2 3; do
  echo "observe $($X record -q -o /tmp/zo$i -- $G/zc_reread-nvcc_shared 20 64M 100 | tee /tmp/o.txt | step) $(sum </tmp/o.txt)"
  echo "zerocpy $($X record -q -o /tmp/zz$i --policy /tmp/zr-zc.json -- $G/zc_reread-nvcc_shared 20 64M 100 | tee /tmp/z.txt | step) $(sum </tmp/z.txt)"
done
} 2>&1 | tee $OUT/log
