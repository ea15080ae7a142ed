# Binaries for the lent device machine: packed here, unpacked there. Sourced (not run) by
# bench/cuda/run_on_device.sh and bench/families_device.sh.
#
# The device gets the session's checkout plus the ignored folders named in `carry` (64 MiB in
# all) and has no Debian -dev packages, so binaries built here travel with the shared libraries
# they load:
#
#   pkg_pack DEST BIN...   (here) DEST/bin.tar.xz holds the binaries and every shared library they
#                          load that is not glibc's own (fmt, pcre2, utf8proc, xxhash, ncurses,
#                          httplib, ssl, ...) in lib/; libstdc++ / libgcc_s apart in lib-std/ (the
#                          device's own, newer ones are used unless a binary does not start with
#                          them). Left to the device: the GPU driver's libcuda / libnvidia-*, and
#                          any library over PKG_MAX_LIB_MB (default 40: a CUDA build's cuBLAS, which
#                          the device's CUDA installation has), each named on stderr. xz: the
#                          smallest form (the device has no zstd).
#   pkg_unpack DIR CHECK...  (device) unpacks DIR/bin.tar.xz into DIR/pkg, puts DIR/pkg/lib on
#                          LD_LIBRARY_PATH, and DIR/pkg/lib-std too when the command CHECK (e.g.
#                          "$DIR/pkg/laya --version") fails without it. Returns non-zero when
#                          nothing could be unpacked.
#   pkg_missing BIN        (device) prints the libraries BIN needs that the loader cannot find.

pkg_pack() {
  local dest="$1" b l max_kb
  shift
  max_kb=$((${PKG_MAX_LIB_MB:-40} * 1024))
  rm -rf "$dest/pkg" && mkdir -p "$dest/pkg/lib" "$dest/pkg/lib-std" || return 1
  for b in "$@"; do cp -L "$b" "$dest/pkg/" || return 1; done
  ldd "$@" 2>/dev/null | awk '/=> \// {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*)\.so' | while read -r l; do
      case "$l" in
        */libcuda.so*|*/libnvidia-*) echo "pkg_pack: left to the device (the GPU driver's): $l" >&2 ;;
        */libstdc++*|*/libgcc_s*) cp -L "$l" "$dest/pkg/lib-std/" ;;
        *) if [ "$(du -kL "$l" | cut -f1)" -gt "$max_kb" ]; then
             echo "pkg_pack: left to the device (over ${PKG_MAX_LIB_MB:-40} MB): $l" >&2
           else
             cp -L "$l" "$dest/pkg/lib/"
           fi ;;
      esac
    done
  tar -C "$dest/pkg" -cf - . | xz -9 -T2 >"$dest/bin.tar.xz" && rm -rf "$dest/pkg"
}

pkg_unpack() {
  local dir="$1"
  shift
  mkdir -p "$dir/pkg" || return 1
  # Python's lzma where the device has no xz.
  tar -C "$dir/pkg" -xJf "$dir/bin.tar.xz" 2>/dev/null ||
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$dir/bin.tar.xz" "$dir/pkg" ||
    return 1
  export LD_LIBRARY_PATH="$dir/pkg/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  if [ $# -gt 0 ] && ! "$@" >/dev/null 2>&1; then
    echo "the device's libstdc++ is older than the build's: using the carried one"
    export LD_LIBRARY_PATH="$dir/pkg/lib-std:$LD_LIBRARY_PATH"
  fi
  return 0
}

pkg_missing() {
  ldd "$1" 2>/dev/null | awk '/not found/ {print $1}' | tr '\n' ' '
}
