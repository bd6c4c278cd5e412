#!/usr/bin/env bash
# `cpack -G DEB` into a temporary directory: the .deb holds the installed
# layout under /usr and nothing else, and its control fields are right
# (Depends computed, nothing of CUDA). Skips (77) without cpack or dpkg-deb.
#   check_deb.sh BUILD_DIR SOURCE_DIR LIBDIR VERSION
set -euo pipefail
BUILD=$1 SRC=$2 LIBDIR=$3 VERSION=$4
fail() { echo "FAIL: $*" >&2; exit 1; }
USER_DOCS="benchmarks calibrate check cli guide install policy report sqlite trace-format tune"
for tool in cpack dpkg-deb; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not found"; exit 77; }
done
W=$(mktemp -d)
# Installing writes $BUILD/install_manifest.txt: keep the one a user's own
# `cmake --install` left there.
M=$BUILD/install_manifest.txt
if [[ -f $M ]]; then cp -p "$M" "$W/install_manifest.kept"; fi
restore() { if [[ -f $W/install_manifest.kept ]]; then cp -p "$W/install_manifest.kept" "$M"; else rm -f "$M"; fi; rm -rf "$W"; }
trap restore EXIT

cpack -G DEB -B "$W" --config "$BUILD/CPackConfig.cmake" >"$W/cpack.log" 2>&1 || fail "cpack: $(cat "$W/cpack.log")"
deb=$(ls "$W"/cuxfer_"$VERSION"_*.deb) || fail "no cuxfer_${VERSION}_<arch>.deb in $(ls "$W"): $(cat "$W/cpack.log")"
arch=$(dpkg --print-architecture 2>/dev/null || true)
[[ -z $arch || $deb == */cuxfer_${VERSION}_${arch}.deb ]] || fail "file name $deb, want cuxfer_${VERSION}_${arch}.deb"

# Contents: exactly the installed product under /usr.
{
  echo ./usr/bin/cuxfer
  echo ./usr/bin/cuxfer-calibrate
  echo "./usr/$LIBDIR/libcuxfer.so"
  echo "./usr/$LIBDIR/libcuxfer_memhooks.so"
  echo ./usr/share/doc/cuxfer/README.md
  echo ./usr/share/doc/cuxfer/CHANGELOG.md
  [[ -f $SRC/LICENSE ]] && echo ./usr/share/doc/cuxfer/LICENSE
  # The user docs only: building, architecture, design notes, simcuda, testapps
  # and the GPU runs are for developers and stay in the repository.
  for d in $USER_DOCS; do echo "./usr/share/doc/cuxfer/docs/$d.md"; done
} | sort >"$W/want"
dpkg-deb -c "$deb" >"$W/listing" || fail "dpkg-deb -c"
awk '$1 !~ /^d/ {print $6}' "$W/listing" | sort >"$W/got"
diff -u "$W/want" "$W/got" >"$W/contents.diff" || fail ".deb contents (- expected, + packaged):
$(cat "$W/contents.diff")"
grep -E '^-rwxr-xr-x +root/root .* \./usr/bin/cuxfer$' "$W/listing" >/dev/null \
  || fail "usr/bin/cuxfer not an executable owned by root: $(grep usr/bin/cuxfer "$W/listing")"

# Control fields.
field() { dpkg-deb -f "$deb" "$1"; }
[[ $(field Package) == cuxfer ]] || fail "Package: $(field Package)"
[[ $(field Version) == "$VERSION" ]] || fail "Version: $(field Version), want $VERSION"
[[ $(field Section) == devel ]] || fail "Section: $(field Section)"
[[ -n $(field Maintainer) ]] || fail "no Maintainer"
[[ -n $(field Description) ]] || fail "no Description"
[[ -z $arch || $(field Architecture) == "$arch" ]] || fail "Architecture: $(field Architecture)"
depends=$(field Depends)
for pkg in libc6 libzstd1; do
  grep -qE "(^|, )$pkg( |,|$)" <<<"$depends" || fail "Depends lacks $pkg: $depends"
done
if grep -qi cuda <<<"$depends"; then fail "Depends names a CUDA package: $depends"; fi
dpkg-deb -I "$deb" >"$W/info" || fail "dpkg-deb -I"

echo "PASS: $(basename "$deb"): Depends: $depends"
