#!/usr/bin/env bash
# python.layouts_match_headers: shim/python/layouts.inc must be what each
# CPython version's own headers say. For every interpreter of 3.10-3.15 found
# here (PATH, pyenv), compiles shim/python/layout_probe.c against its headers
# and compares the output with that version's committed row. Skips (77),
# saying so, when none of them has its headers here.
set -u
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
INC_FILE="$ROOT/shim/python/layouts.inc"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
checked=0 failed=0
for v in 3.10 3.11 3.12 3.13 3.14 3.15; do
  py=""
  # pyenv's own directories first: its shims on PATH fail for a version not selected.
  for c in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/$v.*/bin/python$v /usr/bin/python$v $(command -v python$v 2>/dev/null); do
    [ -x "$c" ] && [ "$("$c" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" == "$v" ] &&
      { py=$c; break; }
  done
  if [ -z "$py" ]; then echo "CPython $v: not here"; continue; fi
  inc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
  if [ ! -f "$inc/internal/pycore_frame.h" ] && [ ! -f "$inc/internal/pycore_code.h" ]; then
    echo "CPython $v ($py): no internal headers at $inc"; continue
  fi
  if ! gcc -I"$inc" -I"$inc/internal" -I"$inc/.." "$ROOT/shim/python/layout_probe.c" -o "$tmp/probe" 2> "$tmp/cc.log"; then
    echo "FAIL CPython $v: layout_probe.c does not compile against $inc"; cat "$tmp/cc.log"; failed=1; continue
  fi
  want=$("$tmp/probe")
  key=$(printf '{{0x%02x%02x,' "${v%%.*}" "${v#*.}")
  have=$(grep -F "$key" "$INC_FILE" || true)
  if [ "$want" == "$have" ]; then
    echo "CPython $v ($py): layouts.inc matches its headers"
  else
    echo "FAIL CPython $v: layouts.inc has"; echo "  $have"; echo "its headers say"; echo "  $want"
    echo "(regenerate: bash devtools/gen_python_layouts.sh)"; failed=1
  fi
  checked=$((checked + 1))
done
[ $failed -eq 0 ] || exit 1
[ $checked -gt 0 ] || { echo "no CPython 3.10-3.15 with headers here: skipped"; exit 77; }
echo "PASS ($checked versions)"
