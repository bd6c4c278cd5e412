#!/usr/bin/env bash
# Newer CPythons than this Debian ships, for the Python-stack tests: Debian
# sid's binary packages of CPython 3.14 and 3.15 (with their headers, for
# python.layouts_match_headers) and the libraries they need, unpacked under
# DIR (default ~/.cache/cuxfer/sid-pythons: outside the tree, so that the
# ~200 MB never travel with a device call).
# Sid's glibc is newer than bookworm's, so each interpreter is pointed at the
# loader and libraries unpacked beside it (patchelf); nothing is installed
# system-wide. Then:
#   PATH=$HOME/.cache/cuxfer/sid-pythons/bin:$PATH ctest -R 'python|unwind_verify'
# finds python3.14 and python3.15 (tests/e2e/e2e_util.py find_python).
# DEBUG=1 adds each version's debug build (python3.Nd, whose objects are laid
# out otherwise: the shim must say so and record native frames only).
#   bash devtools/sid_pythons.sh [DIR]
set -euo pipefail
DEFAULT_DIR=${XDG_CACHE_HOME:-$HOME/.cache}/cuxfer/sid-pythons
DIR=$(mkdir -p "${1:-$DEFAULT_DIR}" && cd "${1:-$DEFAULT_DIR}" && pwd)
MIRROR=${DEBIAN_MIRROR:-https://deb.debian.org/debian}
VERSIONS=${PYTHON_VERSIONS:-"3.14 3.15"}
command -v patchelf > /dev/null || { echo "sid_pythons.sh: needs patchelf (apt-get install patchelf)" >&2; exit 1; }
mkdir -p "$DIR/debs" "$DIR/root" "$DIR/bin"
index="$DIR/debs/Packages"
curl -sfL "$MIRROR/dists/sid/main/binary-amd64/Packages.xz" | xz -dc > "$index"
pkgs="libc6 libexpat1 zlib1g libssl3t64 libffi8 libzstd1 libgcc-s1 libbz2-1.0 liblzma5 libncursesw6 libtinfo6
      libreadline8t64 libsqlite3-0 libuuid1 libdb5.3t64 libstdc++6 libmpdec4 media-types tzdata netbase"
for v in $VERSIONS; do
  pkgs="$pkgs python$v python$v-minimal libpython$v-minimal libpython$v-stdlib libpython$v libpython$v-dev"
  [ "${DEBUG:-0}" = 1 ] && pkgs="$pkgs python$v-dbg libpython$v-dbg"
done
for p in $pkgs; do
  f=$(awk -v p="$p" '$0 == "Package: " p {x = 1} x && /^Filename:/ {print $2; exit}' "$index")
  [ -n "$f" ] || { echo "sid_pythons.sh: sid has no package $p" >&2; exit 1; }
  deb="$DIR/debs/$(basename "$f")"
  [ -s "$deb" ] || curl -sfL -o "$deb" "$MIRROR/$f"
  dpkg -x "$deb" "$DIR/root"
done
lib="$DIR/root/usr/lib/x86_64-linux-gnu"
for v in $VERSIONS; do
  for exe in python$v python${v}d; do
    [ -e "$DIR/root/usr/bin/$exe" ] || continue
    patchelf --set-interpreter "$lib/ld-linux-x86-64.so.2" --set-rpath "$lib" "$DIR/root/usr/bin/$exe"
    ln -sf "../root/usr/bin/$exe" "$DIR/bin/$exe"
    "$DIR/bin/$exe" -c 'import sys, ctypes; print("CPython", sys.version.split()[0], "in", sys.prefix, "(debug build)" if hasattr(sys, "gettotalrefcount") else "")'
  done
done
echo "PATH=$DIR/bin:\$PATH finds them"
