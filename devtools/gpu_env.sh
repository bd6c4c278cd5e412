# Sourced by the devtools GPU scripts: what the GPU image lacks, from the
# carried .debs/ (Debian 12's libdw, libelf, zlib, lzma, bz2, zstd, SQLite and
# nlohmann-json -dev packages, libunwind8), unpacked beside the system into
# /opt/deps (never dpkg -x into /: a Debian package's directory entries break
# Ubuntu's merged /usr) and found through pkg-config and CMake's search paths;
# libunwind (the shim's fast stacks) where the loader finds it.
if ls .debs/*.deb >/dev/null 2>&1; then
  mkdir -p /opt/deps
  for f in .debs/*.deb; do dpkg -x "$f" /opt/deps; done
  sed -i 's|^prefix=/usr$|prefix=/opt/deps/usr|' /opt/deps/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc
  export PKG_CONFIG_PATH=/opt/deps/usr/lib/x86_64-linux-gnu/pkgconfig
  export CMAKE_PREFIX_PATH=/opt/deps/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  export CMAKE_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu CMAKE_INCLUDE_PATH=/opt/deps/usr/include
  if ls /opt/deps/usr/lib/x86_64-linux-gnu/libunwind.so.8* >/dev/null 2>&1; then
    cp -a /opt/deps/usr/lib/x86_64-linux-gnu/libunwind.so.8* /usr/local/lib/ && ldconfig
  fi
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
