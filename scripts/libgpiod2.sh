#!/bin/sh
# Builds libgpiod 2.x from the C sources vendored in the PyPI `gpiod` sdist
# (pinned by version and sha256) into a prefix of its own, with a
# libgpiod.pc, and prints the prefix. The system's libgpiod 1.6 stays the
# default; a build picks 2.x only through PKG_CONFIG_PATH:
#
#   PKG_CONFIG_PATH=$(scripts/libgpiod2.sh)/lib/pkgconfig swift build --scratch-path .build-gpiod2
#
# or `scripts/with-libgpiod2.sh swift build --scratch-path .build-gpiod2`.
# At run time the programs must find this libgpiod.so.3: they are linked with
# an rpath to the prefix's lib/ (`-Xlinker -rpath -Xlinker PREFIX/lib`, which
# scripts/with-libgpiod2.sh adds to swift build/test/run). The rpath cannot
# come from the .pc: SwiftPM drops -Wl,-rpath from pkg-config's Libs
# ("prohibited flag"). With the rpath, ldd (hence the gpio-sim initramfs)
# sees the 2.x library too; no LD_LIBRARY_PATH is needed anywhere.
#
# Cached in ${BOARDLOOP_CACHE:-~/.cache/boardloop}/libgpiod2/KEY, KEY = the
# sdist version + a hash of this script (which pins the sdist's sha256, the
# sources and the flags); rebuilt only when the key changes. Needs PyPI (the
# sdist) and installs python3-pip, gcc and binutils when missing.
set -eu
sdist_version=2.2.1
sdist_sha256=802dad3a89016339a231c462c6da2d56c820f5fb11519728ff86cdff0a16da96
key="gpiod-$sdist_version-$(sha256sum < "$0" | cut -c1-16)"
cache="${BOARDLOOP_CACHE:-$HOME/.cache/boardloop}/libgpiod2/$key"
if [ -f "$cache/lib/pkgconfig/libgpiod.pc" ]; then
    echo "$cache"
    exit 0
fi
# pip fetches the sdist; gcc and binutils build it (installed if missing).
"$(dirname "$0")/install-deps.sh" python3-pip gcc binutils >&2
pip=$(command -v pip3 || command -v pip)
work=$(mktemp -d /tmp/boardloop-libgpiod2.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "libgpiod2: building $key" >&2
"$pip" download --quiet --no-deps --no-binary :all: "gpiod==$sdist_version" -d "$work" >&2
tarball="$work/gpiod-$sdist_version.tar.gz"
echo "$sdist_sha256  $tarball" | sha256sum -c --quiet - >&2 || {
    echo "libgpiod2: gpiod-$sdist_version.tar.gz does not have the pinned sha256" >&2
    exit 1
}
tar -xzf "$tarball" -C "$work"
src="$work/gpiod-$sdist_version"
lib_version=$(tr -d ' \n' < "$src/libgpiod-version.txt")
case "$lib_version" in
2.*) ;;
*) echo "libgpiod2: the sdist vendors libgpiod '$lib_version', not 2.x" >&2; exit 1 ;;
esac
stage="$work/prefix"
mkdir -p "$stage/lib/pkgconfig" "$stage/include" "$work/obj"
# As upstream builds it: hidden visibility (the API is marked GPIOD_API),
# _GNU_SOURCE, the version string, soname libgpiod.so.3 (Debian 13's libgpiod3).
for f in "$src"/lib/*.c; do
    gcc -c -fPIC -O2 -g -fvisibility=hidden -D_GNU_SOURCE -DGPIOD_VERSION_STR="\"$lib_version\"" \
        -ffile-prefix-map="$src"=libgpiod-"$lib_version" \
        -I"$src/include" -I"$src/lib" "$f" -o "$work/obj/$(basename "$f" .c).o"
done
gcc -shared -Wl,-soname,libgpiod.so.3 -o "$stage/lib/libgpiod.so.3" "$work"/obj/*.o
ln -s libgpiod.so.3 "$stage/lib/libgpiod.so"
cp "$src/include/gpiod.h" "$stage/include/gpiod.h"
nm -D --defined-only "$stage/lib/libgpiod.so.3" | grep -q ' T gpiod_line_request_read_edge_events$' || {
    echo "libgpiod2: the built library lacks the 2.x API" >&2
    exit 1
}
mkdir -p "$(dirname "$cache")"
# Staged beside the cache and renamed into place: a concurrent build of the
# same key cannot leave a half-written prefix (the first rename wins).
tmp="$cache.tmp.$$"
rm -rf "$tmp"
cp -a "$stage" "$tmp"
cat > "$tmp/lib/pkgconfig/libgpiod.pc" <<EOF
prefix=$cache
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: libgpiod
Description: libgpiod $lib_version built by boardloop from the gpiod $sdist_version sdist
Version: $lib_version
Libs: -L\${libdir} -lgpiod
Cflags: -I\${includedir}
EOF
echo "$lib_version" > "$tmp/libgpiod-version.txt"
mv -T "$tmp" "$cache" 2>/dev/null || rm -rf "$tmp"
echo "libgpiod2: libgpiod $lib_version in $cache" >&2
echo "$cache"
