# shellcheck shell=bash
# The env step of devtools/gpu.sh, sourced (by hand too: `source devtools/gpu_env.sh`
# from the repository root): what the GPU image lacks, from the carried .debs/
# (Debian 12's libdw, libelf, zlib, lzma, bz2, zstd, SQLite and nlohmann-json
# -dev packages, libunwind8), unpacked beside the system into /opt/deps (never
# dpkg -x into /: a Debian package's directory entries break Ubuntu's merged
# /usr) and found through pkg-config and CMake's search paths; libunwind (the
# shim's fast stacks) where the loader finds it.
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

