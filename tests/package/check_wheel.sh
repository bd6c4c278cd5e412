#!/usr/bin/env bash
# What users install, tested as a user would meet it (scripts/test.sh runs this
# after scripts/build-wheel.sh): the wheel and the tarball from dist/, in a
# fresh virtualenv and a fresh folder outside the checkout, with nothing of
# the build tree on PATH, LD_LIBRARY_PATH or PYTHONPATH. Only the recorded
# programs come from the test build: a simulated C++ app and the simulated
# CUDA runtime a Python script loads with ctypes.
#
#   check_wheel.sh DIST_DIR TEST_BUILD_DIR SOURCE_DIR
#
# Checks: sizes against the bars (wheel <= 10 MB, libcuxfer.so <= 3 MB); what
# the binaries load (glibc, libgcc_s, the loader: nothing else); pip refuses
# the wheel on another platform; `cuxfer` and `python -m cuxfer` from the
# venv; record/report/--html/export --sqlite of a C++ app and of a Python
# script (its copies at the script's line); the tarball relocated; a missing
# shim and a shim of another build refused with one line, exit 2.
set -euo pipefail
DIST=$(cd "$1" && pwd) BUILD=$(cd "$2" && pwd) SRC=$(cd "$3" && pwd)
W=$(cd "$(mktemp -d "${TMPDIR:-/tmp}/cuxfer-wheel-check.XXXXXX")" && pwd -P)
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }

