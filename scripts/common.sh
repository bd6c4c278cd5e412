# Helpers shared by scripts/demo.sh and scripts/test.sh (sourced, not run).

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"

banner() {
  local line="================================================================================"
  printf '\n%s\n== %s\n%s\n' "$line" "$*" "$line"
}

step() { printf '\n--- %s\n' "$*"; }

die() {
  echo "ERROR: $*" >&2
  exit 1
}

# nvcc is often installed but not on PATH (/usr/local/cuda/bin).
find_nvcc() {
  if command -v nvcc >/dev/null 2>&1; then
    command -v nvcc
  elif [[ -n "${CUDACXX:-}" && -x "${CUDACXX}" ]]; then
    echo "${CUDACXX}"
  elif [[ -x /usr/local/cuda/bin/nvcc ]]; then
    echo /usr/local/cuda/bin/nvcc
  else
    return 1
  fi
}

# A machine that can run CUDA for real: a driver that lists a GPU, and nvcc to
# build the GPU test apps.
have_gpu() {
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && find_nvcc >/dev/null
}

# install_deps [--for-tests]
install_deps() {
  if [[ "${SKIP_DEPS:-0}" == 1 ]]; then
    step "skipping dependency installation (--skip-deps)"
  else
    step "dependencies: bash scripts/install-deps.sh $*"
    bash "$ROOT/scripts/install-deps.sh" "$@"
  fi
}

# configure_build DIR BUILD_TYPE [extra cmake args...]
configure_build() {
  local dir="$1" type="$2"
  shift 2
  step "configure $dir ($type): cmake -G Ninja -DCMAKE_BUILD_TYPE=$type $*"
  local gen=(-G Ninja)
  # An existing build directory keeps its generator; asking for another fails.
  if [[ -f "$dir/CMakeCache.txt" ]] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$dir/CMakeCache.txt"; then
    gen=()
  fi
  cmake -S "$ROOT" -B "$dir" "${gen[@]}" -DCMAKE_BUILD_TYPE="$type" "$@"
  # BUILD_TARGET (optional): build only that target.
  step "build $dir: cmake --build $dir -j$JOBS${BUILD_TARGET:+ --target $BUILD_TARGET}"
  cmake --build "$dir" -j"$JOBS" ${BUILD_TARGET:+--target "$BUILD_TARGET"}
}

# Runs "$@" and prints how long it took.
timed() {
  local t0=$SECONDS
  "$@"
  local rc=$?
  echo "(took $((SECONDS - t0)) s)"
  return $rc
}
