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
