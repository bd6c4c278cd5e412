#!/usr/bin/env bash
# Builds cuxfer and profiles a bundled test app. README command 1.
#
#   bash scripts/demo.sh [--build-dir DIR] [--skip-deps]
#
# With a working GPU (nvidia-smi -L lists one, and nvcc is found) it builds the
# GPU test apps and records testapps/async_streams on the real CUDA runtime.
# Without one it records the same app built against the SIMULATED CUDA runtime
# from tests/simcuda, so the whole path (shim, trace, report) can be seen on
# any machine; its timings then mean nothing, and the report says so.
#
# async_streams moves the same bytes from pageable and from pinned host memory
# with cudaMemcpyAsync on two streams: the report shows the pageable share and
# the "async copies with pageable host memory ran synchronously" finding.
#
# It builds the `cuxfer` target -- the product: bin/cuxfer, bin/cuxfer-calibrate,
# lib/libcuxfer.so, lib/libcuxfer_memhooks.so, all that README.md's usage
# section runs -- and the app. Configure and build output goes to
# <build dir>/demo-build.log (apt's output too), shown (its last 60 lines)
# only when a step fails;
# each step prints one progress line.
#
# Environment: DEMO_APP (default async_streams), DEMO_ARGS (app arguments:
# iterations and bytes per copy), JOBS (build parallelism, default nproc).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

BUILD_DIR="$ROOT/build"
SKIP_DEPS=0
while (($#)); do
  case "$1" in
    --build-dir) BUILD_DIR="$(realpath -m "$2")"; shift ;;
    --skip-deps) SKIP_DEPS=1 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (try --help)" ;;
  esac
  shift
done

APP="${DEMO_APP:-async_streams}"
if have_gpu; then
  GPU=1
  NVCC="$(find_nvcc)"
  APP_TARGET="$APP-cudart_shared"
  APP_BIN="$BUILD_DIR/testapps/gpu/$APP_TARGET"
  # 64 MiB per copy: where an async copy from pageable memory blocks the
  # calling thread for ~10 ms on an H200 (docs in README.md).
  APP_ARGS=(${DEMO_ARGS:-8 64M})
  cfg=(-DCUXFER_GPU_TESTS=ON -DCMAKE_CUDA_COMPILER="$NVCC")
else
  GPU=0
  APP_TARGET="$APP-simshared"
  APP_BIN="$BUILD_DIR/testapps/sim/$APP_TARGET"
  APP_ARGS=(${DEMO_ARGS:-8 4M})
  # No GPU to run nvcc's output on: skip compiling the GPU apps.
  cfg=(-DCUXFER_GPU_TESTS=OFF)
fi

banner "cuxfer demo: $( ((GPU)) && echo "real GPU ($(nvidia-smi -L | head -1))" || echo "no GPU: simulated CUDA")"
mkdir -p "$BUILD_DIR"
LOG="$BUILD_DIR/demo-build.log"
: >"$LOG"

# Ninja's (or make's) "[12/86]" / "[ 45%]" progress, shown in place on a terminal.
progress_filter() {
  local what=$1 line
  while IFS= read -r line || [[ -n $line ]]; do
    printf '%s\n' "$line" >>"$LOG"
    if [[ -t 1 && $line =~ ^\[\ *([0-9]+/[0-9]+|[0-9]+%)\] ]]; then
      printf '\r--- %s: [%s]\033[K' "$what" "${BASH_REMATCH[1]}"
    fi
  done
}

# logged WHAT CMD...: runs CMD with its output in $LOG and prints one line
# for it. On failure: the last 60 lines of $LOG and its path, and the demo
# stops with CMD's exit status.
logged() {
  local what=$1 t0=$SECONDS rc=0
  shift
  printf '\n$ %s\n' "$*" >>"$LOG"
  if [[ -t 1 ]]; then
    printf -- '--- %s ...' "$what"  # replaced in place by the progress, then by the result
  else
    printf -- '--- %s ...\n' "$what"
  fi
  "$@" 2>&1 | progress_filter "$what" || rc=$?
  if [[ -t 1 ]]; then printf '\r\033[K'; fi
  if ((rc)); then
    printf -- '--- %s: FAILED (exit %d, %d s)\n' "$what" "$rc" $((SECONDS - t0))
    echo "--- the last 60 lines of $LOG:" >&2
    tail -n 60 "$LOG" >&2
    echo "--- the whole output: $LOG" >&2
    exit "$rc"
  fi
  printf -- '--- %s: done (%d s)\n' "$what" $((SECONDS - t0))
}

echo
echo "dependency, configure and build output: $LOG"
# apt's output (hundreds of lines on a fresh machine) goes to the log too.
if ((SKIP_DEPS)); then
  echo "--- dependencies: skipped (--skip-deps)"
else
  logged "dependencies (scripts/install-deps.sh)" bash "$ROOT/scripts/install-deps.sh"
fi
gen=(-G Ninja)
if [[ -f "$BUILD_DIR/CMakeCache.txt" ]] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$BUILD_DIR/CMakeCache.txt"; then
  gen=()
fi
# -g on top of Release: the report names call sites by file:line (libdw reads
# the app's debug info offline); it does not change the generated code.
logged "configure $BUILD_DIR (Release)" \
  cmake -S "$ROOT" -B "$BUILD_DIR" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS=-g \
  -DCUXFER_BUILD_TESTS=ON "${cfg[@]}"
# The `cuxfer` target is the product (CMakeLists.txt): the command, the shim, the
# libc hooks `record --rewrite=pin` registers with, and cuxfer-calibrate.
logged "build (-j$JOBS): the cuxfer target and $APP_TARGET" \
  cmake --build "$BUILD_DIR" -j"$JOBS" --target cuxfer "$APP_TARGET"
for f in bin/cuxfer bin/cuxfer-calibrate lib/libcuxfer.so lib/libcuxfer_memhooks.so; do
  [[ -f "$BUILD_DIR/$f" ]] || die "the build did not make $BUILD_DIR/$f (see $LOG)"
done
echo "built: $BUILD_DIR/{bin/cuxfer,bin/cuxfer-calibrate,lib/libcuxfer.so,lib/libcuxfer_memhooks.so}, $APP_BIN"

CUXFER="$BUILD_DIR/bin/cuxfer"
TRACES="$BUILD_DIR/demo-traces"
rm -rf "$TRACES"
mkdir -p "$TRACES"

if ((GPU)); then
  banner "recording $APP on the real CUDA runtime"
else
  banner "SIMULATED CUDA: $APP runs on the simulated CUDA runtime from tests/simcuda (no GPU here); timings are not meaningful"
fi
step "$CUXFER record -o $TRACES -- $APP_BIN ${APP_ARGS[*]}"
"$CUXFER" record -o "$TRACES" -- "$APP_BIN" "${APP_ARGS[@]}"

shopt -s nullglob
traces=("$TRACES"/*.trace)
((${#traces[@]})) || die "no trace written under $TRACES"

banner "report"
step "$CUXFER report ${traces[*]}"
"$CUXFER" report "${traces[@]}"

if ((!GPU)); then
  echo
  echo "(This ran on the SIMULATED CUDA runtime from tests/simcuda. On a machine with a GPU the"
  echo " same command records the real runtime: bash scripts/demo.sh)"
fi
echo
echo "Traces: ${traces[*]}"
echo "JSON:   $CUXFER report --json ${traces[*]}"
