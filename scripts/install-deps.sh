#!/usr/bin/env bash
# Installs what cuxfer needs to build and test, by Debian/Ubuntu package name.
#
#   bash scripts/install-deps.sh               what the build and the demo need
#   bash scripts/install-deps.sh --for-tests   and what only the tests need
#                                              (scripts/test.sh passes it)
#
# Idempotent: when every package is already installed (dpkg -s) apt is not
# touched at all. Works as root or through sudo. On a machine without network
# (the GPU machine) it does not fail as long as what the build *requires* is
# already there: libdw and libunwind8 are optional (CMake falls back to
# module+offset call sites; the shim to glibc's slower backtrace).
#
# The CUDA toolkit (headers, cudart, CUPTI) is not installed from here: it is
# expected at /usr/local/cuda (or wherever CUDAToolkit_ROOT / nvcc points).
#
# Environment:
#   CUXFER_SKIP_DEPS=1   do nothing (for machines managed some other way)
set -euo pipefail

FOR_TESTS=0
for a in "$@"; do
  case "$a" in
    --for-tests) FOR_TESTS=1 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "install-deps: unknown option '$a' (try --help)" >&2; exit 2 ;;
  esac
done

if [[ "${CUXFER_SKIP_DEPS:-0}" == 1 ]]; then
  echo "install-deps: CUXFER_SKIP_DEPS=1, skipping"
  exit 0
fi

# Required by the build (cmake/Dependencies.cmake) and the demo (its test app
# is built with the test tree, which needs GoogleTest).
REQUIRED=(cmake ninja-build g++ pkg-config libspdlog-dev libfmt-dev libzstd-dev libsqlite3-dev libgtest-dev nlohmann-json3-dev python3)
# Optional for the build: it has a fallback for each (libdw: call sites by
# module+offset; libunwind: glibc's backtrace).
BUILD_OPTIONAL=(libdw-dev libelf-dev libunwind8)
# Only the tests need these (--for-tests); each test that needs one skips,
# saying so, without it.
# chromium: renders `cuxfer report --html` in the test that checks it (skipped without).
# libjemalloc2, libtcmalloc-minimal4: another allocator preloaded after the shim
# (e2e.rewrite_exactness.{jemalloc,tcmalloc}: skipped without).
# clang + its libFuzzer runtime: scripts/fuzz.sh only (it skips, visibly, without
# them). The runtime is versioned like clang: libclang_rt.fuzzer-x86_64.a comes
# from libclang-rt-14-dev on Debian 12 (dpkg -S), libclang-rt-18-dev on Ubuntu 24.04.
# libxml2-utils: xmllint validates check's JUnit XML against tests/e2e/junit.xsd
# (e2e.check.*: that part said skipped without it).
# python3-dev: CPython's headers and libraries, to build testapps/python_embed
# (a program that embeds Python: e2e.python_embed.*) and to check the frame
# layouts against the headers (python.layouts_match_headers); both skip, saying
# so, without it.
# python3-venv, zlib1g-dev, liblzma-dev, libbz2-dev: scripts/build-wheel.sh,
# which the tests run (a venv for scikit-build-core and auditwheel; the static
# archives the portable build links libdw with).
TEST_ONLY=(chromium libjemalloc2 libtcmalloc-minimal4 libxml2-utils python3-dev python3-venv zlib1g-dev liblzma-dev libbz2-dev)

log() { echo "install-deps: $*"; }

# The major version of the clang installed, or of the one `clang` would install.
clang_major() {
  local v=""
  if command -v clang >/dev/null; then
    v="$(clang -dumpversion 2>/dev/null | cut -d. -f1)"
  elif command -v apt-cache >/dev/null; then
    v="$(apt-cache show clang 2>/dev/null | sed -n 's/^Depends:.*clang-\([0-9][0-9]*\).*/\1/p' | head -1)"
  fi
  echo "${v:-14}"
}
OPTIONAL=("${BUILD_OPTIONAL[@]}")
if ((FOR_TESTS)); then
  OPTIONAL+=("${TEST_ONLY[@]}" clang "libclang-rt-$(clang_major)-dev")
