#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ (clang, build-fuzz/), replays their
# seed corpora and every saved crash input, then fuzzes each target for a
# fixed time. scripts/test.sh runs it with --time 20; run it longer by hand.
#
#   bash scripts/fuzz.sh                    30 s per target
#   bash scripts/fuzz.sh --time 600 --merge ten minutes each, keep what is new
#
# Options:
#   --time N         seconds of fuzzing per target (default 30; 0: replay only)
#   --only TARGET    one target: fuzz_trace_reader, fuzz_policy_parser, fuzz_config, fuzz_elf_sections
#   --merge          merge the new inputs that add coverage into
#                    fuzz/corpus/TARGET/ (without it the corpus is left as it is)
#   --reseed         rewrite the trace seeds of fuzz/corpus/fuzz_trace_reader/
#                    from the synthetic traces (after a trace format change)
#   -h, --help       this text
#
# A crash, leak, hang (timeout) or out-of-memory input is copied into
# fuzz/regressions/TARGET/, where the replay (ctest -L fuzz in build-fuzz/fuzz)
# runs it from then on: fix the bug, keep the file, commit both.
#
# Exits 0 when nothing was found, 1 on a finding or a failed replay or build,
# and 77 with a "fuzz: SKIPPED" line when clang or its libFuzzer runtime is
# missing (Debian: clang, libclang-rt-14-dev; scripts/install-deps.sh).
# Environment: CUXFER_FUZZ_BUILD_DIR (default build-fuzz).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

TIME=30
MERGE=0
RESEED=0
ONLY=""
TARGETS=(fuzz_trace_reader fuzz_policy_parser fuzz_config fuzz_elf_sections)
while (($#)); do
  case "$1" in
    --time)
      [[ "${2:-}" =~ ^[0-9]+$ ]] || die "--time needs a number of seconds"
      TIME="$2"
      shift
      ;;
    --time=*)
      TIME="${1#--time=}"
      [[ "$TIME" =~ ^[0-9]+$ ]] || die "--time needs a number of seconds"
      ;;
    --only)
      ONLY="${2:-}"
      shift
      ;;
    --merge) MERGE=1 ;;
    --reseed) RESEED=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *) die "unknown option '$1' (try --help)" ;;
  esac
  shift
done
if [[ -n "$ONLY" ]]; then
  [[ " ${TARGETS[*]} " == *" $ONLY "* ]] || die "--only: unknown target '$ONLY' (${TARGETS[*]})"
  TARGETS=("$ONLY")
fi

BUILD_DIR="${CUXFER_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
FUZZ_SRC="$ROOT/fuzz"

# --- clang and libFuzzer ----------------------------------------------------------
# The link of an empty fuzzer is the test: clang++ can be there without the
# runtime (libclang_rt.fuzzer-*.a comes in libclang-rt-NN-dev on Debian).
skip() {
  echo "fuzz: SKIPPED (clang/libFuzzer not found: $*)"
  exit 77
}
command -v clang >/dev/null && command -v clang++ >/dev/null || skip "no clang/clang++ on PATH"
probe_dir="$(mktemp -d)"
trap 'rm -rf "$probe_dir"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe_dir/p.cpp"
clang++ -fsanitize=fuzzer,address,undefined "$probe_dir/p.cpp" -o "$probe_dir/p" 2>"$probe_dir/err" ||
  skip "clang++ -fsanitize=fuzzer does not link: $(grep -m1 -i error "$probe_dir/err" || echo '?')"

# --- build ----------------------------------------------------------------------
banner "fuzz: build $BUILD_DIR (clang $(clang++ -dumpversion), CUXFER_FUZZ=ON)"
gen=(-G Ninja)
if [[ -f "$BUILD_DIR/CMakeCache.txt" ]] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$BUILD_DIR/CMakeCache.txt"; then
  gen=()
fi
# Only the fuzzers (and the seed writer) are built: the rest of the project
# is configured, as the top-level CMakeLists.txt needs, but not compiled.
mkdir -p "$BUILD_DIR"
CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD_DIR" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCUXFER_FUZZ=ON -DCUXFER_BUILD_TESTS=OFF -DCUXFER_BUILD_BENCH=OFF -DCUXFER_GPU_TESTS=OFF >"$BUILD_DIR/configure.log" 2>&1 ||
  { cat "$BUILD_DIR/configure.log"; die "fuzz: cmake configure failed"; }
grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*clang' "$BUILD_DIR/CMakeCache.txt" ||
  die "$BUILD_DIR was configured with another compiler; remove it and run again"
cmake --build "$BUILD_DIR" -j"$JOBS" --target "${TARGETS[@]}" fuzz_make_trace_seeds
FUZZ_BIN="$BUILD_DIR/fuzz"

