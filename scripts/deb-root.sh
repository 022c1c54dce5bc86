#!/bin/sh
# Makes a throwaway Debian 12 root for scripts/deb-test.sh and
# scripts/deploy-test.sh and prints the path of its tarball:
# `debootstrap --variant=minbase bookworm` with what installing the boardd
# package needs already in it (systemd, for systemd-analyze verify and
# deb-systemd-helper; libgpiod2, libmosquitto1 and libyaml-0-2, which boardd links; procps), so that
# `apt-get install ./boardd_….deb` resolves its Depends offline,
# openssh-server and sudo (the "board" deploy-test.sh deploys to over ssh,
# as root and as a user with sudo), and dbus, so that the root boots under
# systemd-nspawn with systemd as PID 1 as a board does (scripts/lib/boot.sh).
# Cached in ${BOARDLOOP_CACHE:-~/.cache/boardloop}/debootstrap/KEY.tar.zst,
# KEY = the suite, the packages included and the root's version below; made
# again only when the key changes.
#   scripts/deb-root.sh
set -eu
# Raise when the root should be made again (a package added, a mirror
# change, a point release worth having).
root_version=3
suite=bookworm
include=systemd,dbus,libgpiod2,libmosquitto1,libyaml-0-2,procps,openssh-server,sudo
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
key="$suite-minbase-$(echo "$include" | tr , +)-v$root_version"
cache="${BOARDLOOP_CACHE:-$HOME/.cache/boardloop}/debootstrap"
tarball="$cache/$key.tar.zst"
if [ -f "$tarball" ]; then
    echo "$tarball"
    exit 0
fi
[ "$(id -u)" = 0 ] || { echo "deb-root: debootstrap needs root" >&2; exit 1; }
for tool in debootstrap zstd; do
    command -v "$tool" > /dev/null || { echo "deb-root: no $tool (apt-get install debootstrap zstd)" >&2; exit 1; }
done
work=$(mktemp -d /tmp/boardloop-debroot.XXXXXX)
cleanup() {
    # debootstrap may leave /proc or /sys mounted in the root on a failure.
    for m in proc sys dev/pts dev; do
        mountpoint -q "$work/root/$m" 2> /dev/null && umount -l "$work/root/$m"
    done
    rm -rf --one-file-system "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
echo "deb-root: debootstrap --variant=minbase --include=$include $suite ($key)" >&2
start=$(date +%s)
debootstrap --variant=minbase --include="$include" "$suite" "$work/root" "$mirror" > "$work/debootstrap.log" 2>&1 ||
    { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }
# Downloaded packages are not needed in the tarball (what is installed is).
rm -f "$work/root/var/cache/apt/archives/"*.deb
echo "deb-root: made in $(( $(date +%s) - start )) s" >&2
mkdir -p "$cache"
tar -C "$work/root" --numeric-owner -cf - . | zstd -q -T0 -o "$tarball.tmp"
mv "$tarball.tmp" "$tarball"
echo "$tarball"