fi

# dpkg -s, captured whole (a `| grep -q` pipe can fail under pipefail by SIGPIPE).
installed() { [[ "$(dpkg -s "$1" 2>/dev/null)" == *"Status: install ok installed"* ]]; }

# A required package that dpkg does not know may still be present some other
# way (cmake from pip or a tarball, a source-built GoogleTest on the GPU
# machine): accept those, so that an offline machine can still build.
present_otherwise() {
  case "$1" in
    cmake) command -v cmake >/dev/null ;;
    ninja-build) command -v ninja >/dev/null ;;
    g++) command -v g++ >/dev/null ;;
    pkg-config) command -v pkg-config >/dev/null || command -v pkgconf >/dev/null ;;
    python3) command -v python3 >/dev/null ;;
    libzstd-dev) pkg-config --exists libzstd 2>/dev/null ;;
    libspdlog-dev) compgen -G '/usr/include/spdlog/spdlog.h' >/dev/null ||
                     compgen -G '/usr/local/include/spdlog/spdlog.h' >/dev/null ;;
    libfmt-dev) compgen -G '/usr/include/fmt/format.h' >/dev/null ||
                  compgen -G '/usr/local/include/fmt/format.h' >/dev/null ;;
    libgtest-dev) compgen -G '/usr/include/gtest/gtest.h' >/dev/null ||
                    compgen -G '/usr/local/include/gtest/gtest.h' >/dev/null ;;
    nlohmann-json3-dev) compgen -G '/usr/include/nlohmann/json.hpp' >/dev/null ||
                          compgen -G '/usr/local/include/nlohmann/json.hpp' >/dev/null ;;
    *) return 1 ;;
  esac
}

if ! command -v dpkg >/dev/null; then
  log "not a Debian/Ubuntu system (no dpkg); install by hand: ${REQUIRED[*]} (optional: ${OPTIONAL[*]})"
  missing=()
  for p in "${REQUIRED[@]}"; do present_otherwise "$p" || missing+=("$p"); done
  if ((${#missing[@]})); then
    log "missing: ${missing[*]}"
    exit 1
  fi
  exit 0
fi

missing_req=()
missing_opt=()
for p in "${REQUIRED[@]}"; do installed "$p" || missing_req+=("$p"); done
for p in "${OPTIONAL[@]}"; do installed "$p" || missing_opt+=("$p"); done

if ((${#missing_req[@]} == 0 && ${#missing_opt[@]} == 0)); then
  log "all packages present"
  exit 0
fi

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null; then
    SUDO=(sudo)
  else
    SUDO=(false)
  fi
fi

apt_ok=1
apt_install() {
  ((apt_ok)) || return 1
  DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -q --no-install-recommends "$@"
}

want=("${missing_req[@]}" "${missing_opt[@]}")
log "installing: ${want[*]}"
if [[ "${SUDO[0]:-}" == false ]]; then
  log "not root and no sudo: cannot run apt-get"
  apt_ok=0
elif ! DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get update -q; then
  log "apt-get update failed (no network?); trying with the package lists already on this machine"
fi

if ! apt_install "${want[@]}"; then
  # One unavailable package (say libdw-dev on an older release, or no
  # network at all) must not stop the rest: retry one by one.
  log "installing them together failed; trying one at a time"
  for p in "${want[@]}"; do
    installed "$p" || apt_install "$p" || log "could not install $p"
  done
fi

still_missing=()
for p in "${missing_req[@]}"; do
  if ! installed "$p"; then
    if present_otherwise "$p"; then
      log "$p: not installed as a package, but present on this machine; using that"
    else
      still_missing+=("$p")
    fi
  fi
done
for p in "${missing_opt[@]}"; do
  installed "$p" || log "optional $p missing: the build falls back (see README.md, Dependencies)"
done

if ((${#still_missing[@]})); then
  log "ERROR: required packages missing: ${still_missing[*]}"
  exit 1
fi
log "done"