wheels=("$DIST"/cuxfer-*.whl)
[[ -f ${wheels[0]} && ${#wheels[@]} == 1 ]] || fail "want exactly one wheel in $DIST, found: ${wheels[*]}"
WHEEL=${wheels[0]}
tars=("$DIST"/cuxfer-*-linux-x86_64.tar.gz)
[[ -f ${tars[0]} ]] || fail "no release tarball in $DIST"
TARBALL=${tars[0]}
APP=$BUILD/testapps/sim/pageable_loop-simshared
LIBCUDART=$BUILD/simcuda/lib/libcudart.so
[[ -x $APP && -f $LIBCUDART ]] || fail "the simulated app or runtime is not built in $BUILD"

# 1. Sizes.
wheel_bytes=$(stat -c %s "$WHEEL")
((wheel_bytes <= 10 * 1024 * 1024)) || fail "the wheel is $wheel_bytes bytes, over 10 MB"
mkdir "$W/unzipped"
python3 -m zipfile -e "$WHEEL" "$W/unzipped"
PKG=$W/unzipped/cuxfer
shim_bytes=$(stat -c %s "$PKG/lib/libcuxfer.so")
((shim_bytes <= 3 * 1024 * 1024)) || fail "libcuxfer.so is $shim_bytes bytes, over 3 MB"
ok "sizes: wheel $wheel_bytes bytes, libcuxfer.so $shim_bytes bytes"
for f in bin/cuxfer bin/cuxfer-calibrate lib/libcuxfer.so lib/libcuxfer_memhooks.so __init__.py __main__.py; do
  [[ -f $PKG/$f ]] || fail "the wheel lacks cuxfer/$f"
done
if (cd "$W/unzipped" && find . -name '*.debug' | grep -q .); then fail "the wheel carries debug files"; fi

# 2. What the binaries load: glibc's libraries, libgcc_s and the loader.
allowed='^(linux-vdso\.so\.1|libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|libgcc_s\.so\.1|/lib64/ld-linux-x86-64\.so\.2)$'
for f in lib/libcuxfer.so lib/libcuxfer_memhooks.so bin/cuxfer bin/cuxfer-calibrate; do
  ldd "$PKG/$f" | awk '{print $1}' >"$W/ldd"
  extra=$(grep -Ev "$allowed" "$W/ldd" || true)
  [[ -z $extra ]] || fail "$f loads more than glibc and libgcc_s: $extra"
  if readelf -d "$PKG/$f" | grep -qE 'R(UN)?PATH'; then fail "$f keeps an RPATH/RUNPATH"; fi
done
ok "ldd: libc, libm, libgcc_s and the loader only"

# 3. pip refuses the wheel where it cannot run, at install time, with its own message.
set +e
python3 -m pip install --dry-run --no-index --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
  --target "$W/never" "$WHEEL" >"$W/out" 2>&1
rc=$?
set -e
[[ $rc != 0 ]] && grep -q "is not a supported wheel on this platform" "$W/out" ||
  fail "pip accepted the wheel for glibc 2.17: $(cat "$W/out")"
ok "pip refuses it for an older glibc: $(grep -o 'ERROR: .*' "$W/out" | head -1)"

# 4. A fresh venv, nothing else in it; a clean environment from here on.
python3 -m venv "$W/venv"
"$W/venv/bin/python" -m pip install -q --no-index --no-deps --disable-pip-version-check "$WHEEL"
mkdir "$W/work" "$W/home"
cd "$W/work"
run_clean() {
  env -i HOME="$W/home" PATH="$W/venv/bin:/usr/bin:/bin" LANG=C.UTF-8 "$@"
}
[[ $(run_clean sh -c "command -v cuxfer") == "$W/venv/bin/cuxfer" ]] || fail "cuxfer is not on the venv's PATH"
v1=$(run_clean cuxfer --version) && v2=$(run_clean python -m cuxfer --version) || fail "--version"
[[ $v1 == "$v2" && $v1 =~ ^cuxfer\ [0-9.]+\ \(commit\ [0-9a-z]+,\ built\ [0-9-]+\)$ ]] || fail "--version: '$v1' / '$v2'"
ok "cuxfer and python -m cuxfer: $v1"

# 5. A C++ app: record, report, --html, export --sqlite.
run_clean cuxfer record -q -o t-app --name app -- "$APP" 3 64K >out 2>err || fail "record the C++ app: $(cat err)"
run_clean cuxfer report --json -o app.json t-app/*.trace 2>err || fail "report: $(cat err)"
python3 - app.json <<'PY' || fail "the C++ app's report"
import json, sys
r = json.load(open(sys.argv[1]))
h2d = sum(d["h2d_bytes"] for d in r["devices"]); d2h = sum(d["d2h_bytes"] for d in r["devices"])
assert (h2d, d2h) == (3 * 65536, 3 * 65536), (h2d, d2h)
assert r["processes"][0]["cuxfer_version"].startswith("0."), r["processes"][0]
PY
run_clean cuxfer report t-app/*.trace >report.txt 2>err || fail "text report: $(cat err)"
grep -q "simulated" report.txt || fail "the text report does not say simulated: $(head -20 report.txt)"
run_clean cuxfer report --html app.html t-app/*.trace 2>err || fail "report --html: $(cat err)"
grep -q "<html" app.html || fail "report --html wrote no HTML"
run_clean cuxfer export --sqlite app.db t-app/*.trace 2>err || fail "export --sqlite: $(cat err)"
python3 -c "import sqlite3,sys; n=sqlite3.connect(sys.argv[1]).execute('select count(*) from sqlite_master').fetchone()[0]; assert n > 0" app.db ||
  fail "export --sqlite wrote no tables"
ok "C++ app: record, report (text, JSON, HTML), export --sqlite"

# 6. A Python script (the venv's Python): its copies at its own line.
cat >copies.py <<'PY'
import ctypes, sys
rt = ctypes.CDLL(sys.argv[1])
rt.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
dev = ctypes.c_void_p()
assert rt.cudaMalloc(ctypes.byref(dev), 1 << 20) == 0
buf = ctypes.create_string_buffer(1 << 20)
for _ in range(5):
    assert rt.cudaMemcpy(dev, buf, 1 << 20, 1) == 0  # line 9
print("copies: OK")
PY
run_clean cuxfer record -q -o t-py --name py -- python copies.py "$LIBCUDART" >out 2>err ||
  fail "record python: $(cat err) $(cat out)"
grep -q "copies: OK" out || fail "the script did not run: $(cat out)"
run_clean cuxfer report --json -o py.json t-py/*.trace 2>err || fail "report python: $(cat err)"
python3 - py.json "$W/work/copies.py" <<'PY' || fail "the Python script's report"
import json, os, sys
r = json.load(open(sys.argv[1]))
sites = [(s.get("file"), s.get("line"), s["calls"]) for s in r["callsites"]]
want = os.path.realpath(sys.argv[2])
assert any(f and os.path.realpath(f) == want and l == 9 and c == 5 for f, l, c in sites), sites
PY
ok "Python script: 5 copies at copies.py:9"

# 7. The shim missing, and a shim of another build: one line, exit 2, nothing run.
SHIM=$("$W/venv/bin/python" -c 'import cuxfer; print(cuxfer.shim_path())')
mv "$SHIM" "$W/shim.so"
set +e; run_clean cuxfer record -q -o t-none -- touch ran >out 2>err; rc=$?; set -e
[[ $rc == 2 && $(wc -l <err) == 1 && ! -e ran ]] || fail "record without its shim: exit $rc: $(cat err)"
ok "no shim: $(cat err)"
python3 - "$W/shim.so" "$SHIM" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
at = data.index(b"cuxfer-build-id=") + len(b"cuxfer-build-id=")
end = data.index(b"\0", at)
other = b"9.9.9+000000000000"[: end - at].ljust(end - at, b"0")
open(sys.argv[2], "wb").write(data[:at] + other + data[end:])
PY
chmod +x "$SHIM"
set +e; run_clean cuxfer record -q -o t-other -- touch ran >out 2>err; rc=$?; set -e
[[ $rc == 2 && $(wc -l <err) == 1 && ! -e ran ]] || fail "record with another build's shim: exit $rc: $(cat err)"
grep -q "is from cuxfer 9.9.9" err || fail "the mismatch line names no versions: $(cat err)"
ok "another build's shim: $(cat err)"
mv "$W/shim.so" "$SHIM"

# 8. The tarball: unpacked anywhere, moved, it finds its own libraries.
mkdir "$W/t1"
tar -C "$W/t1" -xzf "$TARBALL"
top=$(ls "$W/t1")
for f in bin/cuxfer bin/cuxfer-calibrate lib/libcuxfer.so lib/libcuxfer_memhooks.so share/doc/cuxfer/README.md; do
  [[ -e $W/t1/$top/$f ]] || fail "the tarball lacks $top/$f"
done
mv "$W/t1/$top" "$W/relocated"
env -i HOME="$W/home" PATH=/usr/bin:/bin "$W/relocated/bin/cuxfer" record -q -o t-tar --rewrite=pin -- "$APP" 2 64K \
  >out 2>err || fail "record from the relocated tarball: $(cat err)"
env -i PATH=/usr/bin:/bin "$W/relocated/bin/cuxfer" report --json -o tar.json t-tar/*.trace 2>err || fail "$(cat err)"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert sum(d['h2d_bytes'] for d in r['devices']) == 2*65536" tar.json ||
  fail "the tarball's report"
ok "tarball: unpacked, moved, record --rewrite=pin and report"
echo "PASS: wheel $(basename "$WHEEL"), tarball $(basename "$TARBALL")"
