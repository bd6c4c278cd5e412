#!/usr/bin/env bash
# `cmake --install` into a temporary prefix: the layout is exactly the
# product (no test or benchmark output; of docs/, only the user docs), the
# installed binaries link nothing of CUDA, and the installed `cuxfer` finds the
# installed shim, memhooks and calibrate program by itself.
#   check_install.sh BUILD_DIR SOURCE_DIR LIBDIR SIM_APP
set -euo pipefail
BUILD=$1 SRC=$2 LIBDIR=$3 APP=$4
W=$(cd "$(mktemp -d)" && pwd -P)
# Installing writes $BUILD/install_manifest.txt: keep the one a user's own
# `cmake --install` left there.
M=$BUILD/install_manifest.txt
if [[ -f $M ]]; then cp -p "$M" "$W/install_manifest.kept"; fi
restore() { if [[ -f $W/install_manifest.kept ]]; then cp -p "$W/install_manifest.kept" "$M"; else rm -f "$M"; fi; rm -rf "$W"; }
trap restore EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
USER_DOCS="benchmarks calibrate check cli guide install policy report sqlite trace-format tune"
P=$W/prefix

cmake --install "$BUILD" --prefix "$P" >"$W/install.log" 2>&1 || fail "cmake --install: $(cat "$W/install.log")"

# 1. The layout, file for file.
{
  echo bin/cuxfer
  echo bin/cuxfer-calibrate
  echo "$LIBDIR/libcuxfer.so"
  echo "$LIBDIR/libcuxfer_memhooks.so"
  echo share/doc/cuxfer/README.md
  echo share/doc/cuxfer/CHANGELOG.md
  [[ -f $SRC/LICENSE ]] && echo share/doc/cuxfer/LICENSE
  # The user docs only: building, architecture, design notes, simcuda, testapps
  # and the GPU runs are for developers and stay in the repository.
  for d in $USER_DOCS; do echo "share/doc/cuxfer/docs/$d.md"; done
} | sort >"$W/want"
(cd "$P" && find . \( -type f -o -type l \) | sed 's|^\./||' | sort) >"$W/got"
diff -u "$W/want" "$W/got" >"$W/layout.diff" || fail "installed layout (- expected, + installed):
$(cat "$W/layout.diff")"
for f in bin/cuxfer bin/cuxfer-calibrate; do [[ -x $P/$f ]] || fail "$f is not executable"; done

# 2. Nothing of CUDA linked, no path into the build tree.
for f in bin/cuxfer bin/cuxfer-calibrate "$LIBDIR/libcuxfer.so" "$LIBDIR/libcuxfer_memhooks.so"; do
  dyn=$(readelf -d "$P/$f") || fail "readelf $f"
  if grep -iE 'NEEDED.*(libcuda|libcudart|libcupti|libnv)' <<<"$dyn"; then fail "$f links CUDA"; fi
  if grep -E 'R(UN)?PATH' <<<"$dyn"; then fail "$f keeps an RPATH/RUNPATH"; fi
done

CUXFER=$P/bin/cuxfer
unset CUXFER_SHIM CUXFER_CALIBRATE_PROGRAM LD_PRELOAD
ver=$("$CUXFER" --version) || fail "cuxfer --version"
grep -qE '^cuxfer [0-9]+\.[0-9]+\.[0-9]+ \(commit [0-9a-z]+, built [0-9]{4}-[0-9]{2}-[0-9]{2}\)$' <<<"$ver" || fail "cuxfer --version: '$ver'"
"$CUXFER" --help >"$W/help" || fail "cuxfer --help"
grep -q record "$W/help" || fail "cuxfer --help names no record command"
"$CUXFER" record --help >"$W/help" || fail "cuxfer record --help"
grep -q -- '--shim PATH' "$W/help" || fail "cuxfer record --help: $(cat "$W/help")"

# 3. The installed shim is the default: with it moved away, record names the
# installed path; with it back, a simulated app records, and --rewrite=pin
# finds libcuxfer_memhooks.so beside it.
mv "$P/$LIBDIR/libcuxfer.so" "$W/libcuxfer.so"
set +e; "$CUXFER" record -q -o "$W/none" -- "$APP" 2 64K >"$W/out" 2>"$W/err"; rc=$?; set -e
mv "$W/libcuxfer.so" "$P/$LIBDIR/libcuxfer.so"
[[ $rc == 2 ]] || fail "record without the installed shim: exit $rc, want 2: $(cat "$W/err")"
grep -qF "$P/bin/../lib" "$W/err" || fail "record without the installed shim does not name it: $(cat "$W/err")"
grep -q "default location" "$W/err" || fail "record without the installed shim: $(cat "$W/err")"

"$CUXFER" record --cupti=off --rewrite=pin -o "$W/traces" --name pkg -- "$APP" 2 64K >"$W/out" 2>"$W/err" \
  || fail "record from the installed prefix: $(cat "$W/err")"
if grep -q "not found" "$W/err"; then fail "record --rewrite=pin: $(cat "$W/err")"; fi
trace=$(ls "$W"/traces/cuxfer-pkg-*.trace) || fail "no trace written: $(cat "$W/err")"
"$CUXFER" report --json -o "$W/report.json" $trace 2>"$W/err" || fail "report: $(cat "$W/err")"
python3 - "$W/report.json" <<'PY' || fail "report of the installed recording: $(head -c 2000 "$W/report.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["schema"].startswith("cuxfer.report/"), r["schema"]
h2d = sum(d["h2d_bytes"] for d in r["devices"])
d2h = sum(d["d2h_bytes"] for d in r["devices"])
assert (h2d, d2h) == (2 * 65536, 2 * 65536), (h2d, d2h)  # pageable_loop 2 64K
PY
# The HTML report links the docs it cites to the installed copy.
"$CUXFER" report --html "$W/report.html" "$W/traces" >/dev/null 2>"$W/err" || fail "report --html: $(cat "$W/err")"
grep -qF "<a href='file://$P/share/doc/cuxfer/docs/report.md'>docs/report.md</a>" "$W/report.html" ||
  fail "report --html does not link the installed docs/report.md: $(grep -o '[^>]*docs/report.md[^<]*' "$W/report.html")"
# 4. calibrate finds its program next to the installed cuxfer: without a GPU
# it says so (77); with one it measures. Exit 1 would mean it is missing.
set +e
CUXFER_PROFILE_DIR=$W/profiles "$CUXFER" calibrate --quick --max-size 4096 >"$W/out" 2>"$W/err"; rc=$?
set -e
[[ $rc == 0 || $rc == 77 ]] || fail "installed cuxfer calibrate: exit $rc: $(cat "$W/err")"

echo "PASS: installed layout under $LIBDIR, shim found at the installed default, calibrate exit $rc"
