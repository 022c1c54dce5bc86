#!/bin/sh
# Builds a minimal x86_64 kernel with gpio-sim from Debian's linux-source-6.1
# and prints the path of its bzImage. Cached in ~/.cache/boardloop/kernel/KEY,
# KEY = source package version + hashes of the config fragment and this script;
# rebuilt only when the key changes. With SIM_SMP set to more than 1, the
# kernel is built for several CPUs (CONFIG_SMP; the default is uniprocessor,
# as tinyconfig makes it) and with ACPI, whose tables are how it finds the
# other CPUs (SeaBIOS's MP table lists only the boot CPU), cached under its
# own key (KEY-smp).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
fragment="$here/kernel.config"
src_tar=/usr/src/linux-source-6.1.tar.xz
[ -f "$src_tar" ] || { echo "build-kernel: $src_tar missing: run scripts/sim/deps.sh" >&2; exit 1; }
version=$(dpkg-query -W -f='${Version}' linux-source-6.1)
key="$version-$(cat "$fragment" "$0" | sha256sum | cut -c1-16)"
smp=""
[ "${SIM_SMP:-1}" -gt 1 ] && { smp="SMP ACPI"; key="$key-smp"; }
cache="${BOARDLOOP_CACHE:-$HOME/.cache/boardloop}/kernel/$key"
if [ -f "$cache/bzImage" ]; then
    echo "$cache/bzImage"
    exit 0
fi
work=$(mktemp -d /tmp/boardloop-kernel.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "build-kernel: building $key (about 3 minutes on 2 cores)" >&2
tar -xJf "$src_tar" -C "$work"
cd "$work/linux-source-6.1"
make ARCH=x86_64 tinyconfig >/dev/null
opts="$(grep -v '^#' "$fragment" | grep -v '^$') $smp"
for o in $opts; do scripts/config --enable "$o"; done
make ARCH=x86_64 olddefconfig >/dev/null
for o in $opts; do
    grep -q "^CONFIG_$o=y" .config || { echo "build-kernel: CONFIG_$o did not survive olddefconfig" >&2; exit 1; }
done
start=$(date +%s)
make ARCH=x86_64 -j"$(nproc)" bzImage > "$work/build.log" 2>&1 || { tail -40 "$work/build.log" >&2; exit 1; }
echo "build-kernel: built in $(( $(date +%s) - start )) s" >&2
mkdir -p "$cache"
cp arch/x86/boot/bzImage "$cache/bzImage.tmp"
cp .config "$cache/config"
mv "$cache/bzImage.tmp" "$cache/bzImage"
echo "$cache/bzImage"