if ((RESEED)); then
  step "rewriting the trace seeds in fuzz/corpus/fuzz_trace_reader"
  "$FUZZ_BIN/fuzz_make_trace_seeds" "$FUZZ_SRC/corpus/fuzz_trace_reader"
fi

# --- replay: seed corpora and every saved crash input -------------------------------
banner "fuzz: replay of fuzz/corpus and fuzz/regressions (ctest -L fuzz)"
declare -a SUMMARY=()
FOUND=0
regex="$(printf '%s|' "${TARGETS[@]}")"
if ctest --test-dir "$FUZZ_BIN" --output-on-failure -L fuzz -R "fuzz\\.(${regex%|})\\.replay" --no-tests=error; then
  SUMMARY+=("PASS  replay of corpora and regressions (${TARGETS[*]})")
else
  SUMMARY+=("FAIL  replay: an input in fuzz/corpus or fuzz/regressions crashes (see above)")
  FOUND=1
fi

# --- fuzzing ----------------------------------------------------------------------
max_len_of() {
  case "$1" in
    fuzz_trace_reader) echo 16384 ;;   # seed traces are 0.5-2.5 KiB
    fuzz_policy_parser) echo 16384 ;;  # room for deep nesting and long strings
    *) echo 4096 ;;
  esac
}
dict_of() {
  case "$1" in
    fuzz_trace_reader) echo "$FUZZ_SRC/trace.dict" ;;
    fuzz_policy_parser) echo "$FUZZ_SRC/policy.dict" ;;
    fuzz_config) echo "$FUZZ_SRC/config.dict" ;;
    fuzz_elf_sections) echo "$FUZZ_SRC/elf.dict" ;;
  esac
}

if ((TIME > 0)); then
  for t in "${TARGETS[@]}"; do
    banner "fuzz: $t for ${TIME} s"
    work="$BUILD_DIR/fuzz-work/$t"
    art="$BUILD_DIR/fuzz-artifacts/$t"
    rm -rf "$work" "$art"
    mkdir -p "$work" "$art"
    # New inputs go to $work (first directory); the checked-in corpus and the
    # regressions are read only. -timeout: one input taking 10 s is a hang.
    # -rss_limit_mb: the reader may hold a few 64 MiB blocks, never gigabytes.
    rc=0
    ("$FUZZ_BIN/$t" -max_total_time="$TIME" -timeout=10 -rss_limit_mb=2048 \
      -max_len="$(max_len_of "$t")" -dict="$(dict_of "$t")" -print_final_stats=1 \
      -artifact_prefix="$art/" "$work" "$FUZZ_SRC/corpus/$t" "$FUZZ_SRC/regressions/$t") \
      >"$art.log" 2>&1 || rc=$?
    grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::new_units_added)' "$art.log" || true
    found=()
    for f in "$art"/*; do
      [[ -f "$f" ]] || continue
      case "$(basename "$f")" in
        crash-* | leak-* | timeout-* | oom-*) found+=("$f") ;;
      esac
    done
    if ((rc != 0 || ${#found[@]})); then
      FOUND=1
      tail -n 60 "$art.log"
      echo
      if ((${#found[@]} == 0)); then
        echo "fuzz: $t exited with status $rc without writing an input (log: $art.log)"
        SUMMARY+=("FAIL  $t: exited with status $rc (log: $art.log)")
      fi
      for f in "${found[@]}"; do
        dest="$FUZZ_SRC/regressions/$t/$(basename "$f")"
        cp "$f" "$dest"
        echo "fuzz: FOUND A BUG in $t: the input is saved as ${dest#"$ROOT"/}"
        echo "      reproduce: $FUZZ_BIN/$t ${dest#"$ROOT"/}"
        echo "      fix the bug, keep the file (it is a regression test now) and commit both"
        SUMMARY+=("FAIL  $t: $(basename "$f") saved in fuzz/regressions/$t/")
      done
      continue
    fi
    new=$(find "$work" -type f | wc -l)
    if ((MERGE)); then
      before=$(find "$FUZZ_SRC/corpus/$t" -type f | wc -l)
      "$FUZZ_BIN/$t" -merge=1 -max_len="$(max_len_of "$t")" "$FUZZ_SRC/corpus/$t" "$work" >"$art.merge.log" 2>&1 ||
        { tail -n 20 "$art.merge.log"; die "fuzz: merging into fuzz/corpus/$t failed"; }
      after=$(find "$FUZZ_SRC/corpus/$t" -type f | wc -l)
      SUMMARY+=("PASS  $t: ${TIME} s, nothing found; corpus $before -> $after files (--merge)")
    else
      SUMMARY+=("PASS  $t: ${TIME} s, nothing found ($new new inputs not kept; --merge keeps them)")
    fi
  done
fi

banner "fuzz: summary"
printf '%s\n' "${SUMMARY[@]}"
exit "$FOUND"
