# Sourced by the devtools GPU scripts: installs the carried libdw (for
# symbolized call sites) and libunwind (fast stacks), which the GPU image lacks.
if ls .debs/*.deb >/dev/null 2>&1; then
  # Never dpkg -x into / (a Debian package's directory entries break Ubuntu's merged /usr).
  mkdir -p /opt/uw && dpkg -x .debs/libunwind8_*.deb /opt/uw
  cp -a /opt/uw/usr/lib/x86_64-linux-gnu/libunwind.so.8* /usr/local/lib/ && ldconfig
  mkdir -p /opt/dw && for f in .debs/lib{dw,elf}*.deb .debs/zlib1g-dev*.deb .debs/liblzma-dev*.deb; do dpkg -x "$f" /opt/dw; done
  sed -i 's|/usr|/opt/dw/usr|g' /opt/dw/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc
  export PKG_CONFIG_PATH=/opt/dw/usr/lib/x86_64-linux-gnu/pkgconfig
fi
# SQLite's headers (cuxfer export --sqlite), when the image lacks libsqlite3-dev:
# Debian's, unpacked beside the system, found through CMAKE_PREFIX_PATH.
if [ ! -f /usr/include/sqlite3.h ] && ls .debs/libsqlite3-dev_*.deb >/dev/null 2>&1; then
  mkdir -p /opt/sq && for f in .debs/libsqlite3-dev_*.deb .debs/libsqlite3-0_*.deb; do dpkg -x "$f" /opt/sq; done
  export CMAKE_PREFIX_PATH=/opt/sq/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
fi

# Configures and builds the GPU tree in $B (default /tmp/b), logs in $OUT;
# optional arguments: the only targets to build.
gpu_configure_build() {
  local b=${B:-/tmp/b}
  cmake -S . -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUXFER_GPU_TESTS=ON \
    -DPython3_EXECUTABLE="$(command -v python3)" > "$OUT/configure.log" 2>&1 || tail -30 "$OUT/configure.log"
  local targets=()
  (($#)) && targets=(--target "$@")
  cmake --build "$b" -j16 "${targets[@]}" > "$OUT/build.log" 2>&1 || grep -E "error|FAILED" -A5 "$OUT/build.log" | head -40
}
